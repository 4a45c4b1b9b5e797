//! The lab's record of a run, `run.json`'s `lab`: which configuration and repetition it is,
//! its settings, the emulated link, where each end ran, the sysctls in force on each side,
//! the kernel and any warning. `oscil-lab` writes it, `oscil-reader --lab-record` checks it
//! and keeps it, the report reads it: one definition, read typed everywhere. A person's own
//! notes (`oscil-reader --meta`) are `run.json`'s `meta`, free-form, apart from it.

use serde::{Deserialize, Serialize};

use crate::campaign::RunSettings;
use crate::sysctl::SysctlValues;

/// `run.json`'s `lab`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabRecord {
    /// The configuration's label: every repetition of it shares it.
    pub configuration: String,
    /// 1-based.
    pub repetition: u32,
    pub settings: RunSettings,
    /// The emulated link; `None` between real hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkRecord>,
    /// The values in force on each side when the run started.
    pub sysctls: Sides<SysctlValues>,
    /// The namespaces that ran each end (the namespace lab).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Sides<String>>,
    /// The `user@host`s that ran each end (real hosts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Sides<String>>,
    /// The sender's kernel release.
    pub kernel: String,
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// Something of each end of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sides<T> {
    pub sender: T,
    pub receiver: T,
}

/// What emulates the namespace lab's path (`oscil-lab --link`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    /// `oscil-link` over TUN: works without netem.
    Tun,
    /// veth + netem, where the kernel has sch_netem.
    Netem,
}

impl LinkKind {
    pub const ALL: [LinkKind; 2] = [LinkKind::Tun, LinkKind::Netem];

    /// Its name on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            LinkKind::Tun => "tun",
            LinkKind::Netem => "netem",
        }
    }

    /// The program or qdisc that emulates the path.
    pub fn emulator(self) -> &'static str {
        match self {
            LinkKind::Tun => "oscil-link",
            LinkKind::Netem => "netem",
        }
    }
}

/// The emulated link as configured, and what its queue limit counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkRecord {
    pub kind: LinkKind,
    /// The program or qdisc that emulates it (`oscil-link`, `netem`).
    pub emulator: String,
    pub rate_bps: u64,
    pub rtt_ms: f64,
    pub one_way_delay_ms: OneWay,
    /// How the RTT was split, in words.
    pub rtt_split: String,
    pub queue_limit: u64,
    /// What `queue_limit` counts, in words: tools count different things.
    pub queue_counts: String,
    pub loss_pct: f64,
    pub bdp_bytes: u64,
}

/// A delay in each direction, ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OneWay {
    pub sender_to_receiver: f64,
    pub receiver_to_sender: f64,
}

impl LabRecord {
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("a lab record serializes")
    }
}

/// Bandwidth-delay product of a path, in bytes.
pub fn bdp_bytes(rate_bps: u64, rtt_us: u64) -> u64 {
    (rate_bps as u128 * rtt_us as u128 / 8 / 1_000_000) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_kinds_are_named_as_saved() {
        for kind in LinkKind::ALL {
            let saved = serde_json::to_value(kind).unwrap();
            assert_eq!(saved, kind.name());
        }
    }

    #[test]
    fn a_fat_paths_bdp() {
        assert_eq!(bdp_bytes(1_000_000_000, 466_000), 58_250_000);
    }
}

//! What the lab tells each run's `run.json` (the reader keeps it as `lab`): which
//! configuration and repetition this is, its settings, the path, the sysctls in force on
//! each side, and any warning.

use std::collections::BTreeMap;
use std::path::Path;

use oscil_rundir::campaign::RunSettings;
use serde::Serialize;

use crate::sysctl::{Sysctls, RMEM};

#[derive(Debug, Clone, Serialize)]
pub struct LabMeta {
    pub configuration: String,
    pub repetition: u32,
    pub settings: RunSettings,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkMeta>,
    /// `sender` and `receiver`: the values in force when the run started.
    pub sysctls: BTreeMap<&'static str, Sysctls>,
    /// The namespaces (lab) or `user@host`s that ran each end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Sides>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Sides>,
    pub kernel: String,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Sides {
    pub sender: String,
    pub receiver: String,
}

/// The emulated link as configured, and what its queue limit counts.
#[derive(Debug, Clone, Serialize)]
pub struct LinkMeta {
    pub kind: String,
    pub emulator: String,
    pub rate_bps: u64,
    pub rtt_ms: f64,
    pub one_way_delay_ms: OneWay,
    pub rtt_split: &'static str,
    pub queue_limit: u64,
    pub queue_counts: String,
    pub loss_pct: f64,
    pub bdp_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct OneWay {
    pub sender_to_receiver: f64,
    pub receiver_to_sender: f64,
}

impl LabMeta {
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("lab metadata serializes")
    }

    /// Replaces `path` atomically, never through a link.
    pub fn write(&self, path: &Path) -> Result<(), oscil_rundir::safe_fs::SafeFsError> {
        oscil_rundir::safe_fs::write_atomic(path, &self.to_json(), 0o644)
    }
}

/// Bandwidth-delay product of a path, in bytes.
pub fn bdp_bytes(rate_bps: u64, rtt_us: u64) -> u64 {
    (rate_bps as u128 * rtt_us as u128 / 8 / 1_000_000) as u64
}

/// Warnings that depend on the run's settings and the receiver: a receive buffer too small
/// for the path, a sysctl the kernel ignores.
pub fn run_warnings(
    settings: &RunSettings,
    receiver: &Sysctls,
    receiver_kernel: &str,
) -> Vec<String> {
    let mut warnings = Vec::new();
    if settings.adv_win_scale.is_some() && ignores_adv_win_scale(receiver_kernel) {
        warnings.push(format!(
            "tcp_adv_win_scale has no effect on Linux {receiver_kernel} (ignored since 6.6; \
             the window follows the measured skb scaling ratio)"
        ));
    }
    let Some(path) = &settings.path else {
        return warnings;
    };
    let bdp = bdp_bytes(path.rate_bps, path.rtt_us);
    let rmem = receiver.get(RMEM).map(String::as_str).unwrap_or_default();
    if let Some(max) = rmem
        .split_whitespace()
        .nth(2)
        .and_then(|v| v.parse::<u64>().ok())
    {
        if max < bdp {
            warnings.push(format!(
                "tcp_rmem max {max} is below the path's BDP ({bdp} bytes): the receive window will cap throughput"
            ));
        }
    }
    warnings
}

/// Linux 6.6 and later ignore tcp_adv_win_scale.
pub fn ignores_adv_win_scale(kernel: &str) -> bool {
    let mut parts = kernel
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse::<u32>().ok());
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (6, 6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use oscil_rundir::campaign::PathSettings;

    #[test]
    fn a_small_rmem_on_a_fat_path_is_warned_about() {
        assert_eq!(bdp_bytes(1_000_000_000, 466_000), 58_250_000);
        let settings = RunSettings {
            path: Some(PathSettings {
                rate_bps: 1_000_000_000,
                rtt_us: 466_000,
                loss_pct: 0.0,
                queue_packets: None,
            }),
            ..RunSettings::default()
        };
        let rmem = |v: &str| Sysctls::from([(RMEM.to_string(), v.to_string())]);
        let small = run_warnings(&settings, &rmem("4096 131072 6291456"), "6.1.0");
        assert_eq!(small.len(), 1, "{small:?}");
        assert!(run_warnings(&settings, &rmem("8192 262144 536870912"), "6.1.0").is_empty());
        let adv = RunSettings {
            adv_win_scale: Some(2),
            ..settings
        };
        let ignored = run_warnings(&adv, &rmem("8192 262144 536870912"), "6.18.0");
        assert!(
            ignored[0].contains("no effect on Linux 6.18.0"),
            "{ignored:?}"
        );
    }

    #[test]
    fn adv_win_scale_is_ignored_from_6_6() {
        assert!(ignores_adv_win_scale("6.6.0"));
        assert!(ignores_adv_win_scale("6.18.0-cloud-amd64"));
        assert!(!ignores_adv_win_scale("6.1.0-28-amd64"));
        assert!(!ignores_adv_win_scale("5.15.0"));
    }
}

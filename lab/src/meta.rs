//! What the lab tells each run's `run.json` (the reader keeps it as `lab`): which
//! configuration and repetition this is, its settings, the path, the sysctls in force on
//! each side, and any warning.

use std::collections::BTreeMap;
use std::path::Path;

use oscil_protocol::campaign::RunSettings;
use serde::Serialize;

use crate::sysctl::Sysctls;

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

    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.to_json())
    }
}

/// Bandwidth-delay product of a path, in bytes.
pub fn bdp_bytes(rate_bps: u64, rtt_us: u64) -> u64 {
    (rate_bps as u128 * rtt_us as u128 / 8 / 1_000_000) as u64
}

/// Warnings that depend on the run's settings: a receive buffer too small for the path.
pub fn run_warnings(settings: &RunSettings, receiver_rmem: &str) -> Vec<String> {
    let Some(path) = &settings.path else {
        return Vec::new();
    };
    let bdp = bdp_bytes(path.rate_bps, path.rtt_us);
    let max = receiver_rmem
        .split_whitespace()
        .nth(2)
        .and_then(|v| v.parse::<u64>().ok());
    match max {
        Some(max) if max < bdp => vec![format!(
            "tcp_rmem max {max} is below the path's BDP ({bdp} bytes): the receive window will cap throughput"
        )],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::unset_settings;
    use oscil_protocol::campaign::PathSettings;
    use oscil_protocol::PatternConfig;

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
            ..unset_settings(1, 100_000, PatternConfig::CLOUDFLARE)
        };
        assert_eq!(run_warnings(&settings, "4096 131072 6291456").len(), 1);
        assert!(run_warnings(&settings, "8192 262144 536870912").is_empty());
    }
}

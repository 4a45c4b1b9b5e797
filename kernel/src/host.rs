//! The facts of a host that decide what a run measures: kernel, buffer sysctls, clock.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::sys;

/// The sysctls recorded with every run, by dotted name.
pub const SYSCTLS: &[&str] = &[
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_mem",
    "net.ipv4.tcp_notsent_lowat",
    "net.ipv4.tcp_adv_win_scale",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_available_congestion_control",
    "net.ipv4.tcp_allowed_congestion_control",
    "net.ipv4.tcp_limit_output_bytes",
    "net.ipv4.tcp_moderate_rcvbuf",
    "net.ipv4.tcp_autocorking",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.default_qdisc",
];

/// One host's facts, as recorded in `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HostFacts {
    pub hostname: String,
    pub kernel_release: String,
    pub page_size_bytes: u64,
    /// Values whitespace-normalised (`4096 16384 4194304`); unreadable ones are absent.
    pub sysctls: BTreeMap<String, String>,
    pub wall_clock_unix_ms: u64,
    /// Which clock sample times use.
    pub clock: String,
    /// Inode of the caller's network namespace: tells namespaces on one host apart.
    pub netns_inode: Option<u64>,
}

/// Collects the facts of the host (and network namespace) the calling thread runs in.
/// Never fails: what cannot be read is left empty or absent.
pub fn collect() -> HostFacts {
    let sysctls = SYSCTLS
        .iter()
        .filter_map(|name| Some((name.to_string(), read_sysctl(name)?)))
        .collect();
    HostFacts {
        hostname: read_sysctl("kernel.hostname").unwrap_or_default(),
        kernel_release: read_sysctl("kernel.osrelease").unwrap_or_default(),
        page_size_bytes: sys::page_size_bytes(),
        sysctls,
        wall_clock_unix_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        clock: "CLOCK_MONOTONIC; t_s is seconds since session start".to_string(),
        netns_inode: ["/proc/thread-self/ns/net", "/proc/self/ns/net"]
            .iter()
            .find_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.ino()),
    }
}

/// Reads a sysctl by dotted name (`net.ipv4.tcp_wmem`), whitespace-normalised.
pub fn read_sysctl(name: &str) -> Option<String> {
    read_sysctl_path(&format!("/proc/sys/{}", name.replace('.', "/")))
}

pub(crate) fn read_sysctl_path(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_this_host() {
        let h = collect();
        assert!(!h.kernel_release.is_empty());
        assert!(h.page_size_bytes >= 4096);
        assert!(h.netns_inode.is_some());
        let wmem = &h.sysctls["net.ipv4.tcp_wmem"];
        assert_eq!(wmem.split(' ').count(), 3, "{wmem:?}");
        assert!(!wmem.contains('\t'));
        assert!(h.sysctls.contains_key("net.ipv4.tcp_congestion_control"));
        assert!(h.wall_clock_unix_ms > 1_600_000_000_000);
    }

    #[test]
    fn missing_sysctl_is_none() {
        assert_eq!(read_sysctl("net.ipv4.no_such_sysctl_here"), None);
    }
}

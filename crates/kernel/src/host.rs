//! The facts of a host that decide what a run measures: kernel, buffer sysctls, clock.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::sys;
use crate::sysctl::{Sysctl, SysctlValue};
use crate::tcp_info::{self, FieldGroup};

/// One host's facts, as recorded in `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HostFacts {
    pub hostname: String,
    pub kernel_release: String,
    pub page_size_bytes: u64,
    /// Every sysctl the project knows ([`Sysctl`]), by dotted name, each value in the
    /// kernel's text white space normalised (`4096 16384 4194304`); unreadable ones are
    /// absent. Kept as text: a peer of another build may know other names.
    pub sysctls: BTreeMap<String, String>,
    pub wall_clock_unix_ms: u64,
    /// Which clock sample times use.
    pub clock: String,
    /// Inode of the caller's network namespace: tells namespaces on one host apart.
    pub netns_inode: Option<u64>,
    /// Bytes of `struct tcp_info` this kernel returns (`tcp_info::kernel_bytes`); absent
    /// in runs recorded before it was, and where the kernel would not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_info_bytes: Option<u32>,
    /// The field groups that length leaves out: figures this kernel cannot give.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tcp_info_absent: Vec<FieldGroup>,
}

impl HostFacts {
    /// A recorded sysctl's value, typed; `None` when it was not recorded or is not a
    /// value of its kind.
    pub fn sysctl(&self, sysctl: Sysctl) -> Option<SysctlValue> {
        sysctl.parse(self.sysctls.get(sysctl.name())?).ok()
    }
}

/// Collects the facts of the host (and network namespace) the calling thread runs in.
/// Never fails: what cannot be read is left empty or absent.
pub fn collect() -> HostFacts {
    let tcp_info_bytes = tcp_info::kernel_bytes().ok();
    let sysctls = Sysctl::all()
        .filter_map(|sysctl| Some((sysctl.name().to_owned(), read_sysctl(sysctl.name())?)))
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
        tcp_info_bytes: tcp_info_bytes.and_then(|n| u32::try_from(n).ok()),
        tcp_info_absent: tcp_info_bytes.map_or_else(Vec::new, FieldGroup::absent_from),
    }
}

/// Reads a sysctl by dotted name (`net.ipv4.tcp_wmem`), whitespace-normalised.
pub fn read_sysctl(name: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/sys/{}", name.replace('.', "/"))).ok()?;
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
        let wmem = &h.sysctls[Sysctl::TcpWmem.name()];
        assert_eq!(wmem.split(' ').count(), 3, "{wmem:?}");
        assert!(!wmem.contains('\t'));
        assert!(h.sysctl(Sysctl::TcpWmem).and_then(|v| v.triple()).is_some());
        assert!(h.sysctl(Sysctl::TcpCongestionControl).is_some());
        assert!(h.wall_clock_unix_ms > 1_600_000_000_000);
        // 6.18 returns every field oscil reads.
        assert!(h.tcp_info_bytes >= Some(240), "{:?}", h.tcp_info_bytes);
        assert!(h.tcp_info_absent.is_empty());
        // 6.5 and later have it (whatever its value), and so does this 6.18.
        assert!(h.sysctls.contains_key("net.ipv4.tcp_shrink_window"));
    }

    #[test]
    fn missing_sysctl_is_none() {
        assert_eq!(read_sysctl("net.ipv4.no_such_sysctl_here"), None);
    }
}

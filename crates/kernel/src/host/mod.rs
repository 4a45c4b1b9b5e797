//! The facts of a host that decide what a run measures: kernel, buffer sysctls, clock; and
//! its files under `/proc` read each interval (sockstat, `TcpExt`, the process's own cost,
//! its threads' wait for a CPU), and its own load (`load`: the egress qdisc, softnet, the
//! CPUs).

pub mod cost;
pub mod cpustat;
pub mod load;
pub mod netstat;
pub(crate) mod proc;
pub mod qdisc;
pub mod schedstat;
pub mod sockstat;
pub mod softnet;

use std::os::unix::fs::MetadataExt;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::sys;
use oscil_model::host::HostFacts;
use oscil_model::socket::FieldGroup;
use oscil_model::sysctl::{Sysctl, SysctlValue};

use crate::socket::tcp_info;

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
        boot_id: read_sysctl("kernel.random.boot_id").filter(|id| !id.is_empty()),
        tcp_info_bytes: tcp_info_bytes.and_then(|n| u32::try_from(n).ok()),
        tcp_info_absent: tcp_info_bytes.map_or_else(Vec::new, FieldGroup::absent_from),
    }
}

/// Reads `sysctl` in the calling thread's network namespace, typed; `None` where this
/// kernel has no such file or it is unreadable.
pub fn read_typed(sysctl: Sysctl) -> Option<SysctlValue> {
    let text = std::fs::read_to_string(sysctl.proc_path()).ok()?;
    sysctl.parse(&text).ok()
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
    fn this_kernel_reads_back_as_typed() {
        assert!(read_typed(Sysctl::TcpWmem)
            .and_then(|v| v.triple())
            .is_some());
        assert!(read_typed(Sysctl::TcpNotsentLowat)
            .and_then(|v| v.integer())
            .is_some());
    }

    #[test]
    fn collects_this_host() {
        let h = collect();
        assert!(!h.kernel_release.is_empty());
        assert!(h.page_size_bytes >= 4096);
        assert!(h.netns_inode.is_some());
        let boot_id = h.boot_id.as_deref().unwrap_or_default();
        assert_eq!(boot_id.len(), 36, "{boot_id:?}");
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

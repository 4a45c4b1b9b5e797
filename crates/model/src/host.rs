//! What a run records of each host: its facts (kernel, sysctls, clock, namespace), its
//! TCP sockets and memory from sockstat, its receive-queue events, and what a process spent.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::socket::FieldGroup;
use crate::sysctl::{Sysctl, SysctlValue};

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
    /// `/proc/sys/kernel/random/boot_id`: tells one host (and boot) from another where
    /// hostnames repeat; absent in runs recorded before it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
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

/// The `TCP:` line of `/proc/net/sockstat`. `inuse` and `tw` are per network namespace;
/// `alloc`, `orphan` and `mem` are global to the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sockstat {
    pub tcp_inuse: u64,
    pub tcp_orphan: u64,
    pub tcp_tw: u64,
    pub tcp_alloc: u64,
    /// TCP memory in pages (see `HostFacts::page_size_bytes`), compared against `tcp_mem`.
    pub tcp_mem_pages: u64,
}

/// The receive-queue events of `oscil_kernel::host::netstat::WATCHED` as numbers: how often the kernel collapsed or
/// pruned a receive queue, or dropped a segment for want of room. Per network namespace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueEvents {
    pub collapsed: u64,
    pub prune_called: u64,
    pub rcv_pruned: u64,
    pub ofo_pruned: u64,
    pub rcvq_drop: u64,
    pub backlog_drop: u64,
}

impl QueueEvents {
    /// What happened between `before` and `self` (a counter that went back counts 0).
    pub fn since(self, before: QueueEvents) -> QueueEvents {
        QueueEvents {
            collapsed: self.collapsed.saturating_sub(before.collapsed),
            prune_called: self.prune_called.saturating_sub(before.prune_called),
            rcv_pruned: self.rcv_pruned.saturating_sub(before.rcv_pruned),
            ofo_pruned: self.ofo_pruned.saturating_sub(before.ofo_pruned),
            rcvq_drop: self.rcvq_drop.saturating_sub(before.rcvq_drop),
            backlog_drop: self.backlog_drop.saturating_sub(before.backlog_drop),
        }
    }
}

/// One interval of a host's own load (`host.csv`'s `qdisc_`, `softnet_` and `cpu_`
/// columns): what the host itself queued, dropped and spent, beside what TCP did. Each part
/// is `None` where its source was not there (no egress device known, no `/proc` file).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct HostLoad {
    pub qdisc: Option<QdiscLoad>,
    pub softnet: Option<SoftnetLoad>,
    pub cpu: Option<CpuLoad>,
}

/// Each source of [`HostLoad`], to name one that a host could not give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HostLoadSource {
    Qdisc,
    Softnet,
    Cpu,
}

impl HostLoadSource {
    pub const ALL: [HostLoadSource; 3] = [Self::Qdisc, Self::Softnet, Self::Cpu];

    /// What the source is, by the kernel's names.
    pub fn what(self) -> &'static str {
        match self {
            Self::Qdisc => "rtnetlink qdisc statistics of the egress device",
            Self::Softnet => "/proc/net/softnet_stat",
            Self::Cpu => "/proc/stat",
        }
    }

    /// The `host.csv` columns it fills.
    pub fn columns(self) -> &'static [&'static str] {
        match self {
            Self::Qdisc => &[
                "host.csv qdisc_backlog_bytes",
                "host.csv qdisc_backlog_packets",
                "host.csv qdisc_drops",
                "host.csv qdisc_requeues",
            ],
            Self::Softnet => &["host.csv softnet_dropped", "host.csv softnet_time_squeeze"],
            Self::Cpu => &["host.csv cpu_busy_max_pct", "host.csv cpu_busy_mean_pct"],
        }
    }
}

/// The egress device's root qdisc: its backlog at the tick, and what it dropped and
/// requeued over the interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QdiscLoad {
    pub backlog_bytes: u64,
    pub backlog_packets: u64,
    pub drops: u64,
    pub requeues: u64,
}

/// `/proc/net/softnet_stat` summed over the CPUs, over the interval: packets the receive
/// backlog dropped (`netdev_max_backlog` full), and times the receive softirq ran out of
/// budget or time with work left (`netdev_budget`, `netdev_budget_usecs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftnetLoad {
    pub dropped: u64,
    pub time_squeeze: u64,
}

/// How busy the host's CPUs were over the interval (`/proc/stat`): the busiest one and
/// the mean, percent of the interval's CPU time not idle nor waiting for I/O.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuLoad {
    pub busy_max_pct: f64,
    pub busy_mean_pct: f64,
}

/// CPU time and context switches of a process (or their growth over a span).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessCost {
    pub user_s: f64,
    pub system_s: f64,
    pub voluntary_ctx: u64,
    pub involuntary_ctx: u64,
}

impl ProcessCost {
    /// What grew from `before` to `self`.
    pub fn since(&self, before: &ProcessCost) -> ProcessCost {
        ProcessCost {
            user_s: (self.user_s - before.user_s).max(0.0),
            system_s: (self.system_s - before.system_s).max(0.0),
            voluntary_ctx: self.voluntary_ctx.saturating_sub(before.voluntary_ctx),
            involuntary_ctx: self.involuntary_ctx.saturating_sub(before.involuntary_ctx),
        }
    }

    pub fn cpu_s(&self) -> f64 {
        self.user_s + self.system_s
    }

    pub fn ctx(&self) -> u64 {
        self.voluntary_ctx.saturating_add(self.involuntary_ctx)
    }
}

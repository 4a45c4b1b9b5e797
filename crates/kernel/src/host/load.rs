//! The host's own load over each interval, for `host.csv`: the egress device's root qdisc
//! (`qdisc`), the receive path's drops and squeezes (`softnet`) and each CPU's busy share
//! (`cpustat`). Every source is opened once and read again each tick (one netlink socket,
//! two files read into kept buffers); one that cannot be opened leaves its columns empty
//! and is named once, with why.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use oscil_model::host::{HostLoad, HostLoadSource, QdiscLoad, SoftnetLoad};

use crate::host::cpustat::{self, CpuTicks};
use crate::host::proc::ProcFile;
use crate::host::qdisc::{QdiscStats, Rtnetlink};
use crate::host::softnet::{self, Softnet};

/// A sampler's sources of the host's load, and their last readings.
pub struct HostLoadSince {
    qdisc: Option<(Rtnetlink, u32)>,
    last_qdisc: Option<QdiscStats>,
    softnet: Option<ProcFile<Softnet>>,
    last_softnet: Option<Softnet>,
    cpustat: Option<ProcFile<Vec<CpuTicks>>>,
    /// The CPUs' ticks at the last reading of `/proc/stat`, and when it was.
    last_cpus: (Vec<CpuTicks>, Instant),
}

/// The shortest span a CPU figure covers: `/proc/stat` counts in clock ticks (10 ms at the
/// usual `USER_HZ` of 100), so over one 10 ms interval a CPU reads 0 or 100% busy. Over at
/// least 9 ticks a share is worth its percent; a tick nearer its last reading leaves the
/// CPU columns empty (at the default 100 ms interval every row has them).
pub const CPU_SPAN_MIN: Duration = Duration::from_millis(90);

impl HostLoadSince {
    /// Opens every source and takes the first readings, counting from now; `peer` is the
    /// data connections' peer, whose route names the egress device. Also says each source
    /// that could not be opened, and why.
    pub fn open(peer: Option<IpAddr>, now: Instant) -> (Self, Vec<(HostLoadSource, String)>) {
        let mut gaps = Vec::new();
        let mut gap = |source, why: String| gaps.push((source, why));
        let qdisc = match peer {
            None => {
                gap(HostLoadSource::Qdisc, "no data connection to route".into());
                None
            }
            Some(peer) => match Rtnetlink::open().and_then(|mut rt| {
                let ifindex = rt.egress_ifindex(peer)?;
                rt.root_qdisc(ifindex)?;
                Ok((rt, ifindex))
            }) {
                Ok(opened) => Some(opened),
                Err(e) => {
                    gap(HostLoadSource::Qdisc, format!("rtnetlink: {e}"));
                    None
                }
            },
        };
        let softnet = softnet::open()
            .map_err(|e| gap(HostLoadSource::Softnet, e.to_string()))
            .ok();
        let cpustat = cpustat::open()
            .map_err(|e| gap(HostLoadSource::Cpu, e.to_string()))
            .ok();
        let mut load = HostLoadSince {
            qdisc,
            last_qdisc: None,
            softnet,
            last_softnet: None,
            cpustat,
            last_cpus: (Vec::new(), now),
        };
        load.next(now);
        (load, gaps)
    }

    /// The load since the last reading, at `now`: the qdisc's backlog now, every
    /// counter's growth, the CPUs' busy shares (since their last reading, [`CPU_SPAN_MIN`]
    /// ago at least). A part is `None` without two readings of its source to compare (a
    /// read that failed, the first, or CPUs read too recently).
    pub fn next(&mut self, now: Instant) -> HostLoad {
        let qdisc = self
            .qdisc
            .as_mut()
            .and_then(|(rt, ifindex)| rt.root_qdisc(*ifindex).ok());
        let softnet = self.softnet.as_mut().and_then(|f| f.read().ok());
        let cpus = self
            .cpustat
            .as_mut()
            .filter(|_| {
                let (last, at) = &self.last_cpus;
                last.is_empty() || now.saturating_duration_since(*at) >= CPU_SPAN_MIN
            })
            .and_then(|f| f.read().ok());
        let load = HostLoad {
            qdisc: qdisc
                .zip(self.last_qdisc)
                .map(|(now, before)| qdisc_since(now, before)),
            softnet: softnet
                .zip(self.last_softnet)
                .map(|(now, before)| softnet_since(now, before)),
            cpu: cpus
                .as_deref()
                .and_then(|cpus| cpustat::busy_between(&self.last_cpus.0, cpus)),
        };
        self.last_qdisc = qdisc;
        self.last_softnet = softnet;
        if let Some(cpus) = cpus {
            self.last_cpus = (cpus, now);
        }
        load
    }
}

/// The kernel's counters are 32 bits: growth wraps. A qdisc replaced between the readings
/// (another handle) counts from its start.
fn qdisc_since(now: QdiscStats, before: QdiscStats) -> QdiscLoad {
    let before = if now.handle == before.handle {
        before
    } else {
        QdiscStats::default()
    };
    QdiscLoad {
        backlog_bytes: now.backlog_bytes.into(),
        backlog_packets: now.backlog_packets.into(),
        drops: now.drops.wrapping_sub(before.drops).into(),
        requeues: now.requeues.wrapping_sub(before.requeues).into(),
    }
}

/// Sums of per-CPU counters: a CPU's wrap shows as a fall, counted as none.
fn softnet_since(now: Softnet, before: Softnet) -> SoftnetLoad {
    SoftnetLoad {
        dropped: now.dropped.saturating_sub(before.dropped),
        time_squeeze: now.time_squeeze.saturating_sub(before.time_squeeze),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn a_loopback_peer_fills_every_part_from_the_second_reading() {
        let start = Instant::now();
        let (mut load, gaps) = HostLoadSince::open(Some(Ipv4Addr::LOCALHOST.into()), start);
        assert!(gaps.is_empty(), "{gaps:?}");
        // 10 ms on: the qdisc and softnet, not yet the CPUs.
        let early = load.next(start + Duration::from_millis(10));
        // lo's noqueue holds and drops nothing.
        assert_eq!(early.qdisc, Some(QdiscLoad::default()));
        assert!(early.softnet.is_some());
        assert_eq!(early.cpu, None);
        std::thread::sleep(Duration::from_millis(100));
        let later = load.next(start + Duration::from_millis(100));
        let cpu = later.cpu.unwrap();
        assert!((0.0..=100.0).contains(&cpu.busy_max_pct), "{cpu:?}");
        assert!(cpu.busy_mean_pct <= cpu.busy_max_pct, "{cpu:?}");
        // The next 90 ms are measured from there.
        assert_eq!(load.next(start + Duration::from_millis(189)).cpu, None);
    }

    #[test]
    fn without_a_peer_the_qdisc_is_named_absent() {
        let (mut load, gaps) = HostLoadSince::open(None, Instant::now());
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert_eq!(gaps[0].0, HostLoadSource::Qdisc);
        assert_eq!(load.next(Instant::now()).qdisc, None);
    }

    #[test]
    fn counters_grow_across_a_wrap_and_a_new_qdisc_counts_from_zero() {
        let at = |handle, drops| QdiscStats {
            handle,
            drops,
            backlog_bytes: 1500,
            backlog_packets: 1,
            requeues: 0,
        };
        assert_eq!(qdisc_since(at(1, 5), at(1, u32::MAX - 2)).drops, 8);
        assert_eq!(qdisc_since(at(2, 5), at(1, 100)).drops, 5);
        assert_eq!(qdisc_since(at(1, 5), at(1, 5)).backlog_bytes, 1500);
    }
}

//! What the link is asked to be: its two ends and the figures of each direction.

use std::path::PathBuf;
use std::time::Duration;

use crate::capture::CaptureConfig;

/// One end of the link: a TUN device name in a network namespace.
#[derive(Debug, Clone)]
pub struct TunEnd {
    /// Namespace name (as for `ip netns`) or a path to a namespace file; None: our own.
    pub netns: Option<String>,
    pub dev: String,
}

impl TunEnd {
    pub(crate) fn netns_path(&self) -> Option<PathBuf> {
        self.netns.as_ref().map(|ns| {
            if ns.contains('/') {
                PathBuf::from(ns)
            } else {
                PathBuf::from("/run/netns").join(ns)
            }
        })
    }

    pub(crate) fn describe(&self) -> String {
        self.netns.clone().unwrap_or_else(|| "own namespace".into())
    }
}

/// The whole link: the same figures apply to both directions.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    pub a: TunEnd,
    pub b: TunEnd,
    pub rate_bps: u64,
    /// One-way delay from A to B.
    pub delay: Duration,
    /// One-way delay from B to A (the reverse direction); the RTT is the sum of the two.
    pub reverse_delay: Duration,
    /// Queue limit in segments; see [`path::QUEUE_COUNTS`].
    pub queue_limit: u32,
    /// Loss probability per packet read from TUN, 0..=1.
    pub loss: f64,
    pub seed: u64,
    /// Let the kernel hand over TCP super-packets of up to 64 KB (TSO/GSO on the TUN).
    pub gso: bool,
    /// Forward at real-time (SCHED_FIFO) priority when allowed.
    pub realtime: bool,
    /// Record each direction's packets as pcapng (`--pcap`).
    pub capture: Option<CaptureConfig>,
}

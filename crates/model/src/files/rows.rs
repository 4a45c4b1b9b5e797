//! One row of each CSV in a run directory. Field names are the column names of the
//! contract in DESIGN.md, so serde writes and reads the files with no mapping table.
//! Columns the contract lists come first, in its order; extra columns follow.

use serde::{Deserialize, Serialize};

use crate::files::columns::Row;
use crate::host::HostLoad;
use crate::socket::Chrono;

pub const READER_CSV: &str = "reader.csv";
pub const SENDER_CSV: &str = "sender.csv";
pub const HOST_CSV: &str = "host.csv";

/// What the reader was doing when a sample was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Reading as fast as the socket delivers.
    Fast,
    /// Reading a fixed budget per second, then stopping until the second is over.
    Slow,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Fast => "fast",
            Phase::Slow => "slow",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which end of the test a host row describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Reader,
    Sender,
}

/// `reader.csv`: the receiver's side of one flow over one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReaderSample {
    /// Seconds since the session's start on the reader's monotonic clock.
    pub t_s: f64,
    pub flow: u32,
    pub phase: Phase,
    /// Bytes the application read in this interval.
    pub bytes: u64,
    /// Window the receiver last advertised, in bytes (tcpi_rcv_wnd); empty where the
    /// kernel does not report it (before 6.2).
    pub rcv_wnd: Option<u32>,
    pub rcv_ssthresh: u32,
    pub rcv_space: u32,
    pub rtt_us: u32,
    /// Receive queue memory including metadata (SO_MEMINFO rmem_alloc), bytes.
    pub rmem_alloc: u32,
    /// The socket's receive buffer limit (sk_rcvbuf), bytes.
    pub rcvbuf: u32,
    /// The receiver's own RTT estimate (tcpi_rcv_rtt), which works on a silent receiver.
    pub rcv_rtt_us: u32,
    /// The slow-phase budget for the current second; 0 in a fast phase.
    pub budget_bytes: u64,
    /// Seconds of reading that `bytes` covers: one interval, several when the sampler woke
    /// late, less for the last sample of a run. Added after format 1 with a default of 0,
    /// "not recorded", so older run directories load (readers then assume one interval).
    #[serde(default)]
    pub span_s: f64,
    /// Bytes TCP delivered to the receive queue over the row's span (the change of
    /// `tcpi_bytes_received`): the network's goodput at the receiver, whatever the
    /// application read. Empty in runs recorded before the column existed.
    #[serde(default)]
    pub delivered_bytes: Option<u64>,
    /// The flow's group (`--group`, counted from 0); empty in runs before groups, which
    /// were all one group.
    #[serde(default)]
    pub group: Option<u32>,
}

impl ReaderSample {
    /// The seconds this row's bytes were read over: `span_s`, or the sampling interval in
    /// a run recorded before the column existed.
    pub fn span_or(&self, interval_s: f64) -> f64 {
        span_or(self.span_s, interval_s)
    }
}

/// `sender.csv`: the daemon's side of one flow over one interval. `Default` (zeros, no
/// latency or wake-ups) is for made-up rows in tests and examples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SenderSample {
    /// Seconds since the session's start on the daemon's monotonic clock.
    pub t_s: f64,
    pub flow: u32,
    /// Bytes the kernel accepted from the daemon in this interval (not bytes on the wire).
    pub bytes: u64,
    /// Congestion window, segments.
    pub cwnd: u32,
    /// Sent but not yet acknowledged, segments.
    pub unacked: u32,
    /// Accepted by the kernel but not yet sent (write_seq - snd_nxt); empty where the
    /// kernel does not report it (before 4.6).
    pub notsent_bytes: Option<u32>,
    /// The peer's advertised window as the sender sees it, bytes (tcpi_snd_wnd); empty
    /// where the kernel does not report it (before 5.4).
    pub snd_wnd: Option<u32>,
    pub rtt_us: u32,
    /// Empty where the kernel does not report it (before 4.9).
    pub delivery_rate_bps: Option<u64>,
    /// Send queue memory including metadata (SO_MEMINFO wmem_queued), bytes.
    pub wmem_queued: u32,
    /// The socket's send buffer limit (sk_sndbuf), bytes.
    pub sndbuf: u32,
    pub snd_mss_bytes: u32,
    /// Segments in flight (unacked - sacked - lost + retransmitted) x MSS: an estimate.
    pub inflight_bytes: u64,
    pub total_retrans: u32,
    /// Empty where the kernel does not report it (before 3.15).
    pub pacing_rate_bps: Option<u64>,
    /// Seconds that `bytes` covers: one interval, several when the daemon's sampler woke
    /// late, less for the last sample. Added after format 1 with a default of 0, "not
    /// recorded", so older run directories load (readers then assume one interval).
    #[serde(default)]
    pub span_s: f64,
    /// Microseconds the interval's tagged write waited in the send queue (from the write
    /// to its TX timestamp at the device); empty when none completed in this interval or
    /// the kernel gives no TX timestamps.
    #[serde(default)]
    pub residence_us: Option<u64>,
    /// Microseconds from the tagged write to its acknowledgement; empty likewise.
    #[serde(default)]
    pub write_to_ack_us: Option<u64>,
    /// POLLOUT wake-ups of the flow's writer in this interval (a write after one that
    /// found the socket full): 0 when it never waited; empty in runs recorded before the
    /// column existed.
    #[serde(default)]
    pub wakeups: Option<u64>,
    /// Not-sent bytes (`tcpi_notsent_bytes`) when the writer woke, before it wrote: the
    /// median of the interval's wake-ups (to 1%) and the exact largest; empty when there
    /// was none. With `TCP_NOTSENT_LOWAT` L the kernel wakes the writer below L/2.
    #[serde(default)]
    pub wake_notsent_p50_bytes: Option<u64>,
    #[serde(default)]
    pub wake_notsent_max_bytes: Option<u64>,
    /// Microseconds from the writer resuming on a wake-up to the end of its write: median
    /// (to 1%) and largest; empty when there was no wake-up.
    #[serde(default)]
    pub wake_to_write_p50_us: Option<u64>,
    #[serde(default)]
    pub wake_to_write_max_us: Option<u64>,
    /// Bytes the peer acknowledged over the row's span (the change of `tcpi_bytes_acked`).
    /// Where it is 0 `delivery_rate_bps` is stale: the kernel keeps its last sample. Empty
    /// in runs recorded before the column existed.
    #[serde(default)]
    pub acked_bytes: Option<u64>,
    /// At the sample, microseconds since the oldest tagged write still without its "sent"
    /// TX timestamp was written: a lower bound ("censored") of that write's residence,
    /// where `residence_us` would say nothing until the write left. Empty when no tagged
    /// write is pending.
    #[serde(default)]
    pub pending_write_age_us: Option<u64>,
    /// Microseconds of the row's span the flow had data to send (`tcpi_busy_time`'s
    /// growth), and of those, held back by the receiver's window (`tcpi_rwnd_limited`) and
    /// by the send buffer (`tcpi_sndbuf_limited`). Busy less both is the network (cwnd,
    /// pacing); the span less busy, the application. Counted in jiffies (1-4 ms). Empty in
    /// runs before the columns existed and where the kernel lacks the counters (before 4.10).
    #[serde(default)]
    pub busy_us: Option<u64>,
    #[serde(default)]
    pub rwnd_limited_us: Option<u64>,
    #[serde(default)]
    pub sndbuf_limited_us: Option<u64>,
    /// The lowest RTT TCP has seen on the flow (`tcpi_min_rtt`), µs: the path's base RTT,
    /// so `rtt_us - min_rtt_us` is the queueing the flow's own packets meet. Empty in runs
    /// before the column and where the kernel lacks the field (before 4.6).
    #[serde(default)]
    pub min_rtt_us: Option<u32>,
    /// The flow's group (`--group`, counted from 0), as the daemon applied its options;
    /// empty in runs before groups, which were all one group.
    #[serde(default)]
    pub group: Option<u32>,
    /// BBR's own model of the path at the sample (`TCP_CC_INFO`, sock_diag's
    /// `INET_DIAG_BBRINFO`): its bandwidth estimate (the max-filtered delivery rate,
    /// bits/s), its min RTT (µs: the filter BBR sizes its cwnd by, which may lag TCP's
    /// `min_rtt_us`), and its pacing and cwnd gains (the kernel's `<<8` fixed point as a
    /// ratio: 2.89 in startup, 1.25/0.75/1 cycling in probe-bw). Empty where the flow is
    /// not on BBR, before BBR's first estimate, and in runs before the columns.
    #[serde(default)]
    pub bbr_bw_bps: Option<u64>,
    #[serde(default)]
    pub bbr_min_rtt_us: Option<u32>,
    #[serde(default)]
    pub bbr_pacing_gain: Option<f64>,
    #[serde(default)]
    pub bbr_cwnd_gain: Option<f64>,
    /// Whether the handshake negotiated ECN (`tcpi_options`' `TCPI_OPT_ECN`); empty in
    /// runs before the column.
    #[serde(default)]
    pub ecn_negotiated: Option<bool>,
    /// Segments the peer acknowledged with an ECN echo over the row's span
    /// (`tcpi_delivered_ce`'s growth): the congestion the path marked instead of dropping.
    /// 0 is a count on a flow that negotiated ECN; empty on one that did not, where the
    /// kernel lacks the counter (before 4.18), and in runs before the column.
    #[serde(default)]
    pub delivered_ce_segs: Option<u64>,
}

/// The largest gain `tcp_bbr_info` can carry: a u32 in fixed point with 8 bits.
pub const MAX_BBR_GAIN: f64 = u32::MAX as f64 / 256.0;

fn span_or(span_s: f64, interval_s: f64) -> f64 {
    if span_s > 0.0 {
        span_s
    } else {
        interval_s
    }
}

/// `host.csv`: one host's `/proc/net/sockstat` TCP line at one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostSample {
    pub t_s: f64,
    pub side: Side,
    pub tcp_inuse: u64,
    pub tcp_orphan: u64,
    pub tcp_tw: u64,
    pub tcp_alloc: u64,
    /// TCP memory in pages; global across network namespaces on this kernel.
    pub tcp_mem_pages: u64,
    /// TCP memory charged to every TCP socket of this side's own network namespace
    /// (send queue, receive queue, forward allocation), bytes, from the sampler's
    /// sock_diag dump: unlike `tcp_mem_pages` it tells sender from receiver on one host.
    /// Summed at most every 100 ms (the dump walks the kernel's whole socket table), so
    /// empty on the ticks between at shorter intervals; empty in runs before format 1.1.
    #[serde(default)]
    pub tcp_mem_ns_bytes: Option<u64>,
    /// Receive-queue events of this side's namespace over the row's span (`TcpExt`
    /// counters' growth): collapses, prunes (called, receive queue, out-of-order queue)
    /// and segments dropped for want of room in the receive queue or the socket backlog.
    /// Empty where the kernel lacks a counter, and in runs before the columns existed.
    #[serde(default)]
    pub tcp_collapsed: Option<u64>,
    #[serde(default)]
    pub tcp_prune_called: Option<u64>,
    #[serde(default)]
    pub tcp_rcv_pruned: Option<u64>,
    #[serde(default)]
    pub tcp_ofo_pruned: Option<u64>,
    #[serde(default)]
    pub tcp_rcvq_drop: Option<u64>,
    #[serde(default)]
    pub tcp_backlog_drop: Option<u64>,
    /// The longest any thread of this side's process (the reader's reading threads, the
    /// daemon's writing ones) waited for a CPU over the row's span, milliseconds: the
    /// scheduler's run-queue wait (`/proc/self/task/*/schedstat`): what tells a starved
    /// end (`run::starvation`) when its sampler, in the real-time class, still woke on time.
    /// Empty where `/proc` does not tell, and in runs before the column existed.
    #[serde(default)]
    pub run_queue_wait_ms: Option<f64>,
    /// The egress device's root qdisc (the device the route to the peer leaves by):
    /// backlog at the tick, bytes and packets, and drops and requeues over the row's span.
    /// Empty where no device or qdisc could be read (`run.json` `absent` says why), and in
    /// runs before the columns existed.
    #[serde(default)]
    pub qdisc_backlog_bytes: Option<u64>,
    #[serde(default)]
    pub qdisc_backlog_packets: Option<u64>,
    #[serde(default)]
    pub qdisc_drops: Option<u64>,
    #[serde(default)]
    pub qdisc_requeues: Option<u64>,
    /// `/proc/net/softnet_stat` summed over the CPUs, over the row's span: packets the
    /// receive backlog dropped, and receive softirq runs cut short with work left.
    #[serde(default)]
    pub softnet_dropped: Option<u64>,
    #[serde(default)]
    pub softnet_time_squeeze: Option<u64>,
    /// The busiest CPU's and the mean CPU's busy share of the row's span (`/proc/stat`:
    /// neither idle nor waiting for I/O), percent, 0 to 100.
    #[serde(default)]
    pub cpu_busy_max_pct: Option<f64>,
    #[serde(default)]
    pub cpu_busy_mean_pct: Option<f64>,
}

impl HostSample {
    /// A row with every count zero and no namespace figures, for made-up rows in tests
    /// and examples (which set the fields they mean).
    pub fn empty(t_s: f64, side: Side) -> Self {
        HostSample {
            t_s,
            side,
            tcp_inuse: 0,
            tcp_orphan: 0,
            tcp_tw: 0,
            tcp_alloc: 0,
            tcp_mem_pages: 0,
            tcp_mem_ns_bytes: None,
            tcp_collapsed: None,
            tcp_prune_called: None,
            tcp_rcv_pruned: None,
            tcp_ofo_pruned: None,
            tcp_rcvq_drop: None,
            tcp_backlog_drop: None,
            run_queue_wait_ms: None,
            qdisc_backlog_bytes: None,
            qdisc_backlog_packets: None,
            qdisc_drops: None,
            qdisc_requeues: None,
            softnet_dropped: None,
            softnet_time_squeeze: None,
            cpu_busy_max_pct: None,
            cpu_busy_mean_pct: None,
        }
    }

    /// The row with one interval of the host's own load.
    pub fn with_load(self, load: &HostLoad) -> Self {
        HostSample {
            qdisc_backlog_bytes: load.qdisc.map(|q| q.backlog_bytes),
            qdisc_backlog_packets: load.qdisc.map(|q| q.backlog_packets),
            qdisc_drops: load.qdisc.map(|q| q.drops),
            qdisc_requeues: load.qdisc.map(|q| q.requeues),
            softnet_dropped: load.softnet.map(|s| s.dropped),
            softnet_time_squeeze: load.softnet.map(|s| s.time_squeeze),
            cpu_busy_max_pct: load.cpu.map(|c| c.busy_max_pct),
            cpu_busy_mean_pct: load.cpu.map(|c| c.busy_mean_pct),
            ..self
        }
    }

    /// A CPU figure that is not a share (NaN, or outside 0 to 100): an untrusted row or
    /// file carrying one is refused.
    pub fn cpu_busy_pct_out_of_range(&self) -> Option<f64> {
        [self.cpu_busy_max_pct, self.cpu_busy_mean_pct]
            .into_iter()
            .flatten()
            .find(|p| !(0.0..=100.0).contains(p))
    }

    /// Packets this host dropped below TCP over the row's span: its egress qdisc's and its
    /// softnet backlog's; `None` where neither was read.
    pub fn host_dropped_packets(&self) -> Option<u64> {
        match (self.qdisc_drops, self.softnet_dropped) {
            (None, None) => None,
            (q, s) => Some(q.unwrap_or(0).saturating_add(s.unwrap_or(0))),
        }
    }
}

impl SenderSample {
    /// The seconds this row's bytes were written over: `span_s`, or the sampling interval
    /// in a run recorded before the column existed.
    pub fn span_or(&self, interval_s: f64) -> f64 {
        span_or(self.span_s, interval_s)
    }

    /// BBR's gains, where the row has them, that are not what the kernel can say (a u32
    /// over 256): an untrusted row or file carrying one is refused.
    pub fn bbr_gain_out_of_range(&self) -> Option<f64> {
        [self.bbr_pacing_gain, self.bbr_cwnd_gain]
            .into_iter()
            .flatten()
            .find(|g| !(0.0..=MAX_BBR_GAIN).contains(g))
    }

    /// The row with where the flow's time went over its span, where the kernel counts it.
    pub fn with_chrono(self, spent: Option<Chrono>) -> Self {
        SenderSample {
            busy_us: spent.map(|s| s.busy_us),
            rwnd_limited_us: spent.map(|s| s.rwnd_limited_us),
            sndbuf_limited_us: spent.map(|s| s.sndbuf_limited_us),
            ..self
        }
    }

    /// The row with one interval's wake-ups of its flow.
    pub fn with_wakeups(self, w: &WakeupFigures) -> Self {
        SenderSample {
            wakeups: Some(w.wakeups),
            wake_notsent_p50_bytes: w.notsent_p50_bytes,
            wake_notsent_max_bytes: w.notsent_max_bytes,
            wake_to_write_p50_us: w.wake_to_write_p50_us,
            wake_to_write_max_us: w.wake_to_write_max_us,
            ..self
        }
    }
}

/// One flow's POLLOUT wake-ups as the daemon's writer saw them: not-sent bytes when it
/// woke (at or below half of `TCP_NOTSENT_LOWAT` when one is set) and the time from waking
/// to the end of its write. Empty figures when the writer never waited.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WakeupFigures {
    pub flow: u32,
    pub wakeups: u64,
    pub notsent_p50_bytes: Option<u64>,
    pub notsent_max_bytes: Option<u64>,
    pub wake_to_write_p50_us: Option<u64>,
    pub wake_to_write_max_us: Option<u64>,
}

impl Row for ReaderSample {
    const FILE: &'static str = READER_CSV;
    /// Up to `budget_bytes`; `span_s` and `delivered_bytes` came later.
    const FIRST_COLUMNS: usize = 12;
}

impl Row for SenderSample {
    const FILE: &'static str = SENDER_CSV;
    /// Up to `pacing_rate_bps`; from `span_s` on, later.
    const FIRST_COLUMNS: usize = 15;
}

impl Row for HostSample {
    const FILE: &'static str = HOST_CSV;
    /// sockstat's; from `tcp_mem_ns_bytes` on, later.
    const FIRST_COLUMNS: usize = 7;
}

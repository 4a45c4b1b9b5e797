//! The rows of a run's CSVs from what the kernel said of a socket or a host at one tick.

use std::time::Duration;

use oscil_model::files::rows::{HostSample, Phase, ReaderSample, SenderSample, Side};
use oscil_model::host::{QueueEvents, Sockstat};

use crate::socket::diag::Sampled;
use crate::socket::meminfo::SkMemInfo;
use crate::socket::tcp_info::TcpInfo;

/// A row from sockstat, the namespace's receive-queue events since the last row,
/// when summed at this tick, the namespace's charged TCP memory, and the longest any of
/// the process's threads waited for a CPU since the last row.
pub fn host_sample(
    t_s: f64,
    side: Side,
    s: &Sockstat,
    queue: Option<QueueEvents>,
    tcp_mem_ns_bytes: Option<u64>,
    run_queue_wait: Option<Duration>,
) -> HostSample {
    HostSample {
        t_s,
        side,
        tcp_inuse: s.tcp_inuse,
        tcp_orphan: s.tcp_orphan,
        tcp_tw: s.tcp_tw,
        tcp_alloc: s.tcp_alloc,
        tcp_mem_pages: s.tcp_mem_pages,
        tcp_mem_ns_bytes,
        tcp_collapsed: queue.map(|q| q.collapsed),
        tcp_prune_called: queue.map(|q| q.prune_called),
        tcp_rcv_pruned: queue.map(|q| q.rcv_pruned),
        tcp_ofo_pruned: queue.map(|q| q.ofo_pruned),
        tcp_rcvq_drop: queue.map(|q| q.rcvq_drop),
        tcp_backlog_drop: queue.map(|q| q.backlog_drop),
        run_queue_wait_ms: run_queue_wait.map(|d| d.as_secs_f64() * 1e3),
        // The host's own load comes from `host::load`, with `HostSample::with_load`.
        ..HostSample::empty(t_s, side)
    }
}

/// Builds a row from what the kernel said of the socket at `t_s`.
pub fn sender_sample(
    t_s: f64,
    flow: u32,
    (bytes, span_s): (u64, f64),
    Sampled { info, mem, bbr }: &Sampled,
) -> SenderSample {
    SenderSample {
        t_s,
        flow,
        bytes,
        cwnd: info.snd_cwnd_segs,
        unacked: info.unacked_segs,
        notsent_bytes: info.notsent_bytes,
        snd_wnd: info.snd_wnd_bytes,
        rtt_us: info.rtt_us,
        delivery_rate_bps: info.delivery_rate_bps,
        wmem_queued: mem.wmem_queued_bytes,
        sndbuf: mem.sndbuf_bytes,
        snd_mss_bytes: info.snd_mss_bytes,
        inflight_bytes: info.inflight_bytes_est(),
        total_retrans: info.total_retrans,
        pacing_rate_bps: info.pacing_rate_bps,
        span_s,
        min_rtt_us: info.min_rtt_us,
        bbr_bw_bps: bbr.and_then(|b| b.bw_bps),
        bbr_min_rtt_us: bbr.and_then(|b| b.min_rtt_us),
        bbr_pacing_gain: bbr.map(|b| b.pacing_gain),
        bbr_cwnd_gain: bbr.map(|b| b.cwnd_gain),
        ecn_negotiated: Some(info.ecn_negotiated),
        // The writer's columns and the counters' shares of the span (chrono, acked and
        // CE-marked) are filled by the daemon's sampler.
        ..SenderSample::default()
    }
}

/// Builds a row from what the kernel said of the socket at `t_s`.
pub fn reader_sample(
    t_s: f64,
    flow: u32,
    phase: Phase,
    (bytes, span_s): (u64, f64),
    budget_bytes: u64,
    info: &TcpInfo,
    mem: &SkMemInfo,
) -> ReaderSample {
    ReaderSample {
        t_s,
        flow,
        phase,
        bytes,
        rcv_wnd: info.rcv_wnd_bytes,
        rcv_ssthresh: info.rcv_ssthresh_bytes,
        rcv_space: info.rcv_space_bytes,
        rtt_us: info.rtt_us,
        rmem_alloc: mem.rmem_alloc_bytes,
        rcvbuf: mem.rcvbuf_bytes,
        rcv_rtt_us: info.rcv_rtt_us,
        budget_bytes,
        span_s,
        delivered_bytes: None,
        // The reader's sampler knows the flow's group.
        group: None,
    }
}

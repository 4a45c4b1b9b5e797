//! The per-ACK trace (`--trace`) in a run directory: one row per kernel event in
//! `trace-sender.csv` (the daemon's `tcp_probe`, retransmits, congestion-state changes) and
//! `trace-reader.csv` (the reader's receive-buffer autotuning), and what each side traced
//! in `run.json`: the rows and facts as they cross the wire. The files are
//! `oscil_rundir::trace`, the tracing itself `oscil_tracer`.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use serde::{Deserialize, Serialize};

use crate::files::columns::Row;

pub const TRACE_SENDER_CSV: &str = "trace-sender.csv";
pub const TRACE_READER_CSV: &str = "trace-reader.csv";

/// Which kernel event a trace row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceKind {
    /// `tcp:tcp_probe`: an incoming segment (on the sender, an ACK).
    Probe,
    /// `tcp:tcp_retransmit_skb`.
    Retransmit,
    /// `tcp:tcp_cong_state_set`: the congestion state changed (to `cong_state`).
    CongState,
    /// `tcp:tcp_rcvbuf_grow`: receive-buffer autotuning grew `rcvbuf`.
    RcvbufGrow,
    /// `tcp:tcp_rcv_space_adjust`: autotuning measured what the application copied.
    RcvSpaceAdjust,
    /// One call of `tcp_collapse` (a kprobe and a kretprobe): the receive queue's skbs
    /// copied into fewer, fuller ones; `duration_ns` long.
    TcpCollapse,
    /// One call of `tcp_prune_queue`: the receive queue over its buffer, collapsed (and
    /// the out-of-order queue pruned) to make room.
    TcpPruneQueue,
    /// One call of `tcp_collapse_ofo_queue`.
    TcpCollapseOfoQueue,
    /// One call of `tcp_prune_ofo_queue`: out-of-order data dropped for room.
    TcpPruneOfoQueue,
}

/// Where the kernel reports an event kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceSource {
    /// A static tracepoint, `system/event` under tracefs's `events/`.
    Tracepoint(&'static str),
    /// Entry and return probes (kprobe events) on a kernel function.
    Function(&'static str),
}

impl TraceSource {
    /// Its name as tracefs and `run.json` say it: `tcp/tcp_probe`, or the function's.
    pub fn name(self) -> &'static str {
        match self {
            TraceSource::Tracepoint(name) | TraceSource::Function(name) => name,
        }
    }
}

impl TraceKind {
    pub const ALL: [TraceKind; 9] = [
        TraceKind::Probe,
        TraceKind::Retransmit,
        TraceKind::CongState,
        TraceKind::RcvbufGrow,
        TraceKind::RcvSpaceAdjust,
        TraceKind::TcpCollapse,
        TraceKind::TcpPruneQueue,
        TraceKind::TcpCollapseOfoQueue,
        TraceKind::TcpPruneOfoQueue,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TraceKind::Probe => "probe",
            TraceKind::Retransmit => "retransmit",
            TraceKind::CongState => "cong_state",
            TraceKind::RcvbufGrow => "rcvbuf_grow",
            TraceKind::RcvSpaceAdjust => "rcv_space_adjust",
            TraceKind::TcpCollapse => "tcp_collapse",
            TraceKind::TcpPruneQueue => "tcp_prune_queue",
            TraceKind::TcpCollapseOfoQueue => "tcp_collapse_ofo_queue",
            TraceKind::TcpPruneOfoQueue => "tcp_prune_ofo_queue",
        }
    }

    /// Where the kernel reports it.
    pub fn source(self) -> TraceSource {
        match self {
            TraceKind::Probe => TraceSource::Tracepoint("tcp/tcp_probe"),
            TraceKind::Retransmit => TraceSource::Tracepoint("tcp/tcp_retransmit_skb"),
            TraceKind::CongState => TraceSource::Tracepoint("tcp/tcp_cong_state_set"),
            TraceKind::RcvbufGrow => TraceSource::Tracepoint("tcp/tcp_rcvbuf_grow"),
            TraceKind::RcvSpaceAdjust => TraceSource::Tracepoint("tcp/tcp_rcv_space_adjust"),
            // The kernel function of the same name.
            call => TraceSource::Function(call.as_str()),
        }
    }

    /// Whether the event names its socket by cookie; the others only by address.
    pub fn has_cookie(self) -> bool {
        matches!(
            self,
            TraceKind::Probe | TraceKind::RcvbufGrow | TraceKind::RcvSpaceAdjust
        )
    }
}

/// Which file a row type goes to.
pub trait TraceSide: Send + Sync + 'static {
    const FILE: &'static str;
}

/// The daemon's events, `trace-sender.csv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderTrace;
/// The reader's events, `trace-reader.csv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderTrace;

impl TraceSide for SenderTrace {
    const FILE: &'static str = TRACE_SENDER_CSV;
}
impl TraceSide for ReaderTrace {
    const FILE: &'static str = TRACE_READER_CSV;
}

/// One kernel event of one flow. Every column but the first three is empty unless the
/// event's tracepoint has the field. Sequence numbers are the kernel's 32-bit ones (they
/// wrap); windows and buffers are bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct TraceRow<S> {
    /// Seconds since the session's start on the side's monotonic clock (the clock of its
    /// samples' `t_s`).
    pub t_s: f64,
    pub kind: TraceKind,
    pub flow: u32,
    pub snd_nxt: Option<u32>,
    pub snd_una: Option<u32>,
    /// Congestion window, segments.
    pub snd_cwnd: Option<u32>,
    pub ssthresh: Option<u32>,
    /// The window the peer advertised, as the sender holds it.
    pub snd_wnd: Option<u32>,
    /// Smoothed RTT, µs.
    pub srtt_us: Option<u32>,
    /// The receive window this socket offers.
    pub rcv_wnd: Option<u32>,
    /// The congestion state entered: 0 open, 1 disorder, 2 cwr, 3 recovery, 4 loss.
    pub cong_state: Option<u8>,
    /// Autotuning (`tcp_rcvbuf_grow`): the receiver's RTT estimate, µs.
    pub rtt_us: Option<u32>,
    /// Bytes the application copied over the measurement.
    pub copied: Option<u32>,
    /// Bytes in the receive queue.
    pub inq: Option<u32>,
    /// `rcvq_space.space`, the measured need.
    pub space: Option<u32>,
    pub ooo_space: Option<u32>,
    /// `sk_rcvbuf` after the step.
    pub rcvbuf: Option<u32>,
    pub rcv_ssthresh: Option<u32>,
    pub window_clamp: Option<u32>,
    /// The share of `rcvbuf` that is payload, in 256ths.
    pub scaling_ratio: Option<u8>,
    /// The measurement's length, µs.
    pub measured_us: Option<u32>,
    /// A kernel function's call (`tcp_collapse`, ...): from entry to return, ns.
    #[serde(default)]
    pub duration_ns: Option<u32>,
    #[serde(skip)]
    pub side: PhantomData<S>,
}

impl<S> TraceRow<S> {
    /// A row with no field set yet.
    pub fn new(t_s: f64, kind: TraceKind, flow: u32) -> Self {
        TraceRow {
            t_s,
            kind,
            flow,
            snd_nxt: None,
            snd_una: None,
            snd_cwnd: None,
            ssthresh: None,
            snd_wnd: None,
            srtt_us: None,
            rcv_wnd: None,
            cong_state: None,
            rtt_us: None,
            copied: None,
            inq: None,
            space: None,
            ooo_space: None,
            rcvbuf: None,
            rcv_ssthresh: None,
            window_clamp: None,
            scaling_ratio: None,
            measured_us: None,
            duration_ns: None,
            side: PhantomData,
        }
    }
}

/// What one side's trace recorded, or why it recorded nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceSideFacts {
    /// The tracepoints enabled, `system/event`.
    pub tracepoints: Vec<String>,
    /// Rows per event kind.
    pub events: BTreeMap<String, u64>,
    /// Events the kernel dropped because its buffer was full (its overrun counter), plus
    /// pages it said followed a loss.
    pub lost_events: u64,
    /// Events past the trace file's cap (`oscil_rundir::trace::MAX_TRACE_ROWS`), counted
    /// and not written.
    #[serde(default)]
    pub rows_not_written: u64,
    /// Rows the daemon's own count says it traced that never reached the reader: its rows
    /// stopped early (the sender's side only; absent when none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rows_missing: u64,
    /// Why the trace, or a tracepoint, is missing (no tracefs, a kernel without the event,
    /// no permission); empty when everything asked for was traced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<String>,
    /// The kernel functions timed by probes, per phase (the reader's side: collapse and
    /// prune); empty where none was timed (see `absent`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<CallFigures>,
}

/// How long one kernel function's calls took in one phase, µs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallFigures {
    /// `tcp_collapse`, `tcp_prune_queue`, ...
    pub function: String,
    pub phase: crate::files::rows::Phase,
    pub calls: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl TraceSideFacts {
    /// Nothing traced, for `why`.
    pub fn absent(why: String) -> Self {
        TraceSideFacts {
            absent: vec![why],
            ..Default::default()
        }
    }

    /// Rows of every kind.
    pub fn total_events(&self) -> u64 {
        // Saturating: a peer's counts are not trusted to fit.
        self.events
            .values()
            .fold(0, |sum: u64, &n| sum.saturating_add(n))
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `run.json`'s `trace`: both sides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceFacts {
    pub sender: Option<TraceSideFacts>,
    pub reader: Option<TraceSideFacts>,
}

impl TraceFacts {
    /// One line per side for the terminal: the events and their losses, or why there are
    /// none.
    pub fn lines(&self) -> Vec<String> {
        [("sender", &self.sender), ("reader", &self.reader)]
            .into_iter()
            .filter_map(|(side, facts)| Some((side, facts.as_ref()?)))
            .map(|(side, facts)| {
                let kinds: Vec<String> = facts
                    .events
                    .iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                let mut line = format!(
                    "trace, {side}: {} events ({}), {} lost",
                    facts.total_events(),
                    if kinds.is_empty() {
                        "none".into()
                    } else {
                        kinds.join(", ")
                    },
                    facts.lost_events
                );
                if facts.rows_not_written > 0 {
                    line += &format!(", {} past the cap not written", facts.rows_not_written);
                }
                if facts.rows_missing > 0 {
                    line += &format!(", {} never arrived", facts.rows_missing);
                }
                for c in &facts.calls {
                    line +=
                        &format!(
                        "; {} in the {} phases: {} calls, p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
                        c.function, c.phase.as_str(), c.calls, c.p50_us, c.p99_us, c.max_us
                    );
                }
                if !facts.absent.is_empty() {
                    line += &format!("; {}", facts.absent.join("; "));
                }
                line
            })
            .collect()
    }
}

impl<S: TraceSide> Row for TraceRow<S> {
    const FILE: &'static str = S::FILE;
    /// All but `duration_ns`, which came later.
    const FIRST_COLUMNS: usize = 21;
}

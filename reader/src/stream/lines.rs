//! The lines of `--json-stream`, one JSON object each, defined once here: what the writer
//! prints. `docs/json-stream.schema.json` describes the same shapes independently, and the
//! tests hold a real stream to the schema, not to these types.

use std::path::Path;

use oscil_model::files::rows::Phase;
use oscil_model::host::HostFacts;
use oscil_model::pattern::PhaseSpan;
use oscil_model::run::{RunConfig, RunMeta};
use oscil_model::socket::OptionsInForce;
use serde::Serialize;

/// One line of the stream; `type` says which.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Line<'a> {
    Start(Box<Start<'a>>),
    Interval(Box<Interval>),
    /// The run's end: the object `-J` prints (its error object when the run could not
    /// start), on one line.
    End(&'a serde_json::Value),
}

impl Line<'_> {
    /// The line as the stream prints it: compact JSON and a newline.
    pub fn text(&self) -> String {
        let mut text = serde_json::to_string(self).expect("a stream line serializes");
        text.push('\n');
        text
    }
}

/// The session as it starts: what was asked, both hosts, the options in force.
#[derive(Debug, Serialize)]
pub struct Start<'a> {
    pub run_id: Option<&'a str>,
    /// `--label`, else the run directory's name.
    pub label: String,
    /// The run directory as given.
    pub out: &'a Path,
    pub started_unix_ms: u64,
    /// The sampling interval, seconds: each interval line covers one.
    pub interval_s: f64,
    pub config: &'a RunConfig,
    /// The pattern's timetable: every phase of every cycle, seconds from the start.
    pub schedule: &'a [PhaseSpan],
    pub versions: Versions<'a>,
    pub hosts: Hosts<'a>,
    pub sender_options: Option<&'a OptionsInForce>,
    pub sender_options_by_group: &'a [OptionsInForce],
    pub reader_options: Option<&'a OptionsInForce>,
}

#[derive(Debug, Serialize)]
pub struct Versions<'a> {
    pub reader: &'a str,
    pub daemon: Option<&'a str>,
}

#[derive(Debug, Serialize)]
pub struct Hosts<'a> {
    pub reader: &'a HostFacts,
    pub sender: Option<&'a HostFacts>,
}

impl<'a> Start<'a> {
    pub fn of(meta: &'a RunMeta, out: &'a Path) -> Self {
        let dir_name = || out.file_name().map(|n| n.to_string_lossy().into_owned());
        Start {
            run_id: meta.run_id.as_deref(),
            label: meta
                .label
                .clone()
                .or_else(dir_name)
                .unwrap_or_else(|| out.display().to_string()),
            out,
            started_unix_ms: meta.started_unix_ms,
            interval_s: meta.config.interval_us as f64 / 1e6,
            config: &meta.config,
            schedule: &meta.schedule,
            versions: Versions {
                reader: &meta.reader_software,
                daemon: meta.daemon_software.as_deref(),
            },
            hosts: Hosts {
                reader: &meta.reader_host,
                sender: meta.sender_host.as_ref(),
            },
            sender_options: meta.sender_options.as_ref(),
            sender_options_by_group: &meta.sender_options_by_group,
            reader_options: meta.reader_options.as_ref(),
        }
    }
}

/// One sampling interval: both ends' figures, the whole session's and each group's. A side
/// is `null` where it has no sample for the interval (its sampler woke late and its next
/// sample covers this interval too, or its samples stopped).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interval {
    /// Which interval: the k-th since the session's start (from 1), ending at k × the
    /// sampling interval.
    pub interval: u64,
    /// Where the interval ends, seconds since the session's start.
    pub t_s: f64,
    pub cycle: u32,
    pub phase: Phase,
    pub reader: Option<ReaderFigures>,
    pub sender: Option<SenderFigures>,
    /// The same figures per group of flows (`--group`; a run without groups is one).
    pub groups: Vec<GroupFigures>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupFigures {
    /// The group's number, from 0, as `reader.csv` and `sender.csv` have it.
    pub group: u32,
    pub reader: Option<ReaderFigures>,
    pub sender: Option<SenderFigures>,
}

/// The reader's side over one sample, summed over flows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReaderFigures {
    /// The sample's time on the reader's clock, seconds since the start.
    pub t_s: f64,
    /// Seconds the sample covers (reader.csv `span_s`).
    pub span_s: f64,
    pub flows: u32,
    /// Bytes the application read, and as a rate over the span.
    pub bytes: u64,
    pub read_bps: f64,
    /// Bytes TCP delivered to the receive queues, and as a rate: the network's goodput.
    pub delivered_bytes: Option<u64>,
    pub net_goodput_bps: Option<f64>,
    /// Receive-queue memory (SO_MEMINFO rmem_alloc) and the receive buffers' limits.
    pub rmem_alloc_bytes: u64,
    pub rcvbuf_bytes: u64,
    /// The slow phase's byte budget for the current second; 0 in a fast phase.
    pub budget_bytes: u64,
    /// The reader's host: TCP memory charged to its namespace's sockets (host.csv
    /// `tcp_mem_ns_bytes`, summed at most every 100 ms) and sockstat's TCP memory. Only on
    /// the session's figures, not a group's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<HostFigures>,
}

/// The daemon's side over one sample, summed over flows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SenderFigures {
    /// The sample's time on the daemon's clock, seconds since its start.
    pub t_s: f64,
    pub span_s: f64,
    pub flows: u32,
    /// Bytes the kernel accepted from the daemon (not bytes on the wire).
    pub bytes: u64,
    /// Bytes the peer acknowledged, and as a rate over the span.
    pub acked_bytes: Option<u64>,
    pub acked_bps: Option<f64>,
    /// Accepted but not yet sent (`tcpi_notsent_bytes`).
    pub notsent_bytes: Option<u64>,
    /// Send-queue memory (SO_MEMINFO wmem_queued) and the send buffers' limits.
    pub wmem_queued_bytes: u64,
    pub sndbuf_bytes: u64,
    pub inflight_bytes: u64,
    pub cwnd_segs: u64,
    /// The flows' smoothed RTT, mean over flows with an estimate, and the lowest `min_rtt`.
    pub rtt_mean_us: Option<f64>,
    pub min_rtt_us: Option<u32>,
    /// Retransmitted segments since each flow began (cumulative, as `tcpi_total_retrans`).
    pub total_retrans: u64,
    pub wakeups: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<HostFigures>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostFigures {
    pub tcp_mem_bytes: u64,
    pub tcp_mem_ns_bytes: Option<u64>,
}

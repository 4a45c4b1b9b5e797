//! `run.json`: what a run was (its configuration, pattern, both hosts' facts, the
//! options in force), how it went (sampling, clock, markers, probe, trace, cost) and how it
//! ended. The reader writes it first and last; the report and the lab read it.

pub mod absent;
pub mod clock;
pub mod host_limit;
pub mod link_health;
pub mod sampling;
pub mod starvation;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::files::markers::MarkerCounts;
use crate::files::rows::WakeupFigures;
use crate::group::{FlowGroup, Reading};
use crate::host::{HostFacts, ProcessCost};
use crate::pattern::{PatternConfig, PhaseSpan, SlowRate, SlowRule};
use crate::run::clock::ClockEstimate;
use crate::run::sampling::Sampling;
use crate::socket::{OptionsInForce, SocketOptions, WriteMode};

/// Bumped when a reader of an older directory would misread a newer one.
pub const FORMAT_VERSION: u32 = 1;

pub const RUN_JSON: &str = "run.json";

/// `run.json`: everything needed to know what a run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    pub format_version: u32,
    /// The run's identity (**contract** `run_id`): 128 random bits as 32 lowercase hex
    /// characters, made by the reader when the run starts, so a copied directory is known
    /// as the same run; absent in runs recorded before it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// A short name for the run, shown on charts; defaults to the directory name.
    pub label: Option<String>,
    pub reader_software: String,
    pub daemon_software: Option<String>,
    pub started_unix_ms: u64,
    pub config: RunConfig,
    /// The phases actually run, cut at the moment the run ended.
    pub schedule: Vec<PhaseSpan>,
    pub reader_host: HostFacts,
    pub sender_host: Option<HostFacts>,
    /// Options the daemon read back after setting the session's request on a socket of
    /// its own at hello time; every data socket gets the same request (per-flow `sndbuf`
    /// is in sender.csv).
    pub sender_options: Option<OptionsInForce>,
    /// Per group of `config.groups`, in order, the options the daemon read back after
    /// setting that group's request; empty in runs before groups (`sender_options` then
    /// holds the one group's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sender_options_by_group: Vec<OptionsInForce>,
    /// Options in force on the reader's data sockets.
    pub reader_options: Option<OptionsInForce>,
    /// TcpExt counters that moved during the run, per side.
    pub tcpext_delta: BTreeMap<String, BTreeMap<String, u64>>,
    pub ending: Ending,
    /// The lab's record of the run (`oscil-reader --lab-record`), when the lab ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<crate::lab::LabRecord>,
    /// Whatever the person who ran the reader described the run with (`--meta`), free-form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Value>,
    /// What each end's process spent over the session; absent in runs before issue 11.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<RunCost>,
    /// Per flow, the daemon's POLLOUT wake-ups; empty when the daemon did not say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wakeups: Vec<WakeupFigures>,
    /// How well each side's sampler kept its clock; absent in runs recorded before it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Sampling>,
    /// The daemon's clock against the reader's, from the exchanges at session start; only
    /// in runs with markers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockEstimate>,
    /// What became of the markers (`markers.csv`); only in runs with markers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub markers: Option<MarkerCounts>,
    /// Whether the idle probe ran (`probe.csv`) and what it counted; absent in runs before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<crate::files::probe::ProbeFacts>,
    /// What the per-ACK trace (`--trace`) recorded per side, or why it could not; only in
    /// runs that asked for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::files::trace::TraceFacts>,
    /// What either side's kernel or host could not give (`tcp_info` fields its length
    /// leaves out, sock_diag refused), each said once, in words; absent when nothing was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<crate::run::absent::Absence>,
}

impl RunMeta {
    /// Everything this run's kernels or hosts could not give, in words, once each, escaped
    /// (the file may come from anywhere): `absent`'s notes, then each side's trace gaps
    /// with its kernel's release.
    pub fn not_given(&self) -> Vec<String> {
        let escape = crate::text::escape_stored;
        let mut notes: Vec<String> = self.absent.iter().map(|a| escape(&a.note)).collect();
        let sides = self.trace.iter().flat_map(|t| {
            [
                ("sender", &t.sender, self.sender_host.as_ref()),
                ("reader", &t.reader, Some(&self.reader_host)),
            ]
        });
        for (side, facts, host) in sides {
            let release = host.map_or("?", |h| h.kernel_release.as_str());
            for absent in facts.iter().flat_map(|f| &f.absent) {
                notes.push(escape(&format!("trace, {side} ({release}): {absent}")));
            }
        }
        notes.dedup();
        notes
    }
}

/// CPU and context switches of both ends over the session; a side is `None` where `/proc`
/// (or the daemon) did not tell, never zeros.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunCost {
    pub reader: Option<ProcessCost>,
    /// The whole daemon process: it includes any other session it served meanwhile.
    pub sender: Option<ProcessCost>,
}

/// The reader's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// The daemon's address as given.
    pub connect: String,
    pub flows: u32,
    pub interval_us: u64,
    pub pattern: PatternConfig,
    /// Socket options asked of the daemon.
    pub sender_request: SocketOptions,
    /// Socket options set on the reader's own sockets.
    pub reader_request: SocketOptions,
    /// Bytes the daemon was asked to offer the kernel per write; absent in older runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_size_bytes: Option<u32>,
    /// How the daemon wrote (the welcome said so); absent in runs before the setting, which
    /// all wrote until `EAGAIN`.
    #[serde(default)]
    pub write_mode: WriteMode,
    /// The marker interval (`--marker-every`), µs; absent when markers were off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marker_every_us: Option<u64>,
    /// How the slow phases' rate was chosen and, once the run ended, what it was per
    /// cycle; absent in runs before it was recorded (their peak was what the application
    /// read) and in full-speed runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_rate: Option<SlowRate>,
    /// The session's groups of flows and their settings, in flow order; a run recorded
    /// before groups loads as one group ([`RunConfig::flow_groups`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<FlowGroup>,
}

impl RunConfig {
    /// The run's groups: as recorded, or the one group of a run recorded before groups,
    /// made from the run-wide settings.
    pub fn flow_groups(&self) -> Vec<FlowGroup> {
        if !self.groups.is_empty() {
            return self.groups.clone();
        }
        let absolute = self.slow_rate.as_ref().map(|rate| rate.chosen_by);
        vec![FlowGroup {
            flows: self.flows,
            sender: self.sender_request.clone(),
            write_size_bytes: self.write_size_bytes,
            write_mode: self.write_mode,
            pattern: match self.pattern.full_speed {
                true => Reading::FullSpeed,
                false => Reading::Oscillating,
            },
            fraction: self.pattern.fraction,
            slow_rate_bps: match absolute {
                Some(SlowRule::Absolute { bytes_per_s }) => Some(bytes_per_s.saturating_mul(8)),
                _ => None,
            },
        }]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// The whole pattern ran.
    Complete,
    /// The run was cut short; `Ending::reason` says why.
    Partial,
    /// The whole pattern ran but a side's record lacks something: intervals merged into a
    /// late tick or with no sample at all, rows or whole flows missing, the daemon's trace
    /// cut short (`RunMeta::sampling` and `trace` count them, `Ending::reason` says which
    /// side). Counted by the reader from what arrived, never taken from the daemon.
    Holes,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ending {
    pub status: RunStatus,
    pub reason: String,
    /// Seconds from the session's start to its end on the reader's clock.
    pub duration_s: f64,
    pub ended_unix_ms: u64,
}

impl Ending {
    /// What `run.json` says while the run is going: true if the reader never finishes.
    pub fn in_progress() -> Self {
        Ending {
            status: RunStatus::Partial,
            reason: "the reader did not finish (it was killed or crashed)".into(),
            duration_s: 0.0,
            ended_unix_ms: 0,
        }
    }
}

//! The run directory: the interface between the reader, which writes it as the run goes,
//! and the report, which reads only it.
//!
//! ```text
//! <out>/run.json    what was run and how it ended (RunMeta)
//! <out>/reader.csv  ReaderSample rows
//! <out>/sender.csv  SenderSample rows
//! <out>/host.csv    HostSample rows
//! <out>/markers.csv MarkerRow rows, only in runs with --marker-every
//! <out>/probe.csv   ProbeRow rows, only in runs with the idle probe (oscil_protocol::probe)
//! ```
//!
//! `run.json` is written first, saying the run is partial, and rewritten (atomically) when
//! the run ends, so a reader that is killed still leaves a directory that says so.

pub mod campaign;
pub mod lab;
pub mod link_health;
pub mod safe_fs;
mod sys;
pub mod trace;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufWriter, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use oscil_kernel::{HostFacts, OptionsInForce, ProcessCost, SocketOptions};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::safe_fs::{LineBound, SafeFsError};
use oscil_protocol::clock::ClockEstimate;
use oscil_protocol::control::WriteMode;
use oscil_protocol::markers::{MarkerCounts, MarkerRow};
use oscil_protocol::pattern::{PatternConfig, PhaseSpan, SlowRate};
use oscil_protocol::records::WakeupFigures;
use oscil_protocol::records::{HostSample, ReaderSample, SenderSample};
use oscil_sampling::Sampling;

/// Bumped when a reader of an older directory would misread a newer one.
pub const FORMAT_VERSION: u32 = 1;

pub const RUN_JSON: &str = "run.json";
pub const READER_CSV: &str = "reader.csv";
pub const SENDER_CSV: &str = "sender.csv";
pub const HOST_CSV: &str = "host.csv";
pub const MARKERS_CSV: &str = "markers.csv";

/// A CSV record type with its header, so files get headers even with no rows and loaders
/// can name a missing column.
pub trait Columns: Serialize + DeserializeOwned {
    const FILE: &'static str;
    const COLUMNS: &'static [&'static str];
    /// Columns added after format 1, at the end, with a serde default: a file without them
    /// still loads.
    const ADDED_LATER: &'static [&'static str] = &[];
    /// The most rows `run.json`'s declarations allow this file, before the margin.
    fn declared_rows(limits: &Limits) -> u64;
    /// Why a row read back is out of range (a time not finite or outside the run, a flow
    /// the run does not have), naming the column; `Ok` for a sound row.
    fn check(&self, limits: &Limits) -> Result<(), RowError>;
}

impl Columns for ReaderSample {
    const FILE: &'static str = READER_CSV;
    const COLUMNS: &'static [&'static str] = &[
        "t_s",
        "flow",
        "phase",
        "bytes",
        "rcv_wnd",
        "rcv_ssthresh",
        "rcv_space",
        "rtt_us",
        "rmem_alloc",
        "rcvbuf",
        "rcv_rtt_us",
        "budget_bytes",
        "span_s",
        "delivered_bytes",
    ];
    const ADDED_LATER: &'static [&'static str] = &["span_s", "delivered_bytes"];
    fn declared_rows(limits: &Limits) -> u64 {
        limits.flow_intervals()
    }
    fn check(&self, limits: &Limits) -> Result<(), RowError> {
        limits.check_sample(self.flow, self.t_s, self.span_s)?;
        let span_s = self.span_or(limits.interval_s);
        limits.check_rate("bytes", Some(self.bytes), span_s)?;
        limits.check_rate("delivered_bytes", self.delivered_bytes, span_s)
    }
}

impl Columns for SenderSample {
    const FILE: &'static str = SENDER_CSV;
    const COLUMNS: &'static [&'static str] = &[
        "t_s",
        "flow",
        "bytes",
        "cwnd",
        "unacked",
        "notsent_bytes",
        "snd_wnd",
        "rtt_us",
        "delivery_rate_bps",
        "wmem_queued",
        "sndbuf",
        "snd_mss_bytes",
        "inflight_bytes",
        "total_retrans",
        "pacing_rate_bps",
        "span_s",
        "residence_us",
        "write_to_ack_us",
        "wakeups",
        "wake_notsent_p50_bytes",
        "wake_notsent_max_bytes",
        "wake_to_write_p50_us",
        "wake_to_write_max_us",
        "acked_bytes",
        "pending_write_age_us",
        "busy_us",
        "rwnd_limited_us",
        "sndbuf_limited_us",
    ];
    /// All after format 1's first 15, from `span_s` on.
    const ADDED_LATER: &'static [&'static str] = Self::COLUMNS.split_at(15).1;
    fn declared_rows(limits: &Limits) -> u64 {
        limits.flow_intervals()
    }
    fn check(&self, limits: &Limits) -> Result<(), RowError> {
        limits.check_sample(self.flow, self.t_s, self.span_s)?;
        let span_s = self.span_or(limits.interval_s);
        limits.check_rate("bytes", Some(self.bytes), span_s)?;
        limits.check_rate("acked_bytes", self.acked_bytes, span_s)
    }
}

impl Columns for HostSample {
    const FILE: &'static str = HOST_CSV;
    const COLUMNS: &'static [&'static str] = &[
        "t_s",
        "side",
        "tcp_inuse",
        "tcp_orphan",
        "tcp_tw",
        "tcp_alloc",
        "tcp_mem_pages",
        "tcp_mem_ns_bytes",
        "tcp_collapsed",
        "tcp_prune_called",
        "tcp_rcv_pruned",
        "tcp_ofo_pruned",
        "tcp_rcvq_drop",
        "tcp_backlog_drop",
    ];
    /// All after format 1's first 7, from `tcp_mem_ns_bytes` on.
    const ADDED_LATER: &'static [&'static str] = Self::COLUMNS.split_at(7).1;
    /// One row per side per interval.
    fn declared_rows(limits: &Limits) -> u64 {
        2 * limits.intervals
    }
    fn check(&self, limits: &Limits) -> Result<(), RowError> {
        limits.check_time("t_s", self.t_s)
    }
}

impl Columns for oscil_protocol::probe::ProbeRow {
    const FILE: &'static str = oscil_protocol::probe::PROBE_CSV;
    const COLUMNS: &'static [&'static str] = &["t_s", "rtt_us", "lost"];
    /// One every [`PROBE_EVERY`](oscil_protocol::probe::PROBE_EVERY) over the run.
    fn declared_rows(limits: &Limits) -> u64 {
        (limits.end_s / oscil_protocol::probe::PROBE_EVERY.as_secs_f64()).ceil() as u64 + 1
    }
    fn check(&self, limits: &Limits) -> Result<(), RowError> {
        limits.check_time("t_s", self.t_s)?;
        match self.rtt_us {
            Some(us) => limits.check_time("rtt_us", us as f64 / 1e6),
            None => Ok(()),
        }
    }
}

impl Columns for MarkerRow {
    const FILE: &'static str = MARKERS_CSV;
    const COLUMNS: &'static [&'static str] = &[
        "flow",
        "k",
        "offset_bytes",
        "sent_t_s",
        "read_t_s",
        "latency_us",
        "censored",
    ];
    const ADDED_LATER: &'static [&'static str] = &["censored"];
    fn declared_rows(limits: &Limits) -> u64 {
        u64::from(limits.flows).saturating_mul(limits.markers_per_flow)
    }
    /// Marker times are mapped through the clock offset and may sit slightly before the
    /// session's start, and a latency slightly below zero (within the clock's uncertainty).
    fn check(&self, limits: &Limits) -> Result<(), RowError> {
        limits.check_flow(self.flow)?;
        limits.check_signed_time("sent_t_s", self.sent_t_s)?;
        if let Some(read) = self.read_t_s {
            limits.check_signed_time("read_t_s", read)?;
        }
        match self.latency_us {
            Some(us) => limits.check_signed_time("latency_us", us / 1e6),
            None => Ok(()),
        }
    }
}

/// `run.json`: everything needed to know what a run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    pub format_version: u32,
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
    /// Options in force on the reader's data sockets.
    pub reader_options: Option<OptionsInForce>,
    /// TcpExt counters that moved during the run, per side.
    pub tcpext_delta: BTreeMap<String, BTreeMap<String, u64>>,
    pub ending: Ending,
    /// The lab's record of the run (`oscil-reader --lab-record`), when the lab ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<lab::LabRecord>,
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
    pub probe: Option<oscil_protocol::probe::ProbeFacts>,
    /// What the per-ACK trace (`--trace`) recorded per side, or why it could not; only in
    /// runs that asked for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<oscil_protocol::trace::TraceFacts>,
    /// What either side's kernel or host could not give (`tcp_info` fields its length
    /// leaves out, sock_diag refused), each said once, in words; absent when nothing was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<oscil_protocol::absent::Absence>,
}

impl RunMeta {
    /// Everything this run's kernels or hosts could not give, in words, once each, escaped
    /// (the file may come from anywhere): `absent`'s notes, then each side's trace gaps
    /// with its kernel's release.
    pub fn not_given(&self) -> Vec<String> {
        let escape = oscil_protocol::text::escape_stored;
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// The whole pattern ran.
    Complete,
    /// The run was cut short; `Ending::reason` says why.
    Partial,
    /// The whole pattern ran but a sampler fell behind: some intervals have no row of their
    /// own (`RunMeta::sampling` counts them, `Ending::reason` says which side).
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

/// What went wrong reading or writing a run directory; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("{0}: no such directory")]
    NoSuchDir(PathBuf),
    #[error("{0}: not a run directory (no run.json)")]
    NotARunDir(PathBuf),
    #[error("{0}: the directory is not empty (pass --force to write into it)")]
    NotEmpty(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A directory to write (`-o`, `--out`) cannot be made there.
    #[error("cannot create {}: {reason}", path.display())]
    CannotCreate { path: PathBuf, reason: String },
    #[error("{path}: not a valid run.json: {source}")]
    BadMeta {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "{path}: run directory format {found} is newer than this build reads ({FORMAT_VERSION})"
    )]
    NewerFormat { path: PathBuf, found: u32 },
    #[error("{path}: missing column {column:?}")]
    MissingColumn { path: PathBuf, column: &'static str },
    #[error("{path}: {source}")]
    BadCsv { path: PathBuf, source: csv::Error },
    /// A file that is not a regular file, or larger than the run allows.
    #[error(transparent)]
    File(#[from] SafeFsError),
    /// A value out of range: a time not finite or outside the run, a flow it does not have.
    #[error("{path}: damaged: {why}")]
    Damaged { path: PathBuf, why: Damage },
    #[error("{path}: more than {limit} rows, beyond what run.json declares ({flows} flow(s) over {end_s} s); refused")]
    TooManyRows {
        path: PathBuf,
        limit: u64,
        flows: u32,
        end_s: f64,
    },
}

/// What is out of range in a damaged run directory ([`RunDirError::Damaged`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Damage {
    /// In `run.json`'s declarations.
    #[error(transparent)]
    Declaration(#[from] DeclarationError),
    /// In a CSV's row, counted from 1 after the header.
    #[error("row {row}: {source}")]
    Row { row: u64, source: RowError },
}

/// Why what `run.json` declares cannot be a run's ([`Limits::of`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeclarationError {
    #[error("flows {0} is not within 1..={MAX_FLOWS}")]
    Flows(u32),
    #[error("interval_us {0} is not within 1..=60000000")]
    IntervalUs(u64),
    /// The name as given, escaped for showing.
    #[error("congestion \"{0}\" is not a congestion control's name")]
    Congestion(String),
    #[error("pattern fraction {0} is not within 0..=1")]
    Fraction(f64),
    /// A time of the schedule or the ending not finite or outside a week.
    #[error("{name} {t_s:?} is not within 0..={MAX_RUN_S} s")]
    Time { name: &'static str, t_s: f64 },
    #[error("the pattern lasts {end_s} s, more than {MAX_RUN_S} s")]
    TooLong { end_s: f64 },
}

/// Why a row read back is out of range ([`Columns::check`]), naming the column.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum RowError {
    #[error("flow {flow}, but the run has {flows} flow(s)")]
    NoSuchFlow { flow: u32, flows: u32 },
    /// A time not finite, or outside `start_s..=end_s` (`start_s` below zero for the
    /// times that may fall before the session's start).
    #[error("{column} {t_s:?} is not within {start_s}..={end_s} s")]
    TimeOutOfRange {
        column: &'static str,
        t_s: f64,
        start_s: f64,
        end_s: f64,
    },
    /// A span shorter than the sampling clock can measure (0 is "not recorded").
    #[error("span_s {span_s:?} is shorter than the sampling clock's resolution ({CLOCK_RESOLUTION_S} s)")]
    SpanBelowResolution { span_s: f64 },
    /// Bytes over a row's span at a rate no path carries (or not a number at all).
    #[error("{column} {bytes} over {span_s} s is {rate:e} bytes/s, past any path's rate ({MAX_BYTES_PER_S:e})")]
    AbsurdRate {
        column: &'static str,
        bytes: u64,
        span_s: f64,
        rate: f64,
    },
}

impl RunDirError {
    /// True when the directory is a run whose content cannot be trusted (a file of the
    /// wrong kind or size, a bad cell, too many rows), rather than not a run at all.
    pub fn is_damaged(&self) -> bool {
        !matches!(
            self,
            RunDirError::NoSuchDir(_)
                | RunDirError::NotARunDir(_)
                | RunDirError::NotEmpty(_)
                | RunDirError::NewerFormat { .. }
        )
    }

    /// True when the directory the command line names is at fault (none there, not a run,
    /// used, or one that cannot be made): a bad value, exit 2, before anything started.
    pub fn is_bad_path(&self) -> bool {
        matches!(
            self,
            RunDirError::NoSuchDir(_)
                | RunDirError::NotARunDir(_)
                | RunDirError::NotEmpty(_)
                | RunDirError::CannotCreate { .. }
        )
    }
}

impl RunDirError {
    /// `path` could not be made a directory to write into: a file there, or the OS's word.
    pub fn cannot_create(path: &Path, source: &std::io::Error) -> RunDirError {
        let reason = match path.is_file() {
            true => "a file is there, not a directory".to_owned(),
            false => oscil_protocol::error_text::os_error(source),
        };
        RunDirError::CannotCreate {
            path: path.to_owned(),
            reason,
        }
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> RunDirError + '_ {
    move |source| RunDirError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Writes a run directory row by row; every `flush` makes what was written durable
/// enough for a report, so nothing is lost when the run is cut short.
pub struct RunWriter {
    dir: PathBuf,
    meta: RunMeta,
    reader: CsvFile,
    sender: CsvFile,
    host: CsvFile,
    markers: Option<CsvFile>,
}

/// One CSV file being written, with its header; also for the trace files (`crate::trace`).
pub(crate) struct CsvFile {
    path: PathBuf,
    writer: csv::Writer<BufWriter<File>>,
}

impl CsvFile {
    pub(crate) fn create<R: Columns>(dir: &Path) -> Result<Self, RunDirError> {
        let path = dir.join(R::FILE);
        // Afresh, never through a link left in the directory (`force` reuses one).
        let file = match safe_fs::create_new(&path, 0o644) {
            Err(SafeFsError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                fs::remove_file(&path).map_err(io_error(&path))?;
                safe_fs::create_new(&path, 0o644)?
            }
            other => other?,
        };
        let mut writer = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(BufWriter::with_capacity(256 << 10, file));
        writer
            .write_record(R::COLUMNS)
            .map_err(|source| RunDirError::BadCsv {
                path: path.clone(),
                source,
            })?;
        Ok(CsvFile { path, writer })
    }

    pub(crate) fn row<R: Columns>(&mut self, row: &R) -> Result<(), RunDirError> {
        self.writer
            .serialize(row)
            .map_err(|source| RunDirError::BadCsv {
                path: self.path.clone(),
                source,
            })
    }

    pub(crate) fn flush(&mut self) -> Result<(), RunDirError> {
        self.writer.flush().map_err(io_error(&self.path))
    }
}

impl RunWriter {
    /// Creates the directory (or reuses an empty one; a non-empty one only with `force`),
    /// writes `run.json` saying the run is in progress and the CSV headers.
    pub fn create(dir: &Path, force: bool, meta: RunMeta) -> Result<Self, RunDirError> {
        fs::create_dir_all(dir).map_err(io_error(dir))?;
        let mut entries = fs::read_dir(dir).map_err(io_error(dir))?;
        if !force && entries.next().is_some() {
            return Err(RunDirError::NotEmpty(dir.to_owned()));
        }
        let markers = match meta.config.marker_every_us {
            Some(_) => Some(CsvFile::create::<MarkerRow>(dir)?),
            None => None,
        };
        let writer = RunWriter {
            dir: dir.to_owned(),
            meta,
            reader: CsvFile::create::<ReaderSample>(dir)?,
            sender: CsvFile::create::<SenderSample>(dir)?,
            host: CsvFile::create::<HostSample>(dir)?,
            markers,
        };
        writer.write_meta()?;
        Ok(writer)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn meta(&self) -> &RunMeta {
        &self.meta
    }

    /// Changes to the metadata reach disk at the next `write_meta` or `finish`.
    pub fn meta_mut(&mut self) -> &mut RunMeta {
        &mut self.meta
    }

    pub fn reader_row(&mut self, row: &ReaderSample) -> Result<(), RunDirError> {
        self.reader.row(row)
    }

    pub fn sender_row(&mut self, row: &SenderSample) -> Result<(), RunDirError> {
        self.sender.row(row)
    }

    pub fn host_row(&mut self, row: &HostSample) -> Result<(), RunDirError> {
        self.host.row(row)
    }

    /// A row of `markers.csv`; nothing in a run without markers.
    pub fn marker_row(&mut self, row: &MarkerRow) -> Result<(), RunDirError> {
        self.markers.as_mut().map_or(Ok(()), |file| file.row(row))
    }

    /// Pushes buffered rows to the files.
    pub fn flush(&mut self) -> Result<(), RunDirError> {
        self.reader.flush()?;
        self.sender.flush()?;
        self.host.flush()?;
        self.markers.as_mut().map_or(Ok(()), CsvFile::flush)
    }

    /// Writes a whole file of `R` rows at once (`probe.csv` at the run's end).
    pub fn whole_file<R: Columns>(&self, rows: &[R]) -> Result<(), RunDirError> {
        let mut file = CsvFile::create::<R>(&self.dir)?;
        rows.iter().try_for_each(|row| file.row(row))?;
        file.flush()
    }

    /// Rewrites `run.json` through a temporary file and a rename, so it is never half written.
    pub fn write_meta(&self) -> Result<(), RunDirError> {
        let mut text = serde_json::to_vec_pretty(&self.meta).expect("RunMeta serializes");
        text.push(b'\n');
        Ok(safe_fs::write_atomic(
            &self.dir.join(RUN_JSON),
            &text,
            0o644,
        )?)
    }

    /// Flushes every file and records how the run ended.
    pub fn finish(mut self, ending: Ending) -> Result<RunMeta, RunDirError> {
        self.flush()?;
        self.meta.ending = ending;
        self.write_meta()?;
        Ok(self.meta)
    }
}

/// A run directory read back whole.
#[derive(Debug, Clone)]
pub struct Run {
    pub dir: PathBuf,
    pub meta: RunMeta,
    pub reader: Vec<ReaderSample>,
    pub sender: Vec<SenderSample>,
    pub host: Vec<HostSample>,
    /// Empty for a run without markers (and for runs recorded before them).
    pub markers: Vec<MarkerRow>,
    /// The idle probe's round trips; empty for a run without it.
    pub probe: Vec<oscil_protocol::probe::ProbeRow>,
    /// Files whose last row was cut short and dropped.
    pub cut: Vec<Cut>,
}

impl Run {
    /// The run's name on charts: its label, else the directory's name, escaped and
    /// bounded ([`oscil_protocol::text::escape_stored`]) wherever it came from.
    pub fn label(&self) -> String {
        oscil_protocol::text::escape_stored(&self.meta.label.clone().unwrap_or_else(|| {
            self.dir
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_else(|| self.dir.display().to_string())
        }))
    }
}

/// The most bytes a `run.json` may hold.
pub const MAX_META_BYTES: u64 = 16 << 20;
/// The most bytes a row of any CSV here takes (the longest, sender.csv's, takes ~250).
pub const MAX_ROW_BYTES: u64 = 1024;
/// The most flows a run may declare.
pub const MAX_FLOWS: u32 = 100_000;
/// The longest run a `run.json` may declare: a week.
pub const MAX_RUN_S: f64 = 7.0 * 86_400.0;
/// The sampling clock's resolution: both ends record times to the nanosecond
/// (`CLOCK_MONOTONIC`), so a shorter span was never measured.
pub const CLOCK_RESOLUTION_S: f64 = 1e-9;
/// The fastest one flow's bytes may come over a row's span: 80 Tbit/s, hundreds of times
/// what a 100 Gbit/s path or a receive queue read at memory speed over a tenth of an
/// interval (the shortest last sample) gives. Past it a rate is absurd, and the charts'
/// scales with it.
pub const MAX_BYTES_PER_S: f64 = 1e13;
/// Seconds past the declared end that a row's time may still fall at (the session's
/// teardown), and before zero that a marker's may (the clock offset).
const SLACK_S: f64 = 60.0;

/// What a run directory may hold, from what its `run.json` declares: rows per file (flows
/// × intervals, doubled and a little more for a margin), bytes per row, and the span every
/// time in it falls within. A file past these is damaged, however it came to be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub flows: u32,
    /// Sampling intervals the run can span.
    pub intervals: u64,
    /// Markers one flow can send over the run; 0 without markers.
    pub markers_per_flow: u64,
    /// Seconds since the session's start that every time in the run falls before.
    pub end_s: f64,
    /// The sampling interval, what a row without `span_s` covers.
    pub interval_s: f64,
}

impl Limits {
    /// From `run.json`, after checking that what it declares is finite and in range.
    pub fn of(meta: &RunMeta) -> Result<Limits, DeclarationError> {
        let config = &meta.config;
        if !(1..=MAX_FLOWS).contains(&config.flows) {
            return Err(DeclarationError::Flows(config.flows));
        }
        let interval_us = match config.interval_us {
            0 => 100_000,
            us @ 1..=60_000_000 => us,
            us => return Err(DeclarationError::IntervalUs(us)),
        };
        for cc in [
            &config.sender_request.congestion,
            &config.reader_request.congestion,
        ] {
            if let Some(name) = cc.as_deref().filter(|name| !is_congestion_name(name)) {
                let shown = oscil_protocol::text::escape_peer(name);
                return Err(DeclarationError::Congestion(shown));
            }
        }
        let pattern = &config.pattern;
        if !(0.0..=1.0).contains(&pattern.fraction) {
            return Err(DeclarationError::Fraction(pattern.fraction));
        }
        let planned_ms = pattern
            .fast_ms
            .saturating_add(pattern.slow_ms)
            .saturating_mul(u64::from(pattern.cycles));
        let mut end_s = planned_ms as f64 / 1000.0;
        let times = meta
            .schedule
            .iter()
            .flat_map(|span| {
                [
                    ("schedule start_s", span.start_s),
                    ("schedule end_s", span.end_s),
                ]
            })
            .chain([("ending duration_s", meta.ending.duration_s)]);
        for (name, t_s) in times {
            if !(t_s.is_finite() && (0.0..=MAX_RUN_S).contains(&t_s)) {
                return Err(DeclarationError::Time { name, t_s });
            }
            end_s = end_s.max(t_s);
        }
        if end_s > MAX_RUN_S {
            return Err(DeclarationError::TooLong { end_s });
        }
        Ok(Limits::declared(
            config.flows,
            interval_us,
            end_s,
            config.marker_every_us,
        ))
    }

    /// From what a run is to be: `flows` sampled every `interval_us` for
    /// `duration_s`, with markers every `marker_every_us`; the lab bounds what it copies
    /// from a remote host with these before any `run.json` exists.
    pub fn declared(
        flows: u32,
        interval_us: u64,
        duration_s: f64,
        marker_every_us: Option<u64>,
    ) -> Limits {
        let end_s = duration_s.clamp(0.0, MAX_RUN_S) + SLACK_S;
        let markers_per_flow = match marker_every_us {
            None => 0,
            Some(every_us) => (end_s * 1e6 / every_us.max(1) as f64) as u64 + 2,
        };
        Limits {
            flows,
            intervals: (end_s * 1e6 / interval_us.max(1) as f64).ceil() as u64 + 1,
            markers_per_flow,
            end_s,
            interval_s: interval_us.max(1) as f64 / 1e6,
        }
    }

    /// Bytes a whole run directory may hold: each CSV's bound and `run.json`'s.
    pub fn dir_bytes(&self) -> u64 {
        [
            self.bytes::<ReaderSample>(),
            self.bytes::<SenderSample>(),
            self.bytes::<HostSample>(),
            self.bytes::<MarkerRow>(),
            self.bytes::<oscil_protocol::probe::ProbeRow>(),
            MAX_META_BYTES,
        ]
        .iter()
        .fold(0, |sum, &b| sum.saturating_add(b))
    }

    /// Rows `R`'s file may hold: twice what `run.json` declares, and 64 more.
    pub fn rows<R: Columns>(&self) -> u64 {
        R::declared_rows(self).saturating_mul(2).saturating_add(64)
    }

    /// Bytes `R`'s file may hold.
    pub fn bytes<R: Columns>(&self) -> u64 {
        self.rows::<R>()
            .saturating_add(1)
            .saturating_mul(MAX_ROW_BYTES)
    }

    /// One row per flow per interval, as reader.csv and sender.csv have.
    fn flow_intervals(&self) -> u64 {
        u64::from(self.flows).saturating_mul(self.intervals)
    }

    /// A flow's sample: a flow the run has, a time and a span within the run.
    fn check_sample(&self, flow: u32, t_s: f64, span_s: f64) -> Result<(), RowError> {
        self.check_flow(flow)?;
        self.check_time("t_s", t_s)?;
        self.check_time("span_s", span_s)?;
        match span_s == 0.0 || span_s >= CLOCK_RESOLUTION_S {
            true => Ok(()),
            false => Err(RowError::SpanBelowResolution { span_s }),
        }
    }

    /// `bytes` of `column` over `span_s` (checked already): a finite rate no faster than
    /// [`MAX_BYTES_PER_S`].
    fn check_rate(
        &self,
        column: &'static str,
        bytes: Option<u64>,
        span_s: f64,
    ) -> Result<(), RowError> {
        let Some(bytes) = bytes else { return Ok(()) };
        let rate = bytes as f64 / span_s;
        match rate.is_finite() && rate <= MAX_BYTES_PER_S {
            true => Ok(()),
            false => Err(RowError::AbsurdRate {
                column,
                bytes,
                span_s,
                rate,
            }),
        }
    }

    pub(crate) fn check_flow(&self, flow: u32) -> Result<(), RowError> {
        match flow < self.flows {
            true => Ok(()),
            false => Err(RowError::NoSuchFlow {
                flow,
                flows: self.flows,
            }),
        }
    }

    /// A time since the session's start: finite, from 0 to the run's end.
    pub(crate) fn check_time(&self, column: &'static str, t_s: f64) -> Result<(), RowError> {
        self.check_time_from(column, 0.0, t_s)
    }

    /// A time that may fall a little before the session's start.
    pub(crate) fn check_signed_time(&self, column: &'static str, t_s: f64) -> Result<(), RowError> {
        self.check_time_from(column, -SLACK_S, t_s)
    }

    /// A time finite and from `start_s` to the run's end.
    fn check_time_from(
        &self,
        column: &'static str,
        start_s: f64,
        t_s: f64,
    ) -> Result<(), RowError> {
        match t_s.is_finite() && (start_s..=self.end_s).contains(&t_s) {
            true => Ok(()),
            false => Err(RowError::TimeOutOfRange {
                column,
                t_s,
                start_s,
                end_s: self.end_s,
            }),
        }
    }
}

/// A kernel congestion control's name: up to 15 letters, digits, `_` or `-`.
pub fn is_congestion_name(name: &str) -> bool {
    (1..16).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Reads `run.json` alone: a regular file of bounded size whose declarations are in range.
pub fn load_meta(dir: &Path) -> Result<RunMeta, RunDirError> {
    let path = dir.join(RUN_JSON);
    if path.symlink_metadata().is_err() {
        return Err(match dir.symlink_metadata() {
            Err(_) => RunDirError::NoSuchDir(dir.to_owned()),
            Ok(_) => RunDirError::NotARunDir(dir.to_owned()),
        });
    }
    let text = safe_fs::read_bounded(&path, MAX_META_BYTES)?;
    let version: Option<u32> = serde_json::from_slice::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("format_version")?.as_u64())
        .map(|v| v as u32);
    if let Some(found) = version.filter(|&v| v > FORMAT_VERSION) {
        return Err(RunDirError::NewerFormat { path, found });
    }
    let meta = serde_json::from_slice::<RunMeta>(&text)
        .or_else(|error| upgraded(&text).ok_or(error))
        .map_err(|source| RunDirError::BadMeta {
            path: path.clone(),
            source,
        })?;
    Limits::of(&meta).map_err(|why| RunDirError::Damaged {
        path,
        why: why.into(),
    })?;
    Ok(meta)
}

/// A `run.json` written before the lab's record was typed, read as today's: the reader kept
/// its `--meta` file as `lab` whatever it held, so a `lab` that is not a lab's record is the
/// person's own description and becomes `meta`. `None` when that does not make it readable.
fn upgraded(text: &[u8]) -> Option<RunMeta> {
    let mut value: serde_json::Value = serde_json::from_slice(text).ok()?;
    let object = value.as_object_mut()?;
    let lab = object.get("lab")?;
    if object.contains_key("meta") || serde_json::from_value::<lab::LabRecord>(lab.clone()).is_ok()
    {
        return None;
    }
    let free = object.remove("lab")?;
    object.insert("meta".into(), free);
    serde_json::from_value(value).ok()
}

/// A CSV's rows, and what was dropped from its end when it was cut mid-row.
#[derive(Debug, Clone, PartialEq)]
pub struct Table<R> {
    pub rows: Vec<R>,
    pub cut: Option<Cut>,
}

/// The incomplete last row of a file cut mid-row (a crash, a full disk): dropped, counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    pub file: &'static str,
    /// Rows dropped: the one incomplete row.
    pub rows: u64,
    /// Bytes after the last complete row.
    pub bytes: u64,
}

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} was cut mid-row: {} incomplete row ({} bytes) dropped",
            self.file, self.rows, self.bytes
        )
    }
}

/// The length of the part of `file` (of `len` bytes) that ends with its last newline.
fn complete_len(file: &mut File, len: u64) -> std::io::Result<u64> {
    let mut end = len;
    let mut chunk = vec![0u8; 64 << 10];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let part = &mut chunk[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(part)?;
        if let Some(at) = part.iter().rposition(|&b| b == b'\n') {
            return Ok(start + at as u64 + 1);
        }
        // No row is longer than MAX_ROW_BYTES: a longer tail is not a cut row.
        if len - start > MAX_ROW_BYTES * 4 {
            return Ok(len);
        }
        end = start;
    }
    Ok(0)
}

/// Reads one CSV of a run directory within `limits`: a regular file, its header naming
/// every column, at most [`Limits::rows`] rows and [`Limits::bytes`] bytes, every row in
/// range. A last row cut short is dropped and said in [`Table::cut`].
pub fn load_csv<R: Columns>(dir: &Path, limits: &Limits) -> Result<Table<R>, RunDirError> {
    let path = dir.join(R::FILE);
    let (mut file, len) = safe_fs::open_regular(&path)?;
    let limit_bytes = limits.bytes::<R>();
    if len > limit_bytes {
        return Err(SafeFsError::TooLarge {
            path,
            found_bytes: len,
            limit_bytes,
        }
        .into());
    }
    let complete = complete_len(&mut file, len).map_err(io_error(&path))?;
    file.seek(SeekFrom::Start(0)).map_err(io_error(&path))?;
    let cut = (complete < len).then_some(Cut {
        file: R::FILE,
        rows: 1,
        bytes: len - complete,
    });
    let bounded = LineBound::new(file.take(complete), MAX_ROW_BYTES);
    let rows = read_rows::<R>(&path, csv::Reader::from_reader(bounded), limits)?;
    Ok(Table { rows, cut })
}

fn read_rows<R: Columns>(
    path: &Path,
    mut reader: csv::Reader<LineBound<std::io::Take<File>>>,
    limits: &Limits,
) -> Result<Vec<R>, RunDirError> {
    let bad_csv = |source: csv::Error| match source.kind() {
        csv::ErrorKind::Io(e) if LineBound::<File>::is_long_line(e) => SafeFsError::LongLine {
            path: path.to_owned(),
            limit_bytes: MAX_ROW_BYTES,
        }
        .into(),
        _ => RunDirError::BadCsv {
            path: path.to_owned(),
            source,
        },
    };
    let headers = reader.headers().map_err(bad_csv)?.clone();
    if let Some(column) = R::COLUMNS
        .iter()
        .filter(|column| !R::ADDED_LATER.contains(column))
        .find(|column| !headers.iter().any(|h| h == **column))
    {
        return Err(RunDirError::MissingColumn {
            path: path.to_owned(),
            column,
        });
    }
    let limit = limits.rows::<R>();
    let mut rows = Vec::new();
    for (index, row) in reader.deserialize::<R>().enumerate() {
        if index as u64 >= limit {
            return Err(RunDirError::TooManyRows {
                path: path.to_owned(),
                limit,
                flows: limits.flows,
                end_s: limits.end_s,
            });
        }
        let row = row.map_err(bad_csv)?;
        row.check(limits).map_err(|source| RunDirError::Damaged {
            path: path.to_owned(),
            why: Damage::Row {
                row: index as u64 + 1,
                source,
            },
        })?;
        rows.push(row);
    }
    Ok(rows)
}

/// Reads one CSV of a run directory within the limits its `run.json` sets, keeping only
/// the rows (for the lab's live view and its end figures).
pub fn load_rows<R: Columns>(dir: &Path) -> Result<Vec<R>, RunDirError> {
    let meta = load_meta(dir)?;
    let limits = Limits::of(&meta).expect("load_meta checked it");
    Ok(load_csv::<R>(dir, &limits)?.rows)
}

/// Reads a whole run directory, each file within the limits its `run.json` sets.
pub fn load(dir: &Path) -> Result<Run, RunDirError> {
    let meta = load_meta(dir)?;
    let limits = Limits::of(&meta).expect("load_meta checked it");
    fn rows<R>(cut: &mut Vec<Cut>, table: Table<R>) -> Vec<R> {
        cut.extend(table.cut);
        table.rows
    }
    let mut cut = Vec::new();
    let reader = rows(&mut cut, load_csv(dir, &limits)?);
    let sender = rows(&mut cut, load_csv(dir, &limits)?);
    let host = rows(&mut cut, load_csv(dir, &limits)?);
    // Present as anything at all (a link, a FIFO): read, so it is refused, not skipped.
    let markers = match fs::symlink_metadata(dir.join(MARKERS_CSV)) {
        Ok(_) => rows(&mut cut, load_csv(dir, &limits)?),
        Err(_) => Vec::new(),
    };
    let probe = match fs::symlink_metadata(dir.join(oscil_protocol::probe::PROBE_CSV)) {
        Ok(_) => rows(&mut cut, load_csv(dir, &limits)?),
        Err(_) => Vec::new(),
    };
    Ok(Run {
        dir: dir.to_owned(),
        meta,
        reader,
        sender,
        host,
        markers,
        probe,
        cut,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use oscil_protocol::records::{Phase, Side};

    fn host() -> HostFacts {
        HostFacts {
            hostname: "test".into(),
            kernel_release: "6.18.0".into(),
            page_size_bytes: 4096,
            sysctls: BTreeMap::from([("net.ipv4.tcp_notsent_lowat".into(), "4294967295".into())]),
            wall_clock_unix_ms: 1,
            clock: "CLOCK_MONOTONIC".into(),
            netns_inode: None,
            tcp_info_bytes: None,
            tcp_info_absent: Vec::new(),
        }
    }

    fn meta() -> RunMeta {
        RunMeta {
            format_version: FORMAT_VERSION,
            label: Some("lowat-default".into()),
            reader_software: "oscil-reader test".into(),
            daemon_software: None,
            started_unix_ms: 1,
            config: RunConfig {
                connect: "127.0.0.1:5250".into(),
                flows: 1,
                interval_us: 100_000,
                pattern: PatternConfig::CLOUDFLARE,
                sender_request: SocketOptions::default(),
                reader_request: SocketOptions::default(),
                write_size_bytes: None,
                write_mode: Default::default(),
                marker_every_us: None,
                slow_rate: None,
            },
            schedule: PatternConfig::CLOUDFLARE.schedule(),
            reader_host: host(),
            sender_host: None,
            sender_options: None,
            reader_options: None,
            tcpext_delta: BTreeMap::new(),
            ending: Ending::in_progress(),
            lab: None,
            meta: None,
            cost: None,
            wakeups: Vec::new(),
            sampling: None,
            clock: None,
            markers: None,
            probe: None,
            trace: None,
            absent: Vec::new(),
        }
    }

    fn reader_row(t_s: f64) -> ReaderSample {
        ReaderSample {
            t_s,
            flow: 0,
            phase: Phase::Slow,
            bytes: 1 << 20,
            rcv_wnd: Some(65535),
            rcv_ssthresh: 65535,
            rcv_space: 14600,
            rtt_us: 50,
            rmem_alloc: 0,
            rcvbuf: 131072,
            rcv_rtt_us: 40,
            budget_bytes: 52428,
            span_s: 0.1,
            delivered_bytes: Some(1 << 19),
        }
    }

    #[test]
    fn a_run_reads_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = RunWriter::create(dir.path(), false, meta()).unwrap();
        writer.reader_row(&reader_row(0.1)).unwrap();
        writer.reader_row(&reader_row(0.2)).unwrap();
        let host_row = HostSample {
            t_s: 0.1,
            side: Side::Sender,
            tcp_inuse: 3,
            tcp_orphan: 0,
            tcp_tw: 1,
            tcp_alloc: 5,
            tcp_mem_pages: 12,
            tcp_mem_ns_bytes: Some(49152),
            ..HostSample::empty(0.0, Side::Reader)
        };
        writer.host_row(&host_row).unwrap();
        let ending = Ending {
            status: RunStatus::Complete,
            reason: "pattern done".into(),
            duration_s: 60.0,
            ended_unix_ms: 2,
        };
        writer.finish(ending.clone()).unwrap();

        let run = load(dir.path()).unwrap();
        assert_eq!(run.reader, vec![reader_row(0.1), reader_row(0.2)]);
        assert!(run.sender.is_empty(), "header only");
        assert_eq!(run.host, vec![host_row]);
        assert_eq!(run.meta.ending, ending);
        assert_eq!(run.label(), "lowat-default");
    }

    #[test]
    fn files_use_the_contract_column_names() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = RunWriter::create(dir.path(), false, meta()).unwrap();
        writer.reader_row(&reader_row(0.1)).unwrap();
        writer.flush().unwrap();
        let text = fs::read_to_string(dir.path().join("reader.csv")).unwrap();
        let header = text.lines().next().unwrap();
        assert!(header.starts_with(
            "t_s,flow,phase,bytes,rcv_wnd,rcv_ssthresh,rcv_space,rtt_us,rmem_alloc,rcvbuf"
        ));
        assert_eq!(text.lines().nth(1).unwrap().split(',').nth(2), Some("slow"));
        let sender = fs::read_to_string(dir.path().join("sender.csv")).unwrap();
        assert!(sender.starts_with("t_s,flow,bytes,cwnd,unacked,notsent_bytes,snd_wnd,rtt_us,delivery_rate_bps,wmem_queued,sndbuf"));
        let host = fs::read_to_string(dir.path().join("host.csv")).unwrap();
        assert!(host.starts_with("t_s,side,tcp_inuse,tcp_orphan,tcp_tw,tcp_alloc,tcp_mem_pages"));
    }

    #[test]
    fn a_reader_csv_from_before_span_s_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        RunWriter::create(dir.path(), false, meta()).unwrap();
        fs::write(
            dir.path().join("reader.csv"),
            "t_s,flow,phase,bytes,rcv_wnd,rcv_ssthresh,rcv_space,rtt_us,rmem_alloc,rcvbuf,rcv_rtt_us,budget_bytes\n\
             0.1,0,fast,1000,,1,2,3,4,5,6,0\n",
        )
        .unwrap();
        let run = load(dir.path()).unwrap();
        assert_eq!(run.reader[0].span_s, 0.0, "not recorded");
        assert_eq!(run.reader[0].span_or(0.1), 0.1);
        assert_eq!(run.reader[0].rcv_wnd, None);
    }

    #[test]
    fn marker_rows_read_back_and_runs_without_markers_load_without_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut with_markers = meta();
        with_markers.config.flows = 2;
        with_markers.config.marker_every_us = Some(1_000_000);
        let mut writer = RunWriter::create(dir.path(), false, with_markers).unwrap();
        let rows = [
            MarkerRow {
                flow: 0,
                k: 1,
                offset_bytes: 65536,
                sent_t_s: 1.0,
                read_t_s: Some(1.25),
                latency_us: Some(250_000.0),
                censored: false,
            },
            MarkerRow {
                flow: 1,
                k: 2,
                offset_bytes: 131072,
                sent_t_s: 2.0,
                read_t_s: None,
                latency_us: Some(4_000_000.0),
                censored: true,
            },
        ];
        rows.iter().for_each(|r| writer.marker_row(r).unwrap());
        writer.flush().unwrap();
        let text = fs::read_to_string(dir.path().join("markers.csv")).unwrap();
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            [
                "flow,k,offset_bytes,sent_t_s,read_t_s,latency_us,censored",
                "0,1,65536,1.0,1.25,250000.0,false",
                "1,2,131072,2.0,,4000000.0,true"
            ]
        );
        assert_eq!(load(dir.path()).unwrap().markers, rows);

        let without = tempfile::tempdir().unwrap();
        RunWriter::create(without.path(), false, meta()).unwrap();
        assert!(!without.path().join("markers.csv").exists());
        assert!(load(without.path()).unwrap().markers.is_empty());
    }

    #[test]
    fn network_goodput_and_pending_writes_read_back_and_older_files_still_load() {
        let dir = tempfile::tempdir().unwrap();
        let mut with_rate = meta();
        with_rate.config.slow_rate = Some(SlowRate {
            chosen_by: oscil_protocol::SlowRule::PeakDelivered,
            cycles: vec![oscil_protocol::pattern::CycleSlowRate {
                cycle: 1,
                bytes_per_s: 62_500,
            }],
        });
        let mut writer = RunWriter::create(dir.path(), false, with_rate.clone()).unwrap();
        let sender = |acked_bytes, pending_write_age_us| SenderSample {
            t_s: 0.1,
            acked_bytes,
            pending_write_age_us,
            ..SenderSample::default()
        };
        let rows = [sender(Some(0), Some(1_500_000)), sender(Some(70_000), None)];
        rows.iter().for_each(|r| writer.sender_row(r).unwrap());
        writer.reader_row(&reader_row(0.1)).unwrap();
        writer.flush().unwrap();
        let header = |file: &str| {
            let text = fs::read_to_string(dir.path().join(file)).unwrap();
            text.lines().next().unwrap().to_owned()
        };
        assert!(header("sender.csv").contains(",acked_bytes,pending_write_age_us,"));
        assert!(header("reader.csv").ends_with(",span_s,delivered_bytes"));
        let run = load(dir.path()).unwrap();
        assert_eq!(run.sender, rows);
        assert_eq!(run.reader[0].delivered_bytes, Some(1 << 19));
        assert_eq!(run.meta.config.slow_rate, with_rate.config.slow_rate);

        // Files written before the columns: empty, never zero (a zero would say stale).
        fs::write(
            dir.path().join("sender.csv"),
            format!(
                "{}\n{}\n",
                SenderSample::COLUMNS[..15].join(","),
                ["0"; 15].join(",")
            ),
        )
        .unwrap();
        fs::write(
            dir.path().join("markers.csv"),
            "flow,k,offset_bytes,sent_t_s,read_t_s,latency_us\n0,1,0,1.0,,\n",
        )
        .unwrap();
        let old = load(dir.path()).unwrap();
        assert_eq!(old.sender[0].acked_bytes, None);
        assert_eq!(old.sender[0].pending_write_age_us, None);
        assert!(!old.markers[0].censored);
    }

    #[test]
    fn an_unfinished_run_says_partial() {
        let dir = tempfile::tempdir().unwrap();
        let writer = RunWriter::create(dir.path(), false, meta()).unwrap();
        drop(writer);
        let meta = load_meta(dir.path()).unwrap();
        assert_eq!(meta.ending.status, RunStatus::Partial);
    }

    #[test]
    fn refuses_a_non_empty_directory_without_force() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        let err = RunWriter::create(dir.path(), false, meta()).err().unwrap();
        assert!(matches!(err, RunDirError::NotEmpty(_)), "{err}");
        RunWriter::create(dir.path(), true, meta()).unwrap();
    }

    #[test]
    fn errors_name_the_file_and_column() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(load(dir.path()), Err(RunDirError::NotARunDir(_))));
        let missing = dir.path().join("none");
        assert_eq!(
            load(&missing).unwrap_err().to_string(),
            format!("{}: no such directory", missing.display())
        );
        RunWriter::create(dir.path(), false, meta()).unwrap();
        fs::write(dir.path().join("sender.csv"), "t_s,flow,bytes\n0.1,0,5\n").unwrap();
        let message = load(dir.path()).unwrap_err().to_string();
        assert!(
            message.ends_with("sender.csv: missing column \"cwnd\""),
            "{message}"
        );
    }

    /// A run of `meta()` with two reader rows written, ended complete.
    fn written_run() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = RunWriter::create(dir.path(), false, meta()).unwrap();
        writer.reader_row(&reader_row(0.1)).unwrap();
        writer.reader_row(&reader_row(0.2)).unwrap();
        let ending = Ending {
            status: RunStatus::Complete,
            reason: "pattern done".into(),
            duration_s: 60.0,
            ended_unix_ms: 2,
        };
        writer.finish(ending).unwrap();
        dir
    }

    #[test]
    fn a_csv_that_is_a_link_to_dev_zero_or_a_fifo_is_refused_at_once() {
        let dir = written_run();
        let sender = dir.path().join("sender.csv");
        fs::remove_file(&sender).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &sender).unwrap();
        let err = load(dir.path()).unwrap_err();
        assert!(err.is_damaged());
        assert!(
            err.to_string()
                .ends_with("sender.csv: not a regular file but a symbolic link; refused"),
            "{err}"
        );
        fs::remove_file(&sender).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&sender)
            .status()
            .unwrap();
        assert!(made.success());
        // A load that opened the FIFO would wait for a writer that never comes: a minute
        // is thousands of times what the check takes, however loaded the machine.
        let (done, refused) = std::sync::mpsc::channel();
        let path = dir.path().to_owned();
        std::thread::spawn(move || done.send(load(&path).unwrap_err().to_string()));
        let err = refused
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("refused without opening it");
        assert!(err.contains("FIFO"), "{err}");
    }

    #[test]
    fn a_cell_not_finite_or_out_of_range_makes_the_run_damaged() {
        let dir = written_run();
        let path = dir.path().join("reader.csv");
        let good = fs::read_to_string(&path).unwrap();
        for (cell, shown) in [
            ("inf", "inf"),
            ("NaN", "NaN"),
            ("-1", "-1.0"),
            ("1e308", "1e308"),
        ] {
            let message = damaged(
                dir.path(),
                &path,
                &good.replacen("\n0.2,", &format!("\n{cell},"), 1),
            );
            let expected = format!("reader.csv: damaged: row 2: t_s {shown} is not within 0..=");
            assert!(message.contains(&expected), "{message}");
        }
        let message = damaged(
            dir.path(),
            &path,
            &good.replacen(",0.1,524288\n", ",inf,524288\n", 1),
        );
        assert!(
            message.contains("row 1: span_s inf is not within"),
            "{message}"
        );
        // Spans the clock cannot measure: a rate of 1e308 bytes/s, or infinite.
        for span in ["1e-300", "5e-324"] {
            let text = good.replacen(",0.1,524288\n", &format!(",{span},524288\n"), 1);
            let message = damaged(dir.path(), &path, &text);
            let expected = format!(
                "row 1: span_s {span} is shorter than the sampling clock's resolution (0.000000001 s)"
            );
            assert!(message.contains(&expected), "{message}");
        }
        let text = good.replacen(",0.1,524288\n", ",0.000001,18446744073709551615\n", 1);
        let message = damaged(dir.path(), &path, &text);
        assert!(
            message.contains("row 1: delivered_bytes 18446744073709551615 over 0.000001 s is 1.8446744073709552e25 bytes/s, past any path's rate (1e13)"),
            "{message}"
        );
        let message = damaged(dir.path(), &path, &good.replacen("\n0.2,0,", "\n0.2,7,", 1));
        assert!(
            message.contains("row 2: flow 7, but the run has 1 flow(s)"),
            "{message}"
        );
    }

    /// Writes `text` into `path` and returns why loading the run in `dir` now fails.
    fn damaged(dir: &Path, path: &Path, text: &str) -> String {
        fs::write(path, text).unwrap();
        let err = load(dir).unwrap_err();
        assert!(err.is_damaged(), "{err}");
        err.to_string()
    }

    #[test]
    fn a_short_sampling_interval_allows_its_rows() {
        let mut fine = meta();
        fine.config.interval_us = 500;
        let limits = Limits::of(&fine).unwrap();
        // 60 s of pattern and 60 s of slack at 0.5 ms, one flow.
        assert_eq!(limits.rows::<ReaderSample>(), 2 * 240_001 + 64);
        fine.config.interval_us = 0;
        assert_eq!(
            Limits::of(&fine).unwrap().intervals,
            1201,
            "0: the default 100 ms"
        );
    }

    #[test]
    fn row_errors_name_the_column_and_the_range() {
        let limits = Limits::of(&meta()).unwrap();
        let end = limits.end_s;
        let marker = MarkerRow {
            flow: 0,
            k: 1,
            offset_bytes: 0,
            sent_t_s: -61.0,
            read_t_s: None,
            latency_us: None,
            censored: false,
        };
        let err = marker.check(&limits).unwrap_err();
        assert_eq!(
            err,
            RowError::TimeOutOfRange {
                column: "sent_t_s",
                t_s: -61.0,
                start_s: -SLACK_S,
                end_s: end,
            }
        );
        assert_eq!(
            err.to_string(),
            format!("sent_t_s -61.0 is not within -60..={end} s")
        );
        let err = limits.check_time("t_s", f64::NAN).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("t_s NaN is not within 0..={end} s")
        );
        let err = limits.check_flow(3).unwrap_err();
        assert_eq!(err, RowError::NoSuchFlow { flow: 3, flows: 1 });
    }

    #[test]
    fn run_json_declaring_a_time_not_finite_is_damaged() {
        let dir = written_run();
        let path = dir.path().join(RUN_JSON);
        let text = fs::read_to_string(&path).unwrap();
        let bad = text.replacen("\"duration_s\": 60.0", "\"duration_s\": -1.0", 1);
        assert_ne!(bad, text);
        let message = damaged(dir.path(), &path, &bad);
        let expected = "run.json: damaged: ending duration_s -1.0 is not within";
        assert!(message.contains(expected), "{message}");
    }

    #[test]
    fn rows_beyond_what_run_json_declares_are_refused_without_reading_them_all() {
        let dir = tempfile::tempdir().unwrap();
        let mut short = meta();
        short.config.flows = 2;
        short.config.pattern = PatternConfig {
            fast_ms: 1000,
            slow_ms: 2000,
            fraction: 0.05,
            cycles: 1,
            full_speed: false,
        };
        short.schedule = short.config.pattern.schedule();
        let mut writer = RunWriter::create(dir.path(), false, short).unwrap();
        for i in 0..10_000 {
            let mut row = reader_row(0.1);
            row.flow = i % 2;
            writer.reader_row(&row).unwrap();
        }
        writer.flush().unwrap();
        let limits = Limits::of(&load_meta(dir.path()).unwrap()).unwrap();
        // 2 flows over 3 s and the 60 s of slack, at 100 ms: 2 x 631, twice, and 64.
        assert_eq!(limits.rows::<ReaderSample>(), 2 * 2 * 631 + 64);
        let err = load(dir.path()).unwrap_err();
        assert!(
            matches!(
                err,
                RunDirError::TooManyRows {
                    limit: 2588,
                    flows: 2,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("beyond what run.json declares (2 flow(s)"),
            "{err}"
        );
        // Ten times as many: refused by its size before a row is read.
        for _ in 0..90_000 {
            writer.reader_row(&reader_row(0.1)).unwrap();
        }
        writer.flush().unwrap();
        let err = load(dir.path()).unwrap_err();
        assert!(
            matches!(err, RunDirError::File(SafeFsError::TooLarge { .. })),
            "{err}"
        );
    }

    #[test]
    fn a_file_larger_than_its_rows_allow_or_with_an_endless_line_is_refused() {
        let dir = written_run();
        let path = dir.path().join("host.csv");
        let limits = Limits::of(&load_meta(dir.path()).unwrap()).unwrap();
        let file = File::options().append(true).open(&path).unwrap();
        file.set_len(limits.bytes::<HostSample>() + 1).unwrap();
        let err = load(dir.path()).unwrap_err();
        assert!(
            matches!(err, RunDirError::File(SafeFsError::TooLarge { .. })),
            "{err}"
        );
        // A sparse file of zeros within the byte bound: one endless line.
        fs::write(
            &path,
            "t_s,side,tcp_inuse,tcp_orphan,tcp_tw,tcp_alloc,tcp_mem_pages\n",
        )
        .unwrap();
        let mut file = File::options().write(true).open(&path).unwrap();
        file.set_len(limits.bytes::<HostSample>() - 1).unwrap();
        file.seek(SeekFrom::End(0)).unwrap();
        std::io::Write::write_all(&mut file, b"\n").unwrap();
        let err = load(dir.path()).unwrap_err();
        assert!(
            matches!(
                err,
                RunDirError::File(SafeFsError::LongLine {
                    limit_bytes: MAX_ROW_BYTES,
                    ..
                })
            ),
            "{err}"
        );
    }

    #[test]
    fn a_csv_cut_mid_row_keeps_its_complete_rows_and_says_what_was_dropped() {
        let dir = written_run();
        let path = dir.path().join("reader.csv");
        let text = fs::read_to_string(&path).unwrap();
        let cut_at = text.len() - 20;
        fs::write(&path, &text[..cut_at]).unwrap();
        let run = load(dir.path()).unwrap();
        assert_eq!(run.reader, vec![reader_row(0.1)]);
        let dropped = (cut_at - text[..cut_at].rfind('\n').unwrap() - 1) as u64;
        assert_eq!(
            run.cut,
            vec![Cut {
                file: READER_CSV,
                rows: 1,
                bytes: dropped
            }]
        );
        assert_eq!(
            run.cut[0].to_string(),
            format!("reader.csv was cut mid-row: 1 incomplete row ({dropped} bytes) dropped")
        );
        // A broken row that is not the last is damage, not a cut.
        fs::write(&path, text.replacen("\n0.1,0,slow,", "\n0.1,0,", 1)).unwrap();
        assert!(load(dir.path()).unwrap_err().is_damaged());
    }

    #[test]
    fn a_long_label_is_escaped_and_bounded() {
        let dir = written_run();
        let mut run = load(dir.path()).unwrap();
        run.meta.label = Some(format!("\u{1b}[31m{}", "x".repeat(2_000_000)));
        let label = run.label();
        assert!(label.starts_with("\\u{1b}[31m"), "{}", &label[..20]);
        assert!(label.len() < 2 * oscil_protocol::text::LABEL_CHARS);
    }
}

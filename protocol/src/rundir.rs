//! The run directory: the interface between the reader, which writes it as the run goes,
//! and the report, which reads only it.
//!
//! ```text
//! <out>/run.json    what was run and how it ended (RunMeta)
//! <out>/reader.csv  ReaderSample rows
//! <out>/sender.csv  SenderSample rows
//! <out>/host.csv    HostSample rows
//! <out>/markers.csv MarkerRow rows, only in runs with --marker-every
//! ```
//!
//! `run.json` is written first, saying the run is partial, and rewritten (atomically) when
//! the run ends, so a reader that is killed still leaves a directory that says so.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use oscil_kernel::{HostFacts, OptionsInForce, ProcessCost, SocketOptions};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::clock::ClockEstimate;
use crate::control::WakeupFigures;
use crate::markers::{MarkerCounts, MarkerRow};
use crate::pattern::{PatternConfig, PhaseSpan};
use crate::records::{HostSample, ReaderSample, SenderSample};
use crate::sampling::Sampling;

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
    ];
    const ADDED_LATER: &'static [&'static str] = &["span_s"];
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
    ];
    /// All after format 1's first 15, from `span_s` on.
    const ADDED_LATER: &'static [&'static str] = Self::COLUMNS.split_at(15).1;
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
    ];
    const ADDED_LATER: &'static [&'static str] = &["tcp_mem_ns_bytes"];
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
    ];
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
    /// Free-form facts from whoever ran the reader (the lab puts its link and sysctls here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<serde_json::Value>,
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
    /// The marker interval (`--marker-every`), µs; absent when markers were off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marker_every_us: Option<u64>,
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
}

impl RunDirError {
    /// `path` could not be made a directory to write into: a file there, or the OS's word.
    pub fn cannot_create(path: &Path, source: &std::io::Error) -> RunDirError {
        let reason = match path.is_file() {
            true => "a file is there, not a directory".to_owned(),
            false => crate::cli::os_error(source),
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

struct CsvFile {
    path: PathBuf,
    writer: csv::Writer<BufWriter<File>>,
}

impl CsvFile {
    fn create<R: Columns>(dir: &Path) -> Result<Self, RunDirError> {
        let path = dir.join(R::FILE);
        let file = File::create(&path).map_err(io_error(&path))?;
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

    fn row<R: Columns>(&mut self, row: &R) -> Result<(), RunDirError> {
        self.writer
            .serialize(row)
            .map_err(|source| RunDirError::BadCsv {
                path: self.path.clone(),
                source,
            })
    }

    fn flush(&mut self) -> Result<(), RunDirError> {
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

    /// Rewrites `run.json` through a temporary file and a rename, so it is never half written.
    pub fn write_meta(&self) -> Result<(), RunDirError> {
        let path = self.dir.join(RUN_JSON);
        let tmp = self.dir.join(".run.json.tmp");
        let mut text = serde_json::to_vec_pretty(&self.meta).expect("RunMeta serializes");
        text.push(b'\n');
        fs::write(&tmp, text).map_err(io_error(&tmp))?;
        fs::rename(&tmp, &path).map_err(io_error(&path))
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
}

impl Run {
    /// The run's name on charts: its label, else the directory's name.
    pub fn label(&self) -> String {
        self.meta.label.clone().unwrap_or_else(|| {
            self.dir
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_else(|| self.dir.display().to_string())
        })
    }
}

/// Reads `run.json` alone.
pub fn load_meta(dir: &Path) -> Result<RunMeta, RunDirError> {
    let path = dir.join(RUN_JSON);
    if !path.is_file() {
        return Err(RunDirError::NotARunDir(dir.to_owned()));
    }
    let text = fs::read(&path).map_err(io_error(&path))?;
    let version: Option<u32> = serde_json::from_slice::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("format_version")?.as_u64())
        .map(|v| v as u32);
    if let Some(found) = version.filter(|&v| v > FORMAT_VERSION) {
        return Err(RunDirError::NewerFormat { path, found });
    }
    serde_json::from_slice(&text).map_err(|source| RunDirError::BadMeta { path, source })
}

/// Reads one CSV of a run directory, checking its header names every column first.
pub fn load_csv<R: Columns>(dir: &Path) -> Result<Vec<R>, RunDirError> {
    let path = dir.join(R::FILE);
    let bad_csv = |source| RunDirError::BadCsv {
        path: path.clone(),
        source,
    };
    let mut reader = csv::Reader::from_path(&path).map_err(bad_csv)?;
    let headers = reader.headers().map_err(bad_csv)?.clone();
    if let Some(column) = R::COLUMNS
        .iter()
        .filter(|column| !R::ADDED_LATER.contains(column))
        .find(|column| !headers.iter().any(|h| h == **column))
    {
        return Err(RunDirError::MissingColumn {
            path: path.clone(),
            column,
        });
    }
    reader
        .deserialize()
        .collect::<Result<_, _>>()
        .map_err(bad_csv)
}

/// Reads a whole run directory.
pub fn load(dir: &Path) -> Result<Run, RunDirError> {
    Ok(Run {
        dir: dir.to_owned(),
        meta: load_meta(dir)?,
        reader: load_csv(dir)?,
        sender: load_csv(dir)?,
        host: load_csv(dir)?,
        markers: match dir.join(MARKERS_CSV).is_file() {
            true => load_csv(dir)?,
            false => Vec::new(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{Phase, Side};

    fn host() -> HostFacts {
        HostFacts {
            hostname: "test".into(),
            kernel_release: "6.18.0".into(),
            page_size_bytes: 4096,
            sysctls: BTreeMap::from([("net.ipv4.tcp_notsent_lowat".into(), "4294967295".into())]),
            wall_clock_unix_ms: 1,
            clock: "CLOCK_MONOTONIC".into(),
            netns_inode: None,
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
                marker_every_us: None,
            },
            schedule: PatternConfig::CLOUDFLARE.schedule(),
            reader_host: host(),
            sender_host: None,
            sender_options: None,
            reader_options: None,
            tcpext_delta: BTreeMap::new(),
            ending: Ending::in_progress(),
            lab: None,
            cost: None,
            wakeups: Vec::new(),
            sampling: None,
            clock: None,
            markers: None,
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
            },
            MarkerRow {
                flow: 1,
                k: 2,
                offset_bytes: 131072,
                sent_t_s: 2.0,
                read_t_s: None,
                latency_us: None,
            },
        ];
        rows.iter().for_each(|r| writer.marker_row(r).unwrap());
        writer.flush().unwrap();
        let text = fs::read_to_string(dir.path().join("markers.csv")).unwrap();
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            [
                "flow,k,offset_bytes,sent_t_s,read_t_s,latency_us",
                "0,1,65536,1.0,1.25,250000.0",
                "1,2,131072,2.0,,"
            ]
        );
        assert_eq!(load(dir.path()).unwrap().markers, rows);

        let without = tempfile::tempdir().unwrap();
        RunWriter::create(without.path(), false, meta()).unwrap();
        assert!(!without.path().join("markers.csv").exists());
        assert!(load(without.path()).unwrap().markers.is_empty());
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
        RunWriter::create(dir.path(), false, meta()).unwrap();
        fs::write(dir.path().join("sender.csv"), "t_s,flow,bytes\n0.1,0,5\n").unwrap();
        let message = load(dir.path()).unwrap_err().to_string();
        assert!(
            message.ends_with("sender.csv: missing column \"cwnd\""),
            "{message}"
        );
    }
}

//! Why a run directory cannot be read or written; every message names the file.

use std::path::{Path, PathBuf};

use oscil_model::files::rows::MAX_BBR_GAIN;
use oscil_model::run::FORMAT_VERSION;

use crate::bounds::{CLOCK_RESOLUTION_S, MAX_BYTES_PER_S, MAX_FLOWS, MAX_RUN_S};
use crate::safe_fs::SafeFsError;

/// What went wrong reading or writing a run directory; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("{0}: no such directory")]
    NoSuchDir(PathBuf),
    #[error("{0}: not a run directory (no run.json)")]
    NotARunDir(PathBuf),
    /// A campaign's directory where a run's was expected.
    #[error("{0}: a campaign directory (campaign.json), not a run directory (run.json)")]
    CampaignNotRun(PathBuf),
    /// A file where a run directory was expected.
    #[error("{0}: a file, not a run directory")]
    FileNotRun(PathBuf),
    /// The OS would not say whether the directory holds a run (a permission, most often).
    #[error("{}: {}", .path.display(), oscil_model::error_text::os_error(.error))]
    Unreadable {
        path: PathBuf,
        /// Said in the line, not as a cause after it.
        error: std::io::Error,
    },
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
    #[error("{}: not a run.json this build can read: {}", .path.display(), crate::json_error::describe(.error))]
    BadMeta {
        path: PathBuf,
        /// Said in the line, not as a cause after it.
        error: serde_json::Error,
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
    /// A BBR gain the kernel cannot give (not a number, below 0, past a u32 over 256).
    #[error("a BBR gain of {gain:?} is not one the kernel can give (0 to {MAX_BBR_GAIN:e})")]
    Gain { gain: f64 },
    /// A CPU's busy share that is not one (not a number, outside 0 to 100).
    #[error("a CPU {pct:?}% busy is not a share (0 to 100)")]
    CpuBusy { pct: f64 },
}

impl RunDirError {
    /// True when the directory is a run whose content cannot be trusted (a file of the
    /// wrong kind or size, a bad cell, too many rows), rather than not a run at all.
    pub fn is_damaged(&self) -> bool {
        !matches!(
            self,
            RunDirError::NoSuchDir(_)
                | RunDirError::NotARunDir(_)
                | RunDirError::CampaignNotRun(_)
                | RunDirError::FileNotRun(_)
                | RunDirError::Unreadable { .. }
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
                | RunDirError::CampaignNotRun(_)
                | RunDirError::FileNotRun(_)
                | RunDirError::Unreadable { .. }
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
            false => oscil_model::error_text::os_error(source),
        };
        RunDirError::CannotCreate {
            path: path.to_owned(),
            reason,
        }
    }
}

pub(crate) fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> RunDirError + '_ {
    move |source| RunDirError::Io {
        path: path.to_owned(),
        source,
    }
}

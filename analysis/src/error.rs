//! What went wrong making a report.

use std::path::PathBuf;

use oscil_rundir::campaign::CampaignError;
use oscil_rundir::RunDirError;

use crate::charts::draw::DrawError;
use crate::load::configs;

/// What went wrong making a report; every message names the file or the flag.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A run directory is missing, malformed, or has a CSV missing a column.
    #[error(transparent)]
    Run(#[from] RunDirError),
    /// A campaign directory's `campaign.json` cannot be read.
    #[error(transparent)]
    Campaign(#[from] CampaignError),
    /// `--out` holds files and `--force` was not given.
    #[error("{0} is not empty: pass --force to replace the report in it (only the files oscil-report writes are removed)")]
    OutNotEmpty(PathBuf),
    /// The inputs hold no run to report on (a campaign with none complete).
    #[error("nothing to report: {0}")]
    NoRuns(String),
    #[error(transparent)]
    Draw(#[from] DrawError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `--baseline` names no configuration or run.
    #[error(transparent)]
    Baseline(#[from] configs::BaselineError),
    #[error("writing a table: {0}")]
    Csv(#[from] csv::Error),
    #[error(transparent)]
    File(#[from] oscil_rundir::safe_fs::SafeFsError),
}

impl ReportError {
    /// What the command line names and cannot work is a bad value, as in every binary
    /// (docs/cli.md); anything else failed on the way.
    pub fn exit_code(&self) -> u8 {
        match self {
            ReportError::OutNotEmpty(_) | ReportError::Baseline(_) => oscil_cli::exit::USAGE,
            ReportError::Run(e) if e.is_bad_path() => oscil_cli::exit::USAGE,
            ReportError::Campaign(e) if e.is_bad_path() => oscil_cli::exit::USAGE,
            _ => oscil_cli::exit::FAILED_START,
        }
    }
}

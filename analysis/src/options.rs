//! What a report is asked for: its inputs, where it goes, and how it compares.

use std::path::PathBuf;

use crate::charts::time_sequence;
use crate::load::summary::Scope;

/// What to report on and where.
#[derive(Debug, Clone)]
pub struct ReportConfig {
    /// Run directories and campaign directories.
    pub run_dirs: Vec<PathBuf>,
    pub out_dir: PathBuf,
    /// The configuration (or run) to compare the others with; default: the default-lowat
    /// configuration on the same path.
    pub baseline: Option<String>,
    /// The cycles verdicts and the recommendation use (steady by default).
    pub scope: Scope,
    /// Write the recommendation, with this goodput tolerance (0.01 for 1%).
    pub recommend: Option<f64>,
    /// Write into a used `out_dir`, removing the files an earlier report wrote there.
    pub force: bool,
    /// The span traced runs' time-sequence pictures show (`--zoom`); default: around each
    /// fast phase's start.
    pub zoom: Option<time_sequence::Span>,
    /// Where to write the figures for Prometheus (`--metrics`), if anywhere.
    pub metrics_dir: Option<PathBuf>,
}

//! Turns run directories into PNG charts and summary tables.
//!
//! Loading and the figures (`summary`, `series`, `figure`, `table`) are pure functions of
//! the run directories; `draw` renders the figures; `report` ties them together.

pub mod draw;
pub mod figure;
pub mod human;
pub mod series;
pub mod summary;
pub mod table;

use std::fs;
use std::path::{Path, PathBuf};

use oscil_protocol::{rundir, RunDirError};

use crate::draw::DrawError;
use crate::summary::RunSummary;

/// What went wrong making a report; every message names the file or the flag.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A run directory is missing, malformed, or has a CSV missing a column.
    #[error(transparent)]
    Run(#[from] RunDirError),
    #[error(transparent)]
    Draw(#[from] DrawError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `--baseline` names no run.
    #[error("{0}")]
    Baseline(String),
    #[error("summary.csv: {0}")]
    Csv(#[from] csv::Error),
}

/// What to report on and where.
#[derive(Debug, Clone)]
pub struct ReportConfig {
    pub run_dirs: Vec<PathBuf>,
    pub out_dir: PathBuf,
    /// The label of the run to compare the others with; default: the default-lowat run.
    pub baseline: Option<String>,
}

/// The files written and the runs' figures.
#[derive(Debug, Clone)]
pub struct Report {
    pub files: Vec<PathBuf>,
    pub summaries: Vec<RunSummary>,
}

/// Loads every run, writes one PNG per run, the comparison charts and the summary tables.
pub fn report(config: &ReportConfig) -> Result<Report, ReportError> {
    // Load all first, so a bad directory fails before anything is written.
    let runs = config
        .run_dirs
        .iter()
        .map(|dir| rundir::load(dir))
        .collect::<Result<Vec<_>, _>>()?;
    let summaries: Vec<RunSummary> = runs.iter().map(summary::summarize).collect();
    let baselines = summary::baselines(&summaries, config.baseline.as_deref())
        .map_err(ReportError::Baseline)?;
    let out = &config.out_dir;
    fs::create_dir_all(out).map_err(|source| ReportError::Io {
        path: out.clone(),
        source,
    })?;

    let mut files = Vec::new();
    let names = file_names(&summaries);
    for ((run, summary), name) in runs.iter().zip(&summaries).zip(&names) {
        let path = out.join(format!("{name}.png"));
        draw::draw_figure(&figure::run_figure(run, summary), &path)?;
        files.push(path);
    }
    if summaries.len() > 1 {
        let path = out.join("comparison.png");
        draw::draw_bar_figure(&figure::comparison(&summaries, &baselines), &path)?;
        files.push(path);
    }
    if summary::paths_differ(&summaries) {
        let path = out.join("path.png");
        draw::draw_figure(&figure::path_figure(&summaries), &path)?;
        files.push(path);
    }
    let csv_path = out.join("summary.csv");
    write(&csv_path, &table::csv(&summaries, &baselines)?)?;
    files.push(csv_path);
    let md_path = out.join("summary.md");
    write(&md_path, &table::markdown(&summaries, &baselines))?;
    files.push(md_path);
    Ok(Report { files, summaries })
}

fn write(path: &Path, text: &str) -> Result<(), ReportError> {
    fs::write(path, text).map_err(|source| ReportError::Io {
        path: path.to_owned(),
        source,
    })
}

/// A file name per run from its label, made safe and unique.
fn file_names(summaries: &[RunSummary]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for s in summaries {
        let base: String = s
            .label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let base = format!("run-{}", base.trim_start_matches('.'));
        let mut name = base.clone();
        let mut n = 2;
        while names.contains(&name) {
            name = format!("{base}-{n}");
            n += 1;
        }
        names.push(name);
    }
    names
}

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

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use oscil_protocol::{rundir, Run, RunDirError, RunMeta};

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

/// Reads every run, writes one PNG per run, the charts across runs and the summary tables.
pub fn report(config: &ReportConfig) -> Result<Report, ReportError> {
    // Every run.json first, so a directory that is not a run fails before any work.
    let labels = config
        .run_dirs
        .iter()
        .map(|dir| Ok(run_label(dir, rundir::load_meta(dir)?)))
        .collect::<Result<Vec<_>, RunDirError>>()?;
    if let Some(baseline) = &config.baseline {
        summary::check_baseline(&labels, baseline).map_err(ReportError::Baseline)?;
    }
    let out = &config.out_dir;
    fs::create_dir_all(out).map_err(|source| ReportError::Io {
        path: out.clone(),
        source,
    })?;

    // Each run is loaded, summarised and drawn on its own, a few at a time, so memory
    // holds only the runs in hand however many there are.
    let jobs: Vec<(&PathBuf, PathBuf)> = config
        .run_dirs
        .iter()
        .zip(file_names(&labels))
        .map(|(dir, name)| (dir, out.join(format!("{name}.png"))))
        .collect();
    let done = parallel_map(&jobs, |(dir, png)| -> Result<RunSummary, ReportError> {
        let run = rundir::load(dir)?;
        let summary = summary::summarize(&run);
        draw::draw_figure(&figure::run_figure(&run, &summary), png)?;
        Ok(summary)
    });
    let summaries = done.into_iter().collect::<Result<Vec<_>, _>>()?;
    let mut files: Vec<PathBuf> = jobs.into_iter().map(|(_, png)| png).collect();

    let baselines = summary::baselines(&summaries, config.baseline.as_deref())
        .map_err(ReportError::Baseline)?;
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

/// The run's name as `Run::label` gives it, from `run.json` alone.
fn run_label(dir: &Path, meta: RunMeta) -> String {
    Run {
        dir: dir.to_owned(),
        meta,
        reader: Vec::new(),
        sender: Vec::new(),
        host: Vec::new(),
    }
    .label()
}

/// `f` over every item on as many threads as there are cores, results in item order.
fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, items.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let result = f(item);
                results.lock().expect("no worker panics holding the lock")[i] = Some(result);
            });
        }
    });
    results
        .into_inner()
        .expect("no worker panics holding the lock")
        .into_iter()
        .map(|r| r.expect("every item was taken by a worker"))
        .collect()
}

fn write(path: &Path, text: &str) -> Result<(), ReportError> {
    fs::write(path, text).map_err(|source| ReportError::Io {
        path: path.to_owned(),
        source,
    })
}

/// A file name per run from its label, made safe and unique.
fn file_names(labels: &[String]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for label in labels {
        let base: String = label
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

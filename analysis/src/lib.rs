//! Turns run directories and campaigns into PNG charts, tables, verdicts, a
//! recommendation and an HTML page.
//!
//! Loading and the figures (`input`, `settings`, `summary`, `metrics`, `configs`, `stats`,
//! `verdict`, `recommend`) are pure functions of the run directories; the charts are
//! built as data (`chart`, `run_chart`, `comparison`, `path_chart`) and rendered by
//! `draw`; the tables, the recommendation and the page are text (`table`, `config_table`,
//! `recommendation_text`, `html`); `report` ties them together.

pub mod chart;
pub mod comparison;
pub mod config_table;
pub mod configs;
pub mod draw;
pub mod end_table;
pub mod html;
pub mod human;
pub mod input;
pub mod metrics;
pub mod out_dir;
pub mod path_chart;
pub mod recommend;
pub mod recommendation_text;
pub mod run_chart;
pub mod series;
pub mod settings;
pub mod stats;
pub mod summary;
pub mod table;
pub mod verdict;

use std::fs;
use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use oscil_protocol::campaign::CampaignError;
use oscil_protocol::{rundir, Run, RunDirError, RunMeta};

use crate::configs::Configuration;
use crate::draw::DrawError;
use crate::input::RunInput;
use crate::summary::{RunSummary, Scope};

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
    #[error("{0}")]
    Baseline(String),
    #[error("writing a table: {0}")]
    Csv(#[from] csv::Error),
}

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
}

/// The files written and the runs' figures.
#[derive(Debug, Clone)]
pub struct Report {
    pub files: Vec<PathBuf>,
    pub summaries: Vec<RunSummary>,
    pub configs: Vec<Configuration>,
}

/// Reads every run, writes one PNG per run, the charts across runs, the tables, the
/// recommendation when asked, and the page.
pub fn report(config: &ReportConfig) -> Result<Report, ReportError> {
    let inputs = input::expand(&config.run_dirs)?;
    if inputs.runs.is_empty() {
        return Err(ReportError::NoRuns(format!(
            "no complete run in {} ({})",
            config
                .run_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            if inputs.skipped.is_empty() {
                "the campaign lists none".to_string()
            } else {
                inputs.skipped.join("; ")
            }
        )));
    }
    // Every run.json first, so a directory that is not a run fails before any work.
    let labels = inputs
        .runs
        .iter()
        .map(|run| Ok(run_label(&run.dir, rundir::load_meta(&run.dir)?)))
        .collect::<Result<Vec<_>, RunDirError>>()?;
    let out = &config.out_dir;
    out_dir::prepare(out, config.force)?;
    let pngs: Vec<String> = file_names(&labels)
        .into_iter()
        .map(|name| format!("{name}.png"))
        .collect();
    let summaries = summarize_and_draw(&inputs.runs, &pngs, out)?;
    let configs =
        configs::group(&summaries, config.baseline.as_deref()).map_err(ReportError::Baseline)?;
    let mut files: Vec<PathBuf> = pngs.iter().map(|png| out.join(png)).collect();
    let written = write_outputs(config, &summaries, &configs, &pngs, &inputs.skipped)?;
    files.extend(written);
    Ok(Report {
        files,
        summaries,
        configs,
    })
}

/// Each run is loaded, summarised and drawn on its own, a few at a time, so memory holds
/// only the runs in hand however many there are.
fn summarize_and_draw(
    runs: &[RunInput],
    pngs: &[String],
    out: &Path,
) -> Result<Vec<RunSummary>, ReportError> {
    let jobs: Vec<(&RunInput, PathBuf)> = runs
        .iter()
        .zip(pngs)
        .map(|(run, png)| (run, out.join(png)))
        .collect();
    let done = parallel_map(&jobs, |(input, png)| -> Result<RunSummary, ReportError> {
        let run = rundir::load(&input.dir)?;
        let summary = summary::summarize(&run, input);
        draw::draw_figure(&run_chart::run_figure(&run, &summary), png)?;
        Ok(summary)
    });
    done.into_iter().collect()
}

/// The charts across runs, the tables, the recommendation and the page.
fn write_outputs(
    config: &ReportConfig,
    summaries: &[RunSummary],
    configs: &[Configuration],
    pngs: &[String],
    skipped: &[String],
) -> Result<Vec<PathBuf>, ReportError> {
    let out = &config.out_dir;
    let scope = config.scope;
    let cells = verdict::evaluate(summaries, configs, scope);
    let mut files = Vec::new();
    let mut charts = Vec::new();
    if summaries.len() > 1 {
        let figure = comparison::comparison(summaries, configs, &cells, scope);
        draw::draw_interval_figure(&figure, &out.join("comparison.png"))?;
        charts.push("comparison.png".to_string());
    }
    if configs::paths_differ(summaries) {
        let figure = path_chart::path_figure(summaries, configs, scope);
        draw::draw_figure(&figure, &out.join("path.png"))?;
        charts.push("path.png".to_string());
    }
    files.extend(charts.iter().map(|c| out.join(c)));
    let run_baselines = run_baselines(summaries, configs);
    let mut texts = vec![
        (
            "summary.csv".to_string(),
            table::csv(summaries, &run_baselines)?,
        ),
        (
            "summary.md".to_string(),
            with_warnings(
                table::markdown(summaries, &run_baselines),
                &verdict::workload_warnings(configs, &cells),
            ),
        ),
        (
            "configurations.csv".to_string(),
            config_table::configurations_csv(summaries, configs, &cells, scope)?,
        ),
        (
            "cycles.csv".to_string(),
            config_table::cycles_csv(summaries, configs)?,
        ),
    ];
    let recommendation = config
        .recommend
        .map(|tolerance| recommendation_files(summaries, configs, scope, tolerance));
    if let Some(files) = &recommendation {
        texts.extend(files.iter().cloned());
    }
    let page = html::page(&html::Page {
        summaries,
        configs,
        cells: &cells,
        scope,
        charts: &charts,
        run_pngs: pngs,
        recommendation: recommendation.as_ref().map(|files| files[0].1.as_str()),
        skipped,
        out_dir: out,
    });
    texts.push(("index.html".into(), page));
    for (name, text) in texts {
        let path = out.join(name);
        write(&path, &text)?;
        files.push(path);
    }
    Ok(files)
}

/// The summary with the comparisons of different workloads flagged under its title, where
/// nobody reads past them.
fn with_warnings(md: String, warnings: &[String]) -> String {
    if warnings.is_empty() {
        return md;
    }
    let (title, rest) = md.split_once("\n\n").unwrap_or((&md, ""));
    let lines: String = warnings.iter().map(|w| format!("- **{w}**\n")).collect();
    format!("{title}\n\n{lines}\n{rest}")
}

/// `recommendation.md` first, then a sysctl file per path with a choice.
fn recommendation_files(
    summaries: &[RunSummary],
    configs: &[Configuration],
    scope: Scope,
    tolerance: f64,
) -> Vec<(String, String)> {
    let choices = recommend::recommend(summaries, configs, scope, tolerance);
    let md = recommendation_text::markdown(summaries, configs, &choices, scope, tolerance);
    let mut files = vec![("recommendation.md".to_string(), md)];
    for (choice, name) in choices
        .iter()
        .zip(recommendation_text::conf_names(&choices))
    {
        let conf = recommendation_text::sysctl_conf(summaries, configs, choice, scope);
        if let (Some(name), Some(conf)) = (name, conf) {
            files.push((name, conf));
        }
    }
    files
}

/// For each run, the run `summary.csv` compares it with: the first run of its
/// configuration's baseline.
fn run_baselines(summaries: &[RunSummary], configs: &[Configuration]) -> Vec<Option<usize>> {
    let mut baselines = vec![None; summaries.len()];
    for c in configs {
        for &r in &c.runs {
            baselines[r] = c.baseline.map(|b| configs[b].runs[0]);
        }
    }
    baselines
}

/// The run's name as `Run::label` gives it, from `run.json` alone.
fn run_label(dir: &Path, meta: RunMeta) -> String {
    Run {
        dir: dir.to_owned(),
        meta,
        reader: Vec::new(),
        sender: Vec::new(),
        host: Vec::new(),
        markers: Vec::new(),
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
    let safe = labels
        .iter()
        .map(|label| {
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
            format!("run-{}", base.trim_start_matches('.'))
        })
        .collect();
    configs::unique(safe, |name, n| format!("{name}-{n}"))
}

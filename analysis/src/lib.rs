//! Turns run directories and campaigns into PNG charts, tables, verdicts, a
//! recommendation and an HTML page.
//!
//! A report goes through five stages: `load` -> `figures` -> `verdicts` -> `charts` ->
//! `write`. Loading, the figures and the verdicts are pure functions of the run
//! directories; the charts are built as data and rendered by `charts::draw`; the tables,
//! the recommendation and the page are text; `report` ties them together.

pub mod charts;
pub mod cli;
mod error;
mod figures;
mod human;
pub mod load;
mod options;
mod verdicts;
pub mod write;

use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use oscil_model::files::trace::{ReaderTrace, TraceRow};
use oscil_model::run::RunMeta;
use oscil_rundir::Run;
use sha2::{Digest, Sha256};

pub use crate::error::ReportError;
pub use crate::options::ReportConfig;

use crate::charts::chart::Figure;
use crate::charts::record::FigureRecord;
use crate::charts::time_sequence::{self, TimeSequenceError};
use crate::charts::{draw, run_chart, shared_scale};
use crate::load::configs::{self, Configuration};
use crate::load::input::{self, RunInput};
use crate::load::run_series::RunSeries;
use crate::load::summary::{self, RunSummary};
use crate::write::across::Across;
use crate::write::manifest;
use crate::write::{openmetrics, out_dir};

/// The files written and the runs' figures.
#[derive(Debug, Clone)]
pub struct Report {
    pub files: Vec<PathBuf>,
    pub summaries: Vec<RunSummary>,
    pub configs: Vec<Configuration>,
    /// Said once to the user (a run given twice).
    pub warnings: Vec<String>,
}

/// One run, loaded, summarised and turned into its picture's data; its rows are dropped.
struct LoadedRun {
    summary: RunSummary,
    figure: Figure,
    series: RunSeries,
    /// Each file cut mid-row, in words: said on stderr as well as on the page.
    cut: Vec<String>,
}

/// Reads every run, writes one PNG per run (y-scales shared across runs), the pictures
/// across runs, the tables, the recommendation when asked, the page and the manifest.
pub fn report(config: &ReportConfig) -> Result<Report, ReportError> {
    let mut inputs = input::expand(&config.run_dirs)?;
    if inputs.runs.is_empty() {
        return Err(no_runs(config, &inputs));
    }
    let mut damaged = Vec::new();
    let (runs, labels) = labelled(
        std::mem::take(&mut inputs.runs),
        &mut damaged,
        &mut inputs.warnings,
    )?;
    let out = &config.out_dir;
    out_dir::prepare(out, config.force)?;
    let pngs: Vec<String> = file_names(&labels)
        .into_iter()
        .map(|name| format!("{name}.png"))
        .collect();
    let loaded = load_all(&runs, pngs, &mut damaged)?;
    let Loaded {
        mut summaries,
        mut figures,
        series,
        pngs,
    } = loaded;
    say_what_is_missing(&damaged, &summaries, &mut inputs);
    load::paths::split_measured(&mut summaries);
    shared_scale::share_ranges(&mut figures);
    let configs =
        configs::group(&summaries, config.baseline.as_deref()).map_err(ReportError::Baseline)?;
    inputs.warnings.extend(configs::left_out(&summaries));
    let mut records = draw_runs(&figures, &pngs, out, &summaries, &configs)?;
    let mut time_sequences = Vec::new();
    let drawn = draw_time_sequences(&summaries, &pngs, out, config.zoom, &mut inputs.warnings)?;
    for (file, record) in drawn {
        time_sequences.push(file);
        records.push(record);
    }
    let across = Across {
        config,
        summaries: &summaries,
        configs: &configs,
        series: &series,
        pngs: &pngs,
        time_sequences: &time_sequences,
        inputs: &inputs,
    };
    let mut names: Vec<String> = pngs.clone();
    names.extend(across.write(&mut records)?);
    out_dir::write(
        &out.join("report.json"),
        &manifest::manifest(&names, &inputs.warnings, &records),
    )?;
    names.push("report.json".into());
    let mut files: Vec<PathBuf> = names.iter().map(|n| out.join(n)).collect();
    if let Some(dir) = &config.metrics_dir {
        files.extend(openmetrics::write(
            dir,
            &summaries,
            &configs,
            &pngs,
            config.scope,
        )?);
    }
    Ok(Report {
        files,
        summaries,
        configs,
        warnings: inputs.warnings,
    })
}

/// The runs left out as damaged (on stderr and in the skipped list), and what a kernel
/// could not give, said once however many runs it ran.
fn say_what_is_missing(damaged: &[String], summaries: &[RunSummary], inputs: &mut input::Inputs) {
    for why in damaged {
        eprintln!("oscil-report: warning: a damaged run is left out: {why}");
    }
    inputs.skipped.extend(
        damaged
            .iter()
            .map(|why| format!("damaged, left out: {why}")),
    );
    for note in summaries.iter().flat_map(|s| &s.not_given) {
        if !inputs.warnings.contains(note) {
            inputs.warnings.push(note.clone());
        }
    }
}

/// Every run's `run.json` first, so a directory that is not a run fails before any work;
/// a damaged run is left out (why, in `damaged`), and the report says so. A run whose
/// `run_id` came already (a copy of its directory) counts once, said in `warnings`.
fn labelled(
    inputs: Vec<RunInput>,
    damaged: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Result<(Vec<RunInput>, Vec<String>), ReportError> {
    let mut runs: Vec<RunInput> = Vec::new();
    let mut labels = Vec::new();
    let mut ids: Vec<(String, usize)> = Vec::new();
    for run in inputs {
        match oscil_rundir::load_meta(&run.dir) {
            Ok(meta) => {
                if let Some(id) = meta.run_id.clone() {
                    if let Some((_, first)) = ids.iter().find(|(seen, _)| *seen == id) {
                        warnings.push(format!(
                            "{} is the run {} already given (run id {}): counted once",
                            run.dir.display(),
                            runs[*first].dir.display(),
                            oscil_model::text::escape_stored(&id)
                        ));
                        continue;
                    }
                    ids.push((id, runs.len()));
                }
                labels.push(run_label(&run.dir, meta));
                runs.push(run);
            }
            Err(e) if e.is_damaged() => damaged.push(e.to_string()),
            Err(e) => return Err(e.into()),
        }
    }
    Ok((runs, labels))
}

/// Every run that loads, with its picture's file name; a damaged one is left out with why.
struct Loaded {
    summaries: Vec<RunSummary>,
    figures: Vec<Figure>,
    series: Vec<RunSeries>,
    pngs: Vec<String>,
}

/// Loads `runs` a few at a time; the ones that turn out damaged go to `damaged`, and
/// when every run does, the report has nothing to say.
fn load_all(
    runs: &[RunInput],
    pngs: Vec<String>,
    damaged: &mut Vec<String>,
) -> Result<Loaded, ReportError> {
    let mut loaded = Loaded {
        summaries: Vec::new(),
        figures: Vec::new(),
        series: Vec::new(),
        pngs: Vec::new(),
    };
    for (outcome, png) in parallel_map(runs, load).into_iter().zip(pngs) {
        match outcome {
            Ok(run) => {
                for why in &run.cut {
                    eprintln!(
                        "oscil-report: warning: {}: {why} (its complete rows are used; the run counts as partial)",
                        run.summary.dir.display()
                    );
                }
                loaded.summaries.push(run.summary);
                loaded.figures.push(run.figure);
                loaded.series.push(run.series);
                loaded.pngs.push(png);
            }
            Err(ReportError::Run(e)) if e.is_damaged() => damaged.push(e.to_string()),
            Err(e) => return Err(e),
        }
    }
    if loaded.summaries.is_empty() {
        return Err(ReportError::NoRuns(format!(
            "every run is damaged: {}",
            damaged.join("; ")
        )));
    }
    Ok(loaded)
}

fn no_runs(config: &ReportConfig, inputs: &input::Inputs) -> ReportError {
    ReportError::NoRuns(format!(
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
    ))
}

/// One run loaded and reduced to what the report keeps of it; runs are loaded a few at a
/// time, so memory holds only the rows of the runs in hand however many there are.
fn load(input: &RunInput) -> Result<LoadedRun, ReportError> {
    let run = oscil_rundir::load(&input.dir)?;
    let summary = summary::summarize(&run, input);
    let calls = traced_calls(&run);
    Ok(LoadedRun {
        figure: run_chart::run_figure(&run, &summary, &calls),
        series: RunSeries::of(&run),
        cut: run.cut.iter().map(ToString::to_string).collect(),
        summary,
    })
}

/// The reader's traced collapse and prune calls (`--trace` where the kernel has kprobe
/// events); none for an untraced run, or one whose trace is damaged (its time-sequence
/// picture says so).
fn traced_calls(run: &Run) -> Vec<TraceRow<ReaderTrace>> {
    let traced = run.meta.trace.as_ref().and_then(|t| t.reader.as_ref());
    let Some(limits) = traced
        .filter(|r| !r.calls.is_empty())
        .and_then(|_| oscil_rundir::Limits::of(&run.meta).ok())
    else {
        return Vec::new();
    };
    let rows = oscil_rundir::trace::load::<ReaderTrace>(&run.dir, &limits).unwrap_or_default();
    rows.into_iter()
        .filter(|r| r.duration_ns.is_some())
        .collect()
}

/// Every run's picture, in parallel; their records for the manifest.
fn draw_runs(
    figures: &[Figure],
    pngs: &[String],
    out: &Path,
    summaries: &[RunSummary],
    configs: &[Configuration],
) -> Result<Vec<FigureRecord>, ReportError> {
    let mut config_of = vec![String::new(); summaries.len()];
    for c in configs {
        for &r in &c.runs {
            config_of[r] = c.name.clone();
        }
    }
    let jobs: Vec<usize> = (0..figures.len()).collect();
    parallel_map(&jobs, |&i| -> Result<FigureRecord, ReportError> {
        let texts = draw::draw_figure(&figures[i], &out.join(&pngs[i]))?;
        let drawn = std::slice::from_ref(&config_of[i]);
        Ok(FigureRecord::of_figure(
            &pngs[i],
            "run",
            &figures[i],
            drawn,
            texts,
        ))
    })
    .into_iter()
    .collect()
}

/// Every traced run's time-sequence picture, in parallel; a run whose trace is damaged is
/// drawn without it, and the report says so.
fn draw_time_sequences(
    summaries: &[RunSummary],
    pngs: &[String],
    out: &Path,
    zoom: Option<time_sequence::Span>,
    warnings: &mut Vec<String>,
) -> Result<Vec<(String, FigureRecord)>, ReportError> {
    let jobs: Vec<usize> = (0..summaries.len()).collect();
    let mut drawn = Vec::new();
    for outcome in parallel_map(&jobs, |&i| {
        let stem = pngs[i].trim_end_matches(".png");
        let run = &summaries[i];
        time_sequence::draw_run(&run.dir, &run.label, stem, out, zoom)
    }) {
        match outcome {
            Ok(time_sequence::Drawn::Picture(file, record)) => drawn.push((file, record)),
            Ok(time_sequence::Drawn::Empty(why)) => warnings.push(why),
            Ok(time_sequence::Drawn::Untraced) => {}
            Err(TimeSequenceError::Run(e)) if e.is_damaged() => {
                eprintln!("oscil-report: warning: a trace is left out: {e}");
            }
            Err(TimeSequenceError::Run(e)) => return Err(e.into()),
            Err(TimeSequenceError::Draw(e)) => return Err(e.into()),
        }
    }
    Ok(drawn)
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
        probe: Vec::new(),
        cut: Vec::new(),
    }
    .label()
}

/// `f` over every item on as many threads as there are cores, results in item order.
pub(crate) fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
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

/// The longest file name made from a label, before `.png`; a longer one is cut and a
/// hash of the whole label added, so two long labels still get two names.
const MAX_FILE_STEM_CHARS: usize = 100;

/// A file name per run from its label, made safe, short enough and unique.
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
            let base = base.trim_start_matches('.');
            if base.len() <= MAX_FILE_STEM_CHARS {
                return format!("run-{base}");
            }
            let hash = Sha256::digest(label.as_bytes());
            let hex: String = hash[..6].iter().map(|b| format!("{b:02x}")).collect();
            format!("run-{}-{hex}", &base[..MAX_FILE_STEM_CHARS - 13])
        })
        .collect();
    configs::unique(safe, |name, n| format!("{name}-{n}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_labels_get_short_distinct_file_names() {
        let a = "a".repeat(300);
        let b = format!("{}b", "a".repeat(299));
        let names = file_names(&[a, b, "lowat-128k".into()]);
        assert_eq!(names[2], "run-lowat-128k");
        assert_ne!(names[0], names[1]);
        for name in &names[..2] {
            assert!(name.len() <= MAX_FILE_STEM_CHARS + 4, "{name}");
            assert!(
                name.starts_with(&format!("run-{}", "a".repeat(80))),
                "{name}"
            );
        }
    }
}

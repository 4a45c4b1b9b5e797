//! The lab's end table and its line per run: the figures of `configurations.csv`, from the
//! same code (`summary::summarize`, `configs::group`, `verdict::evaluate`, the registry in
//! `metrics`), so two tables of one campaign never disagree. The lab used to compute its
//! own, over every cycle and of what the application read: a steady fast phase that
//! drained the receive buffer showed above the path's rate.

use std::path::Path;

use oscil_model::campaign::Campaign;
use oscil_rundir::campaign;

use crate::error::ReportError;
use crate::figures::metrics::{metric, Metric};
use crate::human;
use crate::load::configs;
use crate::load::input::{self, RunInput};
use crate::load::summary::{self, Scope};
use crate::verdicts::verdict::{self, Cell};

/// The figures the lab shows, in order: network goodput of the fast phases, the slow
/// phases' mean queued bytes.
fn shown() -> [&'static Metric; 2] {
    [
        metric("net_goodput_fast_mbps"),
        metric("slow_queued_mean_mib"),
    ]
}

/// The cycles the lab's figures cover: the report's default.
const SCOPE: Scope = Scope::Steady;

/// What `oscil-report --end-table DIR` prints for the lab: the end table of the campaign
/// in `dir`, or the line of a run's figures.
pub fn words(dir: &Path) -> Result<String, ReportError> {
    match campaign::is_campaign(dir) {
        true => end_table(&campaign::load(dir)?, dir),
        false => run_line(dir).map(|line| line + "\n"),
    }
}

/// One run's figures in words, for the line the lab prints as the run ends.
fn run_line(dir: &Path) -> Result<String, ReportError> {
    let run = oscil_rundir::load(dir)?;
    let input = RunInput {
        dir: dir.to_owned(),
        campaign: None,
    };
    let summary = summary::summarize(&run, &input);
    let [goodput, queued] = shown();
    let text = |m: &Metric| {
        summary
            .value(m, SCOPE)
            .map_or("n/a".into(), |v| m.unit.text(v))
    };
    let spoiled = summary.link_spoiled.as_ref().map_or(String::new(), |why| {
        format!("; left out of the verdicts: {why}")
    }) + &summary
        .host_limited
        .as_ref()
        .map_or(String::new(), |why| format!("; {why}"));
    Ok(format!(
        "network goodput fast {}, slow-phase queued mean {}{spoiled}",
        text(goodput),
        text(queued)
    ))
}

/// The end table of the campaign in `dir`: per configuration (by name), complete runs of
/// those planned, then each figure of [`shown`] with its change against the baseline, as
/// `configurations.csv` has them.
fn end_table(campaign: &Campaign, dir: &Path) -> Result<String, ReportError> {
    let inputs = input::expand(&[dir.to_path_buf()])?;
    let mut summaries = inputs
        .runs
        .iter()
        .map(|input| Ok(summary::summarize(&oscil_rundir::load(&input.dir)?, input)))
        .collect::<Result<Vec<_>, ReportError>>()?;
    crate::load::paths::split_measured(&mut summaries);
    let configs = configs::group(&summaries, None).map_err(ReportError::Baseline)?;
    let cells = verdict::evaluate(&summaries, &configs, SCOPE);
    let mut labels: Vec<String> = Vec::new();
    for name in campaign.runs.iter().flat_map(input::configuration_names) {
        if !labels.contains(&name) {
            labels.push(name);
        }
    }
    labels.sort();
    let width = labels.iter().map(|l| l.len()).max().unwrap_or(0).max(13);
    let shown = shown();
    let mut text = format!("{:width$}  runs", "configuration");
    for m in shown {
        text.push_str(&format!("  {:>24}  {:>6}", header(m), "change"));
    }
    text.push('\n');
    for label in labels {
        let planned = campaign
            .runs
            .iter()
            .filter(|r| input::configuration_names(r).contains(&label))
            .count();
        let found = configs.iter().position(|c| c.name == label);
        let done = found.map_or(0, |i| configs[i].runs.len());
        text.push_str(&format!(
            "{label:width$}  {:>4}",
            format!("{done}/{planned}")
        ));
        for m in shown {
            let cell = found.map(|i| &cells[i][index(m)]);
            let is_base = found.is_some_and(|i| configs[i].is_baseline(i));
            let (value, change) = cell_words(m, cell, is_base);
            text.push_str(&format!("  {value:>24}  {change:>6}"));
        }
        text.push('\n');
    }
    if let Some(once) = verdict::Intervals::of(&configs).once() {
        text.push_str(&format!("{once}\n"));
    }
    for warning in verdict::workload_warnings(&configs, &cells) {
        text.push_str(&format!("{warning}\n"));
    }
    if let Some(line) = crate::verdicts::slow_start::warning(&summaries) {
        text.push_str(&format!("{line}\n"));
    }
    for line in configs::left_out(&summaries) {
        text.push_str(&format!("{line}\n"));
    }
    text.push_str(
        "(means over each configuration's complete runs, steady cycles (2 and later) when \
         there are several; as in report/configurations.csv)\n",
    );
    Ok(text)
}

fn header(m: &Metric) -> String {
    match m.column {
        "net_goodput_fast_mbps" => format!("net goodput fast {}", m.unit.name),
        _ => format!("slow queued mean {}", m.unit.name),
    }
}

fn index(m: &Metric) -> usize {
    crate::figures::metrics::METRICS
        .iter()
        .position(|x| x.column == m.column)
        .expect("in the registry")
}

/// A figure's mean, and its change against the baseline (`base` for the baseline).
fn cell_words(m: &Metric, cell: Option<&Cell>, is_base: bool) -> (String, String) {
    let value = cell
        .and_then(|c| c.estimate)
        .map_or("-".into(), |e| m.unit.number(e.mean));
    let change = match cell.and_then(|c| c.change) {
        _ if is_base => "base".into(),
        Some(change) => human::change(change.percent),
        None => "-".into(),
    };
    (value, change)
}

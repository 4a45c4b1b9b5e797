//! `comparison.png` as data: for every compared figure that was measured, in the order of
//! the questions (`shown_figures`), each configuration's runs as points, their mean and
//! its 95% interval, and the verdict against the baseline; a line for each figure left out.

use crate::charts::chart::PALETTE;
use crate::figures::metrics::{Metric, METRICS};
use crate::load::configs::Configuration;
use crate::load::summary::{RunSummary, Scope};
use crate::verdicts::shown_figures::shown;
use crate::verdicts::verdict::{self, Cell, Intervals};

/// One configuration in one panel.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalRow {
    pub label: String,
    /// Each run's value, in the panel's unit.
    pub points: Vec<f64>,
    pub mean: Option<f64>,
    pub ci: Option<(f64, f64)>,
    /// The estimate and the verdict in words.
    pub text: String,
    pub color: (u8, u8, u8),
    pub baseline: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct IntervalPanel {
    /// The figure's column name.
    pub key: String,
    pub title: String,
    pub unit: String,
    pub rows: Vec<IntervalRow>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct IntervalFigure {
    pub header: Vec<String>,
    pub panels: Vec<IntervalPanel>,
}

/// The comparison across configurations over `scope`; `cells` from `verdict::evaluate`.
pub fn comparison(
    summaries: &[RunSummary],
    configs: &[Configuration],
    cells: &[Vec<Cell>],
    scope: Scope,
) -> IntervalFigure {
    let shown = shown(cells);
    let intervals = Intervals::of(configs);
    let panels = shown
        .metrics
        .iter()
        .map(|&m| (m, &METRICS[m]))
        .map(|(m, metric)| IntervalPanel {
            key: metric.column.to_string(),
            title: metric.title.to_string(),
            unit: metric.unit.name.to_string(),
            rows: configs
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let cell = &cells[i][m];
                    let scale = metric.unit.scale;
                    let estimate =
                        verdict::estimate_text_of(summaries, c, (metric, cell), scope, intervals);
                    let words = match (&cell.change, c.is_baseline(i)) {
                        (_, true) => "baseline".to_string(),
                        (Some(change), false) => verdict::brief_change(change, intervals),
                        (None, false) => verdict::verdict_text(
                            (metric, cell),
                            false,
                            c.baseline.is_some(),
                            intervals,
                        ),
                    };
                    IntervalRow {
                        label: c.name.clone(),
                        points: verdict::values(summaries, c, metric, scope)
                            .into_iter()
                            .map(|v| v / scale)
                            .collect(),
                        mean: cell.estimate.map(|e| e.mean / scale),
                        ci: cell
                            .estimate
                            .and_then(|e| e.ci)
                            .map(|(lo, hi)| (lo / scale, hi / scale)),
                        text: format!("{estimate}; {words}"),
                        color: PALETTE[i % PALETTE.len()],
                        baseline: c.is_baseline(i),
                    }
                })
                .collect(),
        })
        .collect();
    let mut header = header(summaries, configs, scope);
    let drawn: Vec<&Metric> = shown.metrics.iter().map(|&m| &METRICS[m]).collect();
    header.extend(verdict::lower_bound_note(summaries, configs, &drawn, scope));
    header.extend(shown.left_out);
    IntervalFigure { header, panels }
}

fn header(summaries: &[RunSummary], configs: &[Configuration], scope: Scope) -> Vec<String> {
    let cycles = summaries.iter().map(RunSummary::cycles).max().unwrap_or(0);
    let intervals = Intervals::of(configs);
    let mut baselines: Vec<&str> = Vec::new();
    for b in configs.iter().filter_map(|c| c.baseline) {
        if !baselines.contains(&configs[b].name.as_str()) {
            baselines.push(&configs[b].name);
        }
    }
    let baseline = if baselines.is_empty() {
        "no baseline: no configuration has the kernel's default lowat (pass --baseline NAME)"
            .to_string()
    } else {
        let interval = match intervals {
            Intervals::PerFigure => ", with a 95% interval for the ratio of the means",
            Intervals::NoneOneRunEach => "",
        };
        format!(
            "change against the baseline, {} (same path, kernel's default lowat unless --baseline){interval}",
            baselines.join(", ")
        )
    };
    let runs = match intervals.once() {
        Some(once) => format!("{} runs, {once}", summaries.len()),
        None => format!("{} runs", summaries.len()),
    };
    let reading = match intervals {
        Intervals::NoneOneRunEach => "Each run is a dot, and the bar is its figure.".to_string(),
        Intervals::PerFigure => format!("Each run is a dot; the bar is the mean and the line its 95% interval (one run has none). A change is clear when its interval leaves out zero; \"no clear change\": the interval holds zero, more runs would tell. {}", crate::figures::stats::METHOD_BRIEF),
    };
    vec![
        format!(
            "Comparison of {} configurations ({runs}), figures {}",
            configs.len(),
            scope.text(cycles)
        ),
        reading,
        baseline,
    ]
}

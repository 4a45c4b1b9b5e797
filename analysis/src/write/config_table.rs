//! `configurations.csv` (one row per configuration: each figure's mean, 95% interval and
//! change against the baseline) and `cycles.csv` (one row per cycle of every run).

use crate::figures::metrics::{lower_bound, Metric, METRICS};
use crate::load::configs::Configuration;
use crate::load::summary::{RunSummary, Scope};
use crate::load::window::Window;
use crate::verdicts::verdict::{self, Cell};
use crate::write::table::cell;

fn finish(writer: csv::Writer<Vec<u8>>) -> Result<String, csv::Error> {
    let bytes = writer.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8(bytes).expect("the table is built from strings"))
}

fn percent(value: Option<f64>) -> String {
    value.map_or(String::new(), |v| format!("{v:.2}"))
}

/// The table of configurations over `scope`; `cells` from `verdict::evaluate`.
pub fn configurations_csv(
    summaries: &[RunSummary],
    configs: &[Configuration],
    cells: &[Vec<Cell>],
    scope: Scope,
) -> Result<String, csv::Error> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> = ["configuration", "runs", "path", "figures", "baseline"]
        .map(String::from)
        .into();
    for m in METRICS {
        for suffix in [
            "",
            "_ci_low",
            "_ci_high",
            "_change_pct",
            "_change_ci_low",
            "_change_ci_high",
        ] {
            header.push(format!("{}{suffix}", m.column));
        }
    }
    let censorable: Vec<&Metric> = METRICS
        .iter()
        .filter(|m| lower_bound(m, &Window::default()).is_some())
        .collect();
    header.extend(censorable.iter().map(|m| format!("{}_censored", m.column)));
    writer.write_record(&header)?;
    for (i, c) in configs.iter().enumerate() {
        let first = &summaries[c.runs[0]];
        let mut row = vec![
            c.name.clone(),
            c.runs.len().to_string(),
            first.settings.path_text().unwrap_or_default(),
            scope.text(first.cycles()),
            c.baseline
                .map_or(String::new(), |b| configs[b].name.clone()),
        ];
        for (m, cell_of) in METRICS.iter().zip(&cells[i]) {
            let estimate = cell_of.estimate;
            let ci = estimate.and_then(|e| e.ci);
            let change_ci = cell_of.change.and_then(|c| c.ci_percent.ok());
            row.extend([
                cell(m, estimate.map(|e| e.mean)),
                cell(m, ci.map(|c| c.0)),
                cell(m, ci.map(|c| c.1)),
                percent(cell_of.change.map(|c| c.percent)),
                percent(change_ci.map(|c| c.0)),
                percent(change_ci.map(|c| c.1)),
            ]);
        }
        // "true" where some run's figure is only a lower bound (`metrics::lower_bound`).
        for m in &censorable {
            row.push(verdict::is_lower_bound(summaries, c, m, scope).to_string());
        }
        writer.write_record(&row)?;
    }
    finish(writer)
}

/// One row per cycle of every run: the cycle's phase lengths and every figure over it.
pub fn cycles_csv(
    summaries: &[RunSummary],
    configs: &[Configuration],
) -> Result<String, csv::Error> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let mut header = vec![
        "run",
        "configuration",
        "repetition",
        "cycle",
        "fast_s",
        "slow_s",
    ];
    header.extend(METRICS.iter().map(|m| m.column));
    writer.write_record(&header)?;
    for c in configs {
        for &r in &c.runs {
            let s = &summaries[r];
            for cycle in 1..=s.cycles() {
                let window = s.window(Scope::Cycle(cycle));
                let mut row = vec![
                    s.label.clone(),
                    c.name.clone(),
                    s.repetition.map_or(String::new(), |k| k.to_string()),
                    cycle.to_string(),
                    format!("{:.3}", window.fast.seconds),
                    format!("{:.3}", window.slow.seconds),
                ];
                row.extend(METRICS.iter().map(|m| cell(m, (m.value)(&window))));
                writer.write_record(&row)?;
            }
        }
    }
    finish(writer)
}

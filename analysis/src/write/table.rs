//! `summary.csv` (one row per run with its settings and every figure) and the runs of
//! `summary.md`.

use std::fmt::Write as _;

use crate::figures::metrics::{Metric, METRICS};
use crate::human::MBIT;
use crate::load::summary::{RunSummary, Scope};
use crate::write::html::escape_markdown;

fn status(s: &RunSummary) -> &'static str {
    match (&s.partial, &s.holes) {
        (Some(_), _) => "partial",
        (None, Some(_)) => "holes",
        (None, None) => "complete",
    }
}

fn number(value: Option<f64>, scale: f64, decimals: usize) -> String {
    value.map_or(String::new(), |v| format!("{:.*}", decimals, v / scale))
}

/// A figure in its table unit, with the table's decimals; empty where it does not exist.
pub fn cell(metric: &Metric, value: Option<f64>) -> String {
    number(value, metric.unit.scale, metric.unit.decimals)
}

/// The CSV table, one row per run over the whole run; empty cells where a figure could not
/// be computed. `baselines` gives each run the run it is compared with.
pub fn csv(summaries: &[RunSummary], baselines: &[Option<usize>]) -> Result<String, csv::Error> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let mut header = vec![
        "label",
        "status",
        "partial_reason",
        "flows",
        "lowat",
        "lowat_bytes",
        "sndbuf_bytes",
        "congestion",
        "path_rtt_ms",
        "path_rate_mbps",
        "duration_s",
    ];
    header.extend(METRICS.iter().map(|m| m.column));
    header.extend(["baseline", "host_limited"]);
    writer.write_record(&header)?;
    for (s, baseline) in summaries.iter().zip(baselines) {
        let set = &s.settings;
        let mut row = vec![
            s.label.clone(),
            status(s).into(),
            s.partial
                .clone()
                .or_else(|| s.holes.clone())
                .unwrap_or_default(),
            set.flows.to_string(),
            set.lowat_text(),
            set.lowat.map_or(String::new(), |(b, _)| b.to_string()),
            set.sndbuf_bytes.map_or(String::new(), |b| b.to_string()),
            set.congestion.clone().unwrap_or_default(),
            number(set.path_rtt_ms, 1.0, 3),
            number(set.path_rate_bps, MBIT, 3),
            format!("{:.3}", s.duration_s),
        ];
        row.extend(METRICS.iter().map(|m| cell(m, s.value(m, Scope::Whole))));
        row.push(baseline.map_or(String::new(), |b| summaries[b].label.clone()));
        row.push(s.host_limited.clone().unwrap_or_default());
        writer.write_record(&row)?;
    }
    let bytes = writer.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8(bytes).expect("the table is built from strings"))
}

/// `summary.md`'s runs: one row per run with its status, settings, path and the run its
/// changes are against, and a line for each partial run, run with holes, or run its hosts
/// limited.
pub fn runs_markdown(summaries: &[RunSummary], baselines: &[Option<usize>]) -> String {
    let mut md =
        String::from("| run | status | settings | path | compared with |\n|---|---|---|---|---|\n");
    for (s, baseline) in summaries.iter().zip(baselines) {
        let path = s.settings.path_text();
        let cells = [
            escape_markdown(&s.label),
            status(s).into(),
            escape_markdown(&s.settings.key()),
            escape_markdown(&path.unwrap_or_else(|| "not recorded".into())),
            baseline.map_or("none".into(), |b| escape_markdown(&summaries[b].label)),
        ];
        let _ = writeln!(md, "| {} |", cells.join(" | "));
    }
    md.push('\n');
    for s in summaries.iter().filter(|s| s.partial.is_some()) {
        let _ = writeln!(
            md,
            "- **{}** is partial: {}",
            escape_markdown(&s.label),
            escape_markdown(s.partial.as_deref().unwrap_or_default())
        );
    }
    for s in summaries.iter().filter(|s| s.partial.is_none()) {
        if let Some(holes) = &s.holes {
            let _ = writeln!(md, "- **{}** has holes (counted): {holes}", s.label);
        }
    }
    for s in summaries.iter().filter(|s| s.partial.is_none()) {
        if let Some(why) = &s.host_limited {
            let _ = writeln!(
                md,
                "- **{}** (counted): {}",
                escape_markdown(&s.label),
                escape_markdown(why)
            );
        }
    }
    md.push_str("\nEvery figure of each run, over the whole run: summary.csv (its columns are defined in docs/report.md); each configuration's mean, interval and change: configurations.csv; each cycle: cycles.csv.\n");
    md
}

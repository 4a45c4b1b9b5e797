//! `summary.csv` and `summary.md`: one row per run with its settings and figures.

use std::fmt::Write as _;

use crate::figures::metrics::{Metric, METRICS};
use crate::human::{self, MBIT};
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

/// The change of `value` against `baseline`, in percent; none when either is missing or
/// the baseline is zero.
fn change_percent(value: Option<f64>, baseline: Option<f64>) -> Option<f64> {
    let (value, baseline) = (value?, baseline?);
    (baseline != 0.0).then(|| (value - baseline) / baseline * 100.0)
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
    header.push("baseline");
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
        writer.write_record(&row)?;
    }
    let bytes = writer.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8(bytes).expect("the table is built from strings"))
}

/// The markdown table, with changes against each run's baseline in brackets.
pub fn markdown(summaries: &[RunSummary], baselines: &[Option<usize>]) -> String {
    let mut md = String::from("# oscil report\n\n");
    let mut header = vec!["run", "status", "settings", "path"];
    let names: Vec<String> = METRICS
        .iter()
        .map(|m| format!("{} ({})", m.title, m.unit.name))
        .collect();
    header.extend(names.iter().map(String::as_str));
    header.push("compared with");
    let _ = writeln!(md, "| {} |", header.join(" | "));
    let _ = writeln!(md, "|{}", "---|".repeat(header.len()));
    for (i, s) in summaries.iter().enumerate() {
        let mut cells = vec![
            escape_markdown(&s.label),
            status(s).into(),
            escape_markdown(&s.settings.key()),
            escape_markdown(
                &s.settings
                    .path_text()
                    .unwrap_or_else(|| "not recorded".into()),
            ),
        ];
        for m in METRICS {
            let value = s.value(m, Scope::Whole);
            let mut cell = number(value, m.unit.scale, m.unit.shown);
            if cell.is_empty() {
                cell = "n/a".into();
            }
            match baselines[i] {
                Some(b) if b == i && m.compared => cell.push_str(" (baseline)"),
                Some(b) if m.compared => {
                    let base = summaries[b].value(m, Scope::Whole);
                    if let Some(change) = change_percent(value, base) {
                        let _ = write!(cell, " ({})", human::change(change));
                    }
                }
                _ => {}
            }
            cells.push(cell);
        }
        cells.push(baselines[i].map_or("none".into(), |b| escape_markdown(&summaries[b].label)));
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
    md.push_str(
        "\nOne row per run, over the whole run (every cycle); configurations.csv gives each configuration's mean and 95% interval over its runs, by default over the steady cycles (2 and later), and cycles.csv each cycle.\n\nDefinitions: goodput of a phase is what the reader read in that phase over the \
         phase's length. Queued bytes are the sender's `wmem_queued` (send queue memory) \
         summed over flows at each sample; \"slow\" figures cover samples inside slow \
         phases. Not sent is `notsent_bytes`, summed the same way. TCP memory is \
         `/proc/net/sockstat` mem times the page size; it is global across network \
         namespaces, so on one machine both hosts' figures are the same host's. Namespace \
         TCP memory is the memory charged to every TCP socket of one side's own network \
         namespace (send queue, receive queue, forward allocation), which tells sender from \
         receiver on one machine. RTT is the \
         sender's smoothed RTT. Changes in brackets are against the run named in \"compared with\": by default the run with the kernel's default lowat on the same path (`--baseline LABEL` picks one).\n",
    );
    md
}

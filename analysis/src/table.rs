//! `summary.csv` and `summary.md`: one row per run with its settings and figures.

use std::fmt::Write as _;

use crate::human::{self, MBIT, MIB};
use crate::summary::{change_percent, RunSummary};

/// One figure of the table: its column name, how to get it, and its unit's scale.
struct Column {
    csv_name: &'static str,
    md_name: &'static str,
    value: fn(&RunSummary) -> Option<f64>,
    scale: f64,
    decimals: usize,
    /// Whether the markdown table shows its change against the baseline.
    compare: bool,
}

const COLUMNS: &[Column] = &[
    Column {
        csv_name: "goodput_fast_mbps",
        md_name: "goodput fast (Mbit/s)",
        value: |s| s.goodput_fast_bps,
        scale: MBIT,
        decimals: 3,
        compare: false,
    },
    Column {
        csv_name: "goodput_slow_mbps",
        md_name: "goodput slow (Mbit/s)",
        value: |s| s.goodput_slow_bps,
        scale: MBIT,
        decimals: 3,
        compare: true,
    },
    Column {
        csv_name: "slow_queued_peak_mib",
        md_name: "slow: queued peak (MiB)",
        value: |s| s.slow_queued_peak_bytes,
        scale: MIB,
        decimals: 4,
        compare: true,
    },
    Column {
        csv_name: "slow_queued_mean_mib",
        md_name: "slow: queued mean (MiB)",
        value: |s| s.slow_queued_mean_bytes,
        scale: MIB,
        decimals: 4,
        compare: true,
    },
    Column {
        csv_name: "slow_notsent_peak_mib",
        md_name: "slow: not sent peak (MiB)",
        value: |s| s.slow_notsent_peak_bytes,
        scale: MIB,
        decimals: 4,
        compare: false,
    },
    Column {
        csv_name: "slow_notsent_mean_mib",
        md_name: "slow: not sent mean (MiB)",
        value: |s| s.slow_notsent_mean_bytes,
        scale: MIB,
        decimals: 4,
        compare: false,
    },
    Column {
        csv_name: "tcp_mem_peak_sender_mib",
        md_name: "peak TCP mem, sender host (MiB)",
        value: |s| s.tcp_mem_peak_sender_bytes,
        scale: MIB,
        decimals: 4,
        compare: true,
    },
    Column {
        csv_name: "tcp_mem_peak_reader_mib",
        md_name: "peak TCP mem, reader host (MiB)",
        value: |s| s.tcp_mem_peak_reader_bytes,
        scale: MIB,
        decimals: 4,
        compare: false,
    },
    Column {
        csv_name: "rtt_slow_mean_ms",
        md_name: "RTT slow mean (ms)",
        value: |s| s.rtt_slow_mean_ms,
        scale: 1.0,
        decimals: 3,
        compare: true,
    },
    Column {
        csv_name: "rtt_min_ms",
        md_name: "RTT min (ms)",
        value: |s| s.rtt_min_ms,
        scale: 1.0,
        decimals: 3,
        compare: false,
    },
];

fn status(s: &RunSummary) -> &'static str {
    if s.partial.is_some() {
        "partial"
    } else {
        "complete"
    }
}

fn number(value: Option<f64>, scale: f64, decimals: usize) -> String {
    value.map_or(String::new(), |v| format!("{:.*}", decimals, v / scale))
}

/// The CSV table; empty cells where a figure could not be computed.
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
    header.extend(COLUMNS.iter().map(|c| c.csv_name));
    header.push("baseline");
    writer.write_record(&header)?;
    for (s, baseline) in summaries.iter().zip(baselines) {
        let set = &s.settings;
        let mut row = vec![
            s.label.clone(),
            status(s).into(),
            s.partial.clone().unwrap_or_default(),
            set.flows.to_string(),
            set.lowat_text(),
            set.lowat.map_or(String::new(), |(b, _)| b.to_string()),
            set.sndbuf_bytes.map_or(String::new(), |b| b.to_string()),
            set.congestion.clone().unwrap_or_default(),
            number(set.path_rtt_ms, 1.0, 3),
            number(set.path_rate_bps, MBIT, 3),
            format!("{:.3}", s.duration_s),
        ];
        row.extend(
            COLUMNS
                .iter()
                .map(|c| number((c.value)(s), c.scale, c.decimals)),
        );
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
    header.extend(COLUMNS.iter().map(|c| c.md_name));
    header.push("compared with");
    let _ = writeln!(md, "| {} |", header.join(" | "));
    let _ = writeln!(md, "|{}", "---|".repeat(header.len()));
    for (i, s) in summaries.iter().enumerate() {
        let mut cells = vec![
            s.label.replace('|', "/"),
            status(s).into(),
            s.settings.key(),
            s.settings
                .path_text()
                .unwrap_or_else(|| "not recorded".into()),
        ];
        for c in COLUMNS {
            let value = (c.value)(s);
            let mut cell = number(value, c.scale, c.decimals.min(2));
            if cell.is_empty() {
                cell = "n/a".into();
            }
            match baselines[i] {
                Some(b) if b == i && c.compare => cell.push_str(" (baseline)"),
                Some(b) if c.compare => {
                    if let Some(change) = change_percent(value, (c.value)(&summaries[b])) {
                        let _ = write!(cell, " ({})", human::change(change));
                    }
                }
                _ => {}
            }
            cells.push(cell);
        }
        cells.push(baselines[i].map_or("none".into(), |b| summaries[b].label.clone()));
        let _ = writeln!(md, "| {} |", cells.join(" | "));
    }
    md.push('\n');
    for s in summaries.iter().filter(|s| s.partial.is_some()) {
        let _ = writeln!(
            md,
            "- **{}** is partial: {}",
            s.label,
            s.partial.as_deref().unwrap_or_default()
        );
    }
    md.push_str(
        "\nDefinitions: goodput of a phase is what the reader read in that phase over the \
         phase's length. Queued bytes are the sender's `wmem_queued` (send queue memory) \
         summed over flows at each sample; \"slow\" figures cover samples inside slow \
         phases. Not sent is `notsent_bytes`, summed the same way. TCP memory is \
         `/proc/net/sockstat` mem times the page size; it is global across network \
         namespaces, so on one machine both hosts' figures are the same host's. RTT is the \
         sender's smoothed RTT. Changes in brackets are against the run named in \"compared with\": by default the run with the kernel's default lowat on the same path (`--baseline LABEL` picks one).\n",
    );
    md
}

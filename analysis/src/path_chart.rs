//! `path.png` as data: send-buffer bloat against the path's RTT, one line per setting, each
//! point a configuration's mean with its 95% interval, and the path's bandwidth-delay
//! product as a line, so queued bytes read against what the path needs in flight.

use crate::chart::{Axis, Figure, Line, Panel, GREY, PALETTE};
use crate::configs::Configuration;
use crate::human::{self, MIB};
use crate::metrics::metric;
use crate::stats::Estimate;
use crate::summary::{RunSummary, Scope};
use crate::verdict;

/// The path figure over `scope`.
pub fn path_figure(summaries: &[RunSummary], configs: &[Configuration], scope: Scope) -> Figure {
    let rtt = |c: &Configuration| -> Option<f64> {
        let rtts: Vec<f64> = c
            .runs
            .iter()
            .filter_map(|&r| summaries[r].path_rtt_ms())
            .collect();
        Estimate::of(&rtts).map(|e| e.mean)
    };
    let x_max = configs.iter().filter_map(rtt).fold(1.0, f64::max) * 1.05;
    let measured = summaries.iter().any(|s| s.settings.path_rtt_ms.is_none());
    let x_label = if measured {
        "path RTT (ms; lab setting, else lowest measured)"
    } else {
        "path RTT (ms, lab setting)"
    };
    let mut keys: Vec<String> = Vec::new();
    for c in configs {
        let key = c.settings(summaries).key();
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let bdp = bdp_lines(summaries, x_max);
    let panel = |title: &str, column: &str| {
        let m = metric(column);
        let mut lines: Vec<Line> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| {
                let mut points: Vec<(f64, f64, Option<(f64, f64)>)> = configs
                    .iter()
                    .filter(|c| c.settings(summaries).key() == *key)
                    .filter_map(|c| {
                        let e = Estimate::of(&verdict::values(summaries, c, m, scope))?;
                        Some((rtt(c)?, e.mean / MIB, e.ci.map(|(l, h)| (l / MIB, h / MIB))))
                    })
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                let mut line = Line::new(
                    key.clone(),
                    PALETTE[i % PALETTE.len()],
                    points.iter().map(|p| (p.0, p.1)).collect(),
                );
                line.markers = true;
                line.intervals = points
                    .iter()
                    .filter_map(|p| p.2.map(|(l, h)| (p.0, l, h)))
                    .collect();
                line
            })
            .collect();
        lines.extend(bdp.iter().cloned());
        Panel {
            title: title.into(),
            x_label: x_label.into(),
            x_range: (0.0, x_max),
            left: Axis {
                label: format!("{} (MiB)", m.title),
                lines,
                ..Axis::default()
            },
            right: None,
            shade: Vec::new(),
        }
    };
    let cycles = summaries.iter().map(RunSummary::cycles).max().unwrap_or(0);
    Figure {
        header: vec![
            format!(
                "Send-buffer bloat against path RTT: {} configurations, one line per setting, figures {}",
                configs.len(),
                scope.text(cycles)
            ),
            "Each point is a configuration's mean with its 95% interval; the dashed grey line is the path's bandwidth-delay product".into(),
        ],
        warning: None,
        panels: vec![
            panel(
                "Peak sender queued bytes (wmem_queued, sum over flows), slow phases",
                "slow_queued_peak_mib",
            ),
            panel(
                "Peak host TCP memory, sender host",
                "tcp_mem_peak_sender_mib",
            ),
        ],
    }
}

/// One bandwidth-delay product line per path rate the lab recorded: rate x RTT / 8 bytes.
fn bdp_lines(summaries: &[RunSummary], x_max: f64) -> Vec<Line> {
    let mut rates: Vec<f64> = Vec::new();
    for rate in summaries.iter().filter_map(|s| s.settings.path_rate_bps) {
        if !rates.contains(&rate) {
            rates.push(rate);
        }
    }
    rates
        .into_iter()
        .map(|rate| {
            let bdp_mib = |rtt_ms: f64| rate / 8.0 * rtt_ms / 1000.0 / MIB;
            Line::new(
                format!("bandwidth-delay product at {}", human::rate(rate)),
                GREY,
                vec![(0.0, 0.0), (x_max, bdp_mib(x_max))],
            )
            .dashed()
        })
        .collect()
}

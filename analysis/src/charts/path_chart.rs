//! `path.png` as data: send-buffer bloat against the path's RTT, one line per setting, each
//! point a configuration's mean with its 95% interval, and the path's bandwidth-delay
//! product as a line, so queued bytes read against what the path needs in flight.

use crate::charts::chart::{Axis, Figure, Line, Panel, GREY, PALETTE};
use crate::figures::metrics::metric;
use crate::figures::stats::Estimate;
use crate::human::{self, MIB};
use crate::load::configs::{self, Configuration};
use crate::load::summary::{RunSummary, Scope};
use crate::verdicts::verdict;

/// The path figure over `scope`.
pub fn path_figure(summaries: &[RunSummary], configs: &[Configuration], scope: Scope) -> Figure {
    let rtt = |c: &Configuration| -> Option<f64> {
        let rtts: Vec<f64> = c
            .runs
            .iter()
            .filter_map(|&r| summaries[r].path_rtt_ms())
            .collect();
        Estimate::of(&rtts, crate::figures::stats::Range::NonNegative).map(|e| e.mean)
    };
    let x_max = configs.iter().filter_map(rtt).fold(1.0, f64::max) * 1.05;
    let measured = summaries.iter().any(|s| s.settings.path_rtt_ms.is_none());
    let x_label = if measured {
        "path RTT (ms; lab setting, else lowest measured)"
    } else {
        "path RTT (ms, lab setting)"
    };
    let (keys, names) = setting_keys(summaries, configs);
    let bdp = bdp_lines(summaries, x_max);
    let panel = |title: &str, column: &str, axis: &str| {
        let m = metric(column);
        let mut lines: Vec<Line> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| {
                let on_line: Vec<&Configuration> = configs
                    .iter()
                    .filter(|c| c.settings(summaries).key() == *key)
                    .collect();
                setting_line(&names[i], PALETTE[i % PALETTE.len()], &on_line, |c| {
                    let e = Estimate::of(&verdict::values(summaries, c, m, scope), m.range())?;
                    Some(PathPoint {
                        rtt_ms: rtt(c)?,
                        mean: e.mean / MIB,
                        ci: e.ci.map(|(l, h)| (l / MIB, h / MIB)),
                    })
                })
            })
            .collect();
        lines.extend(bdp.iter().cloned());
        Panel {
            key: column.into(),
            configurations: configs.iter().map(|c| c.name.clone()).collect(),
            title: title.into(),
            x_label: x_label.into(),
            x_range: (0.0, x_max),
            left: Axis {
                label: format!("{axis} (MiB)"),
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
            bdp_words(&bdp).into(),
        ],
        warning: None,
        panels: vec![
            panel(
                "Peak sender queued bytes (wmem_queued, sum over flows), slow phases",
                "slow_queued_peak_mib",
                "peak queued",
            ),
            panel(
                "Peak host TCP memory, sender host",
                "tcp_mem_peak_sender_mib",
                "peak TCP memory",
            ),
        ],
    }
}

/// The settings apart from the path, one line each, in order of first appearance: their
/// keys, and their names by what sets them apart (not every setting they share).
fn setting_keys(summaries: &[RunSummary], configs: &[Configuration]) -> (Vec<String>, Vec<String>) {
    let mut keys: Vec<String> = Vec::new();
    let mut firsts = Vec::new();
    for c in configs {
        let key = c.settings(summaries).key();
        if !keys.contains(&key) {
            keys.push(key);
            firsts.push(c.settings(summaries));
        }
    }
    let names = configs::varying(&firsts, false);
    (keys, names)
}

/// A configuration's mean (MiB) at its path's RTT, with its interval.
struct PathPoint {
    rtt_ms: f64,
    mean: f64,
    ci: Option<(f64, f64)>,
}

/// One setting's configurations, in order of RTT, as a line with dots and intervals.
fn setting_line(
    key: &str,
    color: (u8, u8, u8),
    configs: &[&Configuration],
    point: impl Fn(&Configuration) -> Option<PathPoint>,
) -> Line {
    let mut points: Vec<PathPoint> = configs.iter().filter_map(|c| point(c)).collect();
    points.sort_by(|a, b| a.rtt_ms.total_cmp(&b.rtt_ms));
    let mut line = Line::new(
        key,
        color,
        points.iter().map(|p| (p.rtt_ms, p.mean)).collect(),
    );
    line.markers = true;
    line.intervals = points
        .iter()
        .filter_map(|p| p.ci.map(|(l, h)| (p.rtt_ms, l, h)))
        .collect();
    line
}

/// What the picture's lines are; the dashed grey line is promised only where one is drawn.
fn bdp_words(bdp: &[Line]) -> &'static str {
    if bdp.is_empty() {
        "Each point is a configuration's mean with its 95% interval; no path rate is known, so no bandwidth-delay product is drawn"
    } else {
        "Each point is a configuration's mean with its 95% interval; the dashed grey line is the path's bandwidth-delay product"
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

//! The picture of a configuration's groups of flows on one axis each: what TCP delivered
//! to each group per second, and each group's not-sent bytes, one colour per group, over
//! the session of the configuration's first run (its slow phases shaded).

use crate::charts::chart::{
    byte_unit, rate_unit, Axis, Bound, Family, Figure, Line, Panel, PALETTE,
};
use crate::figures::groups::ConfigGroups;
use crate::load::configs::Configuration;
use crate::load::groups::RunGroup;
use crate::load::run_series::RunSeries;
use crate::load::summary::RunSummary;

/// The picture of `config`'s groups.
pub fn groups_figure(
    summaries: &[RunSummary],
    series: &[RunSeries],
    configs: &[Configuration],
    config: &ConfigGroups,
) -> Figure {
    let c = &configs[config.config];
    let run = c.runs[0];
    let groups = &summaries[run].groups;
    let x_end = groups
        .iter()
        .flat_map(|g| g.goodput_bps.iter().chain(&g.notsent_bytes))
        .map(|p| p.0)
        .fold(0.0, f64::max);
    let shade = series[run].slow.clone();
    let rate = rate_unit(largest(groups, |g| &g.goodput_bps));
    let bytes = byte_unit(largest(groups, |g| &g.notsent_bytes));
    let panel = |key: &str, title: &str, left: Axis| Panel {
        key: key.into(),
        configurations: vec![c.name.clone()],
        title: title.into(),
        x_label: "time (s)".into(),
        x_range: (0.0, x_end),
        left,
        right: None,
        shade: shade.clone(),
    };
    let runs = match c.runs.len() {
        1 => String::new(),
        n => format!(" (its first run of {n})"),
    };
    Figure {
        header: vec![
            format!("Groups of flows: {}{runs}", c.name),
            "One colour per group; slow phases shaded".into(),
        ],
        warning: None,
        panels: vec![
            panel(
                "group_goodput",
                "What TCP delivered to each group's flows",
                Axis {
                    label: format!("rate ({})", rate.name),
                    lines: lines(groups, |g| &g.goodput_bps, rate.scale),
                    unit: Some((rate, Family::Rate)),
                    bound: Bound::Rate {
                        path: summaries[run]
                            .settings
                            .path_rate_bps
                            .map(|bps| bps / rate.scale),
                    },
                    ..Axis::default()
                },
            ),
            panel(
                "group_unsent",
                "Each group's bytes written but not yet sent, summed over its flows",
                Axis {
                    label: format!("bytes ({})", bytes.name),
                    lines: lines(groups, |g| &g.notsent_bytes, bytes.scale),
                    unit: Some((bytes, Family::Bytes)),
                    ..Axis::default()
                },
            ),
        ],
    }
}

/// One of a group's series over time.
type Points = fn(&RunGroup) -> &[(f64, f64)];

/// The largest value of `points` over every group.
fn largest(groups: &[RunGroup], points: Points) -> f64 {
    groups
        .iter()
        .flat_map(|g| points(g).iter().map(|p| p.1))
        .fold(0.0, f64::max)
}

/// A line per group of `points` divided by `scale`, one colour each.
fn lines(groups: &[RunGroup], points: Points, scale: f64) -> Vec<Line> {
    groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let values = points(g).iter().map(|&(t, v)| (t, v / scale)).collect();
            Line::new(
                format!("group {i}: {}", g.name),
                PALETTE[i % PALETTE.len()],
                values,
            )
        })
        .collect()
}

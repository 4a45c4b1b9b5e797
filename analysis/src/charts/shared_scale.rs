//! Where a y axis ends, and one y-scale for a panel across the pictures of a report.
//!
//! An axis that tells the truth ends near what matters, not at one sample: a rate near the
//! path's rate when it is known (else at the 99th percentile of what is drawn), a log axis
//! within a decade above its largest value, a wait never beyond the session, a share at
//! 100%. What runs above is clipped to the top, marked, and counted in the legend.
//! The runs' pictures are read side by side, so each panel takes one unit and one range over
//! every run (a 7 MiB and a 30 MiB receive window drawn to the same height would mislead).

use std::collections::BTreeMap;

use crate::charts::chart::{Axis, Bound, Figure, Line, Panel, Scale, Weight, GREY};

/// Room above the largest value on a linear axis, so a line does not run along the frame.
const HEADROOM: f64 = 1.05;
/// A known path rate's axis ends this far above the rate: goodput at the rate stays visible.
const RATE_ROOM: f64 = 1.2;
/// Decades above the largest value a log axis leaves (10^0.2 = 1.6x).
const LOG_ROOM_DECADES: f64 = 0.2;
/// The quantile of what is drawn that ends a rate axis when the path's rate is unknown.
const RATE_QUANTILE: f64 = 0.99;

/// The top of a rate axis: near the path's rate when known, else a high quantile of the
/// values drawn (one spike never sets it).
pub fn rate_top(values: &[f64], path: Option<f64>) -> f64 {
    match path {
        Some(rate) if rate > 0.0 => rate * RATE_ROOM,
        _ => quantile(values, RATE_QUANTILE) * HEADROOM,
    }
}

/// The top of a log axis: within a decade above the largest value.
pub fn log_top(max: f64) -> f64 {
    max * 10f64.powf(LOG_ROOM_DECADES)
}

/// The `q` quantile of the finite values (nearest rank); 0 for none.
fn quantile(values: &[f64], q: f64) -> f64 {
    let mut finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.is_empty() {
        return 0.0;
    }
    finite.sort_by(f64::total_cmp);
    let rank = (q * finite.len() as f64).ceil() as usize;
    finite[rank.clamp(1, finite.len()) - 1]
}

/// The top the axis's kind allows on a linear scale.
fn linear_top(axis: &Axis) -> f64 {
    let max = axis.max();
    let top = match axis.bound {
        Bound::Free => max * HEADROOM,
        Bound::Rate { path } => rate_top(&axis.values().collect::<Vec<_>>(), path),
        Bound::Share => 100.0,
        Bound::Wait { session } => (max * HEADROOM).min(session),
    };
    if top > 0.0 {
        top
    } else {
        1.0
    }
}

/// A log axis's range: a little below the smallest value, within a decade above the
/// largest, and for a wait never beyond the session.
fn log_range(axis: &Axis) -> (f64, f64) {
    let max = axis.max();
    let Some(min) = axis.min_positive().filter(|_| max > 0.0) else {
        return (0.1, 1.0);
    };
    let min = min.min(max);
    let decades = (max / min).log10().max(1.0);
    let bottom = min / 10f64.powf(0.05 * decades);
    let top = match axis.bound {
        Bound::Wait { session } => log_top(max).min(session),
        _ => log_top(max),
    };
    (bottom, top.max(bottom * 10.0).max(max.min(top)))
}

/// The range an axis is drawn with: the one fixed from outside, else its own by its rules.
pub fn natural_range(axis: &Axis) -> (f64, f64) {
    if let Some(range) = axis.range {
        return range;
    }
    match axis.scale {
        Scale::Linear => (0.0, linear_top(axis)),
        Scale::Log => log_range(axis),
    }
}

/// Fixes the axis's range by its rules; values above the top are drawn at the top, marked
/// by grey triangles, and counted in the legend ("3 samples above the axis, clipped").
pub fn clip(axis: &mut Axis) {
    let (bottom, top) = natural_range(axis);
    let mut marks = Vec::new();
    for line in &mut axis.lines {
        for p in &mut line.points {
            if p.1 > top {
                marks.push((p.0, top));
                p.1 = top;
            }
        }
    }
    for p in axis.bands.iter_mut().flat_map(|b| b.points.iter_mut()) {
        p.2 = p.2.min(top);
        p.1 = p.1.min(top);
    }
    if !marks.is_empty() {
        let label = format!("{} samples above the axis, clipped to its top", marks.len());
        axis.lines
            .push(Line::new(label, GREY, marks).weighted(Weight::Clipped));
    }
    axis.range = Some((bottom, top));
}

/// Which axis of a panel: its left, or its right.
fn axis(panel: &Panel, right: bool) -> Option<&Axis> {
    if right {
        panel.right.as_ref()
    } else {
        Some(&panel.left)
    }
}

fn axis_mut(panel: &mut Panel, right: bool) -> Option<&mut Axis> {
    if right {
        panel.right.as_mut()
    } else {
        Some(&mut panel.left)
    }
}

/// Gives the axes of panels that answer one question (their `key`), on the same side and
/// scale, across `figures` one unit and one range: the widest any of them needs.
pub fn share_ranges(figures: &mut [Figure]) {
    let mut groups: BTreeMap<(String, bool, bool), Vec<(usize, usize)>> = BTreeMap::new();
    for (f, figure) in figures.iter().enumerate() {
        for (p, panel) in figure.panels.iter().enumerate() {
            for right in [false, true] {
                if let Some(a) = axis(panel, right) {
                    let key = (panel.key.clone(), right, a.scale == Scale::Log);
                    groups.entry(key).or_default().push((f, p));
                }
            }
        }
    }
    for ((_, right, _), members) in groups {
        if members.len() > 1 {
            share_group(figures, &members, right);
        }
    }
}

fn share_group(figures: &mut [Figure], members: &[(usize, usize)], right: bool) {
    // One unit: the one the largest value of the group asks for.
    let first = axis(&figures[members[0].0].panels[members[0].1], right).and_then(|a| a.unit);
    if let Some((_, family)) = first {
        let largest = members
            .iter()
            .filter_map(|&m| {
                let a = axis(&figures[m.0].panels[m.1], right)?;
                Some(a.max() * a.unit?.0.scale)
            })
            .fold(0.0, f64::max);
        let unit = family.pick(largest);
        for &(f, p) in members {
            if let Some(a) = axis_mut(&mut figures[f].panels[p], right) {
                a.rescale(unit);
            }
        }
    }
    let mut range: Option<(f64, f64)> = None;
    for &(f, p) in members {
        let panel = &figures[f].panels[p];
        let Some(a) = axis(panel, right) else {
            continue;
        };
        let (lo, hi) = natural_range(a);
        range = Some(range.map_or((lo, hi), |(l, h)| (l.min(lo), h.max(hi))));
    }
    for &(f, p) in members {
        if let Some(a) = axis_mut(&mut figures[f].panels[p], right) {
            a.range = range;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charts::chart::{byte_unit, Family, BLUE};
    use crate::human::MIB;

    fn figure(window_mib: f64) -> Figure {
        let unit = byte_unit(window_mib * MIB);
        let value = window_mib * MIB / unit.scale;
        Figure {
            header: vec!["run".into()],
            warning: None,
            panels: vec![Panel {
                key: "window".into(),
                configurations: Vec::new(),
                title: "Receive window".into(),
                x_label: "s".into(),
                x_range: (0.0, 1.0),
                left: Axis {
                    label: format!("bytes ({})", unit.name),
                    lines: vec![Line::new("rcv_wnd", BLUE, vec![(0.0, value)])],
                    unit: Some((unit, Family::Bytes)),
                    ..Axis::default()
                },
                right: None,
                shade: Vec::new(),
            }],
        }
    }

    fn rate_axis(values: &[f64], path: Option<f64>) -> Axis {
        let points = values.iter().enumerate().map(|(i, &v)| (i as f64, v));
        Axis {
            label: "rate (Mbit/s)".into(),
            lines: vec![Line::new("goodput", BLUE, points.collect())],
            bound: Bound::Rate { path },
            ..Axis::default()
        }
    }

    #[test]
    fn a_known_path_rate_ends_the_axis_and_spikes_are_clipped_and_counted() {
        // A 1000 Mbit/s path: slow phases at 50, a fast phase near 940, two drain spikes.
        let mut values = vec![50.0; 40];
        values.extend([940.0; 20]);
        values.extend([2072.0, 7566.0]);
        let mut axis = rate_axis(&values, Some(1000.0));
        clip(&mut axis);
        assert_eq!(axis.range, Some((0.0, 1200.0)));
        let marks = axis.lines.last().unwrap();
        assert_eq!(marks.weight, Weight::Clipped);
        assert_eq!(marks.label, "2 samples above the axis, clipped to its top");
        assert_eq!(marks.points, vec![(60.0, 1200.0), (61.0, 1200.0)]);
        assert!(axis.lines[0].points.iter().all(|p| p.1 <= 1200.0));
        // What was under the top is untouched.
        assert_eq!(axis.lines[0].points[45].1, 940.0);
    }

    #[test]
    fn an_unknown_rate_ends_at_the_99th_percentile_never_at_one_sample() {
        // 200 samples from 1 to 200 and one spike of 100,000: p99 is 199 of the 201.
        let mut values: Vec<f64> = (1..=200).map(f64::from).collect();
        values.push(100_000.0);
        let axis = rate_axis(&values, None);
        let (_, top) = natural_range(&axis);
        assert_eq!(top, 199.0 * HEADROOM);
        assert_eq!(rate_top(&[], None), 0.0);
    }

    #[test]
    fn a_share_ends_at_100_and_a_wait_at_the_session() {
        let share = Axis {
            lines: vec![Line::new("rwnd", BLUE, vec![(0.0, 99.0), (1.0, 100.4)])],
            bound: Bound::Share,
            ..Axis::default()
        };
        assert_eq!(natural_range(&share), (0.0, 100.0));
        // Waits up to 5.9 s in a 6 s session: the axis stops at 6,000 ms.
        let wait = Axis {
            lines: vec![Line::new("wait", BLUE, vec![(0.0, 2.0), (1.0, 5900.0)])],
            bound: Bound::Wait { session: 6000.0 },
            ..Axis::default()
        };
        assert_eq!(natural_range(&wait), (0.0, 6000.0));
    }

    #[test]
    fn a_log_axis_ends_within_a_decade_above_its_largest_value() {
        let mut wait = Axis {
            lines: vec![Line::new("wait", BLUE, vec![(0.0, 0.2), (1.0, 15_000.0)])],
            bound: Bound::Wait { session: 1e9 },
            ..Axis::default()
        };
        wait.fit_scale();
        let (bottom, top) = natural_range(&wait);
        assert!(bottom < 0.2, "{bottom}");
        assert!(top > 15_000.0 && top <= 150_000.0, "{top}");
        // And never past the session: 16 s.
        wait.bound = Bound::Wait { session: 16_000.0 };
        assert_eq!(natural_range(&wait).1, 16_000.0);
    }

    #[test]
    fn runs_share_one_unit_and_the_widest_range() {
        // 0.5 MiB is drawn in KiB on its own, 30 MiB in MiB.
        let mut figures = vec![figure(0.5), figure(30.0)];
        assert_eq!(figures[0].panels[0].left.label, "bytes (KiB)");
        share_ranges(&mut figures);
        let (small, large) = (&figures[0].panels[0].left, &figures[1].panels[0].left);
        assert_eq!(small.label, "bytes (MiB)");
        assert_eq!(small.lines[0].points[0].1, 0.5);
        assert_eq!(small.range, large.range);
        let (bottom, top) = small.range.unwrap();
        assert_eq!(bottom, 0.0);
        assert!(top >= 30.0, "{top}");
    }
}

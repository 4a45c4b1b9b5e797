//! One y-scale for a panel across the pictures of a report: the runs' pictures are read
//! side by side, so each panel takes one unit and one range over every run (a 7 MiB and a
//! 30 MiB receive window drawn to the same height would mislead the eye).

use std::collections::BTreeMap;

use crate::charts::chart::{Axis, Figure, Panel, Scale};
use crate::charts::draw::{legend_rows, natural_range};

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
        let (lo, hi) = natural_range(a, legend_rows(panel));
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
    use crate::charts::chart::{byte_unit, Family, Line, BLUE};
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

//! What a chart shows, as plain data: lines, bands and panels already in display units.
//! Building these is pure; `draw` only renders them.

use crate::human::{MBIT, MIB};

/// Colours told apart by colour-blind readers too (Okabe and Ito).
pub const BLUE: (u8, u8, u8) = (0, 114, 178);
pub const ORANGE: (u8, u8, u8) = (230, 159, 0);
pub const GREEN: (u8, u8, u8) = (0, 158, 115);
pub const VERMILLION: (u8, u8, u8) = (213, 94, 0);
pub const PURPLE: (u8, u8, u8) = (204, 121, 167);
pub const SKY: (u8, u8, u8) = (86, 180, 233);
pub const GREY: (u8, u8, u8) = (90, 90, 90);
pub const PALETTE: [(u8, u8, u8); 7] = [BLUE, VERMILLION, GREEN, ORANGE, PURPLE, SKY, GREY];

#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub label: String,
    pub color: (u8, u8, u8),
    /// A point with a NaN y is a gap: the line breaks there.
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
    /// Draw a dot at every point (for few points, as in charts across runs).
    pub markers: bool,
    /// A vertical interval at some points: (x, low, high).
    pub intervals: Vec<(f64, f64, f64)>,
    /// How the line is drawn: one run among several (faint), a mean (bold), a sparse
    /// series (points, no line), a lower bound (hollow points).
    pub weight: Weight,
}

/// How heavily a line is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Weight {
    #[default]
    Normal,
    /// One run of a configuration, behind its mean.
    Faint,
    /// A configuration's mean over its runs.
    Bold,
    /// Filled dots only: a series sampled too sparsely for a line (every 0.3-0.5 s).
    Points,
    /// Hollow dots only: lower bounds ("at least this long"), a wait still running.
    Hollow,
    /// Triangles at the axis's top: values above it, clipped (`shared_scale::clip`).
    Clipped,
}

impl Line {
    pub fn new(label: impl Into<String>, color: (u8, u8, u8), points: Vec<(f64, f64)>) -> Self {
        Line {
            label: label.into(),
            color,
            points,
            dashed: false,
            markers: false,
            intervals: Vec::new(),
            weight: Weight::Normal,
        }
    }

    pub fn dashed(mut self) -> Self {
        self.dashed = true;
        self
    }

    pub fn weighted(mut self, weight: Weight) -> Self {
        self.weight = weight;
        self
    }
}

/// A shaded range between a low and a high value at each x.
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    pub label: String,
    pub color: (u8, u8, u8),
    /// (x, low, high)
    pub points: Vec<(f64, f64, f64)>,
}

/// How an axis spaces its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scale {
    #[default]
    Linear,
    /// Each power of ten takes the same height: for values that span decades.
    Log,
}

/// One y axis and what is drawn against it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Axis {
    /// The quantity with its unit, e.g. "bytes (MiB)".
    pub label: String,
    pub lines: Vec<Line>,
    pub bands: Vec<Band>,
    pub scale: Scale,
    /// A range fixed from outside (the same across the runs of a report), instead of the
    /// one this axis's own values need: (bottom, top) in display units.
    pub range: Option<(f64, f64)>,
    /// The display unit of its values, so a shared range can bring axes to one unit.
    pub unit: Option<(Unit, Family)>,
    /// What the values are, which decides where the axis may end (`shared_scale::top`).
    pub bound: Bound,
}

/// What an axis's values are, for the rule that ends it (all in the axis's display unit).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Bound {
    /// Anything else: a little above the largest value.
    #[default]
    Free,
    /// A rate: near the path's rate when it is known, else a high quantile of what is drawn.
    Rate { path: Option<f64> },
    /// A share of time in percent: never above 100.
    Share,
    /// A wait: never beyond the session's length.
    Wait { session: f64 },
}

/// Which units an axis may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Bytes,
    Rate,
}

impl Family {
    /// The unit that shows values up to `max` (in base units) best.
    pub fn pick(self, max: f64) -> Unit {
        match self {
            Family::Bytes => byte_unit(max),
            Family::Rate => rate_unit(max),
        }
    }
}

impl Axis {
    /// Every value drawn against this axis (NaN gaps included).
    pub(crate) fn values(&self) -> impl Iterator<Item = f64> + '_ {
        let lines = self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
        let bands = self
            .bands
            .iter()
            .flat_map(|b| b.points.iter().flat_map(|p| [p.1, p.2]));
        lines.chain(bands)
    }

    /// The smallest value above zero, where a log axis starts.
    pub fn min_positive(&self) -> Option<f64> {
        self.values().filter(|v| *v > 0.0).min_by(f64::total_cmp)
    }

    /// Log when the values above zero span more than a decade (the largest over ten times
    /// the smallest), so a slow phase's seconds do not flatten a fast phase's milliseconds;
    /// linear otherwise.
    pub fn fitting_scale(&self) -> Scale {
        match self.min_positive() {
            Some(min) if self.max() > 10.0 * min => Scale::Log,
            _ => Scale::Linear,
        }
    }

    /// Takes the scale that fits and says which in the label; on a log scale a value of
    /// zero or less, which it cannot show, becomes a gap.
    pub fn fit_scale(&mut self) {
        self.scale = self.fitting_scale();
        let name = match self.scale {
            Scale::Linear => "linear scale",
            Scale::Log => "log scale",
        };
        self.label = format!("{}, {name}", self.label);
        if self.scale == Scale::Log {
            let gap = |v: &mut f64| {
                if *v <= 0.0 {
                    *v = f64::NAN;
                }
            };
            self.lines
                .iter_mut()
                .flat_map(|l| l.points.iter_mut())
                .for_each(|p| gap(&mut p.1));
            for p in self.bands.iter_mut().flat_map(|b| b.points.iter_mut()) {
                gap(&mut p.1);
                gap(&mut p.2);
            }
        }
    }

    /// Takes another unit of the same family: every value and the label's unit name.
    pub fn rescale(&mut self, to: Unit) {
        let Some((from, family)) = self.unit else {
            return;
        };
        if from == to {
            return;
        }
        let factor = from.scale / to.scale;
        for p in self.lines.iter_mut().flat_map(|l| l.points.iter_mut()) {
            p.1 *= factor;
        }
        for line in &mut self.lines {
            for i in &mut line.intervals {
                (i.1, i.2) = (i.1 * factor, i.2 * factor);
            }
        }
        for p in self.bands.iter_mut().flat_map(|b| b.points.iter_mut()) {
            (p.1, p.2) = (p.1 * factor, p.2 * factor);
        }
        if let Bound::Rate { path: Some(rate) } = &mut self.bound {
            *rate *= factor;
        }
        self.label = self
            .label
            .replace(&format!("({})", from.name), &format!("({})", to.name));
        self.unit = Some((to, family));
    }

    /// The largest value to fit on this axis.
    pub fn max(&self) -> f64 {
        let lines = self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
        let bands = self.bands.iter().flat_map(|b| b.points.iter().map(|p| p.2));
        lines.chain(bands).fold(0.0, f64::max)
    }
}

/// One chart with a shared x axis; a right axis holds per-flow figures when there are many.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// What the panel answers, for the manifest: `unsent`, `goodput`, `latency`.
    pub key: String,
    /// The configurations drawn in it (empty: the figure's own).
    pub configurations: Vec<String>,
    pub title: String,
    pub x_label: String,
    pub x_range: (f64, f64),
    pub left: Axis,
    pub right: Option<Axis>,
    /// Slow phases to shade.
    pub shade: Vec<(f64, f64)>,
}

/// A tall picture of one run: a header, then panels sharing the time axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub header: Vec<String>,
    /// Drawn in red under the header (a partial run says so here).
    pub warning: Option<String>,
    pub panels: Vec<Panel>,
}

/// A display unit: values are divided by `scale` and the axis says `name`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unit {
    pub scale: f64,
    pub name: &'static str,
}

pub fn byte_unit(max_bytes: f64) -> Unit {
    if max_bytes >= MIB {
        Unit {
            scale: MIB,
            name: "MiB",
        }
    } else {
        Unit {
            scale: 1024.0,
            name: "KiB",
        }
    }
}

pub fn rate_unit(max_bps: f64) -> Unit {
    if max_bps >= 10e9 {
        Unit {
            scale: 1e9,
            name: "Gbit/s",
        }
    } else {
        Unit {
            scale: MBIT,
            name: "Mbit/s",
        }
    }
}

pub const MS: Unit = Unit {
    scale: 1000.0,
    name: "ms",
};

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(values: &[f64]) -> Axis {
        let points = values.iter().enumerate().map(|(i, &v)| (i as f64, v));
        Axis {
            label: "time (ms)".into(),
            lines: vec![Line::new("residence", BLUE, points.collect())],
            ..Axis::default()
        }
    }

    #[test]
    fn a_log_scale_only_for_values_spanning_more_than_a_decade() {
        assert_eq!(axis(&[0.5, 3.0, 4.9]).fitting_scale(), Scale::Linear);
        assert_eq!(axis(&[0.5, 3.0, 5.1]).fitting_scale(), Scale::Log);
        assert_eq!(axis(&[2.0, 490.0]).fitting_scale(), Scale::Log);
        // Zero and gaps have no place on a log axis and do not count.
        assert_eq!(
            axis(&[0.0, 1.0, f64::NAN, 9.0]).fitting_scale(),
            Scale::Linear
        );
        assert_eq!(axis(&[]).fitting_scale(), Scale::Linear);
        // A band's low edge counts as much as a line.
        let mut banded = axis(&[1.0, 2.0]);
        banded.bands.push(Band {
            label: "p10-p90".into(),
            color: BLUE,
            points: vec![(0.0, 0.05, 1.5)],
        });
        assert_eq!(banded.fitting_scale(), Scale::Log);
    }

    #[test]
    fn the_label_names_the_scale_and_a_log_axis_leaves_zero_out() {
        let mut linear = axis(&[1.0, 2.0]);
        linear.fit_scale();
        assert_eq!(
            (linear.scale, linear.label.as_str()),
            (Scale::Linear, "time (ms), linear scale")
        );
        let mut log = axis(&[0.0, 0.2, 90.0]);
        log.fit_scale();
        assert_eq!(
            (log.scale, log.label.as_str()),
            (Scale::Log, "time (ms), log scale")
        );
        assert!(log.lines[0].points[0].1.is_nan());
        assert_eq!(log.lines[0].points[2].1, 90.0);
    }
}

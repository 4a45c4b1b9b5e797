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
        }
    }

    pub fn dashed(mut self) -> Self {
        self.dashed = true;
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

/// One y axis and what is drawn against it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Axis {
    /// The quantity with its unit, e.g. "bytes (MiB)".
    pub label: String,
    pub lines: Vec<Line>,
    pub bands: Vec<Band>,
    /// Values above this run off the top, so one wild series does not flatten the rest.
    pub cap: Option<f64>,
}

impl Axis {
    /// The largest value to fit on this axis.
    pub fn max(&self) -> f64 {
        let lines = self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
        let bands = self.bands.iter().flat_map(|b| b.points.iter().map(|p| p.2));
        let max = lines.chain(bands).fold(0.0, f64::max);
        self.cap.map_or(max, |cap| max.min(cap))
    }
}

/// One chart with a shared x axis; a right axis holds per-flow figures when there are many.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
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
#[derive(Debug, Clone, Copy)]
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

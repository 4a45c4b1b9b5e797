//! One picture per path with every configuration of it on the same axes, one panel per
//! question (the sender's memory, unsent bytes, the receive window, network goodput, a
//! write's wait): each run faint, each configuration's mean over its runs bold, as flent
//! and Cloudflare's post draw them. A second picture folds every cycle onto its fast
//! phase's start, so cycles read against each other.

use crate::charts::chart::{
    byte_unit, rate_unit, Axis, Bound, Family, Figure, Line, Panel, Unit, Weight, GREY, MS, PALETTE,
};
use crate::charts::shared_scale;
use crate::human;
use crate::load::configs::Configuration;
use crate::load::run_series::{Question, RunSeries, QUESTIONS};
use crate::load::series;
use crate::load::summary::RunSummary;

/// Shares kept in percent already.
const PERCENT: Unit = Unit {
    scale: 1.0,
    name: "%",
};

/// The runs of one path, by configuration.
pub struct PathRuns<'a> {
    pub path: String,
    pub summaries: &'a [RunSummary],
    pub series: &'a [RunSeries],
    pub configs: Vec<&'a Configuration>,
}

/// Where a run's points sit on the x axis: time since the run's start, or since the start
/// of each cycle's fast phase (one stretch per cycle).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alignment {
    Session,
    Cycle,
}

impl PathRuns<'_> {
    fn runs<'c>(&'c self, config: &'c Configuration) -> impl Iterator<Item = &'c RunSeries> + 'c {
        config.runs.iter().map(|&r| &self.series[r])
    }

    fn all(&self) -> impl Iterator<Item = &RunSeries> {
        self.configs.iter().flat_map(|c| self.runs(c))
    }

    /// The question every run of the path answers, or its stand-in where one did not
    /// record it; `None` where no run has either.
    fn answered(&self, question: Question) -> Option<Question> {
        // A wait still running is an answer too: a run whose every write stayed queued
        // has only lower bounds, and its panel is drawn with them.
        let has = |s: &RunSeries, q: Question| {
            !s.get(q).is_empty()
                || (q == Question::WriteWait && !s.get(Question::WriteWaitPending).is_empty())
        };
        let everywhere = |q: Question| self.all().all(|s| has(s, q));
        let anywhere = |q: Question| self.all().any(|s| has(s, q));
        if everywhere(question) {
            return Some(question);
        }
        match question.fallback() {
            Some(other) if anywhere(other) => Some(other),
            _ => anywhere(question).then_some(question),
        }
    }

    /// A run's stretches of one series: the whole run, or one per cycle from its start.
    fn stretches(&self, run: &RunSeries, q: Question, align: Alignment) -> Vec<Vec<(f64, f64)>> {
        let points = run.get(q);
        match align {
            Alignment::Session => vec![points.to_vec()],
            Alignment::Cycle => run
                .cycles
                .iter()
                .map(|&(start, length)| {
                    // A sample closes the interval before it: it belongs to the cycle
                    // holding that interval's middle.
                    let middle = |t: f64| t - run.interval_s / 2.0;
                    points
                        .iter()
                        .filter(|p| middle(p.0) >= start && middle(p.0) < start + length)
                        .map(|p| (p.0 - start, p.1))
                        .collect()
                })
                .collect(),
        }
    }
}

/// What a question's panel says: its title, the y axis's name and its unit family.
fn words(q: Question) -> (&'static str, &'static str) {
    match q {
        Question::SenderMemory => ("The sender's TCP memory: the sum over its network namespace (points: summed every 0.1-0.5 s)", "memory"),
        Question::SendQueues => ("The sender's send-queue memory (wmem_queued, sum over flows; the runs recorded no namespace sum)", "memory"),
        Question::Unsent => ("Bytes written but not yet sent (notsent_bytes, sum over flows)", "bytes"),
        Question::ReceiveWindow => ("The receive window the reader advertises (sum over flows)", "bytes"),
        Question::AdvertisedWindow => ("The receive window as the sender saw it advertised (snd_wnd, sum over flows): the reader's kernel gives no rcv_wnd (Linux 6.2 and later)", "bytes"),
        Question::Goodput => ("Network goodput: what TCP delivered to the reader (sum over flows; one sampling interval can pass the path's rate when TCP releases out-of-order data at once)", "rate"),
        Question::ReadingRate => ("What the reader read per second (the runs did not record what TCP delivered, so a drain after a slow phase can exceed the path's rate)", "rate"),
        Question::WriteWait | Question::WriteWaitPending => ("A write's wait in the send queue (median over flows; hollow points: writes still queued at a sample, waiting at least that long; dashed: the idle probe's round trip, the path without the send queue)", "wait"),
        Question::ProbeRtt => ("The idle probe's round trip (probe.csv)", "wait"),
        Question::RwndLimited => ("What limits the sender: the share of the flows' time the receiver's window held them back (rwnd_limited_us)", "share"),
        Question::SndbufLimited => ("What limits the sender: the share of the flows' time the send buffer held them back (sndbuf_limited_us)", "share"),
    }
}

/// The mean of the stretches at each bin of `bin_s` seconds: a configuration's bold line.
fn mean_line(stretches: &[Vec<(f64, f64)>], bin_s: f64) -> Vec<(f64, f64)> {
    let mut bins: std::collections::BTreeMap<i64, (f64, usize)> = Default::default();
    for p in stretches.iter().flatten().filter(|p| p.1.is_finite()) {
        let bin = bins
            .entry(series::tick_index(p.0, bin_s))
            .or_insert((0.0, 0));
        bin.0 += p.1;
        bin.1 += 1;
    }
    bins.into_iter()
        .map(|(i, (sum, n))| (i as f64 * bin_s, sum / n as f64))
        .collect()
}

fn gapped(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    series::with_gaps(points, |p| p.0, |x| (x, f64::NAN))
}

/// One configuration's lines on a question's panel: faint runs, the bold mean, and for a
/// write's wait the lower bounds of writes still queued.
fn config_lines(
    path: &PathRuns,
    index: usize,
    q: Question,
    align: Alignment,
    unit: Unit,
) -> Vec<Line> {
    let config = path.configs[index];
    let color = PALETTE[index % PALETTE.len()];
    let scaled = |points: &[(f64, f64)]| -> Vec<(f64, f64)> {
        points.iter().map(|p| (p.0, p.1 / unit.scale)).collect()
    };
    let stretches: Vec<Vec<(f64, f64)>> = path
        .runs(config)
        .flat_map(|run| path.stretches(run, q, align))
        .map(|s| scaled(&s))
        .collect();
    let faint = if q.is_sparse() {
        Weight::Points
    } else {
        Weight::Faint
    };
    let mut lines: Vec<Line> = stretches
        .iter()
        .map(|s| Line::new("", color, gapped(s.clone())).weighted(faint))
        .collect();
    let interval_s = path.runs(config).next().map_or(0.1, |r| r.interval_s);
    let bin_s = if q.is_sparse() {
        interval_s.max(0.5)
    } else {
        interval_s
    };
    let n = config.runs.len();
    let label = match n {
        1 => format!("{} (1 run)", config.name),
        n => format!("{}: mean of {n} runs", config.name),
    };
    let mean = mean_line(&stretches, bin_s);
    if !mean.is_empty() {
        lines.push(Line::new(label, color, gapped(mean)).weighted(Weight::Bold));
    }
    if q == Question::WriteWait {
        let probe: Vec<Vec<(f64, f64)>> = path
            .runs(config)
            .flat_map(|run| path.stretches(run, Question::ProbeRtt, align))
            .map(|s| scaled(&s))
            .collect();
        let mean = mean_line(&probe, bin_s);
        if !mean.is_empty() {
            let label = format!("{}: idle probe's round trip", config.name);
            lines.push(Line::new(label, color, gapped(mean)).dashed());
        }
        let pending: Vec<(f64, f64)> = path
            .runs(config)
            .flat_map(|run| path.stretches(run, Question::WriteWaitPending, align))
            .flat_map(|s| scaled(&s))
            .collect();
        if !pending.is_empty() {
            let label = format!("{}: still queued, at least (lower bound)", config.name);
            lines.push(Line::new(label, color, pending).weighted(Weight::Hollow));
        }
    }
    lines
}

/// The largest value of a question over the path, in base units (for the unit).
fn largest(path: &PathRuns, q: Question) -> f64 {
    path.all()
        .flat_map(|s| s.get(q).iter().map(|p| p.1))
        .fold(0.0, f64::max)
}

/// The panel of one question with every configuration of the path on it.
fn question_panel(path: &PathRuns, q: Question, align: Alignment, frame: &Frame) -> Panel {
    let (title, quantity) = words(q);
    let (unit, family) = match quantity {
        "rate" => (rate_unit(largest(path, q)), Some(Family::Rate)),
        "wait" => (MS, None),
        "share" => (PERCENT, None),
        _ => (byte_unit(largest(path, q)), Some(Family::Bytes)),
    };
    let mut lines: Vec<Line> = (0..path.configs.len())
        .flat_map(|i| config_lines(path, i, q, align, unit))
        .collect();
    if quantity == "rate" {
        lines.extend(rate_line(path, frame.x_end, unit));
    }
    let mut left = Axis {
        label: format!("{quantity} ({})", unit.name),
        lines,
        unit: family.map(|f| (unit, f)),
        bound: bound(path, quantity, unit),
        ..Axis::default()
    };
    if q == Question::WriteWait {
        left.fit_scale();
    }
    shared_scale::clip(&mut left);
    Panel {
        key: format!("{q:?}"),
        configurations: path.configs.iter().map(|c| c.name.clone()).collect(),
        title: title.into(),
        x_label: frame.x_label.into(),
        x_range: (0.0, frame.x_end),
        left,
        right: None,
        shade: frame.shade.clone(),
    }
}

/// What ends the axis of a quantity (`rate`, `wait`, `share`, bytes), in `unit`.
fn bound(path: &PathRuns, quantity: &str, unit: Unit) -> Bound {
    match quantity {
        "rate" => Bound::Rate {
            path: path_rate_bps(path).map(|bps| bps / unit.scale),
        },
        // Waits are drawn in ms.
        "wait" => Bound::Wait {
            session: session_s(path) * 1000.0,
        },
        "share" => Bound::Share,
        _ => Bound::Free,
    }
}

/// The path's rate as the lab set it, if it did.
fn path_rate_bps(path: &PathRuns) -> Option<f64> {
    let config = path.configs.first()?;
    path.summaries[config.runs[0]].settings.path_rate_bps
}

/// The longest session on the path: no wait drawn can be longer.
fn session_s(path: &PathRuns) -> f64 {
    path.all()
        .flat_map(|s| s.cycles.last().map(|c| c.0 + c.1))
        .fold(0.0, f64::max)
}

/// The path's rate as the lab set it, a dashed level line: goodput reads against it.
fn rate_line(path: &PathRuns, x_end: f64, unit: Unit) -> Option<Line> {
    let rate = path_rate_bps(path)?;
    let y = rate / unit.scale;
    let label = format!("the path's rate, {}", human::rate(rate));
    Some(Line::new(label, GREY, vec![(0.0, y), (x_end, y)]).dashed())
}

/// What the panels of one picture share.
struct Frame {
    x_label: &'static str,
    x_end: f64,
    shade: Vec<(f64, f64)>,
}

impl Frame {
    fn of(path: &PathRuns, align: Alignment) -> Frame {
        let first = path.all().next();
        match align {
            Alignment::Session => Frame {
                x_label: "time since session start (s)",
                x_end: session_s(path).max(1.0),
                shade: first.map_or(Vec::new(), |s| s.slow.clone()),
            },
            Alignment::Cycle => {
                let cycle = first.and_then(|s| s.cycles.first().copied());
                let relative = |s: &RunSeries| -> Vec<(f64, f64)> {
                    let Some((start, length)) = cycle else {
                        return Vec::new();
                    };
                    s.slow
                        .iter()
                        .filter(|p| p.0 >= start && p.0 < start + length)
                        .map(|p| (p.0 - start, p.1 - start))
                        .collect()
                };
                Frame {
                    x_label: "time since the cycle's fast phase started (s)",
                    x_end: path
                        .all()
                        .flat_map(|s| s.cycles.iter().map(|c| c.1))
                        .fold(1.0, f64::max),
                    shade: first.map_or(Vec::new(), relative),
                }
            }
        }
    }
}

/// The picture of one path: every question it has an answer for, all configurations
/// overlaid; `Cycle` folds each cycle onto its start.
pub fn path_overlay(path: &PathRuns, align: Alignment) -> Figure {
    let frame = Frame::of(path, align);
    let panels = QUESTIONS
        .iter()
        .filter_map(|&q| path.answered(q))
        .map(|q| question_panel(path, q, align, &frame))
        .collect();
    let names: Vec<&str> = path.configs.iter().map(|c| c.name.as_str()).collect();
    // The window is one of the project's three measurements: its absence is said.
    let warning = path
        .answered(Question::ReceiveWindow)
        .is_none()
        .then(|| NO_WINDOW.to_string());
    let what = match align {
        Alignment::Session => "over the session",
        Alignment::Cycle => "every cycle of every run, aligned at its fast phase's start",
    };
    Figure {
        header: vec![
            format!(
                "Path: {}. {} configurations on one axis, {what}",
                path.path,
                names.len()
            ),
            format!(
                "Configurations: {}. Faint: each run; bold: the configuration's mean; shaded: slow phases.",
                names.join("; ")
            ),
        ],
        warning,
        panels,
    }
}

/// Why a picture has no receive-window panel.
pub const NO_WINDOW: &str = "No receive-window panel: the reader's kernel gives no rcv_wnd (Linux 6.2 and later) and the sender's no snd_wnd (Linux 5.4 and later); the report's warnings say which kernels";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_is_over_the_runs_with_a_value_in_each_bin() {
        // Two runs sampled a little apart; the second has no sample at 0.2 s.
        let runs = vec![
            vec![(0.1, 2.0), (0.2, 4.0), (0.3, 6.0)],
            vec![(0.1004, 4.0), (0.2998, 10.0)],
        ];
        let mean = mean_line(&runs, 0.1);
        let rounded: Vec<(f64, f64)> = mean
            .iter()
            .map(|p| ((p.0 * 10.0).round() / 10.0, p.1))
            .collect();
        assert_eq!(rounded, [(0.1, 3.0), (0.2, 4.0), (0.3, 8.0)]);
        // A gap in the record stays a gap, not a value.
        let holed = vec![vec![(0.1, 1.0), (f64::NAN, f64::NAN), (0.5, 1.0)]];
        assert_eq!(mean_line(&holed, 0.1).len(), 2);
    }
}

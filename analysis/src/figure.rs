//! What each chart shows, as plain data: lines, bands and bars already in display units.
//! Building these is pure; `draw` only renders them.

use oscil_protocol::records::{Phase, Side};
use oscil_protocol::Run;

use crate::human::{self, MBIT, MIB};
use crate::series::Tick;
use crate::summary::{self, RunSummary};

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
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
    /// Draw a dot at every point (for few points, as in charts across runs).
    pub markers: bool,
}

impl Line {
    fn new(label: impl Into<String>, color: (u8, u8, u8), points: Vec<(f64, f64)>) -> Self {
        Line {
            label: label.into(),
            color,
            points,
            dashed: false,
            markers: false,
        }
    }

    fn dashed(mut self) -> Self {
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

const MS: Unit = Unit {
    scale: 1000.0,
    name: "ms",
};

/// Per-tick figures in base units (bytes, bit/s, µs) before a display unit is chosen.
struct Quantity {
    label: String,
    color: (u8, u8, u8),
    ticks: Vec<Tick>,
}

impl Quantity {
    fn new(label: &str, color: (u8, u8, u8), ticks: Vec<Tick>) -> Self {
        Quantity {
            label: label.into(),
            color,
            ticks,
        }
    }

    /// A line through one figure of every tick (`t.sum`, `t.median`).
    fn line(&self, unit: Unit, figure: fn(&Tick) -> f64) -> Line {
        Line::new(
            self.label.clone(),
            self.color,
            self.ticks
                .iter()
                .map(|t| (t.t_s, figure(t) / unit.scale))
                .collect(),
        )
    }

    fn band(&self, label: String, unit: Unit) -> Band {
        Band {
            label,
            color: self.color,
            points: self
                .ticks
                .iter()
                .map(|t| (t.t_s, t.p10 / unit.scale, t.p90 / unit.scale))
                .collect(),
        }
    }

    fn max_sum(&self) -> f64 {
        self.ticks.iter().map(|t| t.sum).fold(0.0, f64::max)
    }

    /// The `q` quantile of the per-tick sums.
    fn quantile_sum(&self, q: f64) -> f64 {
        let mut sums: Vec<f64> = self.ticks.iter().map(|t| t.sum).collect();
        sums.sort_by(f64::total_cmp);
        let index = ((sums.len() as f64 - 1.0) * q).round() as usize;
        sums.get(index).copied().unwrap_or(0.0)
    }

    fn max_p90(&self) -> f64 {
        self.ticks.iter().map(|t| t.p90).fold(0.0, f64::max)
    }
}

/// The sums over flows of some quantities, in one unit chosen to fit them and `at_least`.
fn sum_axis(
    quantity: &str,
    unit_for: fn(f64) -> Unit,
    sums: &[&Quantity],
    at_least: f64,
) -> (Axis, Unit) {
    let unit = unit_for(sums.iter().map(|q| q.max_sum()).fold(at_least, f64::max));
    let axis = Axis {
        label: format!("{quantity}, sum over flows ({})", unit.name),
        lines: sums.iter().map(|q| q.line(unit, |t| t.sum)).collect(),
        bands: Vec::new(),
        cap: None,
    };
    (axis, unit)
}

/// Each quantity's per-flow p10-p90 band, for the right axis of a run with several flows.
fn spread_axis(
    quantity: &str,
    unit_for: fn(f64) -> Unit,
    per_flow: &[&Quantity],
    at_least: f64,
) -> (Axis, Unit) {
    let unit = unit_for(
        per_flow
            .iter()
            .map(|q| q.max_p90())
            .fold(at_least, f64::max),
    );
    let axis = Axis {
        label: format!("{quantity} per flow ({})", unit.name),
        lines: Vec::new(),
        bands: per_flow
            .iter()
            .map(|q| q.band(format!("{}, per flow p10-p90 (right axis)", q.label), unit))
            .collect(),
        cap: None,
    };
    (axis, unit)
}

fn sum_title(title: &str, flows: u32) -> String {
    if flows > 1 {
        format!("{title} (sums over {flows} flows; right axis: spread between flows)")
    } else {
        title.to_string()
    }
}

/// The per-run picture.
pub fn run_figure(run: &Run, summary: &RunSummary) -> Figure {
    let interval_s = summary::interval_s(run);
    let flows = summary.settings.flows;
    let several = flows > 1;
    let schedule = &run.meta.schedule;
    let x_end = run
        .reader
        .iter()
        .map(|r| r.t_s)
        .chain(run.sender.iter().map(|r| r.t_s))
        .chain(schedule.iter().map(|s| s.end_s))
        .fold(interval_s, f64::max);
    let shade: Vec<(f64, f64)> = schedule
        .iter()
        .filter(|s| s.phase == Phase::Slow)
        .map(|s| (s.start_s, s.end_s))
        .collect();
    let panel = |title: String, left: Axis, right: Option<Axis>| Panel {
        title,
        x_label: "time since session start (s)".into(),
        x_range: (0.0, x_end),
        left,
        right,
        shade: shade.clone(),
    };
    let mut panels = Vec::new();

    let goodput = Quantity::new(
        "receiver goodput",
        BLUE,
        summary::reader_ticks(run, |r| Some(r.bytes as f64 * 8.0 / interval_s)),
    );
    let delivery = Quantity::new(
        "sender delivery rate",
        ORANGE,
        summary::sender_ticks(run, |r| Some(r.delivery_rate_bps as f64)),
    );
    let (mut left, unit) = sum_axis("rate", rate_unit, &[&goodput, &delivery], 0.0);
    // One interval can run tens of times above the path's rate: the reader draining a full
    // receive queue at memory speed when a fast phase starts, or the kernel's delivery-rate
    // estimate on loopback. Past 1.5 x the 98th percentile of goodput such spikes run off
    // the top instead of flattening everything else.
    let cap = 1.5 * goodput.quantile_sum(0.98) / unit.scale;
    if cap > 0.0 {
        for line in &mut left.lines {
            if line.points.iter().any(|p| p.1 > cap) {
                line.label.push_str(" (runs off the top in places)");
                left.cap = Some(cap);
            }
        }
    }
    let right = several.then(|| spread_axis("rate", rate_unit, &[&goodput], 0.0).0);
    panels.push(panel(
        sum_title(
            "Throughput: what the reader read, and the sender's delivery rate; slow phases shaded",
            flows,
        ),
        left,
        right,
    ));

    let rcv_wnd = Quantity::new(
        "receive window (rcv_wnd)",
        GREEN,
        summary::reader_ticks(run, |r| r.rcv_wnd.map(f64::from)),
    );
    let inflight = Quantity::new(
        "bytes in flight (segments in flight x mss)",
        VERMILLION,
        summary::sender_ticks(run, |r| Some(r.inflight_bytes as f64)),
    );
    let (left, _) = sum_axis("bytes", byte_unit, &[&rcv_wnd, &inflight], 0.0);
    let right = several.then(|| spread_axis("bytes", byte_unit, &[&rcv_wnd, &inflight], 0.0).0);
    panels.push(panel(
        sum_title("Receive window against bytes in flight", flows),
        left,
        right,
    ));

    let queued = Quantity::new(
        "send queue memory (wmem_queued)",
        BLUE,
        summary::sender_ticks(run, |r| Some(f64::from(r.wmem_queued))),
    );
    let notsent = Quantity::new(
        "not sent (notsent_bytes)",
        VERMILLION,
        summary::sender_ticks(run, |r| Some(f64::from(r.notsent_bytes))),
    );
    let sndbuf = Quantity::new(
        "send buffer limit (sndbuf)",
        GREY,
        summary::sender_ticks(run, |r| Some(f64::from(r.sndbuf))),
    );
    let lowat_bytes = summary
        .settings
        .lowat
        .map_or(0.0, |(bytes, _)| bytes as f64);
    let sums = [&queued, &notsent, &sndbuf];
    let (left, right) = if several {
        let (left, _) = sum_axis("bytes", byte_unit, &sums, 0.0);
        let (mut right, unit) = spread_axis("bytes", byte_unit, &[&notsent], lowat_bytes);
        right
            .lines
            .extend(lowat_line(summary, x_end, unit, " per flow (right axis)"));
        (left, Some(right))
    } else {
        let (mut left, unit) = sum_axis("bytes", byte_unit, &sums, lowat_bytes);
        left.label = format!("bytes ({})", unit.name);
        left.lines.extend(lowat_line(summary, x_end, unit, ""));
        (left, None)
    };
    panels.push(panel(sum_title("The sender's queue", flows), left, right));

    panels.push(panel(host_memory_title(run), host_memory_axis(run), None));

    let rtt = Quantity::new(
        "sender smoothed RTT (rtt_us)",
        BLUE,
        summary::sender_ticks(run, |r| (r.rtt_us > 0).then_some(f64::from(r.rtt_us))),
    );
    let rcv_rtt = Quantity::new(
        "receiver RTT estimate (rcv_rtt_us)",
        ORANGE,
        summary::reader_ticks(run, |r| {
            (r.rcv_rtt_us > 0).then_some(f64::from(r.rcv_rtt_us))
        }),
    );
    let mut axis = Axis {
        label: "RTT (ms)".into(),
        ..Axis::default()
    };
    for q in [&rtt, &rcv_rtt] {
        if q.ticks.is_empty() {
            continue;
        }
        let mut line = q.line(MS, |t| t.median);
        if several {
            axis.bands
                .push(q.band(format!("{}, p10-p90 over flows", q.label), MS));
            line.label = format!("{}, median over flows", q.label);
        }
        line.dashed = !axis.lines.is_empty();
        axis.lines.push(line);
    }
    panels.push(panel("Round-trip time".into(), axis, None));

    Figure {
        header: run_header(summary),
        warning: summary
            .partial
            .as_ref()
            .map(|reason| format!("PARTIAL RUN: {reason}")),
        panels,
    }
}

/// The notsent threshold as a dashed level line across the run.
fn lowat_line(summary: &RunSummary, x_end: f64, unit: Unit, suffix: &str) -> Option<Line> {
    let (lowat, _) = summary.settings.lowat?;
    let y = lowat as f64 / unit.scale;
    Some(
        Line::new(
            format!("{}{suffix}", summary.settings.lowat_text()),
            PURPLE,
            vec![(0.0, y), (x_end, y)],
        )
        .dashed(),
    )
}

fn host_memory_title(run: &Run) -> String {
    let same_machine = run
        .meta
        .sender_host
        .as_ref()
        .is_some_and(|s| s.hostname == run.meta.reader_host.hostname);
    let note = if same_machine {
        "both ends on one machine: sockstat mem is global across network namespaces, so both lines show the same host"
    } else {
        "sockstat mem is global across network namespaces on one machine"
    };
    format!("Host TCP memory (sockstat mem x page size); {note}")
}

fn host_memory_axis(run: &Run) -> Axis {
    let meta = &run.meta;
    let sides = [
        (Side::Sender, "sender host", BLUE, meta.sender_host.as_ref()),
        (Side::Reader, "reader host", ORANGE, Some(&meta.reader_host)),
    ];
    let mut raw = Vec::new();
    for (side, label, color, host) in sides {
        let page = host.unwrap_or(&meta.reader_host).page_size_bytes as f64;
        let points: Vec<(f64, f64)> = run
            .host
            .iter()
            .filter(|h| h.side == side)
            .map(|h| (h.t_s, h.tcp_mem_pages as f64 * page))
            .collect();
        if !points.is_empty() {
            raw.push(Line::new(label, color, points));
        }
    }
    let max = raw
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let unit = byte_unit(max);
    for line in &mut raw {
        for p in &mut line.points {
            p.1 /= unit.scale;
        }
    }
    if let Some(line) = raw.get_mut(1) {
        line.dashed = true;
    }
    Axis {
        label: format!("TCP memory ({})", unit.name),
        lines: raw,
        ..Axis::default()
    }
}

/// The run's name, settings and headline figures.
pub fn run_header(summary: &RunSummary) -> Vec<String> {
    let mut first = format!("Run {}: {}", summary.label, summary.settings.key());
    if let Some(path) = summary.settings.path_text() {
        first.push_str(&format!("; path {path}"));
    }
    let opt = |value: Option<f64>, f: fn(f64) -> String| value.map_or("n/a".into(), f);
    let figures = format!(
        "goodput fast {}, slow {}; slow phase: sender queued peak {}, mean {}, not sent peak {}; peak TCP memory {}; RTT slow mean {}",
        opt(summary.goodput_fast_bps, human::rate),
        opt(summary.goodput_slow_bps, human::rate),
        opt(summary.slow_queued_peak_bytes, human::mib),
        opt(summary.slow_queued_mean_bytes, human::mib),
        opt(summary.slow_notsent_peak_bytes, human::mib),
        opt(summary.tcp_mem_peak_bytes(), human::mib),
        opt(summary.rtt_slow_mean_ms, human::ms),
    );
    vec![first, figures]
}

/// One horizontal bar of a chart across runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub label: String,
    pub value: Option<f64>,
    /// The value in words, with its change against the baseline.
    pub text: String,
    pub color: (u8, u8, u8),
    pub baseline: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BarPanel {
    pub title: String,
    pub unit: String,
    pub bars: Vec<Bar>,
}

/// A figure of bar panels, one bar per run in each.
#[derive(Debug, Clone, PartialEq)]
pub struct BarFigure {
    pub header: Vec<String>,
    pub panels: Vec<BarPanel>,
}

/// The comparison across runs: each figure side by side, with its change against the
/// run's baseline.
pub fn comparison(summaries: &[RunSummary], baselines: &[Option<usize>]) -> BarFigure {
    type Metric = (
        &'static str,
        fn(&RunSummary) -> Option<f64>,
        Unit,
        fn(f64) -> String,
    );
    let metrics: [Metric; 8] = [
        (
            "Goodput, fast phases",
            |s| s.goodput_fast_bps,
            rate_unit(0.0),
            human::rate,
        ),
        (
            "Goodput, slow phases",
            |s| s.goodput_slow_bps,
            rate_unit(0.0),
            human::rate,
        ),
        (
            "Peak sender queued bytes (wmem_queued), slow phases",
            |s| s.slow_queued_peak_bytes,
            byte_unit(MIB),
            human::mib,
        ),
        (
            "Mean sender queued bytes (wmem_queued), slow phases",
            |s| s.slow_queued_mean_bytes,
            byte_unit(MIB),
            human::mib,
        ),
        // Not sent apart from queued: lowat trims only what is not yet sent, so these show
        // whether a run's memory is waiting data or data in flight.
        (
            "Peak not-sent bytes (notsent_bytes), slow phases",
            |s| s.slow_notsent_peak_bytes,
            byte_unit(MIB),
            human::mib,
        ),
        (
            "Mean not-sent bytes (notsent_bytes), slow phases",
            |s| s.slow_notsent_mean_bytes,
            byte_unit(MIB),
            human::mib,
        ),
        (
            "Peak host TCP memory (sender host)",
            RunSummary::tcp_mem_peak_bytes,
            byte_unit(MIB),
            human::mib,
        ),
        (
            "Mean RTT, slow phases",
            |s| s.rtt_slow_mean_ms,
            Unit {
                scale: 1.0,
                name: "ms",
            },
            human::ms,
        ),
    ];
    let keys = setting_keys(summaries);
    let names = summary::distinguishing(summaries);
    let panels = metrics
        .iter()
        .map(|(title, value, unit, words)| BarPanel {
            title: title.to_string(),
            unit: unit.name.into(),
            bars: summaries
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let v = value(s);
                    let base = baselines[i].map(|b| value(&summaries[b]));
                    let mut text = v.map_or("n/a".into(), words);
                    if baselines[i] == Some(i) {
                        text.push_str(" (baseline)");
                    } else if let Some(c) = base.and_then(|b| summary::change_percent(v, b)) {
                        text.push_str(&format!(" ({})", human::change(c)));
                    }
                    Bar {
                        label: bar_label(&names[i], s),
                        value: v.map(|v| v / unit.scale),
                        text,
                        color: PALETTE[keys
                            .iter()
                            .position(|k| *k == s.settings.key())
                            .unwrap_or(0)
                            % PALETTE.len()],
                        baseline: baselines[i] == Some(i),
                    }
                })
                .collect(),
        })
        .collect();
    let mut header = vec![format!(
        "Comparison of {} runs: change against each run's baseline in brackets",
        summaries.len()
    )];
    let mut named: Vec<String> = Vec::new();
    for &b in baselines.iter().flatten() {
        if !named.contains(&summaries[b].label) {
            named.push(summaries[b].label.clone());
        }
    }
    header.push(if named.is_empty() {
        "no baseline: no run has the kernel's default lowat (pass --baseline LABEL)".into()
    } else {
        format!(
            "baseline: {} (same path, kernel's default lowat unless --baseline)",
            named.join(", ")
        )
    });
    BarFigure { header, panels }
}

/// The distinct setting keys, in order of first appearance.
fn setting_keys(summaries: &[RunSummary]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for s in summaries {
        let key = s.settings.key();
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

/// What sets the run apart first, then its name: long lab labels are cut at the end.
fn bar_label(distinguishing: &str, s: &RunSummary) -> String {
    let partial = if s.partial.is_some() { "PARTIAL " } else { "" };
    format!("{partial}{distinguishing} | {}", s.label)
}

/// Slow-phase queued bytes and peak TCP memory against path RTT, one line per setting.
pub fn path_figure(summaries: &[RunSummary]) -> Figure {
    let keys = setting_keys(summaries);
    let rtts: Vec<f64> = summaries
        .iter()
        .filter_map(RunSummary::path_rtt_ms)
        .collect();
    let x_max = rtts.iter().copied().fold(1.0, f64::max) * 1.05;
    let measured = summaries.iter().any(|s| s.settings.path_rtt_ms.is_none());
    let x_label = if measured {
        "path RTT (ms; lab setting, else lowest measured)".to_string()
    } else {
        "path RTT (ms, lab setting)".to_string()
    };
    let axis = |quantity: &str, value: fn(&RunSummary) -> Option<f64>| {
        let lines = keys
            .iter()
            .enumerate()
            .map(|(i, key)| {
                let mut points: Vec<(f64, f64)> = summaries
                    .iter()
                    .filter(|s| s.settings.key() == *key)
                    .filter_map(|s| Some((s.path_rtt_ms()?, value(s)? / MIB)))
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                let mut line = Line::new(key.clone(), PALETTE[i % PALETTE.len()], points);
                line.markers = true;
                line
            })
            .collect();
        Axis {
            label: format!("{quantity} (MiB)"),
            lines,
            ..Axis::default()
        }
    };
    let panel = |title: &str, axis: Axis| Panel {
        title: title.into(),
        x_label: x_label.clone(),
        x_range: (0.0, x_max),
        left: axis,
        right: None,
        shade: Vec::new(),
    };
    Figure {
        header: vec![format!(
            "Send-buffer bloat against path RTT: {} runs, one line per setting",
            summaries.len()
        )],
        warning: None,
        panels: vec![
            panel(
                "Peak sender queued bytes (wmem_queued, sum over flows), slow phases",
                axis("peak queued", |s| s.slow_queued_peak_bytes),
            ),
            panel(
                "Peak host TCP memory (sender host)",
                axis("peak TCP memory", RunSummary::tcp_mem_peak_bytes),
            ),
        ],
    }
}

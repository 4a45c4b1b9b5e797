//! The picture of one run: panels over time sharing the time axis, slow phases shaded.

use oscil_model::files::rows::{Phase, ReaderSample, SenderSample, Side};
use oscil_model::files::trace::{ReaderTrace, TraceRow};
use oscil_rundir::Run;

use crate::charts::chart::*;
use crate::charts::shared_scale;
use crate::figures::metrics::metric;
use crate::human;
use crate::load::limit_shares::TickShares;
use crate::load::run_series;
use crate::load::series::{self, Tick};
use crate::load::summary::{RunSummary, Scope};

pub fn interval_s(run: &Run) -> f64 {
    match run.meta.config.interval_us {
        0 => 0.1,
        us => us as f64 / 1e6,
    }
}

/// `value` of the reader's rows, gathered by tick.
fn reader_ticks(run: &Run, value: impl Fn(&ReaderSample) -> Option<f64>) -> Vec<Tick> {
    series::ticks(&run.reader, interval_s(run), |r| r.t_s, value)
}

/// `value` of the sender's rows, gathered by tick.
fn sender_ticks(run: &Run, value: impl Fn(&SenderSample) -> Option<f64>) -> Vec<Tick> {
    series::ticks(&run.sender, interval_s(run), |r| r.t_s, value)
}

/// Per-tick figures in base units (bytes, bit/s, µs) before a display unit is chosen.
struct Quantity {
    label: String,
    color: (u8, u8, u8),
    ticks: Vec<Tick>,
    /// Drawn as dots joined by a line: a few events rather than a sampled series.
    dots: bool,
}

impl Quantity {
    fn new(label: &str, color: (u8, u8, u8), ticks: Vec<Tick>) -> Self {
        Quantity {
            label: label.into(),
            color,
            ticks,
            dots: false,
        }
    }

    fn dotted(self) -> Self {
        Quantity { dots: true, ..self }
    }

    /// A line through one figure of every tick (`t.sum`, `t.median`).
    fn line(&self, unit: Unit, figure: fn(&Tick) -> f64) -> Line {
        Line {
            markers: self.dots,
            ..Line::new(
                self.label.clone(),
                self.color,
                series::with_gaps(
                    self.ticks
                        .iter()
                        .map(|t| (t.t_s, figure(t) / unit.scale))
                        .collect(),
                    |p| p.0,
                    |x| (x, f64::NAN),
                ),
            )
        }
    }

    fn band(&self, label: String, unit: Unit) -> Band {
        Band {
            label,
            color: self.color,
            points: series::with_gaps(
                self.ticks
                    .iter()
                    .map(|t| (t.t_s, t.p10 / unit.scale, t.p90 / unit.scale))
                    .collect(),
                |p| p.0,
                |x| (x, f64::NAN, f64::NAN),
            ),
        }
    }

    fn max_sum(&self) -> f64 {
        self.ticks.iter().map(|t| t.sum).fold(0.0, f64::max)
    }

    fn max_p90(&self) -> f64 {
        self.ticks.iter().map(|t| t.p90).fold(0.0, f64::max)
    }
}

/// The sums over flows of some quantities, in one unit chosen to fit them and `at_least`.
fn sum_axis(quantity: &str, family: Family, sums: &[&Quantity], at_least: f64) -> (Axis, Unit) {
    let unit = family.pick(sums.iter().map(|q| q.max_sum()).fold(at_least, f64::max));
    let axis = Axis {
        label: format!("{quantity}, sum over flows ({})", unit.name),
        lines: sums.iter().map(|q| q.line(unit, |t| t.sum)).collect(),
        unit: Some((unit, family)),
        ..Axis::default()
    };
    (axis, unit)
}

/// Each quantity's per-flow p10-p90 band, for the right axis of a run with several flows.
fn spread_axis(
    quantity: &str,
    family: Family,
    per_flow: &[&Quantity],
    at_least: f64,
) -> (Axis, Unit) {
    let unit = family.pick(
        per_flow
            .iter()
            .map(|q| q.max_p90())
            .fold(at_least, f64::max),
    );
    let axis = Axis {
        label: format!("{quantity} per flow ({})", unit.name),
        unit: Some((unit, family)),
        lines: Vec::new(),
        bands: per_flow
            .iter()
            .map(|q| q.band(format!("{}, per flow p10-p90 (right axis)", q.label), unit))
            .collect(),
        ..Axis::default()
    };
    (axis, unit)
}

fn sum_title(title: &str, flows: u32) -> String {
    if flows > 1 && !title.is_empty() {
        format!("{title} (sums over {flows} flows; right axis: spread between flows)")
    } else {
        title.to_string()
    }
}

/// What every panel of a run's picture shares: the time axis and the shaded slow phases.
struct Frame {
    x_end: f64,
    shade: Vec<(f64, f64)>,
    flows: u32,
    interval_s: f64,
}

impl Frame {
    fn new(run: &Run, summary: &RunSummary) -> Frame {
        let interval_s = interval_s(run);
        let schedule = &run.meta.schedule;
        let x_end = run
            .reader
            .iter()
            .map(|r| r.t_s)
            .chain(run.sender.iter().map(|r| r.t_s))
            .chain(schedule.iter().map(|s| s.end_s))
            .fold(interval_s, f64::max);
        Frame {
            x_end,
            shade: schedule
                .iter()
                .filter(|s| s.phase == Phase::Slow)
                .map(|s| (s.start_s, s.end_s))
                .collect(),
            flows: summary.settings.flows,
            interval_s,
        }
    }

    fn several(&self) -> bool {
        self.flows > 1
    }

    fn panel(&self, key: &str, title: &str, left: Axis, right: Option<Axis>) -> Panel {
        Panel {
            key: key.into(),
            configurations: Vec::new(),
            title: sum_title(title, self.flows),
            x_label: "time since session start (s)".into(),
            x_range: (0.0, self.x_end),
            left,
            right,
            shade: self.shade.clone(),
        }
    }
}

/// The per-run picture; `calls` are the reader's traced collapse and prune calls (empty
/// for a run without them).
pub fn run_figure(run: &Run, summary: &RunSummary, calls: &[TraceRow<ReaderTrace>]) -> Figure {
    let frame = Frame::new(run, summary);
    Figure {
        header: run_header(summary),
        warning: run_warning(summary),
        panels: [
            Some(throughput_panel(run, summary, &frame)),
            Some(window_panel(run, &frame)),
            Some(queue_panel(run, summary, &frame)),
            Some(Panel {
                title: host_memory_title(run),
                ..frame.panel("memory", "", host_memory_axis(run), None)
            }),
            Some(rtt_panel(run, &frame)),
            latency_panel(run, &frame),
            limits_panel(run, &frame),
            queue_events_panel(run, calls, &frame),
        ]
        .into_iter()
        .flatten()
        .collect(),
    }
}

/// A run's picture of its congestion control's own state, beside its main picture: BBR's
/// bandwidth estimate against the rate delivered; `None` for a run whose sender recorded
/// no BBR state (another congestion control, a kernel without `TCP_CC_INFO`).
pub fn bbr_figure(run: &Run, summary: &RunSummary) -> Option<Figure> {
    let frame = Frame::new(run, summary);
    Some(Figure {
        header: run_header(summary),
        warning: run_warning(summary),
        panels: vec![bbr_panel(run, summary, &frame)?],
    })
}

fn run_warning(summary: &RunSummary) -> Option<String> {
    match (&summary.partial, &summary.holes) {
        (Some(reason), _) => Some(format!("PARTIAL RUN: {reason}")),
        (None, Some(holes)) => Some(format!("RUN WITH HOLES: {holes}")),
        (None, None) => None,
    }
}

/// The receiver's queue events on the left, each traced collapse or prune call's duration
/// on the right (or on the left when the counters saw none).
fn queue_events_panel(run: &Run, calls: &[TraceRow<ReaderTrace>], frame: &Frame) -> Option<Panel> {
    let title = "The receiver's queue events: intervals in which its namespace collapsed, pruned or dropped for want of room (host.csv TcpExt); each traced collapse or prune call's duration (kprobes)";
    let (left, right) = match (
        crate::charts::queue_events::axis(&run.host),
        crate::charts::queue_events::calls_axis(calls),
    ) {
        (Some(events), calls) => (events, calls),
        (None, Some(calls)) => (calls, None),
        (None, None) => return None,
    };
    Some(frame.panel("queue_events", title, left, right))
}

/// The sender's delivery rate. The kernel keeps its last sample while nothing is
/// acknowledged: a row with nothing acked has no fresh rate, and is left out (a gap, not a
/// line).
fn delivery_rate(run: &Run) -> Quantity {
    Quantity::new(
        "sender delivery rate, where fresh (bytes were acked)",
        ORANGE,
        sender_ticks(run, |r| {
            r.delivery_rate_bps
                .filter(|_| run_series::fresh_delivery(r))
                .map(|bps| bps as f64)
        }),
    )
}

fn throughput_panel(run: &Run, summary: &RunSummary, frame: &Frame) -> Panel {
    // Each row's bytes over the seconds it really covers: a late sample holds several
    // intervals' bytes.
    let interval_s = frame.interval_s;
    let rate = move |bytes: u64, r: &ReaderSample| bytes as f64 * 8.0 / r.span_or(interval_s);
    let goodput = Quantity::new(
        "read by the reader",
        BLUE,
        reader_ticks(run, |r| Some(rate(r.bytes, r))),
    );
    let network = Quantity::new(
        "network goodput: delivered by TCP to the reader",
        GREEN,
        reader_ticks(run, |r| run_series::delivered_bytes(r).map(|b| rate(b, r))),
    );
    let delivery = delivery_rate(run);
    let mut shown = vec![&goodput];
    if !network.ticks.is_empty() {
        shown.push(&network);
    }
    shown.push(&delivery);
    let (mut left, unit) = sum_axis("rate", Family::Rate, &shown, 0.0);
    // One interval can run tens of times above the path's rate (the reader draining a full
    // receive queue at memory speed, the kernel's delivery-rate estimate on loopback): the
    // axis ends near the path's rate, or at a high quantile, and such spikes are clipped.
    left.bound = Bound::Rate {
        path: summary.settings.path_rate_bps.map(|bps| bps / unit.scale),
    };
    shared_scale::clip(&mut left);
    let right = frame
        .several()
        .then(|| spread_axis("rate", Family::Rate, &[&goodput], 0.0).0);
    frame.panel(
        "throughput",
        "Throughput: what the reader read (above the path's rate just after a slow phase, when it drains its receive queue), what TCP delivered to it, and the sender's delivery rate; slow phases shaded",
        left,
        right,
    )
}

/// BBR's own bandwidth estimate (`TCP_CC_INFO`'s `bbr_bw`) against the rate it delivered:
/// where the estimate stays above what was delivered, the model (not the path) set the
/// pace; `None` for a run whose sender recorded no BBR state.
fn bbr_panel(run: &Run, summary: &RunSummary, frame: &Frame) -> Option<Panel> {
    let estimate = Quantity::new(
        "BBR's bandwidth estimate (bbr_bw_bps)",
        BLUE,
        sender_ticks(run, |r| r.bbr_bw_bps.map(|bps| bps as f64)),
    );
    if estimate.ticks.is_empty() {
        return None;
    }
    let delivery = delivery_rate(run);
    let shown = [&estimate, &delivery];
    let (mut left, unit) = sum_axis("rate", Family::Rate, &shown, 0.0);
    left.bound = Bound::Rate {
        path: summary.settings.path_rate_bps.map(|bps| bps / unit.scale),
    };
    shared_scale::clip(&mut left);
    let right = frame
        .several()
        .then(|| spread_axis("rate", Family::Rate, &shown, 0.0).0);
    Some(frame.panel(
        "bbr",
        "BBR's bandwidth estimate against the rate the sender delivered (TCP_CC_INFO, tcpi_delivery_rate); slow phases shaded",
        left,
        right,
    ))
}

/// The receive window the reader advertised (`rcv_wnd`), or where its kernel does not
/// give it (before 6.2) the window the sender saw advertised (`snd_wnd`, from 5.4), each
/// labelled for what it is, beside the reader's `rcv_ssthresh` and the bytes in flight.
fn window_panel(run: &Run, frame: &Frame) -> Panel {
    let advertised = reader_ticks(run, |r| r.rcv_wnd.map(f64::from));
    let seen = sender_ticks(run, |r| r.snd_wnd.map(f64::from));
    let (window, title) = if !advertised.is_empty() || seen.is_empty() {
        let title = if advertised.is_empty() {
            crate::charts::overlay_chart::NO_WINDOW
        } else {
            "Receive window against bytes in flight"
        };
        (
            Quantity::new("receive window (rcv_wnd)", GREEN, advertised),
            title,
        )
    } else {
        (
            Quantity::new("window the sender saw advertised (snd_wnd)", GREEN, seen),
            "Receive window as the sender saw it advertised (snd_wnd: the reader's kernel gives no rcv_wnd before Linux 6.2) against bytes in flight",
        )
    };
    let ssthresh = Quantity::new(
        "the reader's window threshold (rcv_ssthresh)",
        SKY,
        reader_ticks(run, |r| Some(f64::from(r.rcv_ssthresh))),
    )
    .dotted();
    let inflight = Quantity::new(
        "bytes in flight (segments in flight x mss)",
        VERMILLION,
        sender_ticks(run, |r| Some(r.inflight_bytes as f64)),
    );
    let both = [&window, &ssthresh, &inflight];
    let (left, _) = sum_axis("bytes", Family::Bytes, &both, 0.0);
    let right = frame
        .several()
        .then(|| spread_axis("bytes", Family::Bytes, &both, 0.0).0);
    frame.panel("window", title, left, right)
}

fn queue_panel(run: &Run, summary: &RunSummary, frame: &Frame) -> Panel {
    let queued = Quantity::new(
        "send queue memory (wmem_queued)",
        BLUE,
        sender_ticks(run, |r| Some(f64::from(r.wmem_queued))),
    );
    let notsent = Quantity::new(
        "not sent (notsent_bytes)",
        VERMILLION,
        sender_ticks(run, |r| r.notsent_bytes.map(f64::from)),
    );
    let sndbuf = Quantity::new(
        "send buffer limit (sndbuf)",
        GREY,
        sender_ticks(run, |r| Some(f64::from(r.sndbuf))),
    );
    let lowat_bytes = summary
        .settings
        .lowat
        .map_or(0.0, |(bytes, _)| bytes as f64);
    let sums = [&queued, &notsent, &sndbuf];
    let x_end = frame.x_end;
    let (left, right) = if frame.several() {
        let (left, _) = sum_axis("bytes", Family::Bytes, &sums, 0.0);
        let (mut right, unit) = spread_axis("bytes", Family::Bytes, &[&notsent], lowat_bytes);
        right
            .lines
            .extend(lowat_line(summary, x_end, unit, " per flow (right axis)"));
        (left, Some(right))
    } else {
        let (mut left, unit) = sum_axis("bytes", Family::Bytes, &sums, lowat_bytes);
        left.label = format!("bytes ({})", unit.name);
        left.lines.extend(lowat_line(summary, x_end, unit, ""));
        (left, None)
    };
    frame.panel("queue", "The sender's queue", left, right)
}

fn rtt_panel(run: &Run, frame: &Frame) -> Panel {
    let rtt = Quantity::new(
        "sender smoothed RTT (rtt_us)",
        BLUE,
        sender_ticks(run, |r| (r.rtt_us > 0).then_some(f64::from(r.rtt_us))),
    );
    let rcv_rtt = Quantity::new(
        "receiver RTT estimate (rcv_rtt_us)",
        ORANGE,
        reader_ticks(run, |r| {
            (r.rcv_rtt_us > 0).then_some(f64::from(r.rcv_rtt_us))
        }),
    );
    median_ms_panel(
        ("rtt", "Round-trip time"),
        "RTT (ms)",
        &[&rtt, &rcv_rtt],
        frame,
    )
}

/// How long a byte waits: the tagged writes' time in the send queue and until acknowledged
/// (kernel TX timestamps), and the markers' from the daemon's write to the reader's read, at
/// the time each marker was sent, on a log scale when they span decades (a slow phase's
/// queue holds seconds, a fast phase's milliseconds); `None` for a run with neither.
fn latency_panel(run: &Run, frame: &Frame) -> Option<Panel> {
    let us = |v: Option<u64>| v.map(|us| us as f64);
    let residence = Quantity::new(
        "send-queue residence of a write (residence_us)",
        VERMILLION,
        sender_ticks(run, |r| us(r.residence_us)),
    );
    let to_ack = Quantity::new(
        "write to acknowledgement (write_to_ack_us)",
        BLUE,
        sender_ticks(run, |r| us(r.write_to_ack_us)),
    );
    let markers = |censored: bool| {
        series::ticks(
            &run.markers,
            frame.interval_s,
            |m| m.sent_t_s,
            move |m| {
                m.latency_us
                    .filter(|_| run_series::marker_censored(m) == censored)
            },
        )
    };
    let marker = Quantity::new(&marker_label(run), GREEN, markers(false)).dotted();
    // The path without the send queue: the markers' excess over it is the sender's queue.
    let probe = Quantity::new(
        "idle probe's round trip, the path without the send queue (probe.csv)",
        PURPLE,
        series::ticks(
            &run.probe,
            frame.interval_s,
            |p| p.t_s,
            |p| p.rtt_us.map(|us| us as f64),
        ),
    );
    // Waits still running: drawn hollow, as lower bounds, so a phase whose every write is
    // still queued shows how long at least, never an empty panel.
    let bounds = [
        Quantity::new(
            "write still queued at a sample: waiting at least (pending_write_age_us)",
            VERMILLION,
            sender_ticks(run, |r| us(run_series::pending_age_us(r))),
        ),
        Quantity::new(
            "marker still unread when the run ended: at least",
            GREEN,
            markers(true),
        ),
    ];
    let measured = !residence.ticks.is_empty()
        || !marker.ticks.is_empty()
        || !probe.ticks.is_empty()
        || bounds.iter().any(|q| !q.ticks.is_empty());
    measured.then(|| {
        let mut panel = median_ms_panel(
            ("latency", "Latency: how long a written byte waits (hollow: still waiting, a lower bound); slow phases shaded"),
            "time (ms)",
            &[&residence, &to_ack, &marker, &probe],
            frame,
        );
        let lower_bounds = bounds
            .iter()
            .filter(|q| !q.ticks.is_empty())
            .map(|q| q.line(MS, |t| t.median).weighted(Weight::Hollow));
        panel.left.lines.extend(lower_bounds);
        panel.left.fit_scale();
        panel.left.bound = Bound::Wait {
            session: frame.x_end * 1000.0,
        };
        shared_scale::clip(&mut panel.left);
        panel
    })
}

/// The marker series' name, with how far the clocks may put it off.
/// What held the sender's flows back, tick by tick, as shares of their time (sender.csv's
/// chrono columns, summed over flows): the receiver's window, the send buffer, the network
/// (cwnd, pacing) or nothing to send. `None` for runs recorded before the columns.
fn limits_panel(run: &Run, frame: &Frame) -> Option<Panel> {
    let shares = crate::load::limit_shares::tick_shares(&run.sender, frame.interval_s);
    if shares.is_empty() {
        return None;
    }
    let share = |part: fn(&TickShares) -> f64| -> Vec<(f64, f64)> {
        let points = shares.iter().map(|s| (s.t_s, part(s))).collect();
        series::with_gaps(points, |p| p.0, |x| (x, f64::NAN))
    };
    let lines = [
        (
            "receive window (rwnd_limited_us)",
            GREEN,
            share(|s| s.rwnd_pct),
        ),
        (
            "send buffer (sndbuf_limited_us)",
            VERMILLION,
            share(|s| s.sndbuf_pct),
        ),
        (
            "network: cwnd, pacing (busy, neither buffer)",
            BLUE,
            share(|s| s.network_pct),
        ),
        ("nothing to send (not busy)", GREY, share(|s| s.app_pct)),
    ];
    let mut axis = Axis {
        label: "share of the flows' time (%)".into(),
        lines: lines
            .into_iter()
            .map(|(label, color, points)| Line::new(label, color, points))
            .collect(),
        bound: Bound::Share,
        ..Axis::default()
    };
    shared_scale::clip(&mut axis);
    Some(frame.panel(
        "limits",
        "What limits the sender: the kernel's count of the time each flow was held by the receive window, the send buffer, the network, or had nothing to send",
        axis,
        None,
    ))
}

fn marker_label(run: &Run) -> String {
    let uncertainty = run.meta.clock.map_or(String::new(), |c| {
        format!(", ±{:.3} ms clock", c.uncertainty_us / 1000.0)
    });
    format!("marker, daemon write to reader read (markers.csv{uncertainty})")
}

/// Medians over flows of quantities in microseconds, drawn in ms; with several flows, each
/// with its p10-p90 band.
fn median_ms_panel(
    (key, title): (&str, &str),
    label: &str,
    quantities: &[&Quantity],
    frame: &Frame,
) -> Panel {
    let mut axis = Axis {
        label: label.into(),
        ..Axis::default()
    };
    for q in quantities {
        if q.ticks.is_empty() {
            continue;
        }
        let mut line = q.line(MS, |t| t.median);
        if frame.several() {
            axis.bands
                .push(q.band(format!("{}, p10-p90 over flows", q.label), MS));
            line.label = format!("{}, median over flows", q.label);
        }
        line.dashed = !axis.lines.is_empty() && !q.dots;
        axis.lines.push(line);
    }
    Panel {
        title: title.into(),
        ..frame.panel(key, "", axis, None)
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

/// True when the run recorded each side's own namespace memory (host.csv
/// `tcp_mem_ns_bytes`), which tells sender from receiver where sockstat cannot.
fn has_namespace_memory(run: &Run) -> bool {
    run.host.iter().any(|h| h.tcp_mem_ns_bytes.is_some())
}

fn host_memory_title(run: &Run) -> String {
    if has_namespace_memory(run) {
        let page = |side: Side| {
            let host = match side {
                Side::Sender => run.meta.sender_host.as_ref(),
                Side::Reader => None,
            };
            host.unwrap_or(&run.meta.reader_host).page_size_bytes as f64
        };
        let peak = run
            .host
            .iter()
            .map(|h| h.tcp_mem_pages as f64 * page(h.side))
            .fold(0.0, f64::max);
        return format!(
            "TCP memory of each side's own network namespace (points: summed every 0.1-0.5 s). Host-wide sockstat, every socket of the host and not this run's alone, peaked at {} and is not drawn",
            human::mib(peak)
        );
    }
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

/// Each side's namespace memory (points) where recorded, else each side's sockstat figure
/// as recorded.
fn host_memory_axis(run: &Run) -> Axis {
    let meta = &run.meta;
    let namespace = has_namespace_memory(run);
    let sides = [
        (Side::Sender, "sender", BLUE, meta.sender_host.as_ref()),
        (Side::Reader, "reader", ORANGE, Some(&meta.reader_host)),
    ];
    let mut raw = Vec::new();
    for (side, name, color, host) in sides {
        let page = host.unwrap_or(&meta.reader_host).page_size_bytes as f64;
        let rows = || run.host.iter().filter(move |h| h.side == side);
        let sockstat: Vec<(f64, f64)> = rows()
            .map(|h| (h.t_s, h.tcp_mem_pages as f64 * page))
            .collect();
        let own: Vec<(f64, f64)> = rows()
            .filter_map(|h| Some((h.t_s, h.tcp_mem_ns_bytes? as f64)))
            .collect();
        if namespace && !own.is_empty() {
            raw.push(
                Line::new(format!("{name} namespace TCP memory"), color, own)
                    .weighted(Weight::Points),
            );
        }
        // Where the namespace sum exists, host-wide sockstat would only stand in for it
        // with other work's memory: the title gives its peak instead.
        if !namespace && !sockstat.is_empty() {
            let mut line = Line::new(
                format!("{name} host, host-wide (sockstat)"),
                color,
                sockstat,
            );
            line.dashed = side == Side::Reader;
            raw.push(line);
        }
    }
    let max = raw
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let unit = byte_unit(max);
    for line in &mut raw {
        if line.weight == Weight::Points {
            line.points.iter_mut().for_each(|p| p.1 /= unit.scale);
            continue;
        }
        line.points = series::with_gaps(
            line.points
                .iter()
                .map(|p| (p.0, p.1 / unit.scale))
                .collect(),
            |p| p.0,
            |x| (x, f64::NAN),
        );
    }
    Axis {
        label: format!("TCP memory ({})", unit.name),
        lines: raw,
        unit: Some((unit, Family::Bytes)),
        ..Axis::default()
    }
}

/// The run's name, settings and headline figures over the whole run.
pub fn run_header(summary: &RunSummary) -> Vec<String> {
    let mut first = format!("Run {}: {}", summary.label, summary.settings.key());
    if let Some(path) = summary.settings.path_text() {
        first.push_str(&format!("; path {path}"));
    }
    let text = |column: &str| {
        let m = metric(column);
        summary
            .value(m, Scope::Whole)
            .map_or("n/a".into(), |v| m.unit.text(v))
    };
    // The sender's host is what lowat acts on; the reader's is named as such, never passed
    // off as the sender's.
    let namespace = summary.value(metric("tcp_mem_ns_peak_sender_mib"), Scope::Whole);
    let memory = match summary.value(metric("tcp_mem_peak_sender_mib"), Scope::Whole) {
        Some(_) if namespace.is_some() => format!(
            "{} (sender namespace; sockstat on its host {})",
            text("tcp_mem_ns_peak_sender_mib"),
            text("tcp_mem_peak_sender_mib")
        ),
        Some(_) => format!("{} (sender host)", text("tcp_mem_peak_sender_mib")),
        None => format!(
            "{} (reader host: the sender host's was not recorded)",
            text("tcp_mem_peak_reader_mib")
        ),
    };
    let mut figures = format!(
        "network goodput fast {}, slow {}; slow phase: sender queued peak {}, mean {}, not sent peak {}; peak TCP memory {memory}; RTT slow mean {}",
        text("net_goodput_fast_mbps"),
        text("net_goodput_slow_mbps"),
        text("slow_queued_peak_mib"),
        text("slow_queued_mean_mib"),
        text("slow_notsent_peak_mib"),
        text("rtt_slow_mean_ms"),
    );
    let measured = |column: &str| summary.value(metric(column), Scope::Whole).is_some();
    if measured("marker_p50_ms") {
        figures.push_str(&format!(
            "; marker latency p50 {}, p99 {} (clock uncertainty ±{})",
            text("marker_p50_ms"),
            text("marker_p99_ms"),
            text("clock_uncertainty_ms"),
        ));
    }
    // The path without the send queue, beside the markers.
    if measured("probe_rtt_p50_ms") {
        let (p50, p99) = (text("probe_rtt_p50_ms"), text("probe_rtt_p99_ms"));
        figures.push_str(&format!("; idle probe round trip p50 {p50}, p99 {p99}"));
    }
    vec![first, figures]
}

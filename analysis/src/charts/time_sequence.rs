//! The time-sequence picture (tcptrace's) of a traced run (`--trace`): per ACK, `snd_una`,
//! `snd_nxt` and the advertised window's right edge (`snd_una + snd_wnd`) against time,
//! retransmits and congestion-state changes marked on it, and the receiver's autotuning
//! steps (its receive buffer) on the right axis. One panel per fast phase's start, where the
//! buffers decide everything (2 s before to 3 s after), or one for the span `--zoom` asks.
//! Building the figure is pure; `draw` renders it like the run's own picture.

use std::path::Path;

use oscil_model::files::rows::Phase;
use oscil_model::files::trace::{
    ReaderTrace, SenderTrace, TraceFacts, TraceKind, TraceRow, TraceSideFacts,
};
use oscil_model::pattern::PhaseSpan;
use oscil_model::run::RunMeta;
use oscil_rundir::{load_meta, trace, Limits, RunDirError};

use crate::charts::chart::{
    byte_unit, Axis, Figure, Line, Panel, Weight, BLUE, GREEN, ORANGE, PURPLE, SKY, VERMILLION,
};
use crate::charts::draw::DrawError;
use crate::charts::record::FigureRecord;

/// The window around a fast phase's start: from this long before it...
const BEFORE_S: f64 = 2.0;
/// ...to this long after.
const AFTER_S: f64 = 3.0;

/// Points per line at most: more than the picture's width shows; every event is kept.
const MAX_POINTS: usize = 6000;

/// A span of the run's clock, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub from_s: f64,
    pub to_s: f64,
}

/// Why `--zoom` is not a span.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BadZoom {
    #[error("--zoom {0:?}: expected FROM..TO, times since the run's start such as 20s..26s")]
    NotASpan(String),
    /// Both ends read, in the wrong order.
    #[error("--zoom {text:?}: FROM must come before TO ({to}..{from}?)")]
    Reversed {
        text: String,
        from: String,
        to: String,
    },
    /// Both ends the same time.
    #[error("--zoom {0:?}: FROM and TO are the same time: a span has a length (20s..26s)")]
    Empty(String),
}

impl std::str::FromStr for Span {
    type Err = BadZoom;

    /// `20s..26s`, `1.5..4` (seconds), `500ms..2s`.
    fn from_str(text: &str) -> Result<Span, BadZoom> {
        let bad = || BadZoom::NotASpan(text.to_string());
        let (from, to) = text.split_once("..").ok_or_else(bad)?;
        let seconds = |t: &str| -> Option<f64> {
            let t = t.trim();
            t.parse::<f64>()
                .ok()
                .or_else(|| humantime::parse_duration(t).ok().map(|d| d.as_secs_f64()))
                .filter(|s| s.is_finite() && *s >= 0.0)
        };
        let (from_s, to_s) = (seconds(from).ok_or_else(bad)?, seconds(to).ok_or_else(bad)?);
        if to_s == from_s {
            return Err(BadZoom::Empty(text.to_string()));
        }
        if to_s < from_s {
            return Err(BadZoom::Reversed {
                text: text.to_string(),
                from: from.trim().to_string(),
                to: to.trim().to_string(),
            });
        }
        Ok(Span { from_s, to_s })
    }
}

/// The spans drawn for a run: `zoom`, else one around each fast phase's start.
pub fn spans(meta: &RunMeta, zoom: Option<Span>) -> Vec<Span> {
    if let Some(zoom) = zoom {
        return vec![zoom];
    }
    meta.schedule
        .iter()
        .filter(|s| s.phase == Phase::Fast)
        .map(|s| Span {
            from_s: (s.start_s - BEFORE_S).max(0.0),
            to_s: s.start_s + AFTER_S,
        })
        .collect()
}

/// The picture of one flow's trace over `spans`; `None` without a sender trace of it.
pub fn figure(
    label: &str,
    meta: &RunMeta,
    sender: &[TraceRow<SenderTrace>],
    reader: &[TraceRow<ReaderTrace>],
    spans: &[Span],
) -> Option<Figure> {
    let flow = 0;
    let sender: Vec<&TraceRow<SenderTrace>> = sender.iter().filter(|r| r.flow == flow).collect();
    if !sender.iter().any(|r| r.kind == TraceKind::Probe) {
        return None;
    }
    let reader: Vec<&TraceRow<ReaderTrace>> = reader.iter().filter(|r| r.flow == flow).collect();
    let of_flows = match meta.config.flows {
        1 => String::new(),
        n => format!(" (flow 0 of {n})"),
    };
    let lost: u64 = meta
        .trace
        .iter()
        .flat_map(|t| [&t.sender, &t.reader])
        .flatten()
        .map(|side| side.lost_events)
        .sum();
    let panels: Vec<Panel> = spans
        .iter()
        .filter_map(|span| panel(&meta.schedule, &sender, &reader, *span))
        .collect();
    let mut header = vec![
        format!("{label}: time sequence{of_flows}"),
        "per ACK from the kernel's tcp_probe; dots: retransmits, congestion-state changes, the receiver's autotuning steps".into(),
    ];
    header.extend(meta.trace.as_ref().and_then(not_traced));
    (!panels.is_empty()).then(|| Figure {
        header,
        warning: (lost > 0).then(|| {
            format!(
                "the kernel lost {lost} trace events: a gap is missing ACKs, not a stalled flow"
            )
        }),
        panels,
    })
}

/// The picture's dots a side's kernel could not trace, in a line: a legend entry without
/// dots is then a kernel without the tracepoint, not a flow without the event.
fn not_traced(facts: &TraceFacts) -> Option<String> {
    // Only where the side named the tracepoint absent: a side that traced nothing at all
    // (no tracefs, no permission) says so among the report's warnings.
    let lacks = |side: &Option<TraceSideFacts>, kind: TraceKind| {
        side.as_ref()
            .is_some_and(|f| f.absent.iter().any(|a| a.contains(kind.source().name())))
    };
    let missing: Vec<String> = [
        (
            &facts.sender,
            TraceKind::CongState,
            "congestion-state changes",
            "sender",
        ),
        (
            &facts.reader,
            TraceKind::RcvbufGrow,
            "autotuning steps",
            "reader",
        ),
    ]
    .into_iter()
    .filter(|(side, kind, ..)| lacks(side, *kind))
    .map(|(_, kind, what, side)| {
        format!(
            "{what} (the {side}'s kernel has no {})",
            kind.source().name()
        )
    })
    .collect();
    (!missing.is_empty()).then(|| format!("not traced: {}", missing.join("; ")))
}

/// One span's panel; `None` when no ACK falls in it.
fn panel(
    schedule: &[PhaseSpan],
    sender: &[&TraceRow<SenderTrace>],
    reader: &[&TraceRow<ReaderTrace>],
    span: Span,
) -> Option<Panel> {
    let inside = |t: f64| span.from_s <= t && t <= span.to_s;
    let acks: Vec<&&TraceRow<SenderTrace>> = sender
        .iter()
        .filter(|r| r.kind == TraceKind::Probe && inside(r.t_s))
        .collect();
    let base = acks.first()?.snd_una?;
    // Sequence numbers wrap at 2^32: each is taken as its signed distance from the base.
    let rel = |seq: u32| f64::from(seq.wrapping_sub(base) as i32);
    let una: Vec<(f64, f64)> = acks
        .iter()
        .filter_map(|r| Some((r.t_s, rel(r.snd_una?))))
        .collect();
    let nxt: Vec<(f64, f64)> = acks
        .iter()
        .filter_map(|r| Some((r.t_s, rel(r.snd_nxt?))))
        .collect();
    let edge: Vec<(f64, f64)> = acks
        .iter()
        .filter_map(|r| Some((r.t_s, rel(r.snd_una?.wrapping_add(r.snd_wnd?)))))
        .collect();
    // An event without a sequence number sits on snd_una as it was then.
    let on_una = |kind: TraceKind| -> Vec<(f64, f64)> {
        sender
            .iter()
            .filter(|r| r.kind == kind && inside(r.t_s))
            .map(|r| (r.t_s, una_at(&una, r.t_s)))
            .collect()
    };
    let max = edge.iter().chain(&nxt).map(|p| p.1).fold(1.0, f64::max);
    let unit = byte_unit(max);
    let scaled = |points: Vec<(f64, f64)>| -> Vec<(f64, f64)> {
        thin(points)
            .into_iter()
            .map(|(t, v)| (t, v / unit.scale))
            .collect()
    };
    let points =
        |label: &str, color, pts| Line::new(label, color, scaled(pts)).weighted(Weight::Points);
    let left = Axis {
        label: format!("sequence since {:.1} s ({})", span.from_s, unit.name),
        lines: vec![
            Line::new("snd_una", BLUE, scaled(una.clone())),
            Line::new("snd_nxt", ORANGE, scaled(nxt)),
            Line::new("advertised window's right edge", GREEN, scaled(edge)).dashed(),
            points("retransmit", VERMILLION, on_una(TraceKind::Retransmit)),
            points(
                "congestion state change",
                PURPLE,
                on_una(TraceKind::CongState),
            ),
        ],
        ..Axis::default()
    };
    Some(Panel {
        key: "time_sequence".into(),
        configurations: Vec::new(),
        title: format!("from {:.1} s to {:.1} s", span.from_s, span.to_s),
        x_label: "time since start (s)".into(),
        x_range: (span.from_s, span.to_s),
        left,
        right: autotuning(reader, span),
        shade: slow_phases(schedule, span),
    })
}

/// The receiver's buffer at each autotuning step in `span`, on the right axis.
fn autotuning(reader: &[&TraceRow<ReaderTrace>], span: Span) -> Option<Axis> {
    let steps: Vec<(f64, f64)> = reader
        .iter()
        .filter(|r| r.kind == TraceKind::RcvbufGrow && span.from_s <= r.t_s && r.t_s <= span.to_s)
        .filter_map(|r| Some((r.t_s, f64::from(r.rcvbuf?))))
        .collect();
    let max = steps.iter().map(|p| p.1).fold(0.0, f64::max);
    if steps.is_empty() {
        return None;
    }
    let unit = byte_unit(max);
    let steps = steps
        .into_iter()
        .map(|(t, v)| (t, v / unit.scale))
        .collect();
    Some(Axis {
        label: format!("receive buffer ({})", unit.name),
        lines: vec![Line::new("rcvbuf (autotuning step)", SKY, steps).weighted(Weight::Points)],
        ..Axis::default()
    })
}

/// `snd_una` at `t_s`: the last ACK's at or before it (the first's before any).
fn una_at(una: &[(f64, f64)], t_s: f64) -> f64 {
    let i = una.partition_point(|p| p.0 <= t_s);
    una.get(i.saturating_sub(1)).map_or(0.0, |p| p.1)
}

/// The slow phases within `span`, for shading.
fn slow_phases(schedule: &[PhaseSpan], span: Span) -> Vec<(f64, f64)> {
    schedule
        .iter()
        .filter(|s| s.phase == Phase::Slow && s.end_s > span.from_s && s.start_s < span.to_s)
        .map(|s| (s.start_s.max(span.from_s), s.end_s.min(span.to_s)))
        .collect()
}

/// At most [`MAX_POINTS`], evenly taken, the last one kept.
fn thin(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    let step = points.len().div_ceil(MAX_POINTS).max(1);
    if step == 1 {
        return points;
    }
    let last = points.last().copied();
    let mut kept: Vec<(f64, f64)> = points.into_iter().step_by(step).collect();
    if kept.last().copied() != last {
        kept.extend(last);
    }
    kept
}

/// A traced run's time-sequence picture, or why there is none.
pub enum Drawn {
    /// The run did not ask for a trace.
    Untraced,
    /// Its file name and manifest record.
    Picture(String, FigureRecord),
    /// Traced, but with nothing to draw: why, in words.
    Empty(String),
}

/// Why a traced run's picture could not be made: its directory, or the drawing.
#[derive(Debug, thiserror::Error)]
pub enum TimeSequenceError {
    #[error(transparent)]
    Run(#[from] RunDirError),
    #[error(transparent)]
    Draw(#[from] DrawError),
}

/// Draws the run in `dir`'s picture as `<stem>-time-sequence.png` in `out` when the run has
/// a trace.
pub fn draw_run(
    dir: &Path,
    label: &str,
    stem: &str,
    out: &Path,
    zoom: Option<Span>,
) -> Result<Drawn, TimeSequenceError> {
    let meta = load_meta(dir)?;
    let Some(facts) = &meta.trace else {
        return Ok(Drawn::Untraced);
    };
    let limits = Limits::of(&meta).expect("load_meta checked it");
    let sender = trace::load::<SenderTrace>(dir, &limits)?;
    let reader = trace::load::<ReaderTrace>(dir, &limits)?;
    let Some(figure) = figure(label, &meta, &sender, &reader, &spans(&meta, zoom)) else {
        return Ok(Drawn::Empty(why_empty(label, facts.sender.as_ref())));
    };
    let file = format!("{stem}-time-sequence.png");
    let texts = crate::charts::draw::draw_figure(&figure, &out.join(&file))?;
    let record = FigureRecord::of_figure(&file, "time_sequence", &figure, &[], texts);
    Ok(Drawn::Picture(file, record))
}

/// Why a traced run has no time-sequence picture: the picture is the sender's ACKs
/// (`tcp_probe`), and the sender's trace facts say what became of them.
fn why_empty(label: &str, sender: Option<&TraceSideFacts>) -> String {
    let escape = oscil_model::text::escape_stored;
    let why = match sender {
        None => "the daemon said nothing of its trace".to_string(),
        Some(facts)
            if !facts
                .tracepoints
                .iter()
                .any(|t| t == TraceKind::Probe.source().name()) =>
        {
            let absent = facts.absent.iter().map(|a| escape(a)).collect::<Vec<_>>();
            format!("the sender traced no tcp_probe ({})", absent.join("; "))
        }
        Some(_) => "the sender's tcp_probe recorded no ACK of flow 0 in the pictured spans".into(),
    };
    format!("{}: no time-sequence picture: {why}", escape(label))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zoom_spans_take_units_or_seconds_and_refuse_the_rest() {
        let span = |from_s, to_s| Ok(Span { from_s, to_s });
        assert_eq!("20s..26s".parse(), span(20.0, 26.0));
        assert_eq!("1.5..4".parse(), span(1.5, 4.0));
        assert_eq!("500ms..2s".parse(), span(0.5, 2.0));
        for bad in ["20s", "26s..20s", "a..b", "3..3", "-1..2"] {
            assert!(bad.parse::<Span>().is_err(), "{bad}");
        }
        assert_eq!(
            "26s..20s".parse::<Span>().unwrap_err().to_string(),
            "--zoom \"26s..20s\": FROM must come before TO (20s..26s?)"
        );
    }

    #[test]
    fn thinning_keeps_the_ends_and_a_bounded_count() {
        let many: Vec<(f64, f64)> = (0..20_001).map(|i| (i as f64, i as f64)).collect();
        let kept = thin(many);
        assert!(kept.len() <= MAX_POINTS + 1, "{}", kept.len());
        assert_eq!(kept[0], (0.0, 0.0));
        assert_eq!(*kept.last().unwrap(), (20_000.0, 20_000.0));
        let few = vec![(0.0, 1.0), (1.0, 2.0)];
        assert_eq!(thin(few.clone()), few);
    }

    fn ack(t_s: f64, una: u32, nxt: u32, wnd: u32) -> TraceRow<SenderTrace> {
        let mut row = TraceRow::new(t_s, TraceKind::Probe, 0);
        (row.snd_una, row.snd_nxt, row.snd_wnd) = (Some(una), Some(nxt), Some(wnd));
        row
    }

    #[test]
    fn a_panel_counts_bytes_from_its_first_ack_across_the_sequence_wrap() {
        let near_wrap = u32::MAX - 999;
        let sender = [
            ack(0.5, 1, 2, 3), // before the span: not drawn
            ack(1.0, near_wrap, near_wrap.wrapping_add(3000), 65536),
            TraceRow::new(1.2, TraceKind::Retransmit, 0),
            ack(
                1.5,
                near_wrap.wrapping_add(2000),
                near_wrap.wrapping_add(5000),
                65536,
            ),
        ];
        let mut grow = TraceRow::new(1.3, TraceKind::RcvbufGrow, 0);
        grow.rcvbuf = Some(1 << 20);
        let sender: Vec<&TraceRow<SenderTrace>> = sender.iter().collect();
        let schedule = [PhaseSpan {
            cycle: 1,
            phase: Phase::Slow,
            start_s: 1.4,
            end_s: 9.0,
        }];
        let span = Span {
            from_s: 1.0,
            to_s: 2.0,
        };
        let panel = panel(&schedule, &sender, &[&grow], span).expect("ACKs in the span");
        let line = |label: &str| {
            let line = panel.left.lines.iter().find(|l| l.label == label).unwrap();
            line.points.clone()
        };
        // Bytes shown in KiB (the largest value is under a MiB).
        let kib = |bytes: f64| bytes / 1024.0;
        assert_eq!(line("snd_una"), vec![(1.0, 0.0), (1.5, kib(2000.0))]);
        assert_eq!(
            line("snd_nxt"),
            vec![(1.0, kib(3000.0)), (1.5, kib(5000.0))]
        );
        assert_eq!(
            line("advertised window's right edge"),
            vec![(1.0, kib(65536.0)), (1.5, kib(67536.0))]
        );
        assert_eq!(line("retransmit"), vec![(1.2, 0.0)]);
        let right = panel.right.expect("an autotuning step");
        assert_eq!(right.lines[0].points, vec![(1.3, 1.0)]);
        assert_eq!(panel.shade, vec![(1.4, 2.0)]);
        let empty = Span {
            from_s: 5.0,
            to_s: 6.0,
        };
        assert!(super::panel(&schedule, &sender, &[], empty).is_none());
    }

    #[test]
    fn dots_a_kernel_cannot_trace_are_said_in_the_header() {
        // As the tracer words it (oscil_kernel::trace::tracefs::TraceError::NoEvent).
        let side = |absent: &[TraceKind]| TraceSideFacts {
            absent: absent
                .iter()
                .map(|k| format!("the kernel has no tracepoint {}", k.source().name()))
                .collect(),
            ..TraceSideFacts::default()
        };
        // 5.10: neither tcp_cong_state_set (5.19) nor tcp_rcvbuf_grow (6.16).
        let old = TraceFacts {
            sender: Some(side(&[TraceKind::CongState])),
            reader: Some(side(&[TraceKind::RcvbufGrow])),
        };
        assert_eq!(
            not_traced(&old).as_deref(),
            Some("not traced: congestion-state changes (the sender's kernel has no tcp/tcp_cong_state_set); autotuning steps (the reader's kernel has no tcp/tcp_rcvbuf_grow)")
        );
        let new = TraceFacts {
            sender: Some(side(&[])),
            reader: Some(side(&[])),
        };
        assert_eq!(not_traced(&new), None);
        // A side that traced nothing, or said nothing, is not claimed to lack a tracepoint.
        let untraced = TraceFacts {
            sender: Some(side(&[])),
            reader: Some(TraceSideFacts::absent(
                "no tracefs at /sys/kernel/tracing".into(),
            )),
        };
        assert_eq!(not_traced(&untraced), None);
        let silent = TraceFacts {
            sender: None,
            reader: None,
        };
        assert_eq!(not_traced(&silent), None);
    }

    #[test]
    fn snd_una_at_a_time_is_the_last_acks() {
        let una = [(1.0, 10.0), (2.0, 20.0), (3.0, 30.0)];
        assert_eq!(una_at(&una, 0.5), 10.0);
        assert_eq!(una_at(&una, 2.0), 20.0);
        assert_eq!(una_at(&una, 2.9), 20.0);
        assert_eq!(una_at(&una, 9.0), 30.0);
    }
}

//! The receiver's queue events on the run picture: the intervals in which the kernel
//! collapsed the reader's receive queue, pruned it, or dropped segments for want of room
//! (host.csv's `TcpExt` columns, the receive side of Cloudflare's story); and, where the
//! reader traced them with kprobes, how long each collapse or prune call took.

use oscil_model::files::rows::{HostSample, Side};
use oscil_model::files::trace::{ReaderTrace, TraceKind, TraceRow, TraceSource};

use crate::charts::chart::{
    Axis, Line, Weight, BLUE, GREEN, GREY, ORANGE, PURPLE, SKY, VERMILLION,
};

/// The receiver's events in one interval: (label, colour, count of the row).
type Series = (&'static str, (u8, u8, u8), fn(&HostSample) -> Option<u64>);

const SERIES: [Series; 3] = [
    (
        "segments collapsed (tcp_collapsed)",
        BLUE,
        |h| h.tcp_collapsed,
    ),
    (
        "prune passes (tcp_prune_called)",
        GREEN,
        |h| h.tcp_prune_called,
    ),
    (
        "segments dropped: pruned or refused (tcp_rcv_pruned + tcp_ofo_pruned + tcp_rcvq_drop + tcp_backlog_drop)",
        VERMILLION,
        dropped,
    ),
];

fn dropped(h: &HostSample) -> Option<u64> {
    [
        h.tcp_rcv_pruned,
        h.tcp_ofo_pruned,
        h.tcp_rcvq_drop,
        h.tcp_backlog_drop,
    ]
    .into_iter()
    .flatten()
    .reduce(u64::saturating_add)
}

/// A point at every interval in which the receiver's namespace had one of the events;
/// `None` when none had any (or the run predates the columns).
pub fn axis(host: &[HostSample]) -> Option<Axis> {
    let reader: Vec<&HostSample> = host.iter().filter(|h| h.side == Side::Reader).collect();
    let lines: Vec<Line> = SERIES
        .iter()
        .filter_map(|&(label, color, count)| {
            let points: Vec<(f64, f64)> = reader
                .iter()
                .filter_map(|h| count(h).filter(|&n| n > 0).map(|n| (h.t_s, n as f64)))
                .collect();
            (!points.is_empty()).then(|| Line::new(label, color, points).weighted(Weight::Points))
        })
        .collect();
    (!lines.is_empty()).then(|| Axis {
        label: "events in the interval (count)".into(),
        lines,
        ..Axis::default()
    })
}

/// The reader's collapse and prune calls, one point per call at its entry (µs, its
/// duration), a series per function; `None` when no call was traced.
pub fn calls_axis(reader: &[TraceRow<ReaderTrace>]) -> Option<Axis> {
    // Not the counters' colours: the two series share the panel.
    let colors = [ORANGE, PURPLE, SKY, GREY];
    let functions = TraceKind::ALL
        .into_iter()
        .filter(|k| matches!(k.source(), TraceSource::Function(_)));
    let lines: Vec<Line> = functions
        .zip(colors)
        .filter_map(|(kind, color)| {
            let points: Vec<(f64, f64)> = reader
                .iter()
                .filter(|r| r.kind == kind)
                .filter_map(|r| Some((r.t_s, f64::from(r.duration_ns?) / 1e3)))
                .collect();
            let label = format!("{} call, µs (trace-reader.csv)", kind.as_str());
            (!points.is_empty()).then(|| Line::new(label, color, points).weighted(Weight::Points))
        })
        .collect();
    (!lines.is_empty()).then(|| Axis {
        label: "call duration (µs)".into(),
        lines,
        ..Axis::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_receivers_intervals_with_events_are_marked() {
        let row = |t_s: f64, side: Side, collapsed: u64, dropped: u64| HostSample {
            tcp_collapsed: Some(collapsed),
            tcp_prune_called: Some(0),
            tcp_rcv_pruned: Some(dropped),
            tcp_rcvq_drop: Some(1),
            ..HostSample::empty(t_s, side)
        };
        let drops_only = |h: &HostSample| dropped(h);
        assert_eq!(drops_only(&row(0.1, Side::Reader, 0, 4)), Some(5));
        assert_eq!(dropped(&HostSample::empty(0.1, Side::Reader)), None);
        let host = vec![
            row(0.1, Side::Reader, 0, 0),
            row(0.2, Side::Reader, 7, 0),
            row(0.2, Side::Sender, 9, 0),
        ];
        let lines = |host: Vec<HostSample>| {
            let axis = axis(&host)?;
            Some(
                axis.lines
                    .iter()
                    .map(|l| l.points.len())
                    .collect::<Vec<_>>(),
            )
        };
        // Collapses at 0.2 s only (the sender's are not the receiver's); the refused
        // segment of each row is a drop in both.
        assert_eq!(lines(host), Some(vec![1, 2]));
        assert_eq!(lines(vec![HostSample::empty(0.1, Side::Reader)]), None);
    }

    #[test]
    fn each_traced_call_is_a_point_of_its_function_in_microseconds() {
        let call = |t_s, kind, ns| {
            let mut row = TraceRow::<ReaderTrace>::new(t_s, kind, 0);
            row.duration_ns = ns;
            row
        };
        let rows = [
            call(1.5, TraceKind::TcpCollapse, Some(1_263_490)),
            call(2.5, TraceKind::TcpPruneOfoQueue, Some(40_000)),
            call(3.0, TraceKind::TcpCollapse, Some(500)),
            call(3.5, TraceKind::RcvSpaceAdjust, None),
        ];
        let axis = calls_axis(&rows).unwrap();
        let lines: Vec<(&str, &[(f64, f64)])> = axis
            .lines
            .iter()
            .map(|l| (l.label.as_str(), l.points.as_slice()))
            .collect();
        assert_eq!(
            lines,
            [
                (
                    "tcp_collapse call, µs (trace-reader.csv)",
                    &[(1.5, 1263.49), (3.0, 0.5)][..]
                ),
                (
                    "tcp_prune_ofo_queue call, µs (trace-reader.csv)",
                    &[(2.5, 40.0)][..]
                ),
            ]
        );
        assert!(calls_axis(&rows[3..]).is_none());
    }
}

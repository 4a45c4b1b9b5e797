//! The receiver's queue events on the run picture: the intervals in which the kernel
//! collapsed the reader's receive queue, pruned it, or dropped segments for want of room
//! (host.csv's `TcpExt` columns, the receive side of Cloudflare's story).

use oscil_protocol::records::{HostSample, Side};

use crate::chart::{Axis, Line, Weight, BLUE, GREEN, VERMILLION};

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
        label: "events in the interval".into(),
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
}

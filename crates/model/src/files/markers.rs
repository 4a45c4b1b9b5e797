//! Marker latency end to end: how long an urgent message would wait behind the send queue.
//!
//! Every `--marker-every` from the session's start the daemon's writer notes, per flow, the
//! stream offset of its next write's first byte and its `CLOCK_REALTIME` as that write
//! begins ([`MarkerSchedule`]): the daemon keeps no queue of its own, so an urgent message
//! would go right behind what the kernel holds. The stream carries no framing; both ends
//! count bytes. The daemon sends each [`Marker`] over the control connection; the reader
//! notes when its application read passes the offset ([`FlowMarkers`]), mapping the daemon's
//! time through the clock offset (`crate::run::clock`). Everything here is pure: time is a
//! parameter.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::files::columns::Row;

/// One marker as the daemon announces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    pub flow: u32,
    /// The marker time it answers: `k` times the marker interval after the session's start
    /// (from 1; a writer that slept through several marks only the latest).
    pub k: u64,
    /// Bytes the daemon had written on the flow before the marker write: its first byte's
    /// offset in the stream.
    pub offset_bytes: u64,
    /// The daemon's `CLOCK_REALTIME` as the marker write began, ns since the Unix epoch.
    pub sent_unix_ns: u64,
}

/// The daemon writer's marker clock: which marker, if any, a write beginning at a given
/// time carries. Times are `CLOCK_REALTIME` ns, as the writer already reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerSchedule {
    start_unix_ns: u64,
    every_ns: u64,
    /// The next marker's time, so a write that carries none costs one comparison.
    next_unix_ns: u64,
}

impl MarkerSchedule {
    pub fn new(start_unix_ns: u64, every_ns: u64) -> Self {
        let every_ns = every_ns.max(1);
        MarkerSchedule {
            start_unix_ns,
            every_ns,
            next_unix_ns: start_unix_ns.saturating_add(every_ns),
        }
    }

    /// The marker a write beginning at `now_unix_ns` carries: the latest one due.
    pub fn due(&mut self, now_unix_ns: u64) -> Option<u64> {
        if now_unix_ns < self.next_unix_ns {
            return None;
        }
        let k = (now_unix_ns - self.start_unix_ns) / self.every_ns;
        self.next_unix_ns = self
            .start_unix_ns
            .saturating_add((k + 1).saturating_mul(self.every_ns));
        Some(k)
    }
}

pub const MARKERS_CSV: &str = "markers.csv";
/// `markers.csv`: one marker with when it was sent and read on the reader's run timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MarkerRow {
    pub flow: u32,
    pub k: u64,
    pub offset_bytes: u64,
    /// When the marker write began, seconds since the reader's session start: the daemon's
    /// time mapped through the clock offset.
    pub sent_t_s: f64,
    /// When the reader's read passed the offset; empty when it never did (the run ended
    /// first) or the reader no longer knew (see `MarkerCounts::expired`).
    pub read_t_s: Option<f64>,
    /// `read - sent` in µs, accurate to the clock's `uncertainty_us`; may be slightly
    /// negative within it. For a censored marker, `end of run - sent`: a lower bound.
    pub latency_us: Option<f64>,
    /// The marker was still unread when the run ended: `latency_us` is how long it had
    /// waited by then, at least its latency. False in runs recorded before the column.
    #[serde(default)]
    pub censored: bool,
}

/// What became of the markers, for `run.json`'s `markers`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerCounts {
    /// Markers the daemon announced.
    pub announced: u64,
    /// Markers whose offset a read passed: rows with a latency.
    pub resolved: u64,
    /// Markers the reader had not read up to when the run ended.
    pub unread: u64,
    /// Markers announced after the reader had read past them and forgotten when (it
    /// remembers a bounded number of reads per flow): rows without a latency.
    pub expired: u64,
    /// Markers not kept, past `max_kept` per flow, or out of order.
    pub dropped: u64,
}

/// A marker with the reader's time of the read that passed it, if known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    pub marker: Marker,
    pub read_unix_ns: Option<u64>,
    /// No read had passed it when the run ended (not merely forgotten when).
    pub unread: bool,
}

/// One flow's markers on the reader: reads and announcements may come in either order.
/// Reads leave a bounded history of (bytes read so far, time), so a marker announced after
/// the read that passed it still resolves exactly.
#[derive(Debug, Clone)]
pub struct FlowMarkers {
    read_bytes: u64,
    /// (bytes read after the read, its time), oldest first, at most `history_len`.
    history: VecDeque<(u64, u64)>,
    history_len: usize,
    /// Bytes read when the oldest remembered read began: an offset below it is forgotten.
    remembered_from_bytes: u64,
    /// Announced, not yet read past, in stream order.
    pending: VecDeque<Marker>,
    done: Vec<Resolved>,
    max_kept: usize,
    last_offset_bytes: Option<u64>,
    counts: MarkerCounts,
}

impl FlowMarkers {
    /// Remembers the last `history_len` reads and keeps at most `max_kept` markers.
    pub fn new(history_len: usize, max_kept: usize) -> Self {
        FlowMarkers {
            read_bytes: 0,
            history: VecDeque::with_capacity(history_len.min(1024)),
            history_len: history_len.max(1),
            remembered_from_bytes: 0,
            pending: VecDeque::new(),
            done: Vec::new(),
            max_kept,
            last_offset_bytes: None,
            counts: MarkerCounts::default(),
        }
    }

    /// A read of `bytes` completed at `now_unix_ns`.
    pub fn read(&mut self, bytes: u64, now_unix_ns: u64) {
        self.read_bytes = self.read_bytes.saturating_add(bytes);
        while self
            .pending
            .front()
            .is_some_and(|m| m.offset_bytes < self.read_bytes)
        {
            let marker = self.pending.pop_front().expect("checked");
            self.finish(marker, Some(now_unix_ns));
        }
        if self.history.len() == self.history_len {
            let (forgotten, _) = self.history.pop_front().expect("full");
            self.remembered_from_bytes = forgotten;
        }
        self.history.push_back((self.read_bytes, now_unix_ns));
    }

    /// The daemon announced `marker` (of this flow).
    pub fn announce(&mut self, marker: Marker) {
        self.counts.announced += 1;
        let in_order = self
            .last_offset_bytes
            .is_none_or(|last| marker.offset_bytes >= last);
        let kept = self.done.len() + self.pending.len();
        if !in_order || kept >= self.max_kept {
            self.counts.dropped += 1;
            return;
        }
        self.last_offset_bytes = Some(marker.offset_bytes);
        if marker.offset_bytes >= self.read_bytes {
            return self.pending.push_back(marker);
        }
        if marker.offset_bytes < self.remembered_from_bytes {
            self.counts.expired += 1;
            return self.done.push(Resolved {
                marker,
                read_unix_ns: None,
                unread: false,
            });
        }
        // The first remembered read after which more than the offset had been read.
        let i = self
            .history
            .partition_point(|&(read, _)| read <= marker.offset_bytes);
        let read_unix_ns = self.history.get(i).map(|&(_, at)| at);
        self.finish(marker, read_unix_ns);
    }

    fn finish(&mut self, marker: Marker, read_unix_ns: Option<u64>) {
        self.counts.resolved += u64::from(read_unix_ns.is_some());
        self.done.push(Resolved {
            marker,
            read_unix_ns,
            unread: false,
        });
    }

    /// Every marker, those never read past last, and what became of them.
    pub fn into_resolved(mut self) -> (Vec<Resolved>, MarkerCounts) {
        self.counts.unread += self.pending.len() as u64;
        let unread = self.pending.drain(..).map(|marker| Resolved {
            marker,
            read_unix_ns: None,
            unread: true,
        });
        self.done.extend(unread);
        (self.done, self.counts)
    }
}

impl MarkerCounts {
    pub fn add(&mut self, other: &MarkerCounts) {
        self.announced += other.announced;
        self.resolved += other.resolved;
        self.unread += other.unread;
        self.expired += other.expired;
        self.dropped += other.dropped;
    }
}

/// The reader's `CLOCK_REALTIME` at the session's start and at the run's end, ns since the
/// Unix epoch: the frame of a marker row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSpan {
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
}

/// The row of a marker on the reader's run timeline; `offset_ns` is the daemon's clock
/// minus the reader's. A marker unread at the end is censored: its latency is what it had
/// waited by `span.end_unix_ns`, a lower bound.
pub fn row(resolved: &Resolved, span: RunSpan, offset_ns: i128) -> MarkerRow {
    let m = &resolved.marker;
    let sent_ns = i128::from(m.sent_unix_ns) - offset_ns;
    let since_start_s = |ns: i128| (ns - i128::from(span.start_unix_ns)) as f64 / 1e9;
    let waited_until = match resolved.unread {
        true => Some(span.end_unix_ns),
        false => resolved.read_unix_ns,
    };
    MarkerRow {
        flow: m.flow,
        k: m.k,
        offset_bytes: m.offset_bytes,
        sent_t_s: since_start_s(sent_ns),
        read_t_s: resolved
            .read_unix_ns
            .map(|at| since_start_s(i128::from(at))),
        latency_us: waited_until.map(|at| (i128::from(at) - sent_ns) as f64 / 1000.0),
        censored: resolved.unread,
    }
}

impl Row for MarkerRow {
    const FILE: &'static str = MARKERS_CSV;
    /// All but `censored`, which came later.
    const FIRST_COLUMNS: usize = 6;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(k: u64, offset_bytes: u64, sent_unix_ns: u64) -> Marker {
        Marker {
            flow: 0,
            k,
            offset_bytes,
            sent_unix_ns,
        }
    }

    #[test]
    fn the_schedule_marks_the_first_write_at_or_after_each_marker_time() {
        let mut s = MarkerSchedule::new(1_000, 100);
        assert_eq!(s.due(1_000), None, "none at the start");
        assert_eq!(s.due(1_099), None);
        assert_eq!(s.due(1_100), Some(1));
        assert_eq!(s.due(1_150), None, "one per marker time");
        // A writer blocked past two marker times carries only the latest.
        assert_eq!(s.due(1_420), Some(4));
        assert_eq!(s.due(1_499), None);
        assert_eq!(s.due(1_500), Some(5));
    }

    #[test]
    fn a_marker_announced_before_its_bytes_resolves_at_the_read_that_passes_it() {
        let mut f = FlowMarkers::new(16, 100);
        f.read(1000, 10);
        f.announce(marker(1, 1000, 5)); // byte 1000 is the next one to read
        f.read(500, 20);
        f.announce(marker(2, 1600, 25));
        f.read(1, 30); // 1501 read: byte 1000 done at 20; byte 1600 not yet
        f.read(100, 40); // 1601 read: byte 1600 read now
        let (done, counts) = f.into_resolved();
        let times: Vec<_> = done.iter().map(|r| (r.marker.k, r.read_unix_ns)).collect();
        assert_eq!(times, vec![(1, Some(20)), (2, Some(40))]);
        assert_eq!(
            (counts.announced, counts.resolved, counts.unread),
            (2, 2, 0)
        );
    }

    #[test]
    fn a_marker_announced_after_its_bytes_resolves_from_the_history() {
        let mut f = FlowMarkers::new(4, 100);
        for t in [10, 20, 30, 40, 50, 60] {
            f.read(100, t); // after the read at t, 10 * t bytes were read
        }
        // Remembered: the reads ending at 300, 400, 500, 600 (the one ending at 300 began
        // at 200). Byte 250 came with the third read, byte 599 with the sixth.
        f.announce(marker(1, 250, 0));
        f.announce(marker(2, 399, 0));
        f.announce(marker(3, 400, 0));
        f.announce(marker(4, 599, 0));
        f.announce(marker(5, 600, 0)); // not read yet
        let (done, counts) = f.into_resolved();
        let times: Vec<_> = done.iter().map(|r| r.read_unix_ns).collect();
        assert_eq!(
            times,
            vec![Some(30), Some(40), Some(50), Some(60), None],
            "{done:?}"
        );
        assert_eq!(counts.unread, 1);
    }

    #[test]
    fn markers_older_than_the_history_or_out_of_order_are_counted_not_guessed() {
        let mut f = FlowMarkers::new(2, 3);
        for t in 1..=5 {
            f.read(100, t); // remembered: the reads ending at 400 and 500
        }
        f.announce(marker(1, 250, 0)); // read by a forgotten read
        f.announce(marker(2, 350, 0)); // the read ending at 400 began at 300
        f.announce(marker(3, 300, 0)); // goes back: dropped
        f.announce(marker(4, 450, 0));
        f.announce(marker(5, 460, 0)); // past max_kept
        let (done, counts) = f.into_resolved();
        let times: Vec<_> = done.iter().map(|r| r.read_unix_ns).collect();
        assert_eq!(times, vec![None, Some(4), Some(5)]);
        assert_eq!(
            counts,
            MarkerCounts {
                announced: 5,
                resolved: 2,
                unread: 0,
                expired: 1,
                dropped: 2,
            }
        );
    }

    #[test]
    fn rows_map_the_daemon_time_through_the_clock_offset() {
        // The daemon's clock runs 2 ms ahead; the reader started at 10 s.
        let resolved = Resolved {
            marker: marker(3, 4096, 13_002_000_000),
            read_unix_ns: Some(13_000_500_000),
            unread: false,
        };
        let span = RunSpan {
            start_unix_ns: 10_000_000_000,
            end_unix_ns: 20_000_000_000,
        };
        let row = row(&resolved, span, 2_000_000);
        assert_eq!(row.sent_t_s, 3.0);
        assert_eq!(row.read_t_s, Some(3.0005));
        assert_eq!(row.latency_us, Some(500.0));
        assert!(!row.censored);
        let expired = Resolved {
            read_unix_ns: None,
            ..resolved
        };
        assert_eq!(super::row(&expired, span, 0).latency_us, None);
        // Unread at the end (20 s), sent at 13.002 s: at least 6.998 s, and says so.
        let unread = Resolved {
            unread: true,
            ..expired
        };
        let censored = super::row(&unread, span, 0);
        assert_eq!(censored.read_t_s, None);
        assert_eq!(censored.latency_us, Some(6_998_000.0));
        assert!(censored.censored);
    }
}

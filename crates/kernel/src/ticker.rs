//! The sampling clock both ends share: ticks at `start + k * interval`, on absolute
//! deadlines so nothing drifts, on a thread of its own (async timers fire late when the
//! data path keeps every worker busy), and stoppable at any moment.

use std::ops::{ControlFlow, Range};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

pub struct Ticker {
    start: Instant,
    interval: Duration,
    /// Intervals before this index have been handed out.
    reported: u64,
}

impl Ticker {
    pub fn new(start: Instant, interval: Duration) -> Self {
        Ticker {
            start,
            interval,
            reported: 0,
        }
    }

    fn boundary(&self, index: u64) -> Instant {
        self.start + self.interval * u32::try_from(index).unwrap_or(u32::MAX)
    }

    /// Sleeps until the next interval ends and returns the intervals that ended since the
    /// last call (more than one if the thread woke late: none is skipped or repeated) and
    /// the moment it woke. Breaks with what `stop` received, or `None` if its sender is gone.
    pub fn wait<T>(&mut self, stop: &Receiver<T>) -> ControlFlow<Option<T>, (Range<u64>, Instant)> {
        let deadline = self.boundary(self.reported + 1);
        match stop.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(said) => return ControlFlow::Break(Some(said)),
            Err(RecvTimeoutError::Disconnected) => return ControlFlow::Break(None),
        }
        let now = Instant::now();
        let ended = (now.duration_since(self.start).as_nanos() / self.interval.as_nanos()) as u64;
        let intervals = self.reported..ended.max(self.reported + 1);
        self.reported = intervals.end;
        ControlFlow::Continue((intervals, now))
    }

    /// After a stop, the samples left to take, one per call until `None`: up to `end`
    /// intervals when the reader said how many its samples covered, otherwise up to the
    /// interval in progress unless less than a tenth of it has passed (a sample of almost
    /// nothing would read as a rate of almost anything). The whole intervals before the
    /// last are ticked on their deadlines, as before the stop: a side whose clock started a
    /// little after the reader's ends on the reader's last tick, not one short of it. The
    /// last, partial one is taken at once.
    pub fn finish(&mut self, end: Option<u64>) -> Option<(Range<u64>, Instant)> {
        let end = end.unwrap_or_else(|| intervals_by(self.start.elapsed(), self.interval));
        if self.reported + 1 < end {
            std::thread::sleep(
                self.boundary(self.reported + 1)
                    .saturating_duration_since(Instant::now()),
            );
            let now = Instant::now();
            let ended =
                (now.duration_since(self.start).as_nanos() / self.interval.as_nanos()) as u64;
            let intervals = self.reported..ended.clamp(self.reported + 1, end - 1);
            self.reported = intervals.end;
            return Some((intervals, now));
        }
        let intervals = self.reported..end;
        self.reported = self.reported.max(end);
        (!intervals.is_empty()).then(|| (intervals, Instant::now()))
    }
}

/// How many intervals a run that stops `elapsed` after its start samples: the ended ones,
/// plus the one in progress if a tenth of it has passed. The reader tells the daemon this
/// count so that both sides end on the same tick.
pub fn intervals_by(elapsed: Duration, interval: Duration) -> u64 {
    let ended = elapsed.as_nanos() / interval.as_nanos();
    let into_next = elapsed.as_nanos() % interval.as_nanos();
    (ended + u128::from(into_next >= interval.as_nanos() / 10)) as u64
}

/// The seconds a sample at `t_s` holds: the intervals it was handed, cut at `t_s` for the
/// last, partial one (work is filed under the interval it completed in). Both samplers
/// record it, so a tick that woke late says how much it covers instead of hiding a hole.
pub fn covered_s(t_s: f64, intervals: &Range<u64>, interval_s: f64) -> f64 {
    let end_s = (intervals.end as f64 * interval_s).min(t_s);
    (end_s - intervals.start as f64 * interval_s).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_tick_covers_every_interval_it_slept_through() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(covered_s(0.1003, &(0..1), 0.1), 0.1));
        assert!(close(covered_s(0.4501, &(1..4), 0.1), 0.3));
        // The last sample of a run, taken 30 ms into its interval.
        assert!(close(covered_s(0.53, &(5..6), 0.1), 0.03));
    }

    #[test]
    fn ticks_hand_out_every_interval_once_on_absolute_deadlines() {
        let interval = Duration::from_millis(20);
        let start = Instant::now();
        let mut ticker = Ticker::new(start, interval);
        let (_keep, stop) = std::sync::mpsc::channel::<()>();
        let mut next = 0;
        for _ in 0..5 {
            let ControlFlow::Continue((intervals, at)) = ticker.wait(&stop) else {
                panic!("not stopped")
            };
            assert_eq!(intervals.start, next, "no interval skipped or repeated");
            assert!(at >= start + interval * intervals.end as u32, "never early");
            next = intervals.end;
        }
        // A late wake-up hands out all the intervals it slept through at once.
        std::thread::sleep(interval * 3);
        let ControlFlow::Continue((intervals, _)) = ticker.wait(&stop) else {
            panic!("not stopped")
        };
        assert_eq!(intervals.start, next);
        assert!(intervals.end >= next + 3, "{intervals:?}");
    }

    #[test]
    fn stop_ends_the_wait_and_leaves_the_partial_interval() {
        let interval = Duration::from_secs(10);
        let mut ticker = Ticker::new(Instant::now() - Duration::from_secs(2), interval);
        let (tell, stop) = std::sync::mpsc::channel();
        tell.send(7u64).unwrap();
        assert_eq!(ticker.wait(&stop), ControlFlow::Break(Some(7)));
        drop(tell);
        assert_eq!(
            ticker.wait(&stop),
            ControlFlow::Break(None),
            "a dropped sender stops it too"
        );
        let (intervals, _) = ticker.finish(None).expect("2 s of a 10 s interval passed");
        assert_eq!(intervals, 0..1);
        assert_eq!(ticker.finish(None), None, "once");
        let mut fresh = Ticker::new(Instant::now(), interval);
        assert!(fresh.finish(None).is_none(), "barely begun");
    }

    #[test]
    fn the_last_samples_end_where_the_reader_said() {
        let interval = Duration::from_millis(100);
        // 0.5 s in, nothing handed out yet: the ended intervals up to the last are one late
        // tick, the last its own.
        let mut ticker = Ticker::new(Instant::now() - Duration::from_millis(500), interval);
        assert_eq!(ticker.finish(Some(6)).map(|(i, _)| i), Some(0..5));
        assert_eq!(ticker.finish(Some(6)).map(|(i, _)| i), Some(5..6));
        assert_eq!(ticker.finish(Some(6)), None);
        // A side whose clock is 150 ms behind the reader's: it waits for its own deadlines
        // and ends on the reader's last interval.
        let start = Instant::now() - Duration::from_millis(250);
        let mut behind = Ticker::new(start, interval);
        let (_keep, stop) = std::sync::mpsc::channel::<()>();
        assert!(behind.wait(&stop).is_continue());
        let (first, at) = behind.finish(Some(4)).unwrap();
        assert_eq!(first, 2..3);
        assert!(at >= start + interval * 3, "on its deadline");
        assert_eq!(behind.finish(Some(4)).map(|(i, _)| i), Some(3..4));
        assert_eq!(behind.finish(Some(4)), None);
        // Nothing beyond what this side already covered.
        assert_eq!(behind.finish(Some(2)), None);
        // The reader stopped 4.039 s in (its last sample partial), or 4.005 s in (too little
        // of the interval in progress to sample).
        let ms = Duration::from_millis;
        assert_eq!(intervals_by(ms(4039), interval), 41);
        assert_eq!(intervals_by(ms(4005), interval), 40);
        assert_eq!(intervals_by(ms(4010), interval), 41);
        assert_eq!(intervals_by(ms(4000), interval), 40);
    }
}

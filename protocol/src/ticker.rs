//! The sampling clock both ends share: ticks at `start + k * interval`, on absolute
//! deadlines so nothing drifts, on a thread of its own (async timers fire late when the
//! data path keeps every worker busy), and stoppable at any moment.

use std::ops::Range;
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
    /// the moment it woke. `None` once `stop` receives or its sender is gone.
    pub fn wait(&mut self, stop: &Receiver<()>) -> Option<(Range<u64>, Instant)> {
        let deadline = self.boundary(self.reported + 1);
        match stop.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return None,
        }
        let now = Instant::now();
        let ended = (now.duration_since(self.start).as_nanos() / self.interval.as_nanos()) as u64;
        let intervals = self.reported..ended.max(self.reported + 1);
        self.reported = intervals.end;
        Some((intervals, now))
    }

    /// After a stop: the interval in progress, unless less than a tenth of it has passed
    /// (a sample of almost nothing would read as a rate of almost anything).
    pub fn partial(&self) -> Option<(Range<u64>, Instant)> {
        let now = Instant::now();
        let since = now.saturating_duration_since(self.boundary(self.reported));
        (since >= self.interval / 10).then(|| (self.reported..self.reported + 1, now))
    }
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
        let (_keep, stop) = std::sync::mpsc::channel();
        let mut next = 0;
        for _ in 0..5 {
            let (intervals, at) = ticker.wait(&stop).unwrap();
            assert_eq!(intervals.start, next, "no interval skipped or repeated");
            assert!(at >= start + interval * intervals.end as u32, "never early");
            next = intervals.end;
        }
        // A late wake-up hands out all the intervals it slept through at once.
        std::thread::sleep(interval * 3);
        let (intervals, _) = ticker.wait(&stop).unwrap();
        assert_eq!(intervals.start, next);
        assert!(intervals.end >= next + 3, "{intervals:?}");
    }

    #[test]
    fn stop_ends_the_wait_and_leaves_the_partial_interval() {
        let interval = Duration::from_secs(10);
        let mut ticker = Ticker::new(Instant::now() - Duration::from_secs(2), interval);
        let (tell, stop) = std::sync::mpsc::channel();
        tell.send(()).unwrap();
        assert!(ticker.wait(&stop).is_none());
        let (intervals, _) = ticker.partial().expect("2 s of a 10 s interval passed");
        assert_eq!(intervals, 0..1);
        drop(tell);
        assert!(
            ticker.wait(&stop).is_none(),
            "a dropped sender stops it too"
        );
        let fresh = Ticker::new(Instant::now(), interval);
        assert!(fresh.partial().is_none(), "barely begun");
    }
}

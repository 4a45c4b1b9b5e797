//! How well each side's sampler kept its clock: ticks taken, intervals merged into a late
//! tick, rows missing, and how late the ticks woke. Computed from the rows themselves
//! (`t_s` and `span_s`), so a sampler that falls behind is never silent in `run.json`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How often both ends sample unless told: fine enough to see a slow phase's queue build,
/// coarse enough that a thousand flows' rows stay cheap.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// `run.json` `sampling`: one entry per side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    pub reader: SideSampling,
    pub sender: SideSampling,
}

impl Sampling {
    /// What the holes were, if there were any: the reason a run that ran its whole pattern
    /// still has holes.
    pub fn holes(&self) -> Option<String> {
        let said: Vec<String> = [("reader", &self.reader), ("sender", &self.sender)]
            .into_iter()
            .filter(|(_, s)| s.merged_intervals > 0 || s.missing_rows > 0)
            .map(|(side, s)| {
                format!(
                    "the {side}'s sampler fell behind ({} intervals merged into late ticks, {} rows missing)",
                    s.merged_intervals, s.missing_rows
                )
            })
            .collect();
        (!said.is_empty()).then(|| format!("pattern complete, but {}", said.join("; ")))
    }
}

/// One side's sampling over a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SideSampling {
    pub ticks: u64,
    /// Intervals that got no tick of their own: a tick that woke late covered them too.
    pub merged_intervals: u64,
    /// Flows missing from a tick (sockets the kernel no longer listed).
    pub missing_rows: u64,
    /// How late the ticks woke after their deadlines, milliseconds.
    pub lateness_p50_ms: f64,
    pub lateness_p99_ms: f64,
}

/// Tallies one side's ticks as they are recorded.
#[derive(Debug, Clone)]
pub struct Tally {
    flows: u64,
    interval_s: f64,
    ticks: u64,
    merged_intervals: u64,
    missing_rows: u64,
    lateness_s: Vec<f64>,
}

impl Tally {
    pub fn new(flows: u32, interval_s: f64) -> Self {
        Tally {
            flows: u64::from(flows),
            interval_s,
            ticks: 0,
            merged_intervals: 0,
            missing_rows: 0,
            lateness_s: Vec::new(),
        }
    }

    /// One tick at `t_s` with `rows` rows covering `span_s` seconds (0 when not recorded:
    /// one interval is assumed).
    pub fn tick(&mut self, t_s: f64, span_s: f64, rows: usize) {
        let interval_s = self.interval_s;
        self.ticks += 1;
        self.missing_rows += self.flows.saturating_sub(rows as u64);
        if span_s <= 0.0 {
            return;
        }
        let intervals = (span_s / interval_s).round();
        self.merged_intervals += intervals.max(1.0) as u64 - 1;
        // The last, partial sample of a run is taken when the run stops, not on a deadline.
        if span_s >= interval_s * 0.9 {
            // The tick waited for the end of the first interval it covers.
            let ended_s = (t_s / interval_s).floor() * interval_s;
            self.lateness_s
                .push((t_s - (ended_s - span_s + interval_s)).max(0.0));
        }
    }

    pub fn finish(mut self) -> SideSampling {
        self.lateness_s.sort_by(f64::total_cmp);
        let quantile_ms = |q: f64| {
            let n = self.lateness_s.len();
            (n > 0).then(|| self.lateness_s[((n - 1) as f64 * q).round() as usize] * 1e3)
        };
        SideSampling {
            ticks: self.ticks,
            merged_intervals: self.merged_intervals,
            missing_rows: self.missing_rows,
            lateness_p50_ms: quantile_ms(0.5).unwrap_or(0.0),
            lateness_p99_ms: quantile_ms(0.99).unwrap_or(0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn on_time_ticks_leave_no_holes() {
        let mut tally = Tally::new(3, 0.1);
        for k in 1..=100 {
            // 2 ms late, every tick.
            tally.tick(k as f64 * 0.1 + 0.002, 0.1, 3);
        }
        // The partial last sample, 30 ms into its interval: not a late tick.
        tally.tick(10.03, 0.03, 3);
        let side = tally.finish();
        assert_eq!(
            (side.ticks, side.merged_intervals, side.missing_rows),
            (101, 0, 0)
        );
        assert!(close(side.lateness_p50_ms, 2.0), "{side:?}");
        assert!(close(side.lateness_p99_ms, 2.0), "{side:?}");
        let sampling = Sampling {
            reader: side.clone(),
            sender: side,
        };
        assert_eq!(sampling.holes(), None);
    }

    #[test]
    fn a_late_tick_counts_the_intervals_it_merged_and_how_late_it_was() {
        let mut tally = Tally::new(2, 0.1);
        tally.tick(0.101, 0.1, 2);
        // Waited for 0.2, woke at 0.45: intervals 1..4 (0.1 to 0.4) in one tick, 250 ms late.
        tally.tick(0.45, 0.3, 2);
        // One flow's row is missing.
        tally.tick(0.501, 0.1, 1);
        let side = tally.finish();
        assert_eq!(
            (side.ticks, side.merged_intervals, side.missing_rows),
            (3, 2, 1)
        );
        assert!(close(side.lateness_p99_ms, 250.0), "{side:?}");
        assert!(close(side.lateness_p50_ms, 1.0), "{side:?}");
        let sampling = Sampling {
            reader: SideSampling::default(),
            sender: side,
        };
        let holes = sampling.holes().expect("holes");
        assert!(
            holes.contains("sender's sampler fell behind (2 intervals merged"),
            "{holes}"
        );
        assert!(!holes.contains("reader"), "{holes}");
    }
}

//! Whether a run's reader and daemon ran when they should: the sibling of
//! [`crate::run::link_health`]. A sampler that wakes late, or merges intervals into a late tick,
//! runs on a host that did not give the run's ends the CPU when due, and a reader starved
//! of CPU stops reading: the run then measures the host, not TCP (issue 38: a 16 KiB
//! send-buffer run 87% receive-window limited at 2.8 Mbit/s on a busy machine). Such a run
//! is spoiled like one whose link was late: the lab redoes it once and the report counts
//! it in no configuration. Judged from `run.json`'s `sampling`, which both ends' rows give:
//! the samplers' own lateness, and the run-queue wait of every thread of each end's
//! process (`host.csv` `run_queue_wait_ms`), since a sampler in the real-time class wakes
//! on time while the reading threads beside it wait for a CPU.

use crate::run::sampling::{Sampling, SideSampling};

/// The latest a side's 99th-percentile tick may wake, as a share of the interval: half an
/// interval late, every hundredth tick, is a process the scheduler kept waiting.
pub const LATENESS_P99_INTERVAL_SHARE_MAX: f64 = 0.5;

/// ...but never less than this: a few milliseconds late on a 10 ms interval is a busy host,
/// not a reader that stopped reading (a short run's p99 is its single worst tick).
pub const LATENESS_P99_FLOOR_MS: f64 = 50.0;

/// The most intervals a side may merge into late ticks, as a share of its ticks: 1%, and
/// never fewer than [`MERGED_FLOOR`] (one late tick on a 40-tick run is not starvation).
pub const MERGED_SHARE_MAX: f64 = 0.01;
pub const MERGED_FLOOR: f64 = 2.0;

/// The most a side's threads may wait for a CPU in one second of the run, at the 99th
/// percentile of its seconds: half of every second ready to run and not running is a
/// reader that stops reading for whole round trips, or a sender that stops writing. A
/// light thread on a busy host waits a few milliseconds per wake-up, up to a few hundred
/// milliseconds a second (docs/lab.md has the figures).
pub const RUN_QUEUE_WAIT_MS_PER_S_MAX: f64 = 500.0;

/// Why the run's reader or sender was starved, in words; `None` when both ran on time.
pub fn starved(sampling: &Sampling, interval_us: u64) -> Option<String> {
    let said: Vec<String> = [("reader", &sampling.reader), ("sender", &sampling.sender)]
        .into_iter()
        .filter_map(|(side, s)| side_starved(s, interval_us).map(|why| format!("the {side} {why}")))
        .collect();
    (!said.is_empty()).then(|| {
        format!(
            "{}: the host did not run it when due, not the path asked for",
            said.join("; ")
        )
    })
}

fn side_starved(side: &SideSampling, interval_us: u64) -> Option<String> {
    let interval_ms = interval_us as f64 / 1000.0;
    let late_max_ms = (interval_ms * LATENESS_P99_INTERVAL_SHARE_MAX).max(LATENESS_P99_FLOOR_MS);
    let merged_max = (side.ticks as f64 * MERGED_SHARE_MAX).max(MERGED_FLOOR);
    let late = side.lateness_p99_ms > late_max_ms;
    let merged = side.merged_intervals as f64 > merged_max;
    let mut why = Vec::new();
    if late || merged {
        why.push(format!(
            "woke {:.1} ms late at the 99th percentile (at most {late_max_ms:.1} ms for a {interval_ms:.0} ms interval) and merged {} of {} intervals (at most 1%, and never fewer than 2)",
            side.lateness_p99_ms, side.merged_intervals, side.ticks
        ));
    }
    if let Some(wait_ms) = side
        .run_queue_wait_p99_ms_per_s
        .filter(|&w| w > RUN_QUEUE_WAIT_MS_PER_S_MAX)
    {
        why.push(format!(
            "waited {wait_ms:.0} ms of a second for a CPU at the 99th percentile of the run's seconds (at most {RUN_QUEUE_WAIT_MS_PER_S_MAX:.0} ms)"
        ));
    }
    (!why.is_empty()).then(|| why.join(" and "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(ticks: u64, merged: u64, p99_ms: f64) -> SideSampling {
        SideSampling {
            ticks,
            merged_intervals: merged,
            missing_rows: 0,
            lateness_p50_ms: 0.1,
            lateness_p99_ms: p99_ms,
            ..SideSampling::default()
        }
    }

    #[test]
    fn a_side_late_past_half_an_interval_or_merging_over_one_percent_is_starved() {
        let on_time = side(600, 0, 2.0);
        let both = |reader, sender| Sampling { reader, sender };
        // 100 ms interval: 50 ms at p99 and 6 of 600 merged are the limits, still on time.
        assert_eq!(
            starved(&both(on_time.clone(), side(600, 6, 50.0)), 100_000),
            None
        );
        let late = starved(&both(side(600, 0, 50.1), on_time.clone()), 100_000).unwrap();
        assert!(late.starts_with("the reader woke 50.1 ms late"), "{late}");
        assert!(!late.contains("the sender"), "{late}");
        let merged = starved(&both(on_time.clone(), side(600, 7, 1.0)), 100_000).unwrap();
        assert!(
            merged.starts_with("the sender ") && merged.contains("merged 7 of 600"),
            "{merged}"
        );
        // A 10 ms interval: the floor, 50 ms, holds; 6 ms at p99 is a busy host.
        assert!(starved(&both(side(6000, 0, 6.0), on_time.clone()), 10_000).is_none());
        assert!(starved(&both(side(6000, 0, 50.1), on_time.clone()), 10_000).is_some());
        // A 40-tick run: one merged interval is not starvation, three are.
        assert!(starved(&both(side(40, 1, 1.0), on_time.clone()), 100_000).is_none());
        assert!(starved(&both(side(40, 3, 1.0), on_time), 100_000).is_some());
    }

    #[test]
    fn a_side_whose_threads_waited_half_a_second_for_a_cpu_is_starved() {
        let waited = |ms: Option<f64>| SideSampling {
            run_queue_wait_p99_ms_per_s: ms,
            ..side(600, 0, 2.0)
        };
        let both = |reader, sender| Sampling { reader, sender };
        // Not measured (a run before the column, a host without schedstat): not judged.
        assert_eq!(starved(&both(waited(None), waited(None)), 100_000), None);
        // 500 ms of a second is the limit, still on time, whatever the interval.
        for interval_us in [10_000, 100_000, 1_000_000] {
            let at_limit = both(waited(Some(500.0)), waited(Some(0.0)));
            assert_eq!(starved(&at_limit, interval_us), None);
        }
        // The reader's sampler woke on time; its reading threads waited.
        let why = starved(&both(waited(Some(900.0)), waited(Some(3.0))), 100_000).unwrap();
        assert!(
            why.starts_with("the reader waited 900 ms of a second for a CPU"),
            "{why}"
        );
        assert!(
            !why.contains("woke") && !why.contains("the sender"),
            "{why}"
        );
        let sender = starved(&both(waited(Some(3.0)), waited(Some(501.0))), 10_000).unwrap();
        assert!(sender.starts_with("the sender waited 501 ms"), "{sender}");
        // Late ticks and a long wait are said together.
        let late_and_waiting = SideSampling {
            run_queue_wait_p99_ms_per_s: Some(700.0),
            ..side(600, 0, 80.0)
        };
        let both_said = starved(&both(late_and_waiting, waited(None)), 100_000).unwrap();
        assert!(
            both_said.contains("woke 80.0 ms late") && both_said.contains("and waited 700 ms"),
            "{both_said}"
        );
    }
}

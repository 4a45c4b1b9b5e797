//! How well each side's sampler kept its clock: ticks taken, intervals merged into a late
//! tick, intervals with no tick at all, rows missing, and how late the ticks woke. Computed
//! from the rows themselves (`t_s` and `span_s`) against the intervals the reader ran, so
//! a sampler that falls behind, or a daemon that sends less than it sampled, is never
//! silent in `run.json`; and how long the side's threads waited for a CPU (`host.csv`
//! `run_queue_wait_ms`), which a sampler in the real-time class does not feel.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::files::rows::HostSample;
use crate::host::HostLoadSource;
use crate::run::host_limit::CPU_SATURATED_PCT;

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
    /// What the holes were, one phrase each naming its side (`the sender's record has no
    /// sample for 35 of the intervals the reader ran`); empty when there were none.
    pub fn holes(&self) -> Vec<String> {
        [("reader", &self.reader), ("sender", &self.sender)]
            .into_iter()
            .flat_map(|(side, s)| {
                s.holes()
                    .into_iter()
                    .map(move |h| format!("the {side}'s {h}"))
            })
            .collect()
    }
}

/// One side's sampling over a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SideSampling {
    pub ticks: u64,
    /// Intervals that got no tick of their own: a tick that woke late covered them too.
    pub merged_intervals: u64,
    /// Intervals the reader ran that no tick of this side covers, not even merged: samples
    /// never taken or never sent. Absent from runs recorded before it was counted.
    #[serde(default)]
    pub missing_intervals: u64,
    /// Flows missing from a tick (sockets the kernel no longer listed, or rows not sent).
    pub missing_rows: u64,
    /// Flows of the session with no row at all on this side.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows_without_rows: Vec<u32>,
    /// How late the ticks woke after their deadlines, milliseconds.
    pub lateness_p50_ms: f64,
    pub lateness_p99_ms: f64,
    /// How long the side's threads waited for a CPU in one second of the run (each row's
    /// longest-waiting thread, summed over the rows of the second), milliseconds, at the
    /// 99th percentile of the run's seconds. Absent where the rows do not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_queue_wait_p99_ms_per_s: Option<f64>,
    /// Packets the side's host dropped below TCP over the run: its egress qdisc's drops
    /// and its softnet backlog's (`host.csv` `qdisc_drops` + `softnet_dropped`). Absent
    /// where the rows do not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_dropped_packets: Option<u64>,
    /// The share of the side's rows whose busiest CPU was at least
    /// [`crate::run::host_limit::CPU_SATURATED_PCT`] busy (`host.csv` `cpu_busy_max_pct`),
    /// 0 to 1. Absent where the rows do not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_saturated_share: Option<f64>,
}

impl SideSampling {
    /// What this side's record lacks, one phrase each; empty when nothing.
    pub fn holes(&self) -> Vec<String> {
        let mut said = Vec::new();
        if self.missing_intervals > 0 {
            said.push(format!(
                "record has no sample for {} of the intervals the reader ran",
                self.missing_intervals
            ));
        }
        if self.merged_intervals > 0 || self.missing_rows > 0 {
            said.push(format!(
                "sampler fell behind ({} intervals merged into late ticks, {} rows missing)",
                self.merged_intervals, self.missing_rows
            ));
        }
        if !self.flows_without_rows.is_empty() {
            let flows: Vec<String> = self.flows_without_rows.iter().map(u32::to_string).collect();
            said.push(format!(
                "record has no row at all for flow {}",
                flows.join(", ")
            ));
        }
        said
    }
}

/// Tallies one side's ticks as they are recorded.
#[derive(Debug, Clone)]
pub struct Tally {
    interval_s: f64,
    ticks: u64,
    merged_intervals: u64,
    missing_rows: u64,
    /// Rows per flow of the session.
    rows_by_flow: Vec<u64>,
    /// The last tick's span, seconds: the run's last tick covers up to the end, which may
    /// fall anywhere in an interval.
    last_span_s: f64,
    lateness_s: Vec<f64>,
    /// The run-queue wait of each second of the run that has rows which say it (ms), and
    /// the second being summed.
    wait_ms_by_second: Vec<f64>,
    waiting: Option<(u64, f64)>,
    /// The host's drops so far, and rows that said them.
    host_dropped_packets: Option<u64>,
    /// Rows with a CPU figure, and those whose busiest CPU was saturated.
    cpu_rows: u64,
    cpu_saturated_rows: u64,
    /// Rows that carried each [`HostLoadSource`]'s columns, in its order.
    load_rows: [u64; 3],
}

impl Tally {
    pub fn new(flows: u32, interval_s: f64) -> Self {
        Tally {
            interval_s,
            ticks: 0,
            merged_intervals: 0,
            missing_rows: 0,
            rows_by_flow: vec![0; flows as usize],
            last_span_s: 0.0,
            lateness_s: Vec::new(),
            wait_ms_by_second: Vec::new(),
            waiting: None,
            host_dropped_packets: None,
            cpu_rows: 0,
            cpu_saturated_rows: 0,
            load_rows: [0; 3],
        }
    }

    /// A `host.csv` row of this side: its run-queue wait, and its host's own load.
    pub fn host(&mut self, row: &HostSample) {
        self.run_queue_wait(row.t_s, row.run_queue_wait_ms);
        if let Some(dropped) = row.host_dropped_packets() {
            let sum = self.host_dropped_packets.get_or_insert(0);
            *sum = sum.saturating_add(dropped);
        }
        if let Some(pct) = row.cpu_busy_max_pct.filter(|p| p.is_finite()) {
            self.cpu_rows += 1;
            self.cpu_saturated_rows += u64::from(pct >= CPU_SATURATED_PCT);
        }
        let filled = [
            row.qdisc_drops.is_some(),
            row.softnet_dropped.is_some(),
            row.cpu_busy_max_pct.is_some(),
        ];
        for (count, filled) in self.load_rows.iter_mut().zip(filled) {
            *count += u64::from(filled);
        }
    }

    /// The sources of the host's load no row of this side carried (none before any row).
    pub fn host_load_missing(&self) -> Vec<HostLoadSource> {
        if self.ticks == 0 {
            return Vec::new();
        }
        HostLoadSource::ALL
            .into_iter()
            .zip(self.load_rows)
            .filter(|&(_, rows)| rows == 0)
            .map(|(source, _)| source)
            .collect()
    }

    /// A row at `t_s` whose longest-waiting thread waited `wait_ms` for a CPU since the
    /// last; rows come in time order, so a second is done when a row of a later one comes.
    pub fn run_queue_wait(&mut self, t_s: f64, wait_ms: Option<f64>) {
        let Some(wait_ms) = wait_ms.filter(|w| w.is_finite() && t_s.is_finite()) else {
            return;
        };
        let second = t_s.max(0.0) as u64;
        match &mut self.waiting {
            Some((at, sum_ms)) if *at == second => *sum_ms += wait_ms,
            waiting => {
                if let Some((_, sum_ms)) = waiting.replace((second, wait_ms)) {
                    self.wait_ms_by_second.push(sum_ms);
                }
            }
        }
    }

    /// One tick at `t_s` with rows for `flows` covering `span_s` seconds (0 when not
    /// recorded: one interval is assumed).
    pub fn tick(&mut self, t_s: f64, span_s: f64, flows: impl IntoIterator<Item = u32>) {
        let interval_s = self.interval_s;
        self.ticks += 1;
        let mut rows = 0;
        for flow in flows {
            rows += 1;
            if let Some(count) = self.rows_by_flow.get_mut(flow as usize) {
                *count += 1;
            }
        }
        self.missing_rows += (self.rows_by_flow.len() as u64).saturating_sub(rows);
        self.last_span_s = span_s;
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

    /// Intervals the last tick may stand for beyond those counted for it (its span rounded,
    /// at least one). A tick on a deadline spans whole intervals and stands for them; the
    /// run's last, taken where the side stopped, spans part of one, on clocks one message
    /// apart: it may stand for its span rounded up, plus one.
    fn last_tick_slack(&self) -> u64 {
        let intervals = self.last_span_s / self.interval_s;
        if self.ticks == 0 || (intervals - intervals.round()).abs() < 1e-6 {
            return 0;
        }
        (intervals.ceil() as u64 + 1).saturating_sub((intervals.round() as u64).max(1))
    }

    /// The side's sampling over a run whose reader ran `intervals_run` intervals.
    pub fn finish(mut self, intervals_run: u64) -> SideSampling {
        let covered = self.ticks + self.merged_intervals + self.last_tick_slack();
        let flows_without_rows = (0..)
            .zip(&self.rows_by_flow)
            .filter(|&(_, &rows)| rows == 0)
            .map(|(flow, _)| flow)
            .collect();
        self.lateness_s.sort_by(f64::total_cmp);
        let quantile_ms = |q: f64| quantile(&self.lateness_s, q).map(|s| s * 1e3);
        self.wait_ms_by_second
            .extend(self.waiting.map(|(_, sum_ms)| sum_ms));
        self.wait_ms_by_second.sort_by(f64::total_cmp);
        SideSampling {
            ticks: self.ticks,
            merged_intervals: self.merged_intervals,
            missing_intervals: intervals_run.saturating_sub(covered),
            missing_rows: self.missing_rows,
            flows_without_rows,
            lateness_p50_ms: quantile_ms(0.5).unwrap_or(0.0),
            lateness_p99_ms: quantile_ms(0.99).unwrap_or(0.0),
            run_queue_wait_p99_ms_per_s: quantile(&self.wait_ms_by_second, 0.99),
            host_dropped_packets: self.host_dropped_packets,
            cpu_saturated_share: (self.cpu_rows > 0)
                .then(|| self.cpu_saturated_rows as f64 / self.cpu_rows as f64),
        }
    }
}

/// The `q` quantile of `sorted`, the nearest rank; `None` when it is empty.
fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    (n > 0).then(|| sorted[((n - 1) as f64 * q).round() as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn host_rows_sum_drops_and_count_saturated_cpus_and_missing_sources() {
        let mut tally = Tally::new(1, 0.1);
        let row = |k: u32, qdisc: Option<u64>, softnet: Option<u64>, cpu: Option<f64>| HostSample {
            qdisc_drops: qdisc,
            softnet_dropped: softnet,
            cpu_busy_max_pct: cpu,
            ..HostSample::empty(f64::from(k) * 0.1, crate::files::rows::Side::Sender)
        };
        // 4 rows: drops 2 + 0, 3 + 1, none, 0 + 0; CPUs 99, 98, 50, 97.9.
        for (k, (q, s, cpu)) in [
            (Some(2), Some(0), Some(99.0)),
            (Some(3), Some(1), Some(98.0)),
            (None, Some(0), Some(50.0)),
            (Some(0), Some(0), Some(97.9)),
        ]
        .into_iter()
        .enumerate()
        {
            tally.tick(f64::from(k as u32 + 1) * 0.1, 0.1, [0]);
            tally.host(&row(k as u32 + 1, q, s, cpu));
        }
        assert!(tally.host_load_missing().is_empty());
        let side = tally.finish(4);
        assert_eq!(side.host_dropped_packets, Some(6));
        assert_eq!(side.cpu_saturated_share, Some(0.5));
        // Rows without the columns: each source named missing, nothing summed.
        let mut old = Tally::new(1, 0.1);
        old.tick(0.1, 0.1, [0]);
        old.host(&row(1, None, None, None));
        assert_eq!(old.host_load_missing(), HostLoadSource::ALL);
        let side = old.finish(1);
        assert_eq!(
            (side.host_dropped_packets, side.cpu_saturated_share),
            (None, None)
        );
    }

    #[test]
    fn on_time_ticks_leave_no_holes() {
        let mut tally = Tally::new(3, 0.1);
        for k in 1..=100 {
            // 2 ms late, every tick.
            tally.tick(k as f64 * 0.1 + 0.002, 0.1, 0..3);
        }
        // The partial last sample, 30 ms into its interval: not a late tick.
        tally.tick(10.03, 0.03, 0..3);
        // 10.03 s: 100 intervals ended and a tenth of the next passed.
        let side = tally.finish(101);
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
        assert!(sampling.holes().is_empty());
    }

    #[test]
    fn a_late_tick_counts_the_intervals_it_merged_and_how_late_it_was() {
        let mut tally = Tally::new(2, 0.1);
        tally.tick(0.101, 0.1, 0..2);
        // Waited for 0.2, woke at 0.45: intervals 1..4 (0.1 to 0.4) in one tick, 250 ms late.
        tally.tick(0.45, 0.3, 0..2);
        // One flow's row is missing.
        tally.tick(0.501, 0.1, [1]);
        let side = tally.finish(5);
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
        let holes = sampling.holes().join("; ");
        assert!(
            holes.contains("sender's sampler fell behind (2 intervals merged"),
            "{holes}"
        );
        assert!(!holes.contains("reader"), "{holes}");
        assert!(!holes.contains("no sample"), "{holes}");
    }

    #[test]
    fn intervals_no_tick_covers_are_missing_even_when_each_tick_looks_on_time() {
        // Five on-time ticks of a session whose reader ran 40 intervals.
        let mut tally = Tally::new(2, 0.1);
        for k in 1..=5 {
            tally.tick(k as f64 * 0.1 + 0.001, 0.1, 0..2);
        }
        let side = tally.clone().finish(40);
        assert_eq!(
            (side.ticks, side.merged_intervals, side.missing_intervals),
            (5, 0, 35)
        );
        // A last, partial tick may stand for one interval more, no further.
        tally.tick(3.93, 0.03, 0..2);
        assert_eq!(tally.clone().finish(40).missing_intervals, 33);
        // A last tick of 1.4 intervals (one counted) stands for up to three: its span
        // rounded up, plus one.
        tally.tick(4.04, 0.14, 0..2);
        assert_eq!(tally.finish(41).missing_intervals, 41 - 6 - 3);
        let sampling = Sampling {
            reader: SideSampling::default(),
            sender: side,
        };
        let holes = sampling.holes().join("; ");
        assert!(
            holes.contains("the sender's record has no sample for 35 of the intervals"),
            "{holes}"
        );
    }

    #[test]
    fn the_wait_for_a_cpu_is_summed_by_second_of_the_run() {
        let mut tally = Tally::new(1, 0.1);
        assert_eq!(tally.clone().finish(0).run_queue_wait_p99_ms_per_s, None);
        // Second 0: 10 rows of 1 ms; second 1: 9 rows of 60 ms (540 ms); second 2: one
        // row that does not say.
        for k in 1..=9 {
            tally.run_queue_wait(k as f64 * 0.1, Some(1.0));
        }
        tally.run_queue_wait(0.99, Some(1.0));
        for k in 10..19 {
            tally.run_queue_wait(k as f64 * 0.1 + 0.001, Some(60.0));
        }
        tally.run_queue_wait(2.0, None);
        let side = tally.finish(20);
        assert!(
            close(side.run_queue_wait_p99_ms_per_s.unwrap(), 540.0),
            "{side:?}"
        );
    }

    #[test]
    fn a_flow_with_no_row_is_named() {
        let mut tally = Tally::new(3, 0.1);
        for k in 1..=4 {
            tally.tick(k as f64 * 0.1, 0.1, [0, 2]);
        }
        let side = tally.finish(4);
        assert_eq!((side.missing_rows, side.missing_intervals), (4, 0));
        assert_eq!(side.flows_without_rows, [1]);
        let holes = side.holes().join("; ");
        assert!(holes.contains("no row at all for flow 1"), "{holes}");
    }
}

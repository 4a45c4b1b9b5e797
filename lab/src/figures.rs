//! The two figures the lab shows per run and per configuration: goodput at the receiver
//! over the fast phases, and the sender's queued bytes (wmem_queued, summed over flows)
//! over the slow phases. Read from the run directory, as the report reads it.

use std::collections::BTreeMap;
use std::path::Path;

use oscil_protocol::pattern::phase_of_sample;
use oscil_protocol::{rundir, Phase, Run};

/// One run's figures; `None` where the run has no such phase or no samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunFigures {
    pub fast_goodput_bps: Option<f64>,
    pub slow_queued_bytes: Option<f64>,
}

pub fn load(dir: &Path) -> Option<RunFigures> {
    rundir::load(dir).ok().map(|run| figures(&run))
}

pub fn figures(run: &Run) -> RunFigures {
    let fast_s: f64 = run
        .meta
        .schedule
        .iter()
        .filter(|span| span.phase == Phase::Fast)
        .map(|span| span.end_s - span.start_s)
        .sum();
    let fast_bytes: u64 = run
        .reader
        .iter()
        .filter(|r| r.phase == Phase::Fast)
        .map(|r| r.bytes)
        .sum();
    let interval_s = run.meta.config.interval_us as f64 / 1e6;
    let mut queued_at: BTreeMap<u64, f64> = BTreeMap::new();
    for row in &run.sender {
        if phase_of_sample(&run.meta.schedule, row.t_s, interval_s) == Some(Phase::Slow) {
            let slot = (row.t_s / interval_s).round() as u64;
            *queued_at.entry(slot).or_default() += row.wmem_queued as f64;
        }
    }
    RunFigures {
        fast_goodput_bps: (fast_s > 0.0).then(|| fast_bytes as f64 * 8.0 / fast_s),
        slow_queued_bytes: mean(queued_at.values().copied()),
    }
}

pub fn mean(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values
        .into_iter()
        .fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// "+3.2%" against a baseline value, or "base" for the baseline itself.
pub fn change(value: Option<f64>, baseline: Option<f64>, is_baseline: bool) -> String {
    match (value, baseline) {
        _ if is_baseline => "base".into(),
        (Some(v), Some(b)) if b != 0.0 => format!("{:+.1}%", (v / b - 1.0) * 100.0),
        _ => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_against_the_baseline() {
        assert_eq!(change(Some(110.0), Some(100.0), false), "+10.0%");
        assert_eq!(change(Some(25.0), Some(100.0), false), "-75.0%");
        assert_eq!(change(Some(1.0), Some(1.0), true), "base");
        assert_eq!(change(None, Some(1.0), false), "-");
        assert_eq!(mean([1.0, 2.0, 6.0]), Some(3.0));
        assert_eq!(mean([]), None);
    }
}

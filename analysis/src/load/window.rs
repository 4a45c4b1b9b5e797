//! One run's totals over some of its cycles, and the facts of the whole run beside them:
//! what the load stage hands the figures, every one of which is computed from a window.

use oscil_figures::Totals;
use oscil_model::run::RunCost;

/// One run's phase totals over some of its cycles: what every figure is computed from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Window {
    pub fast: Totals,
    pub slow: Totals,
    pub sender_page_bytes: f64,
    pub reader_page_bytes: f64,
    pub run: RunFacts,
}

/// Facts of a whole run that no phase owns, the same in every window of it: what each
/// end's process spent over the session, and the writer's wake-ups.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFacts {
    /// Bytes the reader read over the whole run.
    pub bytes_read: u64,
    pub cost: Option<RunCost>,
    /// The most not-sent bytes any flow's writer found at a POLLOUT wake-up over the
    /// session (run.json `wakeups`): the figure of runs recorded before sender.csv's
    /// wake-up columns.
    pub pollout_notsent_max_bytes: Option<u64>,
    /// CPU seconds of the lab's link emulator over the run (its `link.json`).
    pub link_cpu_s: Option<f64>,
    /// How far the marker latencies may be off: half the best clock exchange's round trip
    /// (run.json `clock.uncertainty_us`); `None` in a run without markers.
    pub clock_uncertainty_us: Option<f64>,
    /// The slow phases' reading rate the reader recorded (run.json `config.slow_rate`,
    /// mean over its cycles), bit/s; `None` in runs before it was recorded.
    pub slow_rate_bps: Option<f64>,
}

impl Window {
    /// Both phases together (host memory and the lowest RTT are over the whole window).
    pub fn both(&self) -> Totals {
        let mut both = self.fast.clone();
        both.merge(&self.slow);
        both
    }
}

//! The reading pattern as a pure state machine: given the time and the bytes read so far,
//! what a flow does next. No I/O and no clock of its own, so it is tested on made-up time.
//!
//! Time is cut into one-second windows aligned to each phase's start (the last window of a
//! phase may be shorter). A fast window reads without limit; a full one-second fast window
//! updates the peak (a phase shorter than a second counts at its rate per second instead).
//! Entering a slow phase fixes the budget at `fraction` x peak; each slow window reads
//! exactly that budget (a shorter last window, its share of it), then waits for the
//! window to end.

use oscil_protocol::{PatternConfig, Phase, PhaseSpan};

/// What the flow's reading loop does next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Read what arrives, at most `max_bytes` in all (`None`: no limit), until `until_s`.
    Read {
        max_bytes: Option<u64>,
        until_s: f64,
    },
    /// Read nothing until `until_s`.
    Wait { until_s: f64 },
    /// The pattern is over.
    Done,
}

/// A one-second (or shorter, at a phase's end) window of one phase.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Window {
    span: usize,
    index: u64,
    start_s: f64,
    end_s: f64,
}

impl Window {
    fn length_s(&self) -> f64 {
        self.end_s - self.start_s
    }
}

#[derive(Debug, Clone)]
pub struct Pacer {
    schedule: Vec<PhaseSpan>,
    fraction: f64,
    window: Option<Window>,
    window_bytes: u64,
    peak_second_bytes: u64,
    budget_bytes: u64,
    /// The span whose budget is in `budget_bytes`.
    budget_span: Option<usize>,
}

impl Pacer {
    pub fn new(config: &PatternConfig) -> Self {
        Pacer {
            schedule: config.schedule(),
            fraction: config.fraction,
            window: None,
            window_bytes: 0,
            peak_second_bytes: 0,
            budget_bytes: 0,
            budget_span: None,
        }
    }

    /// The highest byte count of any one-second fast window so far.
    pub fn peak_second_bytes(&self) -> u64 {
        self.peak_second_bytes
    }

    /// The slow budget of the current window; 0 outside a slow phase.
    pub fn budget_bytes(&self) -> u64 {
        match self.window {
            Some(w) if self.schedule[w.span].phase == Phase::Slow => {
                (self.budget_bytes as f64 * w.length_s().min(1.0)).round() as u64
            }
            _ => 0,
        }
    }

    /// Counts `bytes` read at `t_s` (seconds since the session's start).
    pub fn record(&mut self, t_s: f64, bytes: u64) {
        self.advance(t_s);
        self.window_bytes += bytes;
    }

    /// What to do at `t_s`.
    pub fn step(&mut self, t_s: f64) -> Step {
        self.advance(t_s);
        let Some(window) = self.window else {
            return Step::Done;
        };
        match self.schedule[window.span].phase {
            Phase::Fast => Step::Read {
                max_bytes: None,
                until_s: window.end_s,
            },
            Phase::Slow if self.window_bytes < self.budget_bytes() => Step::Read {
                max_bytes: Some(self.budget_bytes() - self.window_bytes),
                until_s: window.end_s,
            },
            Phase::Slow => Step::Wait {
                until_s: window.end_s,
            },
        }
    }

    fn window_at(&self, t_s: f64) -> Option<Window> {
        let span = self.schedule.iter().position(|s| s.contains(t_s))?;
        let PhaseSpan { start_s, end_s, .. } = self.schedule[span];
        let index = (t_s - start_s).floor() as u64;
        let window_start_s = start_s + index as f64;
        Some(Window {
            span,
            index,
            start_s: window_start_s,
            end_s: (window_start_s + 1.0).min(end_s),
        })
    }

    /// Moves to the window holding `t_s`, closing the previous one.
    fn advance(&mut self, t_s: f64) {
        let next = self.window_at(t_s);
        let same = matches!((self.window, next), (Some(a), Some(b)) if (a.span, a.index) == (b.span, b.index));
        if same {
            return;
        }
        if let Some(closed) = self.window {
            let span = self.schedule[closed.span];
            // A short window at the end of a long fast phase is left out: it often drains
            // a queue that filled in the slow phase at memory speed, and scaled to a second
            // it would inflate the peak.
            let counts = closed.length_s() >= 1.0 - 1e-9 || span.end_s - span.start_s < 1.0;
            if span.phase == Phase::Fast && counts {
                let per_second = (self.window_bytes as f64 / closed.length_s()).round() as u64;
                self.peak_second_bytes = self.peak_second_bytes.max(per_second);
            }
        }
        self.window = next;
        self.window_bytes = 0;
        if let Some(window) = next {
            let slow = self.schedule[window.span].phase == Phase::Slow;
            if slow && self.budget_span != Some(window.span) {
                self.budget_span = Some(window.span);
                self.budget_bytes = (self.fraction * self.peak_second_bytes as f64).round() as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short() -> PatternConfig {
        PatternConfig {
            fast_ms: 2000,
            slow_ms: 3000,
            fraction: 0.05,
            cycles: 2,
            full_speed: false,
        }
    }

    #[test]
    fn fast_phase_reads_without_limit_to_each_second() {
        let mut pacer = Pacer::new(&short());
        assert_eq!(
            pacer.step(0.25),
            Step::Read {
                max_bytes: None,
                until_s: 1.0
            }
        );
        assert_eq!(
            pacer.step(1.5),
            Step::Read {
                max_bytes: None,
                until_s: 2.0
            }
        );
        assert_eq!(pacer.budget_bytes(), 0);
    }

    #[test]
    fn slow_budget_is_the_fraction_of_the_best_fast_second() {
        let mut pacer = Pacer::new(&short());
        pacer.record(0.5, 600_000);
        pacer.record(0.9, 400_000); // second 0: 1,000,000
        pacer.record(1.2, 2_000_000); // second 1: 2,000,000, the peak
        assert_eq!(
            pacer.step(2.0),
            Step::Read {
                max_bytes: Some(100_000),
                until_s: 3.0
            }
        );
        assert_eq!(pacer.peak_second_bytes(), 2_000_000);
        assert_eq!(pacer.budget_bytes(), 100_000);
    }

    #[test]
    fn slow_second_reads_its_budget_then_waits_for_the_next_second() {
        let mut pacer = Pacer::new(&short());
        pacer.record(0.5, 1_000_000);
        pacer.step(2.0);
        pacer.record(2.01, 30_000);
        assert_eq!(
            pacer.step(2.02),
            Step::Read {
                max_bytes: Some(20_000),
                until_s: 3.0
            }
        );
        pacer.record(2.03, 20_000);
        assert_eq!(pacer.step(2.04), Step::Wait { until_s: 3.0 });
        // A new second brings a fresh budget, never the leftovers of the last one.
        assert_eq!(
            pacer.step(3.0),
            Step::Read {
                max_bytes: Some(50_000),
                until_s: 4.0
            }
        );
    }

    #[test]
    fn peak_carries_across_cycles_and_the_pattern_ends() {
        let mut pacer = Pacer::new(&short());
        pacer.record(0.5, 1_000_000);
        pacer.step(2.5);
        pacer.record(5.5, 400_000); // cycle 2 fast: lower than cycle 1
        pacer.step(7.0);
        assert_eq!(pacer.budget_bytes(), 50_000);
        assert_eq!(pacer.step(10.0), Step::Done);
    }

    #[test]
    fn a_short_fast_window_counts_at_its_rate_per_second() {
        let config = PatternConfig {
            fast_ms: 500,
            ..short()
        };
        let mut pacer = Pacer::new(&config);
        pacer.record(0.1, 300_000);
        pacer.step(0.6);
        assert_eq!(pacer.peak_second_bytes(), 600_000);
        assert_eq!(pacer.budget_bytes(), 30_000);
    }

    #[test]
    fn a_short_last_fast_window_does_not_set_the_peak() {
        let config = PatternConfig {
            fast_ms: 1500,
            ..short()
        };
        let mut pacer = Pacer::new(&config);
        pacer.record(0.5, 1_000_000); // a full second
        pacer.record(1.2, 900_000); // half a second: 1.8 MB/s if scaled, left out
        pacer.step(1.5);
        assert_eq!(pacer.peak_second_bytes(), 1_000_000);
    }

    #[test]
    fn a_short_last_slow_window_reads_its_share_of_the_budget() {
        let config = PatternConfig {
            slow_ms: 2500,
            ..short()
        };
        let mut pacer = Pacer::new(&config);
        pacer.record(0.5, 1_000_000);
        assert_eq!(
            pacer.step(4.0),
            Step::Read {
                max_bytes: Some(25_000),
                until_s: 4.5
            }
        );
        assert_eq!(pacer.budget_bytes(), 25_000);
    }

    #[test]
    fn full_speed_pattern_never_limits() {
        let config = PatternConfig {
            full_speed: true,
            ..short()
        };
        let mut pacer = Pacer::new(&config);
        pacer.record(0.5, 1_000_000);
        assert_eq!(
            pacer.step(7.5),
            Step::Read {
                max_bytes: None,
                until_s: 8.0
            }
        );
        assert_eq!(pacer.step(10.0), Step::Done);
    }
}

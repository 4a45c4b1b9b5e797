//! The oscillating reading pattern's timetable: which phase runs when. It is a pure
//! function of the configuration, so the reader, the run directory and the report agree.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::records::Phase;

/// The reading pattern, as configured. Durations are whole milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PatternConfig {
    pub fast_ms: u64,
    pub slow_ms: u64,
    /// Share of the peak one-second read that each slow second reads.
    pub fraction: f64,
    pub cycles: u32,
    /// The control pattern: read at full speed for the whole run, as iperf3 does.
    pub full_speed: bool,
}

impl PatternConfig {
    /// The Cloudflare test: 5 s fast, 15 s at 5% of the peak, three times.
    pub const CLOUDFLARE: PatternConfig = PatternConfig {
        fast_ms: 5000,
        slow_ms: 15000,
        fraction: 0.05,
        cycles: 3,
        full_speed: false,
    };

    pub fn total(&self) -> Duration {
        Duration::from_millis((self.fast_ms + self.slow_ms) * u64::from(self.cycles))
    }

    /// The phases in order. The full-speed control pattern is one fast span as long as
    /// the oscillating one would be.
    pub fn schedule(&self) -> Vec<PhaseSpan> {
        if self.full_speed {
            return vec![PhaseSpan {
                cycle: 1,
                phase: Phase::Fast,
                start_s: 0.0,
                end_s: self.total().as_secs_f64(),
            }];
        }
        let mut spans = Vec::new();
        let mut start_ms = 0;
        for cycle in 1..=self.cycles {
            for (phase, length_ms) in [(Phase::Fast, self.fast_ms), (Phase::Slow, self.slow_ms)] {
                if length_ms == 0 {
                    continue;
                }
                spans.push(PhaseSpan {
                    cycle,
                    phase,
                    start_s: start_ms as f64 / 1000.0,
                    end_s: (start_ms + length_ms) as f64 / 1000.0,
                });
                start_ms += length_ms;
            }
        }
        spans
    }
}

/// One phase of the schedule, in seconds since the session's start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PhaseSpan {
    pub cycle: u32,
    pub phase: Phase,
    pub start_s: f64,
    pub end_s: f64,
}

impl PhaseSpan {
    pub fn contains(&self, t_s: f64) -> bool {
        self.start_s <= t_s && t_s < self.end_s
    }
}

/// The phase a sample taken at `t_s` describes. A sample covers the interval that ends at
/// `t_s`, so it belongs to the phase that holds the middle of that interval: a sample a
/// little late at a boundary still belongs to the phase that just ended.
pub fn phase_of_sample(schedule: &[PhaseSpan], t_s: f64, interval_s: f64) -> Option<Phase> {
    span_of_sample(schedule, t_s, interval_s).map(|i| schedule[i].phase)
}

/// The index in `schedule` of the span a sample taken at `t_s` describes, by the same rule
/// as `phase_of_sample`.
pub fn span_of_sample(schedule: &[PhaseSpan], t_s: f64, interval_s: f64) -> Option<usize> {
    let middle_s = t_s - interval_s / 2.0;
    schedule.iter().position(|s| s.contains(middle_s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloudflare_schedule_is_three_fast_slow_pairs_over_60_s() {
        let spans = PatternConfig::CLOUDFLARE.schedule();
        let layout: Vec<(u32, Phase, f64, f64)> = spans
            .iter()
            .map(|s| (s.cycle, s.phase, s.start_s, s.end_s))
            .collect();
        assert_eq!(
            layout,
            vec![
                (1, Phase::Fast, 0.0, 5.0),
                (1, Phase::Slow, 5.0, 20.0),
                (2, Phase::Fast, 20.0, 25.0),
                (2, Phase::Slow, 25.0, 40.0),
                (3, Phase::Fast, 40.0, 45.0),
                (3, Phase::Slow, 45.0, 60.0),
            ]
        );
        assert_eq!(PatternConfig::CLOUDFLARE.total(), Duration::from_secs(60));
    }

    #[test]
    fn a_sample_at_a_boundary_belongs_to_the_phase_that_ended() {
        let spans = PatternConfig::CLOUDFLARE.schedule();
        assert_eq!(phase_of_sample(&spans, 5.0, 0.1), Some(Phase::Fast));
        assert_eq!(phase_of_sample(&spans, 5.001, 0.1), Some(Phase::Fast));
        assert_eq!(phase_of_sample(&spans, 5.1, 0.1), Some(Phase::Slow));
        assert_eq!(phase_of_sample(&spans, 0.0, 0.1), None);
        assert_eq!(phase_of_sample(&spans, 60.5, 0.1), None);
    }

    #[test]
    fn full_speed_is_one_fast_span() {
        let config = PatternConfig {
            full_speed: true,
            ..PatternConfig::CLOUDFLARE
        };
        let spans = config.schedule();
        assert_eq!(spans.len(), 1);
        assert_eq!((spans[0].phase, spans[0].end_s), (Phase::Fast, 60.0));
    }
}

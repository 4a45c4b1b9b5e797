//! The oscillating reading pattern's timetable: which phase runs when. It is a pure
//! function of the configuration, so the reader, the run directory and the report agree.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::files::rows::Phase;

/// The reading pattern, as configured. Durations are whole milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PatternConfig {
    pub fast_ms: u64,
    pub slow_ms: u64,
    /// Share of the peak one-second read that each slow second reads.
    pub fraction: Fraction,
    pub cycles: u32,
    /// The control pattern: read at full speed for the whole run, as iperf3 does.
    pub full_speed: bool,
}

impl PatternConfig {
    /// The Cloudflare test: 5 s fast, 15 s at 5% of the peak, three times.
    pub const CLOUDFLARE: PatternConfig = PatternConfig {
        fast_ms: 5000,
        slow_ms: 15000,
        fraction: Fraction::CLOUDFLARE,
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

/// The share of a peak that the slow phases read: above 0 and at most 1. The one place of
/// the slow-rate rule, "fraction x peak", and of its inverse (a calibration's peak from the
/// slow rate it chose), whatever the unit (bit/s or bytes/s) of the peak.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Fraction(f64);

/// A share that is no fraction of a peak: at most 0, above 1, or not a number.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("fraction {0} is not above 0 and at most 1")]
pub struct FractionError(pub f64);

impl Fraction {
    /// The Cloudflare test's 5%.
    pub const CLOUDFLARE: Fraction = Fraction(0.05);

    pub fn new(share: f64) -> Result<Fraction, FractionError> {
        match share > 0.0 && share <= 1.0 {
            true => Ok(Fraction(share)),
            false => Err(FractionError(share)),
        }
    }

    pub fn get(self) -> f64 {
        self.0
    }

    /// The slow rate from a `peak` (rounded to the unit's whole number).
    pub fn of(self, peak: u64) -> u64 {
        (self.0 * peak as f64).round() as u64
    }

    /// The slow rate from a peak rate: the plan's rule.
    pub fn of_rate(self, peak: BitRate) -> BitRate {
        BitRate(self.of(peak.0))
    }

    /// The inverse: the peak a slow rate of `slow` was taken from.
    pub fn peak_of(self, slow: u64) -> u64 {
        (slow as f64 / self.0).round() as u64
    }

    /// As a percentage for people, to two decimals: `5` for 0.05.
    pub fn percent(self) -> f64 {
        (self.0 * 1e4).round() / 1e2
    }
}

impl TryFrom<f64> for Fraction {
    type Error = FractionError;

    fn try_from(share: f64) -> Result<Fraction, FractionError> {
        Fraction::new(share)
    }
}

impl From<Fraction> for f64 {
    fn from(fraction: Fraction) -> f64 {
        fraction.0
    }
}

/// As typed on a command line (`0.05`), so a plan's argv reads back the same share.
impl std::fmt::Display for Fraction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A rate in bits per second: the slow phases' rate from the plan to the reader's
/// command line, and a link's or a pacing rate. Written in one form only, tc's, in the
/// largest unit that keeps it whole (`5mbit`, `1500kbit`), which every binary's rate
/// grammar reads back to the same value; the reader's pacer counts it in bytes/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BitRate(u64);

impl BitRate {
    pub const fn from_bps(bps: u64) -> BitRate {
        BitRate(bps)
    }

    /// From what a reader recorded it read, bytes/s.
    pub const fn from_bytes_per_s(bytes_per_s: u64) -> BitRate {
        BitRate(bytes_per_s.saturating_mul(8))
    }

    pub const fn bps(self) -> u64 {
        self.0
    }

    /// Whole bytes per second, as the pacer budgets its reads.
    pub const fn bytes_per_s(self) -> u64 {
        self.0 / 8
    }
}

impl std::fmt::Display for BitRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let bps = self.0;
        let unit = [
            (1_000_000_000, "gbit"),
            (1_000_000, "mbit"),
            (1_000, "kbit"),
        ]
        .into_iter()
        .find(|&(scale, _)| bps >= scale && bps.is_multiple_of(scale));
        match unit {
            Some((scale, unit)) => write!(f, "{}{unit}", bps / scale),
            None => write!(f, "{bps}bit"),
        }
    }
}

/// How the slow phases' reading rate is chosen. It must not depend on the setting under
/// test: a peak measured from what the application read would, from the second cycle on,
/// be the drain of its own receive buffer, larger the more the setting let queue.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "by")]
pub enum SlowRule {
    /// `fraction` x each flow's best full one-second fast window of bytes TCP delivered
    /// (`tcpi_bytes_received`), which no receive buffer inflates.
    PeakDelivered,
    /// An absolute rate for all flows together, shared equally (`--slow-rate`), bytes/s.
    Absolute { bytes_per_s: u64 },
}

/// `run.json`'s record of the slow phases' reading rate: how it was chosen and what it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlowRate {
    pub chosen_by: SlowRule,
    /// Per cycle whose slow phase began, all flows' slow budgets together, bytes/s.
    #[serde(default)]
    pub cycles: Vec<CycleSlowRate>,
}

/// The slow rate of one cycle.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CycleSlowRate {
    pub cycle: u32,
    pub bytes_per_s: u64,
}

impl SlowRate {
    /// The mean over the cycles; `None` when no slow phase began.
    pub fn mean_bytes_per_s(&self) -> Option<f64> {
        let n = self.cycles.len();
        (n > 0).then(|| {
            self.cycles
                .iter()
                .map(|c| c.bytes_per_s as f64)
                .sum::<f64>()
                / n as f64
        })
    }
}

/// How far apart (largest over smallest, minus 1) the slow rates of configurations may be
/// for a comparison of them to compare one workload.
pub const SLOW_RATE_TOLERANCE: f64 = 0.15;

/// Whether configurations that read their slow phases at `rates` (bytes/s, any unit) ran
/// one workload: the largest at most `SLOW_RATE_TOLERANCE` above the smallest. Fewer than
/// two rates agree trivially.
pub fn slow_rates_agree(rates: &[f64]) -> bool {
    let (lo, hi) = rates.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), &r| {
        (lo.min(r), hi.max(r))
    });
    rates.len() < 2 || hi <= lo * (1.0 + SLOW_RATE_TOLERANCE + 1e-12)
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
    fn a_rate_is_written_in_the_largest_whole_unit() {
        let shown = |bps| BitRate::from_bps(bps).to_string();
        assert_eq!(shown(5_000_000), "5mbit");
        assert_eq!(shown(2_500_000_000), "2500mbit");
        assert_eq!(shown(1_500_000), "1500kbit");
        assert_eq!(shown(1_500), "1500bit");
        assert_eq!(shown(1_000_000_000), "1gbit");
        assert_eq!(shown(8_001), "8001bit");
        assert_eq!(shown(0), "0bit");
        assert_eq!(BitRate::from_bytes_per_s(625_000).bytes_per_s(), 625_000);
    }

    #[test]
    fn slow_rates_agree_within_fifteen_percent_of_the_smallest() {
        assert!(slow_rates_agree(&[]));
        assert!(slow_rates_agree(&[31.0]));
        assert!(slow_rates_agree(&[100.0, 115.0, 108.0]));
        assert!(!slow_rates_agree(&[100.0, 116.0]));
        // The issue's campaign: the default read its slow phases at 31 Mbit/s, lowat at 14.
        assert!(!slow_rates_agree(&[31.0, 14.0]));
        assert!(!slow_rates_agree(&[0.0, 1.0]));
    }

    #[test]
    fn slow_rate_records_read_back_with_how_they_were_chosen() {
        let rate = SlowRate {
            chosen_by: SlowRule::Absolute {
                bytes_per_s: 625_000,
            },
            cycles: vec![
                CycleSlowRate {
                    cycle: 1,
                    bytes_per_s: 625_000,
                },
                CycleSlowRate {
                    cycle: 2,
                    bytes_per_s: 625_002,
                },
            ],
        };
        let json = serde_json::to_string(&rate).unwrap();
        assert!(json.contains(r#""by":"absolute""#), "{json}");
        assert_eq!(serde_json::from_str::<SlowRate>(&json).unwrap(), rate);
        assert_eq!(rate.mean_bytes_per_s(), Some(625_001.0));
        let peak: SlowRate =
            serde_json::from_str(r#"{"chosen_by":{"by":"peak_delivered"}}"#).unwrap();
        assert_eq!(peak.chosen_by, SlowRule::PeakDelivered);
        assert_eq!(peak.mean_bytes_per_s(), None);
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
    fn a_fraction_is_above_zero_and_at_most_one() {
        assert_eq!(Fraction::new(1.0).map(Fraction::get), Ok(1.0));
        for bad in [0.0, -0.1, 1.01, f64::NAN] {
            assert!(Fraction::new(bad).is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<Fraction>("0").is_err());
        assert_eq!(
            serde_json::from_str::<Fraction>("0.05").unwrap(),
            Fraction::CLOUDFLARE
        );
        assert_eq!(
            serde_json::to_string(&Fraction::CLOUDFLARE).unwrap(),
            "0.05"
        );
    }

    #[test]
    fn the_slow_rate_is_the_fraction_of_the_peak_and_back() {
        let five = Fraction::CLOUDFLARE;
        // 5% of a 1 Gbit/s path; of a peak of 1,234,567 bytes/s, rounded to the byte.
        assert_eq!(five.of(1_000_000_000), 50_000_000);
        assert_eq!(five.of(1_234_567), 61_728);
        assert_eq!(five.peak_of(50_000_000), 1_000_000_000);
        let third = Fraction::new(1.0 / 3.0).unwrap();
        assert_eq!(third.peak_of(third.of(3_000_000)), 3_000_000);
        assert_eq!((five.percent(), third.percent()), (5.0, 33.33));
        assert_eq!(five.to_string(), "0.05");
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

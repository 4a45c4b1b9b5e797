//! The offset between the reader's and the daemon's `CLOCK_REALTIME`, estimated NTP-style
//! from timestamped exchanges on the control connection: the reader stamps `t1` and sends
//! a probe, the daemon stamps `t2` on receipt and `t3` as it answers, the reader stamps `t4`
//! on the answer. Then `offset = ((t2 - t1) + (t3 - t4)) / 2` (daemon minus reader) and
//! `round trip = (t4 - t1) - (t3 - t2)`; whatever the path's asymmetry, the true offset
//! lies within half the round trip of the estimate. The exchange with the smallest round
//! trip is kept: it is the one least delayed by queues, and bounds the error most tightly.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Exchanges at session start: enough that one of them meets a quiet moment.
pub const EXCHANGES: u32 = 12;

/// `CLOCK_REALTIME` now, in nanoseconds since the Unix epoch (0 before it).
pub fn realtime_unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().try_into().unwrap_or(u64::MAX))
}

/// One exchange's four stamps, nanoseconds since the Unix epoch on each end's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    /// Reader, as it sent the probe.
    pub t1_unix_ns: u64,
    /// Daemon, as it took the probe.
    pub t2_unix_ns: u64,
    /// Daemon, as it answered.
    pub t3_unix_ns: u64,
    /// Reader, as it took the answer.
    pub t4_unix_ns: u64,
}

impl Exchange {
    /// The daemon's clock minus the reader's, nanoseconds.
    pub fn offset_ns(&self) -> i128 {
        let [t1, t2, t3, t4] = self.stamps();
        ((t2 - t1) + (t3 - t4)) / 2
    }

    /// Time on the wire and in both stacks, without the daemon's own turn-around;
    /// negative only when a clock stepped during the exchange.
    pub fn round_trip_ns(&self) -> i128 {
        let [t1, t2, t3, t4] = self.stamps();
        (t4 - t1) - (t3 - t2)
    }

    fn stamps(&self) -> [i128; 4] {
        [
            self.t1_unix_ns,
            self.t2_unix_ns,
            self.t3_unix_ns,
            self.t4_unix_ns,
        ]
        .map(i128::from)
    }
}

/// The estimate `run.json` records as `clock`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClockEstimate {
    /// The daemon's `CLOCK_REALTIME` minus the reader's, µs: a daemon time `t` is the
    /// reader's `t - offset_us`.
    pub offset_us: f64,
    /// Half the best round trip, µs: the true offset lies within this of `offset_us`.
    pub uncertainty_us: f64,
    /// Exchanges made; the one with the smallest round trip gives the estimate.
    pub exchanges: u32,
}

impl ClockEstimate {
    /// The exchange with the smallest round trip; `None` when no exchange has a round trip
    /// of zero or more (a clock stepped during every one).
    pub fn from_exchanges(exchanges: &[Exchange]) -> Option<Self> {
        let best = exchanges
            .iter()
            .filter(|e| e.round_trip_ns() >= 0)
            .min_by_key(|e| e.round_trip_ns())?;
        Some(ClockEstimate {
            offset_us: best.offset_ns() as f64 / 1000.0,
            uncertainty_us: best.round_trip_ns() as f64 / 2000.0,
            exchanges: exchanges.len() as u32,
        })
    }

    /// The offset in whole nanoseconds, for mapping daemon times.
    pub fn offset_ns(&self) -> i128 {
        (self.offset_us * 1000.0).round() as i128
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An exchange with the daemon's clock `offset` ns ahead, `out` and `back` ns on the
    /// wire each way and `turn` ns inside the daemon.
    fn exchange(t1: u64, offset: i64, out: u64, turn: u64, back: u64) -> Exchange {
        let t2 = (t1 + out).checked_add_signed(offset).unwrap();
        Exchange {
            t1_unix_ns: t1,
            t2_unix_ns: t2,
            t3_unix_ns: t2 + turn,
            t4_unix_ns: t1 + out + turn + back,
        }
    }

    #[test]
    fn a_symmetric_path_gives_the_offset_exactly() {
        let e = exchange(1_000_000, -250_000, 40_000, 5_000, 40_000);
        assert_eq!(e.offset_ns(), -250_000);
        assert_eq!(e.round_trip_ns(), 80_000);
    }

    #[test]
    fn the_quietest_exchange_wins_and_bounds_the_error() {
        // The daemon is 3 ms ahead. The slow exchanges queued 900 µs on the way out only,
        // which skews their offsets by 450 µs; the quiet one is off by 10 µs of asymmetry.
        let exchanges = [
            exchange(1_000_000_000, 3_000_000, 950_000, 20_000, 50_000),
            exchange(1_100_000_000, 3_000_000, 60_000, 10_000, 40_000),
            exchange(1_200_000_000, 3_000_000, 940_000, 30_000, 40_000),
        ];
        let estimate = ClockEstimate::from_exchanges(&exchanges).unwrap();
        assert_eq!(estimate.exchanges, 3);
        assert_eq!(estimate.uncertainty_us, 50.0);
        assert_eq!(estimate.offset_us, 3_010.0);
        assert!((estimate.offset_us - 3_000.0).abs() <= estimate.uncertainty_us);
        assert_eq!(estimate.offset_ns(), 3_010_000);
    }

    #[test]
    fn exchanges_across_a_clock_step_are_left_out() {
        let stepped = Exchange {
            t1_unix_ns: 1_000,
            t2_unix_ns: 5_000,
            t3_unix_ns: 9_000,
            t4_unix_ns: 2_000,
        };
        assert!(stepped.round_trip_ns() < 0);
        assert_eq!(ClockEstimate::from_exchanges(&[stepped]), None);
        assert_eq!(ClockEstimate::from_exchanges(&[]), None);
    }
}

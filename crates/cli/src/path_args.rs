//! The emulated path's values that `oscil-link` and `oscil-lab` both take, with the bounds
//! past which a plan cannot work: every packet lost, or a delay no path on Earth has (the
//! link holds a delay's worth of packets in memory).

use std::time::Duration;

use crate::units::{parse_duration, parse_percent, UnitError};

/// The most random loss a link takes, as a probability.
pub const MAX_LOSS: f64 = 0.5;

/// The longest one-way delay a link takes: twice a geostationary hop, 20 times a path round
/// the Earth.
pub const MAX_ONE_WAY_DELAY: Duration = Duration::from_secs(5);

/// `--loss`: a percentage of at most [`MAX_LOSS`].
pub fn parse_loss(input: &str) -> Result<f64, UnitError> {
    match parse_percent(input)? {
        loss if loss > MAX_LOSS => Err(UnitError::new(
            "loss",
            input,
            "at most 50%: beyond it hardly a handshake or a retransmission gets through, and a run would measure nothing",
        )),
        loss => Ok(loss),
    }
}

/// A one-way `--delay`: at most [`MAX_ONE_WAY_DELAY`].
pub fn parse_one_way_delay(input: &str) -> Result<Duration, UnitError> {
    let delay = parse_duration(input)?;
    check_delay(input, delay, MAX_ONE_WAY_DELAY, "one-way delay")
}

/// A round-trip `--rtt` above zero: at most twice [`MAX_ONE_WAY_DELAY`].
pub fn parse_rtt(input: &str) -> Result<Duration, UnitError> {
    let rtt = parse_duration(input)?;
    if rtt.is_zero() {
        return Err(UnitError::new(
            "round trip",
            input,
            "a round trip above zero",
        ));
    }
    check_delay(input, rtt, 2 * MAX_ONE_WAY_DELAY, "round trip")
}

fn check_delay(
    input: &str,
    delay: Duration,
    max: Duration,
    what: &'static str,
) -> Result<Duration, UnitError> {
    match delay > max {
        true => Err(UnitError::new(
            what,
            input,
            format!("at most {}s: no real path is longer (a geostationary hop is 0.25 s), and the link would hold that much traffic in memory", max.as_secs()),
        )),
        false => Ok(delay),
    }
}

/// `--queue`'s default for a rate: the packets of 1514 wire bytes that drain in 60 ms at
/// `rate_bps` (the seed's netem `limit 50` at 10 Mbit/s), at least 50. One definition for
/// the link emulator and for the lab's netem link alike.
pub fn default_queue_limit(rate_bps: u64) -> u32 {
    let drain_bits = rate_bps as f64 * 0.060;
    let packets = (drain_bits / (1514.0 * 8.0)).round() as u64;
    packets.clamp(50, u32::MAX as u64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_queue_scales_with_rate() {
        assert_eq!(default_queue_limit(10_000_000), 50);
        assert_eq!(default_queue_limit(1_000_000), 50);
        assert_eq!(default_queue_limit(1_000_000_000), 4954);
    }

    #[test]
    fn plans_that_cannot_work_are_refused_with_the_reason() {
        assert_eq!(parse_loss("50%"), Ok(0.5));
        let message = parse_loss("100%").unwrap_err().to_string();
        assert!(message.contains("at most 50%"), "{message}");
        assert_eq!(parse_rtt("10s"), Ok(Duration::from_secs(10)));
        let message = parse_rtt("2y").unwrap_err().to_string();
        assert!(
            message.contains("at most 7d") || message.contains("at most 10s"),
            "{message}"
        );
        let message = parse_one_way_delay("6s").unwrap_err().to_string();
        assert!(
            message.contains("at most 5s: no real path is longer"),
            "{message}"
        );
        assert!(parse_rtt("0").is_err());
    }
}

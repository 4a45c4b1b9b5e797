//! The session request's values as people type them (`--write-size`, `--pacing-rate`,
//! `--slow-rate`) and the Cloudflare pattern's defaults as clap shows them: parsed with this
//! crate's units, checked by `oscil_protocol::request`'s rules, so the reader, the lab and the
//! daemon accept the same values with the same words.

use std::fmt;
use std::time::Duration;

use oscil_model::pattern::BitRate;
use oscil_protocol::request::{check_pacing_rate, check_slow_rate, check_write_size, RequestError};

use crate::units::{parse_bytes, parse_duration, parse_rate_bps, UnitError};

/// A value that is not a quantity, or a quantity no session may ask for.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArgError {
    #[error(transparent)]
    Unit(#[from] UnitError),
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error("{0:?} is neither a rate (5mbit, as tc writes rates) nor {AUTO_PER_RUN}")]
    NotSlowRate(String),
}

/// `--write-size`, as typed: a byte size the daemon will take.
pub fn parse_write_size(input: &str) -> Result<u32, ArgError> {
    Ok(check_write_size(parse_bytes(input)?)?)
}

/// `--pacing-rate`, as typed (tc's units), bit/s.
pub fn parse_pacing_rate(input: &str) -> Result<u64, ArgError> {
    Ok(check_pacing_rate(parse_rate_bps(input)?)?)
}

/// `--slow-rate`, as typed (tc's units): the grammar `BitRate`'s text is read back with.
pub fn parse_slow_rate(input: &str) -> Result<BitRate, ArgError> {
    let bps = check_slow_rate(parse_rate_bps(input)?)?;
    Ok(BitRate::from_bps(bps))
}

/// `--slow-rate`'s word for each run's own peak: `--fraction` of the most TCP delivered in
/// one second of the run's fast phases.
pub const AUTO_PER_RUN: &str = "auto-per-run";

/// `--slow-rate`, as typed: an absolute rate, or each run's own peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlowRateArg {
    /// All flows together.
    Bps(BitRate),
    AutoPerRun,
}

impl SlowRateArg {
    /// The absolute rate; `None` for each run's own peak.
    pub fn bps(self) -> Option<BitRate> {
        match self {
            SlowRateArg::Bps(bps) => Some(bps),
            SlowRateArg::AutoPerRun => None,
        }
    }
}

/// `--slow-rate RATE|auto-per-run`. A word that is no rate at all is named as such, rather
/// than with the rate grammar's hints.
pub fn parse_slow_rate_arg(input: &str) -> Result<SlowRateArg, ArgError> {
    match input.trim() {
        AUTO_PER_RUN => Ok(SlowRateArg::AutoPerRun),
        word if !word.contains(|c: char| c.is_ascii_digit()) => {
            Err(ArgError::NotSlowRate(input.to_owned()))
        }
        _ => parse_slow_rate(input).map(SlowRateArg::Bps),
    }
}

/// A duration as the command line writes it (`5s`, `100ms`), so that clap can show a
/// default taken from a constant here as a person would type it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TypedDuration(pub Duration);

impl TypedDuration {
    pub const fn from_millis(ms: u64) -> Self {
        TypedDuration(Duration::from_millis(ms))
    }
}

impl fmt::Display for TypedDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl std::str::FromStr for TypedDuration {
    type Err = UnitError;

    fn from_str(input: &str) -> Result<Self, UnitError> {
        parse_duration(input).map(TypedDuration)
    }
}

/// The Cloudflare pattern's values as the command line shows them, for clap's defaults.
pub mod cloudflare {
    use super::TypedDuration;
    use oscil_model::pattern::PatternConfig;

    pub const FAST: TypedDuration = TypedDuration::from_millis(PatternConfig::CLOUDFLARE.fast_ms);
    pub const SLOW: TypedDuration = TypedDuration::from_millis(PatternConfig::CLOUDFLARE.slow_ms);
    pub const FRACTION: oscil_model::pattern::Fraction = PatternConfig::CLOUDFLARE.fraction;
    pub const CYCLES: u32 = PatternConfig::CLOUDFLARE.cycles;
    pub const INTERVAL: TypedDuration = TypedDuration(oscil_model::run::sampling::DEFAULT_INTERVAL);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_read_as_typed() {
        assert_eq!(cloudflare::FAST.to_string(), "5s");
        assert_eq!(cloudflare::SLOW.to_string(), "15s");
        assert_eq!(cloudflare::INTERVAL.to_string(), "100ms");
        assert_eq!("5s".parse::<TypedDuration>(), Ok(cloudflare::FAST));
        assert_eq!(cloudflare::FAST.0, Duration::from_secs(5));
    }

    #[test]
    fn values_are_parsed_then_held_to_the_rules() {
        assert_eq!(
            parse_write_size("4G").unwrap_err().to_string(),
            "write size of 4294967296 bytes: 1 to 16777216 bytes at a time"
        );
        assert!(matches!(
            parse_write_size("4 gallons"),
            Err(ArgError::Unit(_))
        ));
        assert!(parse_pacing_rate("7bit").is_err());
        assert_eq!(parse_pacing_rate("8bit"), Ok(8));
        assert!(parse_slow_rate("4bit")
            .unwrap_err()
            .to_string()
            .contains("read nothing"));
    }

    /// The one text a rate is written in reads back to the same rate, through the grammar
    /// every binary's `--slow-rate` and `--pacing-rate` use.
    #[test]
    fn a_rate_written_for_a_command_line_reads_back_the_same() {
        for bps in [
            8,
            8_001,
            1_500,
            1_500_000,
            5_000_000,
            2_500_000_000,
            40_000_000_000,
        ] {
            let rate = BitRate::from_bps(bps);
            assert_eq!(parse_slow_rate(&rate.to_string()), Ok(rate), "{rate}");
            assert_eq!(parse_pacing_rate(&rate.to_string()), Ok(bps), "{rate}");
        }
    }

    #[test]
    fn a_slow_rate_is_a_rate_or_each_runs_own_peak() {
        assert_eq!(
            parse_slow_rate_arg("5mbit"),
            Ok(SlowRateArg::Bps(BitRate::from_bps(5_000_000)))
        );
        assert_eq!(
            parse_slow_rate_arg("auto-per-run"),
            Ok(SlowRateArg::AutoPerRun)
        );
        assert_eq!(SlowRateArg::AutoPerRun.bps(), None);
        assert_eq!(
            parse_slow_rate_arg("auto").unwrap_err().to_string(),
            "\"auto\" is neither a rate (5mbit, as tc writes rates) nor auto-per-run"
        );
        assert!(matches!(parse_slow_rate_arg("5M"), Err(ArgError::Unit(_))));
    }
}

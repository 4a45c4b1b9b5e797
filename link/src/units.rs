//! Parsers for the link's figures, written the way `tc` and `netem` write them.

use std::time::Duration;

/// A value on the command line that is not a rate, duration or percentage.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum UnitError {
    /// The rate has no number, an unknown unit, or is zero.
    #[error("invalid rate {0:?}: expected a positive number with a tc unit such as 500kbit, 10mbit, 1gbit or 125mbps")]
    Rate(String),
    /// The duration is not humantime (`40ms`, `1.5s`).
    #[error("invalid duration {0:?}: expected e.g. 40ms or 1.5s")]
    Duration(String),
    /// The percentage is not a number from 0 to 100.
    #[error("invalid percentage {0:?}: expected a number from 0 to 100, e.g. 0.5 or 0.5%")]
    Percent(String),
}

/// Parses a rate as `tc` writes it into bits per second: `bit`/bare number, `kbit`, `mbit`,
/// `gbit`, `tbit` (SI), `kibit`.. (IEC), and the byte forms `bps`, `kbps`, `mbps`, `gbps`.
pub fn parse_rate_bps(text: &str) -> Result<u64, UnitError> {
    let err = || UnitError::Rate(text.to_string());
    let lower = text.trim().to_ascii_lowercase();
    let split = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let (number, unit) = lower.split_at(split);
    let value: f64 = number.parse().map_err(|_| err())?;
    let scale = match unit {
        "" | "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        "kibit" => 1024.0,
        "mibit" => 1024.0 * 1024.0,
        "gibit" => 1024.0 * 1024.0 * 1024.0,
        "bps" => 8.0,
        "kbps" => 8e3,
        "mbps" => 8e6,
        "gbps" => 8e9,
        _ => return Err(err()),
    };
    let bps = (value * scale).round();
    if !(1.0..1e15).contains(&bps) {
        return Err(err());
    }
    Ok(bps as u64)
}

/// Parses a humantime duration (`233ms`, `1s`); `0` alone means no delay.
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    if text.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(text.trim()).map_err(|_| UnitError::Duration(text.to_string()))
}

/// Parses a loss percentage, with or without a trailing `%`, into a probability.
pub fn parse_percent(text: &str) -> Result<f64, UnitError> {
    let err = || UnitError::Percent(text.to_string());
    let number = text.trim().trim_end_matches('%');
    let pct: f64 = number.parse().map_err(|_| err())?;
    if !(0.0..=100.0).contains(&pct) {
        return Err(err());
    }
    Ok(pct / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_as_tc_writes_them() {
        assert_eq!(parse_rate_bps("10mbit"), Ok(10_000_000));
        assert_eq!(parse_rate_bps("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate_bps("500kbit"), Ok(500_000));
        assert_eq!(parse_rate_bps("1.5Mbit"), Ok(1_500_000));
        assert_eq!(parse_rate_bps("125mbps"), Ok(1_000_000_000));
        assert_eq!(parse_rate_bps("1kibit"), Ok(1024));
        assert_eq!(parse_rate_bps("9600"), Ok(9600));
        assert!(parse_rate_bps("fast").is_err());
        assert!(parse_rate_bps("10 furlongs").is_err());
        assert!(parse_rate_bps("0mbit").is_err());
        assert!(parse_rate_bps("").is_err());
    }

    #[test]
    fn durations_and_percentages() {
        assert_eq!(parse_duration("233ms"), Ok(Duration::from_millis(233)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("soon").is_err());
        assert_eq!(parse_percent("1%"), Ok(0.01));
        assert_eq!(parse_percent("0.5"), Ok(0.005));
        assert!(parse_percent("101").is_err());
        assert!(parse_percent("-1").is_err());
    }
}

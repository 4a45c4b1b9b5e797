//! Parsers for the quantities people type on a command line: byte sizes, bit rates and
//! durations, each with one clear error that says what was expected.

use std::time::Duration;

/// A quantity that did not parse; the message names what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {input:?} is not valid: expected {expected}")]
pub struct UnitError {
    what: &'static str,
    input: String,
    expected: &'static str,
}

impl UnitError {
    fn new(what: &'static str, input: &str, expected: &'static str) -> Self {
        UnitError {
            what,
            input: input.to_owned(),
            expected,
        }
    }
}

/// Splits "128KiB" into (128.0, "kib"), lower-casing the suffix.
fn split_number(input: &str) -> Option<(f64, String)> {
    let trimmed = input.trim();
    let end = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let number: f64 = trimmed[..end].parse().ok()?;
    if !number.is_finite() || number < 0.0 {
        return None;
    }
    Some((number, trimmed[end..].trim().to_ascii_lowercase()))
}

/// Parses a byte size: `16384`, `128k`, `128KiB`, `4M`, `1g`. Suffixes are binary
/// (k = 1024), as the kernel's buffer sysctls are.
pub fn parse_bytes(input: &str) -> Result<u64, UnitError> {
    const EXPECTED: &str = "a byte count such as 16384, 128k, 128KiB or 4M";
    let err = || UnitError::new("size", input, EXPECTED);
    let (number, suffix) = split_number(input).ok_or_else(err)?;
    let scale: u64 = match suffix.as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(err()),
    };
    let bytes = number * scale as f64;
    if bytes > u64::MAX as f64 || bytes.fract() != 0.0 {
        return Err(err());
    }
    Ok(bytes as u64)
}

/// Parses a byte size that must fit a 32-bit socket option.
pub fn parse_bytes_u32(input: &str) -> Result<u32, UnitError> {
    let bytes = parse_bytes(input)?;
    u32::try_from(bytes).map_err(|_| {
        UnitError::new(
            "size",
            input,
            "a size below 4 GiB (a socket option is 32 bits)",
        )
    })
}

/// Parses a bit rate as tc writes it: `10mbit`, `1gbit`, `500kbit`, `100000bit`; decimal
/// prefixes (1mbit = 1,000,000 bit/s). A bare number is bits per second.
pub fn parse_rate_bps(input: &str) -> Result<u64, UnitError> {
    const EXPECTED: &str = "a rate such as 10mbit, 1gbit or 500kbit";
    let err = || UnitError::new("rate", input, EXPECTED);
    let (number, suffix) = split_number(input).ok_or_else(err)?;
    let scale: f64 = match suffix.as_str() {
        "" | "bit" | "bps" => 1.0,
        "k" | "kbit" => 1e3,
        "m" | "mbit" => 1e6,
        "g" | "gbit" => 1e9,
        "t" | "tbit" => 1e12,
        _ => return Err(err()),
    };
    let bps = (number * scale).round();
    if bps < 1.0 || bps > u64::MAX as f64 {
        return Err(err());
    }
    Ok(bps as u64)
}

/// Parses a duration in humantime form: `5s`, `250ms`, `1m30s`.
pub fn parse_duration(input: &str) -> Result<Duration, UnitError> {
    humantime::parse_duration(input.trim())
        .map_err(|_| UnitError::new("duration", input, "a duration such as 5s, 250ms or 1m"))
}

/// Parses a duration that must be longer than zero.
pub fn parse_positive_duration(input: &str) -> Result<Duration, UnitError> {
    match parse_duration(input)? {
        d if d.is_zero() => Err(UnitError::new("duration", input, "a duration above zero")),
        d => Ok(d),
    }
}

/// Parses a fraction in (0, 1]: `0.05`, or a percentage `5%`.
pub fn parse_fraction(input: &str) -> Result<f64, UnitError> {
    let err = || {
        UnitError::new(
            "fraction",
            input,
            "a number above 0 and at most 1, or a percentage like 5%",
        )
    };
    let trimmed = input.trim();
    let value = match trimmed.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().map_err(|_| err())? / 100.0,
        None => trimmed.parse::<f64>().map_err(|_| err())?,
    };
    if value > 0.0 && value <= 1.0 {
        Ok(value)
    } else {
        Err(err())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_are_binary() {
        assert_eq!(parse_bytes("16384"), Ok(16384));
        assert_eq!(parse_bytes("128k"), Ok(131072));
        assert_eq!(parse_bytes("128KiB"), Ok(131072));
        assert_eq!(parse_bytes("4M"), Ok(4194304));
        assert_eq!(parse_bytes("1.5k"), Ok(1536));
        assert!(parse_bytes("12q").is_err());
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes_u32("4g").is_err());
    }

    #[test]
    fn rates_are_decimal_like_tc() {
        assert_eq!(parse_rate_bps("10mbit"), Ok(10_000_000));
        assert_eq!(parse_rate_bps("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate_bps("500kbit"), Ok(500_000));
        assert_eq!(parse_rate_bps("2.5gbit"), Ok(2_500_000_000));
        assert!(parse_rate_bps("fast").is_err());
        assert!(parse_rate_bps("0").is_err());
    }

    #[test]
    fn durations_and_fractions() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_positive_duration("0s").is_err());
        assert_eq!(parse_fraction("0.05"), Ok(0.05));
        assert_eq!(parse_fraction("5%"), Ok(0.05));
        assert!(parse_fraction("1.5").is_err());
        assert!(parse_fraction("0").is_err());
    }

    #[test]
    fn errors_say_what_was_expected() {
        let message = parse_duration("soon").unwrap_err().to_string();
        assert_eq!(
            message,
            "duration \"soon\" is not valid: expected a duration such as 5s, 250ms or 1m"
        );
    }
}

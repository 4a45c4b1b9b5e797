//! Parsers for the quantities people type on a command line: byte sizes, bit rates and
//! durations, each with one clear error that says what was expected. One grammar for every
//! binary and the lab:
//! - a bare number is a byte count for sizes (as the kernel's sysctls are), and is refused
//!   for rates and durations, with the likely spellings offered (`5` → `5s`? `5ms`?);
//! - rates are spelled in bits as tc spells them (`100mbit`, `1gbit`); `100M`, `1G` and
//!   byte spellings (`10Mbps`) are refused with both readings offered, since tools disagree.

use std::time::Duration;

use oscil_model::pattern::Fraction;

/// Bytes in a mebibyte, the unit of buffer sizes in every table and chart.
pub const MIB: f64 = 1024.0 * 1024.0;

/// `bytes` in MiB.
pub fn mib(bytes: f64) -> f64 {
    bytes / MIB
}

/// A quantity that did not parse; the message names what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {input:?} is not valid: expected {expected}")]
pub struct UnitError {
    what: &'static str,
    input: String,
    expected: String,
}

impl UnitError {
    pub(crate) fn new(what: &'static str, input: &str, expected: impl Into<String>) -> Self {
        UnitError {
            what,
            input: input.to_owned(),
            expected: expected.into(),
        }
    }
}

/// True for a plain number with no unit (`5`, `2.5`).
fn is_bare_number(input: &str) -> bool {
    let trimmed = input.trim();
    !trimmed.is_empty() && trimmed.parse::<f64>().is_ok()
}

/// A minus sign: no size, rate, duration or share here can be negative, so say that rather
/// than that the spelling is unknown.
fn refuse_negative(what: &'static str, input: &str) -> Result<(), UnitError> {
    match input.trim_start().starts_with('-') {
        true => Err(UnitError::new(
            what,
            input,
            format!("no minus sign: a {what} cannot be negative"),
        )),
        false => Ok(()),
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
    parse_bytes_below(input, u64::MAX, "a size below 16 EiB (2^64 bytes)")
}

/// Parses a byte size that must fit a 32-bit socket option.
pub fn parse_bytes_u32(input: &str) -> Result<u32, UnitError> {
    let below = "a size below 4 GiB (a socket option is 32 bits)";
    let bytes = parse_bytes_below(input, u64::from(u32::MAX), below)?;
    Ok(u32::try_from(bytes).expect("bounded by u32::MAX"))
}

/// A byte size of at most `max`, else `too_large` says what was expected.
fn parse_bytes_below(input: &str, max: u64, too_large: &str) -> Result<u64, UnitError> {
    refuse_negative("size", input)?;
    const EXPECTED: &str = "a byte count such as 16384, 128k, 128KiB or 4M";
    let err = || UnitError::new("size", input, EXPECTED);
    let (number, suffix) = split_number(input).ok_or_else(err)?;
    refuse_bits(input)?;
    let scale: u64 = match suffix.as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(err()),
    };
    let bytes = number * scale as f64;
    if bytes > max as f64 {
        return Err(UnitError::new("size", input, too_large));
    }
    if bytes.fract() != 0.0 {
        return Err(UnitError::new(
            "size",
            input,
            "a whole number of bytes (1.5k is 1536; 1.5 is no size)",
        ));
    }
    Ok(bytes as u64)
}

/// A size spelled with a small `b` (`128Kb`, `4mb`, `64b`): network tools read it as bits,
/// storage ones as bytes, so it is refused with both readings; `B` (`128KB`, `128KiB`) and
/// no `b` at all (`128k`) are bytes.
fn refuse_bits(input: &str) -> Result<(), UnitError> {
    let trimmed = input.trim();
    let Some(number_prefix) = trimmed.strip_suffix('b') else {
        return Ok(());
    };
    let number_prefix = number_prefix.strip_suffix('i').unwrap_or(number_prefix);
    let prefix = number_prefix
        .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.')
        .to_ascii_lowercase();
    if !["", "k", "m", "g"].contains(&prefix.as_str()) {
        return Ok(());
    }
    let number = &number_prefix[..number_prefix.len() - prefix.len()];
    let bytes = format!("{number}{}", prefix.to_ascii_uppercase());
    Err(UnitError::new(
        "size",
        input,
        format!("B for bytes: a small b reads as bits; did you mean {bytes} (bytes) or a rate {number}{prefix}bit?"),
    ))
}

/// Parses a rate as tc writes it, into bits per second: `bit` (or a bare number), `kbit`,
/// `mbit`, `gbit`, `tbit` (decimal: 1mbit = 1,000,000 bit/s), `kibit`, `mibit`, `gibit`
/// (binary). Byte rates (`mbps`, `100M`) are refused with both readings: tc reads `mbps`
/// as bytes, most people as bits.
pub fn parse_rate_bps(input: &str) -> Result<u64, UnitError> {
    refuse_negative("rate", input)?;
    const EXPECTED: &str = "a rate such as 10mbit, 1gbit or 500kbit (bits per second, as tc)";
    let err = || UnitError::new("rate", input, EXPECTED);
    let (number, suffix) = split_number(input).ok_or_else(err)?;
    if number == 0.0 {
        return Err(UnitError::new("rate", input, "a rate above zero"));
    }
    let number_text = input
        .trim()
        .trim_end_matches(|c: char| c.is_alphabetic() || c == '/');
    match suffix.as_str() {
        "" => {
            return Err(UnitError::new(
                "rate",
                input,
                format!("a unit: {number_text}mbit? {number_text}kbit? {number_text}bit? (bits per second, as tc writes them)"),
            ))
        }
        prefix @ ("k" | "m" | "g" | "t") => return Err(ambiguous_rate(input, number, prefix)),
        _ => {}
    }
    // tc reads `mbps` as megabytes per second, iperf3 users as megabits: refused, as `100M`.
    if let Some(prefix @ ("" | "k" | "m" | "g" | "t")) =
        suffix.trim_end_matches("/s").strip_suffix("bps")
    {
        return Err(ambiguous_rate(input, number, prefix));
    }
    let scale: f64 = match suffix.trim_end_matches("/s") {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        "kibit" => 1024.0,
        "mibit" => 1024.0 * 1024.0,
        "gibit" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(err()),
    };
    let bps = (number * scale).round();
    if !(1.0..1e15).contains(&bps) {
        return Err(err());
    }
    Ok(bps as u64)
}

/// A rate some read as bits and others as bytes (`100M`, `10Mbps`): both readings, in bits.
fn ambiguous_rate(input: &str, number: f64, prefix: &str) -> UnitError {
    let bytes = match prefix {
        "k" => "kilobytes",
        "m" => "megabytes",
        "g" => "gigabytes",
        "t" => "terabytes",
        _ => "bytes",
    };
    UnitError::new(
        "rate",
        input,
        format!(
            "an unambiguous unit: {number}{prefix}bit (bits per second) or {}{prefix}bit ({number} {bytes} per second)",
            number * 8.0
        ),
    )
}

/// Parses a percentage, with or without `%` (`0.5`, `1%`), into a probability in [0, 1].
pub fn parse_percent(input: &str) -> Result<f64, UnitError> {
    refuse_negative("percentage", input)?;
    let err = || {
        UnitError::new(
            "percentage",
            input,
            "a number from 0 to 100, such as 0.5 or 1%",
        )
    };
    let number = input.trim().trim_end_matches('%');
    let percent: f64 = number.trim().parse().map_err(|_| err())?;
    if (0.0..=100.0).contains(&percent) {
        Ok(percent / 100.0)
    } else {
        Err(err())
    }
}

/// The longest duration any flag takes: no run, phase, path or timeout of oscil lasts a
/// week, and longer ones overflow the protocol's microseconds (`99999999999h`).
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// What a duration past [`MAX_DURATION`] is told.
const TOO_LONG: &str = "at most 7d (a week): no run, phase or timeout of oscil lasts longer";

/// Parses a duration in humantime form: `5s`, `250ms`, `1m30s`; a bare `0` is zero; at most
/// [`MAX_DURATION`].
pub fn parse_duration(input: &str) -> Result<Duration, UnitError> {
    match parse_any_duration(input)? {
        d if d > MAX_DURATION => Err(UnitError::new("duration", input, TOO_LONG)),
        d => Ok(d),
    }
}

/// [`parse_duration`] without the upper bound.
fn parse_any_duration(input: &str) -> Result<Duration, UnitError> {
    refuse_negative("duration", input)?;
    if input.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    if is_bare_number(input) {
        let n = input.trim();
        return Err(UnitError::new(
            "duration",
            input,
            format!("a unit: {n}s? {n}ms?"),
        ));
    }
    humantime::parse_duration(input.trim()).map_err(|e| match e {
        humantime::DurationError::NumberOverflow => UnitError::new("duration", input, TOO_LONG),
        _ => UnitError::new("duration", input, "a duration such as 5s, 250ms or 1m"),
    })
}

/// Parses a duration that must be longer than zero.
pub fn parse_positive_duration(input: &str) -> Result<Duration, UnitError> {
    match parse_duration(input)? {
        d if d.is_zero() => Err(UnitError::new("duration", input, "a duration above zero")),
        d => Ok(d),
    }
}

/// A clap value parser of durations from `min` to `max`, with the reason for the
/// bounds (`why`): a daemon's timeout so short that every session would fail.
pub fn duration_within(
    min: Duration,
    max: Duration,
    why: &'static str,
) -> impl Fn(&str) -> Result<Duration, UnitError> + Clone + Send + Sync + 'static {
    move |input| {
        let duration = parse_duration(input)?;
        match (min..=max).contains(&duration) {
            true => Ok(duration),
            false => Err(UnitError::new(
                "duration",
                input,
                format!(
                    "{} to {}: {why}",
                    humantime::format_duration(min),
                    humantime::format_duration(max)
                ),
            )),
        }
    }
}

/// Parses a phase length: a duration in whole milliseconds, the unit the pattern is stored
/// in (`run.json`'s `fast_ms`, `slow_ms`), so `500us` is refused rather than cut to nothing.
pub fn parse_whole_ms_duration(input: &str) -> Result<Duration, UnitError> {
    let duration = parse_duration(input)?;
    if duration.subsec_nanos() % 1_000_000 != 0 {
        return Err(UnitError::new(
            "phase length",
            input,
            "a whole number of milliseconds (phase lengths are stored in ms), such as 1ms or 250ms",
        ));
    }
    Ok(duration)
}

/// Parses a whole number from `min` to `max` (a count, a port, a seed): no unit, no
/// fraction. `what` names it in the message.
pub fn parse_whole(what: &'static str, input: &str, min: u64, max: u64) -> Result<u64, UnitError> {
    refuse_negative(what, input)?;
    match input.trim().parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(UnitError::new(
            what,
            input,
            format!("a whole number from {min} to {max}"),
        )),
    }
}

/// [`parse_whole`] as a clap value parser of `T` (`u16`, `u32`, `u64`).
pub fn whole<T>(
    what: &'static str,
    min: T,
    max: T,
) -> impl Fn(&str) -> Result<T, UnitError> + Clone + Send + Sync + 'static
where
    T: Into<u64> + TryFrom<u64> + Copy + Send + Sync + 'static,
{
    move |input| {
        let n = parse_whole(what, input, min.into(), max.into())?;
        Ok(T::try_from(n).unwrap_or(max))
    }
}

/// Parses a fraction in (0, 1]: `0.05`, or a percentage `5%`.
pub fn parse_fraction(input: &str) -> Result<Fraction, UnitError> {
    refuse_negative("fraction", input)?;
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
    Fraction::new(value).map_err(|_| err())
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
    fn rates_as_tc_writes_them() {
        assert_eq!(parse_rate_bps("10mbit"), Ok(10_000_000));
        assert_eq!(parse_rate_bps("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate_bps("500kbit"), Ok(500_000));
        assert_eq!(parse_rate_bps("2.5gbit"), Ok(2_500_000_000));
        assert_eq!(parse_rate_bps("1.5Mbit"), Ok(1_500_000));
        assert_eq!(parse_rate_bps("1kibit"), Ok(1024));
        assert_eq!(parse_rate_bps("100Mbit/s"), Ok(100_000_000));
        assert!(parse_rate_bps("fast").is_err());
        assert!(parse_rate_bps("10 furlongs").is_err());
        for zero in ["0", "0mbit", "0.0kbit"] {
            let message = parse_rate_bps(zero).unwrap_err().to_string();
            assert!(message.ends_with("expected a rate above zero"), "{message}");
        }
        assert!(parse_rate_bps("").is_err());
    }

    #[test]
    fn bare_and_ambiguous_rates_offer_the_readings() {
        let message = |input| parse_rate_bps(input).unwrap_err().to_string();
        assert!(message("100").contains("100mbit? 100kbit? 100bit?"));
        assert!(message("100M")
            .contains("100mbit (bits per second) or 800mbit (100 megabytes per second)"));
        for spelling in ["10Mbps", "10MBps", "10mbps", "10Mbps/s"] {
            assert!(
                message(spelling)
                    .contains("10mbit (bits per second) or 80mbit (10 megabytes per second)"),
                "{spelling}: {}",
                message(spelling)
            );
        }
        assert!(message("1.5kbps").contains("1.5kbit (bits per second) or 12kbit (1.5 kilobytes"));
        assert!(message("100bps").contains("100bit (bits per second) or 800bit (100 bytes"));
        assert!(message("1.5g").contains("1.5gbit"));
        let message = parse_duration("40").unwrap_err().to_string();
        assert!(message.contains("40s? 40ms?"), "{message}");
    }

    #[test]
    fn negative_values_are_refused_as_negative() {
        let expected = |what: &str| format!("expected no minus sign: a {what} cannot be negative");
        let message = parse_duration("-5s").unwrap_err().to_string();
        assert!(message.contains(&expected("duration")), "{message}");
        let message = parse_percent("-5%").unwrap_err().to_string();
        assert!(message.contains(&expected("percentage")), "{message}");
        let message = parse_bytes("-5k").unwrap_err().to_string();
        assert!(message.contains(&expected("size")), "{message}");
        let message = parse_rate_bps("-1mbit").unwrap_err().to_string();
        assert!(message.contains(&expected("rate")), "{message}");
        let message = parse_fraction("-0.5").unwrap_err().to_string();
        assert!(message.contains(&expected("fraction")), "{message}");
    }

    #[test]
    fn percentages_become_probabilities() {
        assert_eq!(parse_percent("1%"), Ok(0.01));
        assert_eq!(parse_percent("0.5"), Ok(0.005));
        assert!(parse_percent("101").is_err());
        assert!(parse_percent("-1").is_err());
    }

    #[test]
    fn durations_and_fractions() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_positive_duration("0s").is_err());
        assert_eq!(parse_whole_ms_duration("2ms"), Ok(Duration::from_millis(2)));
        assert_eq!(parse_whole_ms_duration("0"), Ok(Duration::ZERO));
        assert!(parse_whole_ms_duration("500us").is_err());
        assert!(parse_whole_ms_duration("1ms 500us").is_err());
        assert_eq!(parse_fraction("0.05"), Ok(Fraction::CLOUDFLARE));
        assert_eq!(parse_fraction("5%"), Ok(Fraction::CLOUDFLARE));
        assert!(parse_fraction("1.5").is_err());
        assert!(parse_fraction("0").is_err());
    }

    #[test]
    fn whole_numbers_say_their_range() {
        assert_eq!(parse_whole("count", "12", 1, 100), Ok(12));
        for bad in ["2k", "1.5", "0", "101", "", "abc"] {
            assert_eq!(
                parse_whole("count", bad, 1, 100).unwrap_err().to_string(),
                format!("count {bad:?} is not valid: expected a whole number from 1 to 100")
            );
        }
        let message = parse_whole("port", "-1", 1, 65535).unwrap_err().to_string();
        assert!(
            message.ends_with("no minus sign: a port cannot be negative"),
            "{message}"
        );
        assert_eq!(whole("port", 1u16, u16::MAX)("65535"), Ok(65535u16));
    }

    #[test]
    fn sizes_too_large_or_fractional_say_so() {
        let message = parse_bytes("99999999999999999999999")
            .unwrap_err()
            .to_string();
        assert!(
            message.ends_with("expected a size below 16 EiB (2^64 bytes)"),
            "{message}"
        );
        let message = parse_bytes_u32("99999999999999999999999")
            .unwrap_err()
            .to_string();
        assert!(message.ends_with("expected a size below 4 GiB (a socket option is 32 bits)"));
        assert_eq!(parse_bytes_u32("4294967295"), Ok(u32::MAX));
        let message = parse_bytes("1.5").unwrap_err().to_string();
        assert!(message.contains("a whole number of bytes"), "{message}");
    }

    #[test]
    fn a_small_b_is_bits_and_refused_for_a_size() {
        for (input, offer) in [
            ("128Kb", "did you mean 128K (bytes) or a rate 128kbit?"),
            ("4mb", "did you mean 4M (bytes) or a rate 4mbit?"),
            ("64b", "did you mean 64 (bytes) or a rate 64bit?"),
        ] {
            let message = parse_bytes(input).unwrap_err().to_string();
            assert!(message.ends_with(offer), "{input}: {message}");
        }
        assert_eq!(parse_bytes("128KB"), Ok(131072));
        assert_eq!(parse_bytes("128kB"), Ok(131072));
        assert_eq!(parse_bytes("64B"), Ok(64));
    }

    #[test]
    fn durations_past_a_week_are_refused_before_they_overflow() {
        assert_eq!(parse_duration("7d"), Ok(MAX_DURATION));
        for input in ["8d", "99999999999h", "999999999999999999999s"] {
            let message = parse_duration(input).unwrap_err().to_string();
            assert!(
                message.ends_with(
                    "at most 7d (a week): no run, phase or timeout of oscil lasts longer"
                ),
                "{input}: {message}"
            );
        }
        let timeout = duration_within(Duration::from_secs(1), MAX_DURATION, "why");
        assert!(timeout("1ms")
            .unwrap_err()
            .to_string()
            .ends_with("1s to 7days: why"));
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

//! Numbers in the units a person reads: Mbit/s, KiB/MiB, ms.

pub use oscil_cli::units::MIB;
pub const MBIT: f64 = 1e6;

/// A byte size the way buffer sizes are usually written: `16 KiB`, `4 MiB`, `300 B`.
pub fn size(bytes: f64) -> String {
    const UNITS: [(f64, &str); 3] = [(1024.0 * MIB, "GiB"), (MIB, "MiB"), (1024.0, "KiB")];
    for (scale, unit) in UNITS {
        if bytes >= scale {
            return format!("{} {unit}", trim(bytes / scale));
        }
    }
    format!("{bytes:.0} B")
}

/// A rate in bits per second: `12.3 Mbit/s`, or `1.25 Gbit/s` from 1 Gbit/s up.
pub fn rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{} Gbit/s", trim(bps / 1e9))
    } else {
        format!("{:.1} Mbit/s", bps / MBIT)
    }
}

pub fn mib(bytes: f64) -> String {
    format!("{:.2} MiB", oscil_cli::units::mib(bytes))
}

pub fn ms(ms: f64) -> String {
    format!("{ms:.1} ms")
}

/// A wait in the unit that reads best: `1.4 s` from a second up, `1.6 ms`, `0.25 ms`.
pub fn wait(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else if ms >= 1.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.2} ms")
    }
}

/// A change against a baseline, signed: `+12%`, `-45%`.
pub fn change(percent: f64) -> String {
    if percent.round() == 0.0 {
        return "±0%".into();
    }
    format!("{percent:+.0}%")
}

/// Up to two decimals, without trailing zeros.
fn trim(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_sysctl_values() {
        assert_eq!(size(16384.0), "16 KiB");
        assert_eq!(size(131072.0 * 3.0), "384 KiB");
        assert_eq!(size(1.5 * MIB), "1.5 MiB");
        assert_eq!(size(100.0), "100 B");
    }

    #[test]
    fn rates_and_changes() {
        assert_eq!(rate(12_345_678.0), "12.3 Mbit/s");
        assert_eq!(rate(25e9), "25 Gbit/s");
        assert_eq!(rate(9_912_000_000.0), "9.91 Gbit/s");
        assert_eq!(change(-44.6), "-45%");
        assert_eq!(change(12.0), "+12%");
        assert_eq!(change(-0.2), "±0%");
        assert_eq!(wait(1400.0), "1.4 s");
        assert_eq!(wait(1.6), "1.6 ms");
        assert_eq!(wait(0.25), "0.25 ms");
    }
}

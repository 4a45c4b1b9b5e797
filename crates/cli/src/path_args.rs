//! The emulated path's values that `oscil-link` and `oscil-lab` both take.

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
}

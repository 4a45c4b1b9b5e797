//! The deterministic model of one direction of the link. No I/O: the caller passes `now`.
//!
//! A packet meets, in order: random loss (as netem: before the queue), a drop-tail queue of
//! `queue_limit` segments in front of a serializer running at `rate_bps`, then a fixed
//! propagation delay. Departure = max(now, last departure) + wire bits / rate; delivery =
//! departure + delay. The queue holds the segments whose serialization has not finished
//! (a router's queue); packets already in the delay line do not count.

use std::collections::VecDeque;
use std::time::Duration;

use serde::Serialize;

use crate::wire::WireSize;

/// What the queue limit counts, recorded in stats and the lab's run metadata.
pub const QUEUE_COUNTS: &str = "segments (wire packets; a GSO skb counts each of its segments) \
waiting for or in serialization at the bottleneck; packets in the delay line are not counted";

/// Configuration of one direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathConfig {
    /// Bottleneck rate in bits per second.
    pub rate_bps: u64,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Drop-tail queue limit in segments.
    pub queue_limit: u32,
    /// Probability that a packet is lost, 0..=1.
    pub loss: f64,
    /// Seed of the loss generator.
    pub seed: u64,
}

/// What happens to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Deliver at this time (nanoseconds on the caller's clock).
    Deliver { at_ns: u64 },
    /// The queue had room for only the first `segments` segments of a GSO packet: cut it
    /// to those (`wire::truncate_tcp_gso`) and deliver them at `at_ns`; the rest are dropped.
    DeliverFirst { segments: u32, at_ns: u64 },
    /// The bottleneck queue was full.
    DropQueue,
    /// Random loss.
    DropLoss,
}

/// What the link did to the packets of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PathStats {
    pub packets_in: u64,
    pub segments_in: u64,
    pub wire_bytes_in: u64,
    pub packets_forwarded: u64,
    pub segments_forwarded: u64,
    pub wire_bytes_forwarded: u64,
    /// Packets dropped whole at the queue; `segments_dropped_queue` also counts the
    /// segments cut from truncated packets.
    pub packets_dropped_queue: u64,
    pub segments_dropped_queue: u64,
    /// GSO packets of which the queue took only the first segments.
    pub packets_truncated_queue: u64,
    pub packets_dropped_loss: u64,
    pub segments_dropped_loss: u64,
    pub max_queue_segments: u32,
}

/// One direction of the link.
#[derive(Debug)]
pub struct PathModel {
    config: PathConfig,
    rng: SplitMix64,
    /// When the serializer is next free, and the sub-nanosecond remainder (in bit-ns / rate).
    last_departure_ns: u64,
    departure_remainder: u128,
    /// Departure time and segments of each packet still in the queue, oldest first.
    queue: VecDeque<(u64, u32)>,
    queued_segments: u32,
    stats: PathStats,
}

impl PathModel {
    pub fn new(config: PathConfig) -> Self {
        PathModel {
            config,
            rng: SplitMix64(config.seed),
            last_departure_ns: 0,
            departure_remainder: 0,
            queue: VecDeque::new(),
            queued_segments: 0,
            stats: PathStats::default(),
        }
    }

    pub fn config(&self) -> &PathConfig {
        &self.config
    }

    pub fn stats(&self) -> &PathStats {
        &self.stats
    }

    /// Segments in the queue at `now_ns`.
    pub fn queued_segments(&mut self, now_ns: u64) -> u32 {
        self.drain(now_ns);
        self.queued_segments
    }

    /// Decides the fate of a packet of `size` arriving at `now_ns`. `now_ns` must not go
    /// backwards between calls.
    pub fn admit(&mut self, now_ns: u64, size: WireSize) -> Verdict {
        let segments = size.segments.max(1);
        self.stats.packets_in += 1;
        self.stats.segments_in += segments as u64;
        self.stats.wire_bytes_in += size.bytes;
        if self.config.loss > 0.0 && self.rng.next_f64() < self.config.loss {
            self.stats.packets_dropped_loss += 1;
            self.stats.segments_dropped_loss += segments as u64;
            return Verdict::DropLoss;
        }
        self.drain(now_ns);
        let room = (self.config.queue_limit as u64).saturating_sub(self.queued_segments as u64);
        let kept = if segments as u64 <= room {
            size
        } else if size.truncatable && room > 0 {
            // A router's drop-tail queue takes the segments that fit and drops the rest.
            size.first(room as u32)
        } else if self.queued_segments == 0 {
            // An empty queue takes even a packet larger than the limit, or a packet that
            // cannot be cut and is larger than the limit could never pass.
            size
        } else {
            self.stats.packets_dropped_queue += 1;
            self.stats.segments_dropped_queue += segments as u64;
            return Verdict::DropQueue;
        };
        let at_ns = self.enqueue(now_ns, kept);
        if kept.segments < segments {
            self.stats.packets_truncated_queue += 1;
            self.stats.segments_dropped_queue += (segments - kept.segments) as u64;
            return Verdict::DeliverFirst {
                segments: kept.segments,
                at_ns,
            };
        }
        Verdict::Deliver { at_ns }
    }

    /// Queues a packet behind the serializer; returns its delivery time.
    fn enqueue(&mut self, now_ns: u64, size: WireSize) -> u64 {
        let segments = size.segments.max(1);
        if self.last_departure_ns < now_ns {
            self.last_departure_ns = now_ns;
            self.departure_remainder = 0;
        }
        let rate = self.config.rate_bps as u128;
        let numerator = size.bytes as u128 * 8 * 1_000_000_000 + self.departure_remainder;
        self.last_departure_ns += (numerator / rate) as u64;
        self.departure_remainder = numerator % rate;
        let departure_ns = self.last_departure_ns;
        self.queue.push_back((departure_ns, segments));
        self.queued_segments += segments;
        self.stats.max_queue_segments = self.stats.max_queue_segments.max(self.queued_segments);
        self.stats.packets_forwarded += 1;
        self.stats.segments_forwarded += segments as u64;
        self.stats.wire_bytes_forwarded += size.bytes;
        departure_ns + self.config.delay.as_nanos() as u64
    }

    /// Removes from the queue the packets whose serialization ended by `now_ns`.
    fn drain(&mut self, now_ns: u64) {
        while let Some(&(departure_ns, segments)) = self.queue.front() {
            if departure_ns > now_ns {
                break;
            }
            self.queue.pop_front();
            self.queued_segments -= segments;
        }
    }
}

/// A small seeded generator (SplitMix64): reproducible loss without a dependency.
#[derive(Debug)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn config(rate_bps: u64, delay_ms: u64, queue_limit: u32) -> PathConfig {
        PathConfig {
            rate_bps,
            delay: Duration::from_millis(delay_ms),
            queue_limit,
            loss: 0.0,
            seed: 1,
        }
    }

    fn packet(bytes: u64) -> WireSize {
        WireSize {
            segments: 1,
            bytes,
            segment_bytes: bytes,
            truncatable: false,
        }
    }

    /// A GSO packet of full 1514-byte segments, which the link can cut or not.
    fn gso(segments: u32, truncatable: bool) -> WireSize {
        WireSize {
            segments,
            bytes: segments as u64 * 1514,
            segment_bytes: 1514,
            truncatable,
        }
    }

    #[test]
    fn idle_link_adds_serialization_and_delay() {
        // 1250 bytes at 10 Mbit/s take 1 ms on the wire; then 20 ms of delay.
        let mut path = PathModel::new(config(10_000_000, 20, 50));
        assert_eq!(
            path.admit(5 * MS, packet(1250)),
            Verdict::Deliver { at_ns: 26 * MS }
        );
        // Long after, the serializer is idle again: same cost from the new arrival.
        assert_eq!(
            path.admit(100 * MS, packet(1250)),
            Verdict::Deliver { at_ns: 121 * MS }
        );
    }

    #[test]
    fn back_to_back_packets_leave_at_the_rate() {
        // 1000 packets of 1514 bytes arriving together at 100 Mbit/s: the last one leaves
        // after 1000 * 1514 * 8 / 1e8 s = 121.12 ms, regardless of rounding per packet.
        let mut path = PathModel::new(config(100_000_000, 0, 10_000));
        let mut last = 0;
        for _ in 0..1000 {
            match path.admit(0, packet(1514)) {
                Verdict::Deliver { at_ns } => last = at_ns,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(last, 121_120_000);
        // A rate that does not divide evenly still adds up exactly: 3 bits at 7 bit/s.
        let mut path = PathModel::new(config(7, 0, 10));
        let mut last = 0;
        for _ in 0..7 {
            if let Verdict::Deliver { at_ns } = path.admit(0, packet(1)) {
                last = at_ns;
            }
        }
        assert_eq!(last, 8_000_000_000);
    }

    #[test]
    fn queue_limit_drops_tail_and_frees_as_packets_leave() {
        // Each 1250-byte packet takes 1 ms at 10 Mbit/s; limit 5 packets.
        let mut path = PathModel::new(config(10_000_000, 40, 5));
        let verdicts: Vec<_> = (0..8).map(|_| path.admit(0, packet(1250))).collect();
        assert!(verdicts[..5]
            .iter()
            .all(|v| matches!(v, Verdict::Deliver { .. })));
        assert!(verdicts[5..].iter().all(|v| *v == Verdict::DropQueue));
        assert_eq!(path.stats().max_queue_segments, 5);
        // After 2 ms two packets have left the queue (they are in the delay line, which
        // does not count) and two more fit.
        assert_eq!(path.queued_segments(2 * MS), 3);
        assert!(matches!(
            path.admit(2 * MS, packet(1250)),
            Verdict::Deliver { .. }
        ));
        assert!(matches!(
            path.admit(2 * MS, packet(1250)),
            Verdict::Deliver { .. }
        ));
        assert_eq!(path.admit(2 * MS, packet(1250)), Verdict::DropQueue);
        let stats = path.stats();
        assert_eq!(
            (stats.packets_forwarded, stats.packets_dropped_queue),
            (7, 4)
        );
    }

    #[test]
    fn gso_packets_occupy_one_slot_per_segment() {
        let mut path = PathModel::new(config(1_000_000_000, 0, 50));
        assert!(matches!(
            path.admit(0, gso(44, false)),
            Verdict::Deliver { .. }
        ));
        // 44 queued: a further 7-segment packet that cannot be cut would exceed 50.
        assert_eq!(path.admit(0, gso(7, false)), Verdict::DropQueue);
        assert!(matches!(
            path.admit(0, gso(6, false)),
            Verdict::Deliver { .. }
        ));
        // A packet larger than the whole limit that cannot be cut passes an empty queue.
        let mut path = PathModel::new(config(1_000_000_000, 0, 10));
        assert!(matches!(
            path.admit(0, gso(44, false)),
            Verdict::Deliver { .. }
        ));
    }

    #[test]
    fn a_gso_packet_that_does_not_fit_keeps_the_segments_that_do() {
        // 1 Gbit/s: a 1514-byte segment takes 12.112 us; 1 ms of delay.
        let mut path = PathModel::new(config(1_000_000_000, 1, 50));
        assert!(matches!(
            path.admit(0, gso(44, true)),
            Verdict::Deliver { .. }
        ));
        // 6 places left: the first 6 of 44 segments go, leaving after the 50th segment.
        assert_eq!(
            path.admit(0, gso(44, true)),
            Verdict::DeliverFirst {
                segments: 6,
                at_ns: 50 * 12_112 + MS
            }
        );
        assert_eq!(
            path.admit(0, gso(2, true)),
            Verdict::DropQueue,
            "queue full"
        );
        let stats = path.stats();
        assert_eq!(stats.packets_truncated_queue, 1);
        assert_eq!(stats.packets_dropped_queue, 1);
        assert_eq!(stats.segments_dropped_queue, 38 + 2);
        assert_eq!(stats.segments_forwarded, 50);
        assert_eq!(stats.wire_bytes_forwarded, 50 * 1514);
        // An empty queue takes the first `queue_limit` segments of a longer packet.
        let mut path = PathModel::new(config(1_000_000_000, 0, 10));
        assert!(matches!(
            path.admit(0, gso(44, true)),
            Verdict::DeliverFirst { segments: 10, .. }
        ));
    }

    #[test]
    fn loss_is_random_at_the_configured_rate_and_seeded() {
        let run = |seed| {
            let mut path = PathModel::new(PathConfig {
                loss: 0.1,
                seed,
                ..config(1_000_000_000, 0, 1_000_000)
            });
            (0..100_000u64)
                .map(|i| path.admit(i * MS, packet(100)))
                .filter(|v| *v == Verdict::DropLoss)
                .count()
        };
        let lost = run(7);
        // Binomial(100000, 0.1): sd is about 95; allow 5 sd.
        assert!((9_525..=10_475).contains(&lost), "lost {lost}");
        assert_eq!(lost, run(7), "same seed, same losses");
        assert_ne!(lost, run(8), "another seed, other losses");
    }
}

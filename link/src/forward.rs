//! The I/O layer of one direction: read frames from one TUN, let the [`PathModel`] decide their
//! fate, hold them in a [`DelayLine`], write them to the other TUN when due.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::capture::{Capture, CaptureStats};
use crate::delay_line::DelayLine;
use crate::path::{PathModel, PathStats, Verdict};
use crate::sys::{self, CpuSeconds};
use crate::wire::{truncate_tcp_gso, wire_size, VNET_HDR_LEN};

/// Reads between two delivery passes, so a flood of arrivals cannot delay deliveries.
const READ_BATCH: usize = 64;
/// The last stretch before a delivery is polled, not slept: waking from a sleep takes tens of
/// microseconds, twice per direction per round trip, which at 10 ms RTT was most of a 2%
/// (200 us) error budget. Only on a nearly idle line (`SPIN_MAX_FRAMES`): under load a
/// frame is always due within that time, and two real-time threads polling for ever took
/// the CPU from the endpoints (7.7 instead of 10 Gbit/s delivered on 2 cores).
const SPIN_NS: u64 = 100_000;
const SPIN_MAX_FRAMES: usize = 4;
// Each arrival and each due frame wakes the thread on its own, though on this VM a third
// of the forwarding threads' time at 10 Gbit/s goes to going to sleep and waking up (perf:
// `schedule_hrtimeout_range_clock` in `ppoll`). Coalescing was tried and left out: a
// 100 us nap after each pass on a busy line, not cut short by arrivals, halved the
// emulator's CPU with 1-8 flows of 64 KB GSO frames (73-77% -> 39-41% of a core at
// 10 Gbit/s x 10 ms) with late frames unchanged, but with 100 paced flows (the a74f0fa
// scenario: ~60,000 small frames and ~33,000 ACKs a second) the ACK direction fell
// behind: 68-69% of ACKs more than 1 ms late and 200,000+ dropped at the TUN, against
// 6-25% and none without the nap (docs/PERFORMANCE.md).
/// Longest sleep, so a stop request is seen promptly.
const MAX_SLEEP: Duration = Duration::from_millis(50);
/// How often the shared statistics are refreshed.
const PUBLISH_EVERY: Duration = Duration::from_millis(250);
/// A packet written later than this past its delivery time counts as late.
const LATE_NS: u64 = 1_000_000;

/// Failures of the emulator itself, kept apart from what the emulated link did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct IoStats {
    /// Packets the kernel dropped at the input TUN because this thread did not read them in
    /// time (TX dropped of the input device, counted since the emulator attached).
    pub tun_tx_dropped: u64,
    /// Writes to the output TUN that failed (e.g. device down).
    pub write_errors: u64,
    /// Packets written more than 1 ms after their delivery time.
    pub packets_late_over_1ms: u64,
    /// Largest lateness of a write past its delivery time, in microseconds.
    pub max_late_us: u64,
    /// Longest single write to the output TUN, in microseconds: the far namespace's
    /// receive processing runs inside it, and delays everything behind it.
    pub max_write_us: u64,
    /// GSO packets the link meant to cut to their first segments but could not (the link's
    /// stats count them as forwarded; they were dropped). Zero unless the frame parser and
    /// the cutter disagree.
    pub truncate_failures: u64,
    /// Times reading paused because the delay line's buffer was full.
    pub ring_full_waits: u64,
    /// Whether the thread ran at real-time priority.
    pub realtime: bool,
    /// CPU used by this direction's thread.
    pub cpu: CpuSeconds,
}

/// Statistics of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct DirectionStats {
    /// What the emulated link did to the packets.
    pub link: PathStats,
    /// Where the emulator fell short.
    pub emulator: IoStats,
    /// What the packet capture kept, with `--pcap`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureStats>,
}

/// One direction: frames from `input` (a TUN in namespace `input_netns`) to `output`.
pub struct Direction {
    pub input: Arc<File>,
    pub output: Arc<File>,
    /// The namespace of the input device, entered so its counters can be read.
    pub input_netns: Option<File>,
    pub input_dev: String,
    pub path: PathModel,
    pub ring_bytes: usize,
    /// Run at SCHED_FIFO priority 10 if the kernel allows.
    pub realtime: bool,
    /// Where the packets are recorded, with `--pcap`.
    pub capture: Option<Capture>,
}

/// Runs one direction until `stop` is set, refreshing `shared` as it goes.
pub fn run(
    mut dir: Direction,
    epoch: Instant,
    stop: &AtomicBool,
    shared: &Mutex<DirectionStats>,
) -> io::Result<()> {
    if let Some(ns) = &dir.input_netns {
        sys::enter_netns(ns)?;
    }
    sys::set_timer_slack(10_000);
    let mut io_stats = IoStats {
        realtime: dir.realtime && sys::set_realtime(10).is_ok(),
        ..IoStats::default()
    };
    let tx_dropped_at_start = tun_tx_dropped(&dir.input_dev).unwrap_or(0);
    let mut line = DelayLine::new(dir.ring_bytes);
    let now_ns = || epoch.elapsed().as_nanos() as u64;
    let mut next_publish = Instant::now();

    while !stop.load(Ordering::Relaxed) {
        deliver_due(&mut line, &dir.output, epoch, &mut io_stats);
        let batch = read_batch(&mut dir, &mut line, epoch, &mut io_stats)?;
        if next_publish <= Instant::now() {
            if let Some(capture) = &mut dir.capture {
                capture.hand_off();
            }
            publish(&dir, &io_stats, tx_dropped_at_start, shared);
            next_publish += PUBLISH_EVERY;
        }
        if batch == Batch::Interrupted {
            continue;
        }
        let now = now_ns();
        let spin_ns = if line.len() <= SPIN_MAX_FRAMES {
            SPIN_NS
        } else {
            0
        };
        let sleep = match line.front() {
            Some((_, at)) if at <= now + spin_ns => {
                std::hint::spin_loop();
                continue;
            }
            Some((_, at)) => Duration::from_nanos(at - now - spin_ns).min(MAX_SLEEP),
            None => MAX_SLEEP,
        };
        if batch == Batch::RingFull {
            io_stats.ring_full_waits += 1;
            std::thread::sleep(sleep);
        } else {
            sys::wait_readable(dir.input.as_fd(), sleep)?;
        }
    }
    let captured = dir.capture.as_mut().map_or(Ok(()), Capture::finish);
    publish(&dir, &io_stats, tx_dropped_at_start, shared);
    captured
}

/// Writes every frame whose delivery time has come, counting how late each one is.
fn deliver_due(line: &mut DelayLine, output: &File, epoch: Instant, io_stats: &mut IoStats) {
    let mut output = output;
    let now = epoch.elapsed().as_nanos() as u64;
    while let Some((frame, deliver_ns)) = line.front() {
        if deliver_ns > now {
            break;
        }
        let write_started = Instant::now();
        if output.write(frame).is_err() {
            io_stats.write_errors += 1;
        }
        let write_us = write_started.elapsed().as_micros() as u64;
        io_stats.max_write_us = io_stats.max_write_us.max(write_us);
        // Measured at the write, not at the top of the pass: a slow write before this
        // one makes this frame later, and that is the emulator's shortfall to count.
        let late_ns = ((write_started - epoch).as_nanos() as u64).saturating_sub(deliver_ns);
        io_stats.max_late_us = io_stats.max_late_us.max(late_ns / 1000);
        if late_ns > LATE_NS {
            io_stats.packets_late_over_1ms += 1;
        }
        line.pop();
    }
}

/// How a batch of reads ended.
#[derive(Debug, PartialEq, Eq)]
enum Batch {
    /// The input had nothing more to read: sleep until it has or a frame falls due.
    Drained,
    /// The delay line's ring is full: sleep until a frame falls due.
    RingFull,
    /// A frame fell due, or the batch reached its size: deliver before reading on.
    Interrupted,
}

/// Reads frames and lets the path decide their fate until the input is empty, the ring is
/// full, `READ_BATCH` frames were read, or the oldest frame in the line falls due.
///
/// Speed: the last condition keeps deliveries on time at 5-10 Gbit/s. A 64 KB read takes
/// some 10-20 us, so a batch of 64 of them held due frames back by a millisecond or more,
/// and the late count grew with the rate; checking the front after each read costs one
/// clock read, which `admit` needed anyway.
fn read_batch(
    dir: &mut Direction,
    line: &mut DelayLine,
    epoch: Instant,
    io_stats: &mut IoStats,
) -> io::Result<Batch> {
    let mut input = &*dir.input;
    for _ in 0..READ_BATCH {
        let Some(buf) = line.reserve() else {
            return Ok(Batch::RingFull);
        };
        let n = match input.read(buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Batch::Drained),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let size = wire_size(&buf[..n]);
        let now = epoch.elapsed().as_nanos() as u64;
        let verdict = dir.path.admit(now, size);
        if let Some(capture) = &mut dir.capture {
            capture.record(now, buf.get(VNET_HDR_LEN..n).unwrap_or(&[]), verdict);
        }
        match verdict {
            Verdict::Deliver { at_ns } => line.commit(n, at_ns),
            Verdict::DeliverFirst { segments, at_ns } => {
                match truncate_tcp_gso(&mut buf[..n], segments) {
                    Some(len) => line.commit(len, at_ns),
                    None => io_stats.truncate_failures += 1,
                }
            }
            Verdict::DropQueue | Verdict::DropLoss => {}
        }
        if line.front().is_some_and(|(_, at)| at <= now) {
            return Ok(Batch::Interrupted);
        }
    }
    Ok(Batch::Interrupted)
}

fn publish(
    dir: &Direction,
    io: &IoStats,
    tx_dropped_at_start: u64,
    shared: &Mutex<DirectionStats>,
) {
    let mut emulator = *io;
    emulator.tun_tx_dropped = tun_tx_dropped(&dir.input_dev)
        .unwrap_or(0)
        .saturating_sub(tx_dropped_at_start);
    emulator.cpu = sys::thread_cpu();
    let stats = DirectionStats {
        link: *dir.path.stats(),
        emulator,
        capture: dir.capture.as_ref().map(Capture::stats),
    };
    *shared.lock().unwrap_or_else(|e| e.into_inner()) = stats;
}

/// TX dropped of `dev` in the calling thread's network namespace.
fn tun_tx_dropped(dev: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev").ok()?;
    parse_tx_dropped(&text, dev)
}

/// Finds `dev`'s TX drop counter in the text of `/proc/net/dev`.
fn parse_tx_dropped(text: &str, dev: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, counters) = line.split_once(':')?;
        if name.trim() != dev {
            return None;
        }
        // 8 receive counters, then transmit: bytes packets errs drop ...
        counters.split_whitespace().nth(11)?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_dropped_is_read_from_proc_net_dev() {
        let text = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  osl0: 5229952    3517    0    1    0     0          0         0 91236771   62431    0   17    0     0       0          0
";
        assert_eq!(parse_tx_dropped(text, "osl0"), Some(17));
        assert_eq!(parse_tx_dropped(text, "lo"), Some(0));
        assert_eq!(parse_tx_dropped(text, "eth0"), None);
    }
}

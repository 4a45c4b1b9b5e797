//! A packet capture of one direction: the headers of every packet as it entered the link,
//! stamped with the emulator's own clock, with its fate (when it leaves the queue and is
//! delivered, or why it was dropped) in the packet's comment, as pcapng.
//!
//! The forwarding thread only copies into a preallocated buffer; a writer thread of its own
//! writes full buffers to the file and hands them back. When the writer has not, the
//! packet goes uncaptured (and counted) rather than slowing the link, as when the bytes of
//! both directions' captures reach the shared cap.

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use serde::Serialize;

use crate::path::Verdict;
use crate::pcapng;

/// Buffers per direction, each `BUFFER_BYTES`: the writer may fall this far behind, some
/// 35,000 packets (0.2 s at 10 Gbit/s without GSO). It runs at normal priority beside the
/// real-time forwarding threads, pinned to the same CPU in the lab; 4 x 256 KB were filled
/// in 5 ms by a loop recording 1514-byte packets as fast as it could.
const BUFFERS: usize = 8;
const BUFFER_BYTES: usize = 1 << 20;
/// The longest comment `Fate` writes (two 20-digit numbers and the words around them).
const MAX_COMMENT_BYTES: usize = 160;
/// Budget taken from the shared cap at a time, so the two directions rarely touch it.
const BUDGET_CHUNK_BYTES: u64 = 64 * 1024;

/// What to capture, asked with `--pcap`.
#[derive(Debug, Clone)]
pub struct CaptureConfig {
    /// Where `link-a_to_b.pcapng` and `link-b_to_a.pcapng` go.
    pub dir: PathBuf,
    /// Bytes kept of each packet from its IP header on: the headers, not the payload.
    pub snap_bytes: u32,
    /// Most bytes written in both files together; packets past it are counted, not kept.
    pub max_bytes: u64,
}

impl CaptureConfig {
    /// The capture file of a direction (`a_to_b` or `b_to_a`).
    pub fn file(&self, direction: &str) -> PathBuf {
        self.dir.join(format!("link-{direction}.pcapng"))
    }
}

/// What a direction's capture kept and left out; in the stats JSON under `capture`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CaptureStats {
    /// Packets written (one per packet read from the input TUN, whatever its fate).
    pub packets_captured: u64,
    /// Packets left out because both files together reached `--pcap-max-bytes`.
    pub packets_over_cap: u64,
    /// Packets left out because the writer thread had not written the earlier ones yet.
    pub packets_writer_behind: u64,
    /// Bytes of the file, headers included.
    pub bytes: u64,
}

/// The writer thread's input and the thread, whose result is the file's.
type Writer = (SyncSender<Vec<u8>>, JoinHandle<io::Result<()>>);

/// The capture of one direction, owned by its forwarding thread.
pub struct Capture {
    /// The buffer being filled; empty without capacity while the writer holds them all.
    buf: Vec<u8>,
    empty_rx: Receiver<Vec<u8>>,
    /// The writer thread and its input, until `finish`.
    writer: Option<Writer>,
    /// Bytes both directions may still write, shared; `allowance` is this one's share.
    budget: Arc<AtomicU64>,
    allowance: u64,
    snap_bytes: usize,
    /// The Unix time of the emulator's clock zero, in nanoseconds.
    wall_epoch_ns: u64,
    delay_ns: u64,
    stats: CaptureStats,
}

impl Capture {
    /// Creates `path` and writes its section header and interface; `delay_ns` is the
    /// direction's one-way delay (delivery minus leaving the queue).
    pub fn create(
        path: &Path,
        direction: &str,
        config: &CaptureConfig,
        budget: Arc<AtomicU64>,
        wall_epoch_ns: u64,
        delay_ns: u64,
    ) -> io::Result<Capture> {
        let file = File::create(path)?;
        let (full_tx, full_rx) = sync_channel::<Vec<u8>>(BUFFERS);
        let (empty_tx, empty_rx) = sync_channel::<Vec<u8>>(BUFFERS);
        for _ in 1..BUFFERS {
            empty_tx
                .send(touched_buffer())
                .expect("the channel holds BUFFERS");
        }
        let writer = std::thread::Builder::new()
            .name(format!("pcap-{direction}"))
            .spawn(move || write_buffers(file, full_rx, empty_tx))?;
        let mut capture = Capture {
            buf: touched_buffer(),
            empty_rx,
            writer: Some((full_tx, writer)),
            budget,
            allowance: 0,
            snap_bytes: config.snap_bytes as usize,
            wall_epoch_ns,
            delay_ns,
            stats: CaptureStats::default(),
        };
        let description = format!(
            "oscil-link {direction}: every packet as it entered the link, before loss and \
             the queue; its comment says when it left the queue and was delivered, or why it \
             was dropped"
        );
        pcapng::section_header(
            &mut capture.buf,
            concat!("oscil-link ", env!("CARGO_PKG_VERSION")),
        );
        pcapng::interface(&mut capture.buf, direction, &description, config.snap_bytes);
        let header_bytes = capture.buf.len() as u64;
        capture.stats.bytes = header_bytes;
        let _ = capture
            .budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                Some(left.saturating_sub(header_bytes))
            });
        Ok(capture)
    }

    /// Records a packet (`ip`, from its IP header on) that entered at `now_ns` on the
    /// emulator's clock, and what the path decided.
    pub fn record(&mut self, now_ns: u64, ip: &[u8], verdict: Verdict) {
        let captured = &ip[..ip.len().min(self.snap_bytes)];
        let record_bytes = pcapng::PACKET_OVERHEAD_BYTES + captured.len() + MAX_COMMENT_BYTES;
        if !self.take_budget(record_bytes as u64) {
            self.stats.packets_over_cap += 1;
            return;
        }
        if self.buf.capacity() - self.buf.len() < record_bytes {
            self.hand_off();
        }
        if self.buf.capacity() < record_bytes {
            match self.empty_rx.try_recv() {
                Ok(buf) => self.buf = buf,
                Err(_) => {
                    self.allowance += record_bytes as u64;
                    self.stats.packets_writer_behind += 1;
                    return;
                }
            }
        }
        let before = self.buf.len();
        let fate = Fate {
            now_ns,
            delay_ns: self.delay_ns,
            verdict,
        };
        pcapng::enhanced_packet(
            &mut self.buf,
            self.wall_epoch_ns + now_ns,
            captured,
            ip.len() as u32,
            pcapng::FLAG_INBOUND,
            format_args!("{fate}"),
        );
        let written = (self.buf.len() - before) as u64;
        // The budget was taken for the longest record; give back what this one did not use.
        self.allowance += record_bytes as u64 - written;
        self.stats.bytes += written;
        self.stats.packets_captured += 1;
    }

    /// Passes what is buffered to the writer, so the file on disk stays current.
    pub fn hand_off(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let Some((full_tx, _)) = &self.writer else {
            return;
        };
        let buf = std::mem::take(&mut self.buf);
        // A writer that failed has gone; `finish` returns its error.
        let _ = full_tx.try_send(buf);
        if let Ok(buf) = self.empty_rx.try_recv() {
            self.buf = buf;
        }
    }

    pub fn stats(&self) -> CaptureStats {
        self.stats
    }

    /// Writes what is left and waits for the writer; the file is complete after this.
    pub fn finish(&mut self) -> io::Result<()> {
        self.hand_off();
        let Some((full_tx, writer)) = self.writer.take() else {
            return Ok(());
        };
        drop(full_tx);
        writer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("capture writer panicked")))
    }

    /// Takes `bytes` from this direction's allowance, refilled from the shared budget.
    fn take_budget(&mut self, bytes: u64) -> bool {
        if self.allowance < bytes {
            let want = BUDGET_CHUNK_BYTES.max(bytes - self.allowance);
            let got = self
                .budget
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                    Some(left.saturating_sub(want))
                })
                .map_or(0, |left| left.min(want));
            self.allowance += got;
        }
        if self.allowance < bytes {
            return false;
        }
        self.allowance -= bytes;
        true
    }
}

/// An empty buffer of `BUFFER_BYTES` whose pages are already mapped, so the forwarding
/// thread takes no page faults filling it (as `DelayLine::new` does for its ring).
fn touched_buffer() -> Vec<u8> {
    let mut buf = vec![0u8; BUFFER_BYTES];
    for page in buf.chunks_mut(4096) {
        page[0] = std::hint::black_box(0);
    }
    buf.clear();
    buf
}

/// The writer thread: writes each full buffer and hands it back, until the capture ends.
fn write_buffers(
    mut file: File,
    full_rx: Receiver<Vec<u8>>,
    empty_tx: SyncSender<Vec<u8>>,
) -> io::Result<()> {
    for mut buf in full_rx {
        file.write_all(&buf)?;
        buf.clear();
        // The forwarding thread may have finished and stopped taking buffers back.
        let _ = empty_tx.try_send(buf);
    }
    file.flush()
}

/// A packet's fate as its comment says it, times in nanoseconds after it entered.
struct Fate {
    now_ns: u64,
    delay_ns: u64,
    verdict: Verdict,
}

impl fmt::Display for Fate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let after = |at_ns: u64| at_ns.saturating_sub(self.now_ns);
        let times = |f: &mut fmt::Formatter<'_>, at_ns: u64| {
            write!(
                f,
                "queue_exit_after_ns={} delivery_after_ns={}",
                after(at_ns.saturating_sub(self.delay_ns)),
                after(at_ns)
            )
        };
        match self.verdict {
            Verdict::Deliver { at_ns } => {
                f.write_str("forwarded; ")?;
                times(f, at_ns)
            }
            Verdict::DeliverFirst { segments, at_ns } => {
                write!(
                    f,
                    "forwarded its first {segments} segments, the queue dropped the rest; "
                )?;
                times(f, at_ns)
            }
            Verdict::DropQueue => f.write_str("dropped: queue full"),
            Verdict::DropLoss => f.write_str("dropped: random loss"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &Path, max_bytes: u64) -> CaptureConfig {
        CaptureConfig {
            dir: dir.to_owned(),
            snap_bytes: 64,
            max_bytes,
        }
    }

    #[test]
    fn the_longest_comment_fits_its_reserve() {
        let fate = Fate {
            now_ns: 0,
            delay_ns: 0,
            verdict: Verdict::DeliverFirst {
                segments: u32::MAX,
                at_ns: u64::MAX,
            },
        };
        assert!(fate.to_string().len() <= MAX_COMMENT_BYTES, "{fate}");
    }

    #[test]
    fn the_byte_cap_holds_and_counts_what_it_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path(), 100_000);
        let budget = Arc::new(AtomicU64::new(config.max_bytes));
        let path = config.file("a_to_b");
        let mut capture = Capture::create(&path, "a_to_b", &config, budget, 0, 1000).unwrap();
        let packet = [0x45u8; 1500];
        for i in 0..2_000 {
            capture.record(
                i * 1000,
                &packet,
                Verdict::Deliver {
                    at_ns: i * 1000 + 5000,
                },
            );
        }
        capture.finish().unwrap();
        let stats = capture.stats();
        let file_bytes = std::fs::metadata(&path).unwrap().len();
        assert!(
            file_bytes <= 100_000,
            "{file_bytes} bytes past a 100 kB cap"
        );
        assert_eq!(file_bytes, stats.bytes, "the stats say what the file holds");
        assert!(stats.packets_captured > 0 && stats.packets_over_cap > 0);
        assert_eq!(stats.packets_captured + stats.packets_over_cap, 2_000);
        // Each record holds the 64 bytes of the snap length, not the 1500 of the packet.
        assert!(file_bytes / stats.packets_captured < 300);
    }
}

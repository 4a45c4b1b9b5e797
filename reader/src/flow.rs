//! One data connection: reads by the pacer's steps and counts what it read.

use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::{sleep_until, timeout_at, Instant};

use oscil_protocol::clock::realtime_unix_ns;

use crate::markers::Book;
use crate::pacer::{Pacer, Step};

/// Reads of up to this size. Each read that empties the receive queue sends the task back
/// through the runtime's poller (epoll, a wake-up, a context switch: 17% of the reader's
/// time with 64 KiB reads under perf), so fewer, larger reads matter more than the cache:
/// on loopback 256 KiB reads and writes gave 58-69 Gbit/s where 64 KiB gave 41-42
/// (cubic; docs/PERFORMANCE.md). iperf3 reads 128 KiB.
const READ_BUF_BYTES: usize = 256 << 10;

/// Sample intervals the byte counters remember; the sampler is never this far behind.
const SLOTS: usize = 64;

/// A data connection shared by its reading task and the sampler.
pub struct Flow {
    pub index: u32,
    pub stream: TcpStream,
    interval: Duration,
    /// Bytes read, filed under the sample interval in which each read completed, so that a
    /// sampler that wakes late still reports every interval's own bytes.
    bytes_by_interval: [AtomicU64; SLOTS],
    /// The slow budget in force, for the sampler's rows.
    budget_bytes: AtomicU64,
    /// The flow's markers, in a session with markers.
    pub markers: Option<Book>,
}

impl Flow {
    pub fn new(index: u32, stream: TcpStream, interval: Duration, markers: Option<Book>) -> Self {
        Flow {
            index,
            stream,
            interval,
            bytes_by_interval: std::array::from_fn(|_| AtomicU64::new(0)),
            budget_bytes: AtomicU64::new(0),
            markers,
        }
    }

    /// The sample interval that holds `elapsed` since the session's start.
    pub fn interval_index(&self, elapsed: Duration) -> u64 {
        (elapsed.as_nanos() / self.interval.as_nanos()) as u64
    }

    fn add_read(&self, elapsed: Duration, bytes: u64) {
        let slot = self.interval_index(elapsed) as usize % SLOTS;
        self.bytes_by_interval[slot].fetch_add(bytes, Ordering::Relaxed);
    }

    /// Takes the bytes read in `intervals` (indices as from `interval_index`).
    pub fn take_bytes_read(&self, intervals: Range<u64>) -> u64 {
        let from = intervals.start;
        (from..intervals.end.min(from + SLOTS as u64))
            .map(|i| self.bytes_by_interval[i as usize % SLOTS].swap(0, Ordering::Relaxed))
            .sum()
    }

    pub fn budget_bytes(&self) -> u64 {
        self.budget_bytes.load(Ordering::Relaxed)
    }
}

/// Why a flow stopped before its pattern was done.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error("flow {0}: the daemon closed the data connection")]
    Closed(u32),
    #[error("flow {flow}: {source}")]
    Io { flow: u32, source: io::Error },
}

/// Runs the reading pattern on one flow until it is done.
pub async fn read_pattern(
    flow: Arc<Flow>,
    mut pacer: Pacer,
    start: Instant,
) -> Result<(), FlowError> {
    let mut buf = vec![0u8; READ_BUF_BYTES];
    let seconds = |at: Instant| at.duration_since(start).as_secs_f64();
    let instant = |t_s: f64| start + Duration::from_secs_f64(t_s);
    loop {
        let step = pacer.step(seconds(Instant::now()));
        flow.budget_bytes
            .store(pacer.budget_bytes(), Ordering::Relaxed);
        match step {
            Step::Done => return Ok(()),
            Step::Wait { until_s } => sleep_until(instant(until_s)).await,
            Step::Read { max_bytes, until_s } => {
                let len = max_bytes.map_or(buf.len(), |max| buf.len().min(max as usize));
                let Ok(read) =
                    timeout_at(instant(until_s), read_some(&flow.stream, &mut buf[..len])).await
                else {
                    continue;
                };
                match read {
                    Ok(0) => return Err(FlowError::Closed(flow.index)),
                    Ok(n) => {
                        let elapsed = Instant::now().duration_since(start);
                        pacer.record(elapsed.as_secs_f64(), n as u64);
                        flow.add_read(elapsed, n as u64);
                        if let Some(markers) = &flow.markers {
                            markers.read(n as u64, realtime_unix_ns());
                        }
                    }
                    Err(source) => {
                        return Err(FlowError::Io {
                            flow: flow.index,
                            source,
                        })
                    }
                }
            }
        }
    }
}

/// Reads once through a shared stream, waiting for data as needed.
async fn read_some(stream: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        stream.readable().await?;
        match stream.try_read(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            result => return result,
        }
    }
}

//! One data connection: reads by the pacer's steps and counts what it read.

pub(crate) mod markers;
pub mod pacer;

use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::{sleep_until, timeout_at, Instant};

use oscil_kernel::socket::tcp_info;
use oscil_model::files::markers::Marker;
use oscil_model::pattern::CycleSlowRate;
use oscil_model::run::clock::realtime_unix_ns;

use crate::read::markers::Book;
use crate::read::pacer::{Pacer, Step};

/// Reads of up to this size, into one buffer per runtime thread (the bytes are counted,
/// never looked at). What a read costs is mostly the kernel's copy into this buffer, which
/// is fast while the buffer and the socket's freshly queued data stay in the core's L2
/// cache (512 KiB here): over loopback with one flow, 128 KiB reads gave 47.0 Gbit/s and
/// 0.297 CPU s/GB where 256 KiB gave 41.0 and 0.347 (bbr, medians of 5 alternated runs;
/// iperf3, which reads 128 KiB, 42.3 and 0.337; docs/PERFORMANCE.md). 64 KiB reads swung
/// between 19 and 49 Gbit/s from run to run. One buffer per thread rather than per flow
/// made no measurable difference in speed, and 1,000 flows no longer hold 256 MiB of
/// buffers (256 KiB each before).
const READ_BUF_BYTES: usize = 128 << 10;

thread_local! {
    static READ_BUF: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0u8; READ_BUF_BYTES].into_boxed_slice());
}

/// Bytes a flow reads before it lets the runtime run its other flows. Without it a flow
/// with data queued reads on until its socket is empty or the runtime's budget of 128
/// operations per poll is spent (16 MiB at 128 KiB), and a busy runtime thread looks for
/// newly readable sockets only every 61 polls: over loopback at full speed with 4 flows, one
/// flow's receive queue would fill to its whole `rcvbuf` (32 MB) while the others were
/// drained, a different flow every few hundred ms, and the 100 ms rows swung from 0.7 to 38
/// Gbit/s between flows. With a yield every 4 MiB, in the most uneven tenth of the
/// intervals the smallest flow still got 37-54% of the largest one's bytes, against 17-23%
/// without. It may cost a few percent of goodput at full speed over loopback: 37.2 against
/// 38.6 Gbit/s in 4 alternated rounds, within the noise in others (docs/PERFORMANCE.md).
/// A lone flow does not yield: it has no one to share with, and the yields cost it a fifth
/// of its goodput (32.9 against 42.3 Gbit/s, bbr; not profiled).
pub const FAIR_SHARE_BYTES: u64 = 4 << 20;

/// Sample intervals the byte counters remember; the sampler is never this far behind.
const SLOTS: usize = 64;

/// A data connection shared by its reading task and the sampler.
pub struct Flow {
    pub index: u32,
    /// The flow's group (`--group`), from 0.
    pub group: u32,
    pub stream: TcpStream,
    interval: Duration,
    /// Bytes read, filed under the sample interval in which each read completed, so that a
    /// sampler that wakes late still reports every interval's own bytes.
    bytes_by_interval: [AtomicU64; SLOTS],
    /// The slow budget in force, for the sampler's rows.
    budget_bytes: AtomicU64,
    /// The budget per second of each slow phase begun, for `run.json`.
    slow_rates: Mutex<Vec<CycleSlowRate>>,
    /// The flow's markers, in a session with markers.
    pub markers: Option<Book>,
}

impl Flow {
    pub fn new(
        (index, group): (u32, u32),
        stream: TcpStream,
        interval: Duration,
        markers: Option<Book>,
    ) -> Self {
        Flow {
            index,
            group,
            stream,
            interval,
            bytes_by_interval: std::array::from_fn(|_| AtomicU64::new(0)),
            budget_bytes: AtomicU64::new(0),
            slow_rates: Mutex::new(Vec::new()),
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

    /// The budget per second of each slow phase the flow began, by cycle.
    pub fn slow_rates(&self) -> Vec<CycleSlowRate> {
        self.slow_rates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What TCP has delivered to the socket so far (`tcpi_bytes_received`).
    fn delivered_bytes(&self) -> Option<u64> {
        tcp_info::read(&self.stream)
            .ok()
            .and_then(|i| i.bytes_received)
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

/// Runs the reading pattern on one flow until it is done, letting the runtime run other
/// flows after every `fair_share_bytes` read (see [`FAIR_SHARE_BYTES`]).
pub async fn read_pattern(
    flow: Arc<Flow>,
    mut pacer: Pacer,
    start: Instant,
    fair_share_bytes: Option<u64>,
) -> Result<(), FlowError> {
    let mut unyielded_bytes = 0;
    let mut slow_phases = 0;
    let seconds = |at: Instant| at.duration_since(start).as_secs_f64();
    let instant = |t_s: f64| start + Duration::from_secs_f64(t_s);
    let delivered = || flow.delivered_bytes();
    loop {
        let step = pacer.step(seconds(Instant::now()), delivered);
        flow.budget_bytes
            .store(pacer.budget_bytes(), Ordering::Relaxed);
        if pacer.slow_rates().len() != slow_phases {
            slow_phases = pacer.slow_rates().len();
            *flow
                .slow_rates
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = pacer.slow_rates().to_vec();
        }
        match step {
            Step::Done => return Ok(()),
            Step::Wait { until_s } => sleep_until(instant(until_s)).await,
            Step::Read { max_bytes, until_s } => {
                let len = max_bytes.map_or(READ_BUF_BYTES, |max| READ_BUF_BYTES.min(max as usize));
                let Ok(read) = timeout_at(instant(until_s), read_some(&flow.stream, len)).await
                else {
                    continue;
                };
                match read {
                    Ok(0) => return Err(FlowError::Closed(flow.index)),
                    Ok(n) => {
                        let elapsed = Instant::now().duration_since(start);
                        pacer.record(elapsed.as_secs_f64(), n as u64, delivered);
                        flow.add_read(elapsed, n as u64);
                        if let Some(markers) = &flow.markers {
                            markers.read(n as u64, realtime_unix_ns());
                        }
                        unyielded_bytes += n as u64;
                        if fair_share_bytes.is_some_and(|share| unyielded_bytes >= share) {
                            unyielded_bytes = 0;
                            tokio::task::yield_now().await;
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

/// Reads up to `len` bytes once through a shared stream, waiting for data as needed.
async fn read_some(stream: &TcpStream, len: usize) -> io::Result<usize> {
    loop {
        stream.readable().await?;
        match READ_BUF.with(|buf| stream.try_read(&mut buf.borrow_mut()[..len])) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            result => return result,
        }
    }
}

/// A marker the daemon should not have sent: for a flow the session does not have, or in a
/// session without markers.
#[derive(Debug, thiserror::Error)]
#[error(
    "the daemon sent a marker for flow {flow} of a session of {flows} flows{}",
    if *.without_markers { " without markers" } else { "" }
)]
pub struct StrayMarker {
    pub flow: u32,
    pub flows: usize,
    pub without_markers: bool,
}

/// Hands each of the daemon's markers to its flow; a stray marker is the daemon's error.
pub fn announce_markers(flows: &[Arc<Flow>], markers: Vec<Marker>) -> Result<(), StrayMarker> {
    for marker in markers {
        let flow = flows.get(marker.flow as usize);
        let Some(book) = flow.and_then(|f| f.markers.as_ref()) else {
            return Err(StrayMarker {
                flow: marker.flow,
                flows: flows.len(),
                without_markers: flows.iter().all(|f| f.markers.is_none()),
            });
        };
        book.announce(marker);
    }
    Ok(())
}

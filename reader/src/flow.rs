//! One data connection: reads by the pacer's steps and counts what it read.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio::time::{sleep_until, timeout_at, Instant};

use crate::pacer::{Pacer, Step};

/// Reads of up to this size. Larger buffers fall out of the CPU cache: on loopback 256 KiB
/// reads and writes gave 10 Gbit/s where 64 KiB gave 20 (scripts/bench-loopback).
const READ_BUF_BYTES: usize = 64 << 10;

/// A data connection shared by its reading task and the sampler.
pub struct Flow {
    pub index: u32,
    pub stream: TcpStream,
    /// Bytes read since the sampler last took them.
    bytes_read: AtomicU64,
    /// The slow budget in force, for the sampler's rows.
    budget_bytes: AtomicU64,
}

impl Flow {
    pub fn new(index: u32, stream: TcpStream) -> Self {
        Flow {
            index,
            stream,
            bytes_read: AtomicU64::new(0),
            budget_bytes: AtomicU64::new(0),
        }
    }

    /// Bytes read since the last call.
    pub fn take_bytes_read(&self) -> u64 {
        self.bytes_read.swap(0, Ordering::Relaxed)
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
    let instant = |t_s: f64| start + std::time::Duration::from_secs_f64(t_s);
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
                        pacer.record(seconds(Instant::now()), n as u64);
                        flow.bytes_read.fetch_add(n as u64, Ordering::Relaxed);
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

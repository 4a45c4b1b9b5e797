//! One data connection: the writer that keeps the kernel's send queue full; the sampler
//! (`sampler.rs`) finds the same socket in its sock_diag dump.

pub(crate) mod latency;
pub(crate) mod payload;
pub(crate) mod probe;
pub(crate) mod sampler;

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use oscil_model::socket::WriteMode;
use tokio::net::TcpStream;

use latency::{MarkerTap, TxProbe, Writer};
use payload::Payload;

/// A data connection of a running session.
#[derive(Clone)]
pub(crate) struct Flow {
    pub(crate) index: u32,
    /// The flow's group in the session (`--group`), from 0.
    pub(crate) group: u32,
    /// Shared by the writer task and the sampler, which finds it by its cookie.
    pub(crate) stream: Arc<TcpStream>,
    /// Bytes the kernel accepted since the last sample.
    pub(crate) written: Arc<AtomicU64>,
    /// TX timestamps and wake-ups, shared by the writer and the sampler.
    pub(crate) probe: Arc<TxProbe>,
}

impl Flow {
    /// A flow whose writes are timestamped when `timestamps` (the kernel took them).
    pub(crate) fn new((index, group): (u32, u32), stream: TcpStream, timestamps: bool) -> Self {
        Flow {
            index,
            group,
            stream: Arc::new(stream),
            written: Arc::new(AtomicU64::new(0)),
            probe: Arc::new(TxProbe::new(timestamps)),
        }
    }

    /// Ends the connection with a reset, so no orphaned send queue outlives the session and
    /// weighs on the next run's memory figures.
    pub(crate) fn reset(self) {
        let _ = socket2::SockRef::from(&*self.stream).set_linger(Some(Duration::ZERO));
    }
}

/// Offers `payload` again and again for as long as the kernel accepts it, in `mode`: until
/// `EAGAIN` after each POLLOUT, or one write per POLLOUT. It queues nothing in user space;
/// with `markers`, notes the marker writes. Returns only on error.
///
/// Speed: the payload is 256 KiB unless the session asks for another write size
/// (`DaemonConfig::write_chunk_bytes`), so one system call fills a fair part of the send
/// queue and the task goes back to the runtime's poller less often; on loopback 256 KiB
/// writes against 256 KiB reads gave 58-69 Gbit/s where 64 KiB gave 41-42 (cubic, 3 s
/// runs, same machine, see docs/PERFORMANCE.md).
pub(crate) async fn write_forever(
    flow: Flow,
    payload: Payload,
    zerocopy: bool,
    mode: WriteMode,
    markers: Option<MarkerTap>,
) -> io::Error {
    let mut writer = match Writer::new(&flow.probe, &flow.stream, mode, markers) {
        Ok(writer) => writer,
        Err(e) => return e,
    };
    loop {
        match writer.write(&payload, zerocopy).await {
            Ok(n) => {
                flow.written.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) => return e,
        }
    }
}

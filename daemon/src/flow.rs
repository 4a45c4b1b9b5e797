//! One data connection: the writer that keeps the kernel's send queue full, and the
//! sampler's view of the same socket.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use oscil_kernel::{meminfo, tcp_info};
use oscil_protocol::SenderSample;
use tokio::net::TcpStream;

use crate::latency::{TxProbe, Writer};

/// A data connection of a running session.
#[derive(Clone)]
pub(crate) struct Flow {
    pub(crate) index: u32,
    /// Shared by the writer task and the sampler, which reads `TCP_INFO` from the same fd.
    pub(crate) stream: Arc<TcpStream>,
    /// Bytes the kernel accepted since the last sample.
    pub(crate) written: Arc<AtomicU64>,
    /// TX timestamps and wake-ups, shared by the writer and the sampler.
    pub(crate) probe: Arc<TxProbe>,
}

impl Flow {
    /// A flow whose writes are timestamped when `timestamps` (the kernel took them).
    pub(crate) fn new(index: u32, stream: TcpStream, timestamps: bool) -> Self {
        Flow {
            index,
            stream: Arc::new(stream),
            written: Arc::new(AtomicU64::new(0)),
            probe: Arc::new(TxProbe::new(timestamps)),
        }
    }

    /// Samples the socket: `None` if the kernel no longer answers for it (the writer will
    /// report why).
    pub(crate) fn sample(&self, t_s: f64) -> Option<SenderSample> {
        let info = tcp_info::read(&*self.stream).ok()?;
        let mem = meminfo::read(&*self.stream).ok()?;
        let bytes = self.written.swap(0, Ordering::Relaxed);
        let completed = self.probe.collect();
        Some(SenderSample {
            residence_us: completed.residence_us,
            write_to_ack_us: completed.write_to_ack_us,
            ..SenderSample::from_kernel(t_s, self.index, bytes, &info, &mem)
        })
    }

    /// Ends the connection with a reset, so no orphaned send queue outlives the session and
    /// weighs on the next run's memory figures.
    pub(crate) fn reset(self) {
        let _ = socket2::SockRef::from(&*self.stream).set_linger(Some(Duration::ZERO));
    }
}

/// Writes `payload` again and again for as long as the kernel accepts it. It writes only
/// when the socket polls writable, which is when `TCP_NOTSENT_LOWAT` (if set) lets it, and
/// queues nothing in user space. Returns only on error.
pub(crate) async fn write_forever(flow: Flow, payload: Arc<[u8]>) -> io::Error {
    let mut writer = match Writer::new(&flow.probe, &flow.stream) {
        Ok(writer) => writer,
        Err(e) => return e,
    };
    loop {
        match writer.write(&payload).await {
            Ok(n) => {
                flow.written.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) => return e,
        }
    }
}

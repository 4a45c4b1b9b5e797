//! One data connection: the writer that keeps the kernel's send queue full; the sampler
//! (`sampler.rs`) finds the same socket in its sock_diag dump.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;

/// A data connection of a running session.
#[derive(Clone)]
pub(crate) struct Flow {
    pub(crate) index: u32,
    /// Shared by the writer task and the sampler, which finds it by its cookie.
    pub(crate) stream: Arc<TcpStream>,
    /// Bytes the kernel accepted since the last sample.
    pub(crate) written: Arc<AtomicU64>,
}

impl Flow {
    pub(crate) fn new(index: u32, stream: TcpStream) -> Self {
        Flow {
            index,
            stream: Arc::new(stream),
            written: Arc::new(AtomicU64::new(0)),
        }
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
pub(crate) async fn write_forever(
    stream: Arc<TcpStream>,
    written: Arc<AtomicU64>,
    payload: Arc<[u8]>,
) -> io::Error {
    loop {
        if let Err(e) = stream.writable().await {
            return e;
        }
        match stream.try_write(&payload) {
            Ok(n) => {
                written.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return e,
        }
    }
}

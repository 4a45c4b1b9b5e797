//! The daemon's end of the idle probe (`oscil_model::files::probe`): every byte the reader sends
//! on the probe connection goes straight back. The connection is no flow: it is never
//! sampled, never written to otherwise, and its echo ends with the session.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::AbortHandle;

/// The session's echo task, stopped when dropped (the session's end).
#[derive(Default)]
pub(crate) struct Echo(Option<AbortHandle>);

impl Echo {
    /// Starts echoing on `stream` for at most `longest`; a second probe connection of the
    /// same session is refused (`false`) and closed.
    pub(crate) fn start(&mut self, stream: TcpStream, longest: Duration) -> bool {
        if self.0.is_some() {
            return false;
        }
        // Small writes go out at once: the round trip must not wait for Nagle.
        let _ = stream.set_nodelay(true);
        let task = tokio::spawn(async move {
            let _ = tokio::time::timeout(longest, echo(stream)).await;
        });
        self.0 = Some(task.abort_handle());
        true
    }

    pub(crate) fn is_open(&self) -> bool {
        self.0.is_some()
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// Sends back what comes until the reader closes or the connection fails.
async fn echo(mut stream: TcpStream) -> std::io::Result<()> {
    let mut buf = [0u8; 256];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        stream.write_all(&buf[..n]).await?;
    }
}

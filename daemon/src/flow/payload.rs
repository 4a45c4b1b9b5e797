//! The bytes every flow writes, shared by all flows of all sessions: the writer
//! (`latency::Writer`) offers them, the session sizes them.

use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;

use oscil_kernel::socket::sendfile::PayloadFile;

/// What every flow sends, held twice: in memory for `write`, and in an unnamed file for the
/// zero-copy mode's `sendfile`. All flows of all sessions share the same pages.
#[derive(Clone)]
pub(crate) struct Payload {
    bytes: Arc<[u8]>,
    file: Arc<PayloadFile>,
}

impl Payload {
    pub(crate) fn new(len_bytes: usize) -> io::Result<Payload> {
        let bytes: Arc<[u8]> = (0..len_bytes)
            .map(|i| b"oscil-daemon payload "[i % 21])
            .collect();
        let file = Arc::new(PayloadFile::new(&bytes)?);
        Ok(Payload { bytes, file })
    }

    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The bytes, for a write that must go through `sendmsg` (a tagged one).
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Offers the whole payload to the kernel once on `socket` (nonblocking), copying it
    /// (`send`) or lending its pages (`sendfile`); returns the bytes taken or `WouldBlock`
    /// when the queue is full.
    pub(crate) fn offer(&self, socket: &impl AsFd, zerocopy: bool) -> io::Result<usize> {
        if zerocopy {
            self.file.send_to(socket)
        } else {
            socket2::SockRef::from(socket).send(&self.bytes)
        }
    }
}

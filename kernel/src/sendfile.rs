//! Zero-copy sending: the payload lives once in a memfd and `sendfile` hands its pages to
//! the socket, which keeps a reference to each page instead of copying it.
//!
//! Chosen over `MSG_ZEROCOPY` because that flag needs a completion read from the error
//! queue for every send, and on loopback and through a TUN the kernel copies the pages
//! anyway when the packet reaches a local socket (Documentation/networking/msg_zerocopy.rst,
//! "Loopback"); `sendfile` from a file is also what `iperf3 -Z` does, so the two compare
//! like with like. The pages are shared by every flow and never written again, so a send
//! queue referencing them costs no memory of its own beyond the skb heads, though the
//! socket's `SO_MEMINFO` still charges the queued bytes to the socket as if copied.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};

use crate::sys;

/// The payload as an in-memory file.
#[derive(Debug)]
pub struct PayloadFile {
    fd: OwnedFd,
    len_bytes: usize,
}

impl PayloadFile {
    /// A memfd holding `bytes`.
    pub fn new(bytes: &[u8]) -> io::Result<PayloadFile> {
        let fd = sys::memfd_create(c"oscil-payload")?;
        let mut file = File::from(fd);
        file.write_all(bytes)?;
        Ok(PayloadFile {
            fd: file.into(),
            len_bytes: bytes.len(),
        })
    }

    /// Offers the whole payload to `socket` once; returns the bytes taken (maybe fewer).
    /// A nonblocking socket with a full send queue gives `WouldBlock`.
    pub fn send_to(&self, socket: impl AsFd) -> io::Result<usize> {
        sys::sendfile(socket.as_fd(), self.fd.as_fd(), 0, self.len_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::loopback_pair;
    use std::io::Read;

    #[test]
    fn the_peer_reads_the_payload_bytes() {
        let (client, mut server) = loopback_pair();
        let payload: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let file = PayloadFile::new(&payload).unwrap();
        let sent = file.send_to(&client).unwrap();
        let mut got = vec![0u8; sent];
        server.read_exact(&mut got).unwrap();
        assert_eq!(got, payload[..sent]);
        assert!(sent > 0);
    }

    #[test]
    fn a_full_nonblocking_socket_would_block() {
        let (client, _server) = loopback_pair();
        client.set_nonblocking(true).unwrap();
        let file = PayloadFile::new(&[7u8; 1 << 16]).unwrap();
        let err = loop {
            match file.send_to(&client) {
                Ok(_) => continue,
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    }
}

//! Zero-copy sending: the payload lives once in a file and `sendfile` hands its pages to
//! the socket, which keeps a reference to each page instead of copying it.
//!
//! Chosen over `MSG_ZEROCOPY` because that flag needs a completion read from the error
//! queue for every send, and on loopback and through a TUN the kernel copies the pages
//! anyway when the packet reaches a local socket (Documentation/networking/msg_zerocopy.rst,
//! "Loopback"); `sendfile` from a file is also what `iperf3 -Z` does, so the two compare
//! like with like. The pages are shared by every flow and never written again, so a send
//! queue referencing them costs no memory of its own beyond the skb heads, though the
//! socket's `SO_MEMINFO` still charges the queued bytes to the socket as if copied.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

use crate::sys;

/// The payload as an unnamed file.
#[derive(Debug)]
pub struct PayloadFile {
    fd: OwnedFd,
    len_bytes: usize,
}

impl PayloadFile {
    /// An unnamed file holding `bytes`: in the page cache of the temporary directory's file
    /// system (`O_TMPFILE`, as `iperf3 -Z` uses a file in /tmp), else a memfd.
    ///
    /// Why not always a memfd: shared memory is cached in 4 KiB pages unless the host enables
    /// huge pages for it (`transparent_hugepage/shmem_enabled`, "never" here), while ext4 and
    /// xfs cache a file written in one go in large folios, so `sendfile` and the receiver's
    /// copy handle a few large fragments per packet instead of 16 small ones. Over loopback,
    /// one flow, 128 KiB files: 57.7 against 51.2 Gbit/s (cubic; docs/PERFORMANCE.md).
    pub fn new(bytes: &[u8]) -> io::Result<PayloadFile> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_TMPFILE)
            .open(std::env::temp_dir())
            .or_else(|_| sys::memfd_create(c"oscil-payload").map(File::from))?;
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

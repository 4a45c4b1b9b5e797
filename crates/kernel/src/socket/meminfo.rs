//! `SO_MEMINFO`: one socket's own memory accounting (what `ss -m` shows as `skmem`).

use std::io;
use std::os::fd::AsFd;

use serde::{Deserialize, Serialize};

use crate::sys;

/// A socket's memory as the kernel accounts it, in bytes (`drops` is a packet count).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkMemInfo {
    /// Memory of the receive queue (`sk_rmem_alloc`).
    pub rmem_alloc_bytes: u32,
    pub rcvbuf_bytes: u32,
    /// Memory of skbs handed to the device and not yet freed (`sk_wmem_alloc`).
    pub wmem_alloc_bytes: u32,
    pub sndbuf_bytes: u32,
    pub fwd_alloc_bytes: u32,
    /// Memory of the write queue: sent-unacknowledged plus not-yet-sent data.
    pub wmem_queued_bytes: u32,
    pub optmem_bytes: u32,
    pub backlog_bytes: u32,
    pub drops: u32,
}

/// Reads `SO_MEMINFO` of any socket.
pub fn read(fd: impl AsFd) -> io::Result<SkMemInfo> {
    let m = sys::meminfo(fd.as_fd())?;
    let at = |i: libc::c_int| m[i as usize];
    Ok(SkMemInfo {
        rmem_alloc_bytes: at(libc::SK_MEMINFO_RMEM_ALLOC),
        rcvbuf_bytes: at(libc::SK_MEMINFO_RCVBUF),
        wmem_alloc_bytes: at(libc::SK_MEMINFO_WMEM_ALLOC),
        sndbuf_bytes: at(libc::SK_MEMINFO_SNDBUF),
        fwd_alloc_bytes: at(libc::SK_MEMINFO_FWD_ALLOC),
        wmem_queued_bytes: at(libc::SK_MEMINFO_WMEM_QUEUED),
        optmem_bytes: at(libc::SK_MEMINFO_OPTMEM),
        backlog_bytes: at(libc::SK_MEMINFO_BACKLOG),
        drops: at(libc::SK_MEMINFO_DROPS),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::loopback_pair;
    use std::io::Write;

    #[test]
    fn unread_data_shows_in_the_receivers_rmem_and_buffers_match_so_options() {
        let (mut client, server) = loopback_pair();
        client.write_all(&[1u8; 50_000]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let srv = read(&server).unwrap();
        assert!(srv.rmem_alloc_bytes >= 50_000, "{srv:?}");
        let sock = socket2::SockRef::from(&server);
        assert_eq!(srv.rcvbuf_bytes as usize, sock.recv_buffer_size().unwrap());
        assert_eq!(srv.sndbuf_bytes as usize, sock.send_buffer_size().unwrap());
    }
}

//! `NETLINK_SOCK_DIAG`: every TCP socket of the caller's network namespace in one dump, each
//! with its `TCP_INFO` and `SK_MEMINFO` (what `ss -tim` shows). One dump per sampling tick
//! costs far less than two `getsockopt` calls per socket once there are hundreds of flows,
//! and the same dump gives the namespace's own TCP memory, which `/proc/net/sockstat`
//! cannot (its `mem` is global across namespaces).

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP};
use netlink_packet_sock_diag::inet::{
    nlas::Nla, ExtensionFlags, InetRequest, InetResponse, SocketId, StateFlags,
};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket};

use crate::meminfo::SkMemInfo;
use crate::sys;
use crate::tcp_info::{self, TcpInfo};

/// One TCP socket as the dump describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketDiag {
    /// The kernel's id of the socket, the same as `SO_COOKIE` on its fd.
    pub cookie: u64,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// `TCP_ESTABLISHED` = 1, ... `TCP_LISTEN` = 10 (include/net/tcp_states.h).
    pub state: u8,
    pub info: Option<TcpInfo>,
    pub mem: Option<SkMemInfo>,
}

impl SocketDiag {
    /// The TCP memory this socket holds, as the kernel charges it against `tcp_mem`:
    /// queued send data, the receive queue, and pages reserved ahead (forward alloc).
    pub fn charged_bytes(&self) -> u64 {
        self.mem.map_or(0, |m| {
            u64::from(m.wmem_queued_bytes)
                + u64::from(m.rmem_alloc_bytes)
                + u64::from(m.fwd_alloc_bytes)
        })
    }
}

/// A netlink socket that dumps the namespace's TCP sockets; open one per sampler and reuse it.
pub struct Diag {
    socket: Socket,
    buf: Vec<u8>,
    sequence: u32,
}

impl Diag {
    /// Opens the netlink socket in the calling thread's network namespace.
    pub fn open() -> io::Result<Diag> {
        let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
        socket.bind_auto()?;
        socket.connect(&netlink_sys::SocketAddr::new(0, 0))?;
        Ok(Diag {
            socket,
            buf: vec![0; 64 << 10],
            sequence: 0,
        })
    }

    /// Calls `each` for every TCP socket (IPv4, then IPv6) of the namespace.
    pub fn dump_tcp(&mut self, mut each: impl FnMut(SocketDiag)) -> io::Result<()> {
        for family in [AF_INET, AF_INET6] {
            self.dump_family(family, &mut each)?;
        }
        Ok(())
    }

    fn dump_family(&mut self, family: u8, each: &mut impl FnMut(SocketDiag)) -> io::Result<()> {
        self.sequence = self.sequence.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        header.sequence_number = self.sequence;
        let mut request = NetlinkMessage::new(
            header,
            SockDiagMessage::InetRequest(InetRequest {
                family,
                protocol: IPPROTO_TCP,
                extensions: ExtensionFlags::INFO | ExtensionFlags::SKMEMINFO,
                states: StateFlags::all(),
                socket_id: match family {
                    AF_INET => SocketId::new_v4(),
                    _ => SocketId::new_v6(),
                },
            })
            .into(),
        );
        request.finalize();
        let mut bytes = vec![0; request.buffer_len()];
        request.serialize(&mut bytes);
        self.socket.send(&bytes, 0)?;
        loop {
            let len = self.socket.recv(&mut &mut self.buf[..], 0)?;
            if walk_messages(&self.buf[..len], each)? {
                return Ok(());
            }
        }
    }
}

/// The sockets a sampler watches, found in each dump by their cookies.
pub struct Watched {
    /// Cookie to position in the caller's list.
    positions: HashMap<u64, usize>,
}

impl Watched {
    /// Watches `fds` (a session's data sockets), in the caller's order.
    pub fn new<F: AsFd>(fds: impl IntoIterator<Item = F>) -> io::Result<Watched> {
        let mut positions = HashMap::new();
        for (position, fd) in fds.into_iter().enumerate() {
            positions.insert(cookie(fd)?, position);
        }
        Ok(Watched { positions })
    }
}

/// What one dump says of the watched sockets and of the whole namespace.
#[derive(Debug)]
pub struct Snapshot {
    /// In the watched order; `None` for a socket the dump no longer lists (closed).
    pub sockets: Vec<Option<(TcpInfo, SkMemInfo)>>,
    /// TCP memory charged to every TCP socket of the namespace, bytes.
    pub namespace_charged_bytes: u64,
}

impl Diag {
    /// One dump: the watched sockets' `TCP_INFO` and `SK_MEMINFO` and the namespace's sum.
    pub fn snapshot(&mut self, watched: &Watched) -> io::Result<Snapshot> {
        let mut snapshot = Snapshot {
            sockets: vec![None; watched.positions.len()],
            namespace_charged_bytes: 0,
        };
        self.dump_tcp(|socket| {
            snapshot.namespace_charged_bytes += socket.charged_bytes();
            if let (Some(&position), Some(info), Some(mem)) = (
                watched.positions.get(&socket.cookie),
                socket.info,
                socket.mem,
            ) {
                snapshot.sockets[position] = Some((info, mem));
            }
        })?;
        Ok(snapshot)
    }
}

/// Parses one datagram of the dump's answer; true when it holds the end of the dump.
fn walk_messages(mut bytes: &[u8], each: &mut impl FnMut(SocketDiag)) -> io::Result<bool> {
    let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidData, e);
    while !bytes.is_empty() {
        let message = NetlinkMessage::<SockDiagMessage>::deserialize(bytes)
            .map_err(|e| invalid(format!("sock_diag answer: {e}")))?;
        let len = message.header.length as usize;
        match message.payload {
            NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(response)) => {
                each(socket_diag(&response));
            }
            NetlinkPayload::Done(_) => return Ok(true),
            NetlinkPayload::Error(error) => return Err(error.to_io()),
            _ => {}
        }
        if len == 0 || len > bytes.len() {
            break;
        }
        // Messages are 4-byte aligned within the datagram.
        bytes = &bytes[(len + 3) & !3..];
    }
    Ok(false)
}

fn socket_diag(response: &InetResponse) -> SocketDiag {
    let id = &response.header.socket_id;
    let half = |i: usize| u32::from_ne_bytes(id.cookie[i..i + 4].try_into().expect("4 bytes"));
    let mut diag = SocketDiag {
        // The kernel writes the 64-bit cookie as two host-order words, low word first.
        cookie: u64::from(half(0)) | u64::from(half(4)) << 32,
        local: SocketAddr::new(id.source_address, id.source_port),
        remote: SocketAddr::new(id.destination_address, id.destination_port),
        state: response.header.state,
        info: None,
        mem: None,
    };
    for nla in &response.nlas {
        match nla {
            Nla::TcpInfo(bytes) => diag.info = Some(tcp_info::from_bytes(bytes)),
            Nla::MemInfo(m) => {
                diag.mem = Some(SkMemInfo {
                    rmem_alloc_bytes: m.receive_queue,
                    rcvbuf_bytes: m.receive_queue_max,
                    wmem_alloc_bytes: m.bottom_send_queues,
                    sndbuf_bytes: m.send_queue_max,
                    fwd_alloc_bytes: m.cache,
                    wmem_queued_bytes: m.send_queue,
                    optmem_bytes: m.options,
                    backlog_bytes: m.backlog_queue_length,
                    drops: m.drops,
                })
            }
            _ => {}
        }
    }
    diag
}

/// The kernel's id of a socket (`SO_COOKIE`), as the dump reports it.
pub fn cookie(fd: impl AsFd) -> io::Result<u64> {
    let mut bytes = [0u8; 8];
    let len = sys::get_bytes(fd.as_fd(), libc::SOL_SOCKET, sys::SO_COOKIE, &mut bytes)?;
    if len != bytes.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("SO_COOKIE returned {len} bytes, expected 8"),
        ));
    }
    Ok(u64::from_ne_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::loopback_pair;
    use std::io::Write;

    #[test]
    fn dump_finds_a_pair_by_cookie_with_its_info_and_memory() {
        let (mut client, server) = loopback_pair();
        let payload = vec![1u8; 60_000];
        client.write_all(&payload).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (client_cookie, server_cookie) = (cookie(&client).unwrap(), cookie(&server).unwrap());
        assert_ne!(client_cookie, server_cookie);

        let mut found = Vec::new();
        Diag::open()
            .unwrap()
            .dump_tcp(|s| {
                if s.cookie == client_cookie || s.cookie == server_cookie {
                    found.push(s);
                }
            })
            .unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        let server_side = found.iter().find(|s| s.cookie == server_cookie).unwrap();
        assert_eq!(server_side.local, server.local_addr().unwrap());
        assert_eq!(server_side.remote, client.local_addr().unwrap());
        assert_eq!(server_side.state, 1, "TCP_ESTABLISHED");
        // The server never read: the 60,000 bytes sit in its receive queue.
        let info = server_side.info.expect("INET_DIAG_INFO");
        assert!(info.bytes_received >= payload.len() as u64, "{info:?}");
        let mem = server_side.mem.expect("INET_DIAG_SKMEMINFO");
        assert!(mem.rmem_alloc_bytes as usize >= payload.len(), "{mem:?}");
        assert!(server_side.charged_bytes() >= payload.len() as u64);
        // And it agrees with getsockopt on the same socket.
        let direct = crate::meminfo::read(&server).unwrap();
        assert_eq!(direct.rmem_alloc_bytes, mem.rmem_alloc_bytes);
        assert_eq!(direct.rcvbuf_bytes, mem.rcvbuf_bytes);
    }

    #[test]
    fn snapshot_keeps_the_watched_order_and_counts_the_namespace() {
        let (mut client, server) = loopback_pair();
        let (other, _other_server) = loopback_pair();
        client.write_all(&[7u8; 30_000]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut diag = Diag::open().unwrap();
        // Server first: the snapshot answers in the order asked, not the kernel's.
        let snapshot = diag
            .snapshot(&Watched::new([&server, &client]).unwrap())
            .unwrap();
        let (server_info, server_mem) = snapshot.sockets[0].expect("server listed");
        let (client_info, _) = snapshot.sockets[1].expect("client listed");
        assert!(server_info.bytes_received >= 30_000, "{server_info:?}");
        assert!(server_mem.rmem_alloc_bytes >= 30_000, "{server_mem:?}");
        assert_eq!(client_info.bytes_received, 0);
        assert!(snapshot.namespace_charged_bytes >= 30_000);
        // A socket closed since it was watched is missing, not an error.
        let watched = Watched::new([&other]).unwrap();
        drop(other);
        let gone = diag.snapshot(&watched).unwrap();
        assert!(
            !matches!(gone.sockets[0], Some((info, _)) if info.state == 1),
            "{gone:?}"
        );
    }
}

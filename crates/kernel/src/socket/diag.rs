//! `NETLINK_SOCK_DIAG`: every TCP socket of the caller's network namespace in one dump, each
//! with its `TCP_INFO`, `SK_MEMINFO` and its congestion control's state (what `ss -tim`
//! shows). One dump per sampling tick
//! costs far less than two `getsockopt` calls per socket once there are hundreds of flows,
//! and the same dump gives the namespace's own TCP memory, which `/proc/net/sockstat`
//! cannot (its `mem` is global across namespaces).

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use netlink_packet_core::Nla as _;
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLMSG_DONE, NLMSG_ERROR, NLM_F_DUMP,
    NLM_F_REQUEST,
};
use netlink_packet_sock_diag::constants::{
    AF_INET, AF_INET6, INET_DIAG_BBRINFO, INET_DIAG_SKMEMINFO, IPPROTO_TCP, TCP_CLOSE_WAIT,
    TCP_CLOSING, TCP_ESTABLISHED, TCP_FIN_WAIT1, TCP_FIN_WAIT2, TCP_LAST_ACK, TCP_SYN_SENT,
};
use netlink_packet_sock_diag::inet::{
    nlas::Nla, ExtensionFlags, InetRequest, InetResponse, SocketId, StateFlags,
};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket};

use crate::socket::cc_info::{self, BbrInfo};
use crate::socket::meminfo::SkMemInfo;
use crate::sys;
use oscil_model::socket::Source;

use crate::socket::tcp_info::{self, TcpInfo};

/// One TCP socket as the dump describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct SocketDiag {
    /// The kernel's id of the socket, the same as `SO_COOKIE` on its fd.
    pub cookie: u64,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// `TCP_ESTABLISHED` = 1, ... `TCP_LISTEN` = 10 (include/net/tcp_states.h).
    pub state: u8,
    pub info: Option<TcpInfo>,
    pub mem: Option<SkMemInfo>,
    /// Where the socket runs BBR (`INET_DIAG_BBRINFO`).
    pub bbr: Option<BbrInfo>,
}

/// What one tick learns of one watched socket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampled {
    pub info: TcpInfo,
    pub mem: SkMemInfo,
    /// BBR's own state, where the socket runs BBR.
    pub bbr: Option<BbrInfo>,
}

impl SocketDiag {
    /// The TCP memory this socket holds, as the kernel charges it against `tcp_mem`:
    /// queued send data, the receive queue, and pages reserved ahead (forward alloc). The
    /// samplers sum it in the dump instead (`charged`); the tests compare the two.
    #[cfg(test)]
    pub(crate) fn charged_bytes(&self) -> u64 {
        self.mem.as_ref().map_or(0, charged_of)
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

    /// Calls `each` for every TCP socket (IPv4, then IPv6) of the namespace; only the tests
    /// need every socket's whole record.
    #[cfg(test)]
    pub(crate) fn dump_tcp(&mut self, mut each: impl FnMut(SocketDiag)) -> io::Result<()> {
        for family in [AF_INET, AF_INET6] {
            self.dump_family(family, &Query::full(), &mut each)?;
        }
        Ok(())
    }

    /// The TCP memory charged to every TCP socket of the namespace, bytes, from one dump over
    /// both address families. Asks only for memory (no `TCP_INFO`, which takes each socket's
    /// lock) of sockets in the states that can hold any: the kernel then skips the listening
    /// hash, TIME_WAIT and SYN_RECV mini-sockets (thousands in a flood) and bound-only
    /// sockets. Sums as it parses: nothing is allocated per socket.
    pub fn namespace_charged_bytes(&mut self) -> io::Result<u64> {
        self.sequence = self.sequence.wrapping_add(1);
        self.socket.send(&memory_dump_request(self.sequence), 0)?;
        let mut sum = 0;
        loop {
            let len = self.socket.recv(&mut &mut self.buf[..], 0)?;
            if sum_charged(&self.buf[..len], &mut sum)? {
                return Ok(sum);
            }
        }
    }

    #[cfg(test)]
    fn dump_family(
        &mut self,
        family: u8,
        query: &Query,
        each: &mut impl FnMut(SocketDiag),
    ) -> io::Result<()> {
        let socket_id = match family {
            AF_INET => SocketId::new_v4(),
            _ => SocketId::new_v6(),
        };
        let mut bytes = Vec::new();
        self.sequence = self.sequence.wrapping_add(1);
        request(
            family,
            socket_id,
            query,
            (self.sequence, NLM_F_DUMP),
            &mut bytes,
        );
        self.socket.send(&bytes, 0)?;
        loop {
            let len = self.socket.recv(&mut &mut self.buf[..], 0)?;
            if walk_messages(&self.buf[..len], &mut |_, answer| {
                if let Some(socket) = answer {
                    each(socket)
                }
            })? {
                return Ok(());
            }
        }
    }

    /// Each watched socket by exact lookup (4-tuple and cookie), into `found` in the watched
    /// order: the requests built once, `LOOKUPS_PER_SEND` to a send, a hash lookup each in
    /// the kernel however many sockets it holds.
    fn look_up(&mut self, watched: &Watched, found: &mut [Option<Sampled>]) -> io::Result<()> {
        found.fill(None);
        for (batch, request) in watched.requests.iter().enumerate() {
            let count = (found.len() - batch * LOOKUPS_PER_SEND).min(LOOKUPS_PER_SEND);
            self.socket.send(request, 0)?;
            let mut answered = 0;
            while answered < count {
                let len = self.socket.recv(&mut &mut self.buf[..], 0)?;
                walk_messages(&self.buf[..len], &mut |sequence, answer| {
                    answered += 1;
                    if let (Some(socket), Some(slot)) = (answer, found.get_mut(sequence as usize)) {
                        *slot = socket.info.zip(socket.mem).map(|(info, mem)| Sampled {
                            info,
                            mem,
                            bbr: socket.bbr,
                        });
                    }
                })?;
            }
        }
        Ok(())
    }
}

/// The original inet_diag request type. Its dump is the only one the kernel runs over both
/// address families in one walk (it sets the family to `AF_UNSPEC`); `SOCK_DIAG_BY_FAMILY`
/// needs a dump per family, and each walks the whole established hash table (262,144
/// buckets on an 8 GiB host) however few sockets the namespace holds. netlink-packet-sock-diag
/// has no type for it, so its 60-byte body (`struct inet_diag_req`) is written here.
const TCPDIAG_GETSOCK: u16 = 18;

/// The states whose sockets can hold memory: every connected state. Leaving LISTEN out
/// skips the listening hash; TIME_WAIT and SYN_RECV sockets are mini-sockets with no
/// buffers; CLOSE and bound-only sockets are in no table the walk needs.
const MEMORY_STATES: u32 = 1 << TCP_ESTABLISHED
    | 1 << TCP_SYN_SENT
    | 1 << TCP_FIN_WAIT1
    | 1 << TCP_FIN_WAIT2
    | 1 << TCP_CLOSE_WAIT
    | 1 << TCP_LAST_ACK
    | 1 << TCP_CLOSING;

/// `struct nlmsghdr` and `struct inet_diag_msg`, bytes.
const NLMSG_HEADER_BYTES: usize = 16;
const INET_DIAG_MSG_BYTES: usize = 72;

/// Indices into `INET_DIAG_SKMEMINFO` (`SK_MEMINFO_*`, include/uapi/linux/sock_diag.h).
const SK_MEMINFO_RMEM_ALLOC: usize = 0;
const SK_MEMINFO_FWD_ALLOC: usize = 4;
const SK_MEMINFO_WMEM_QUEUED: usize = 5;

/// A dump of every TCP socket of both families in `MEMORY_STATES`, with `SK_MEMINFO` only.
fn memory_dump_request(sequence: u32) -> [u8; NLMSG_HEADER_BYTES + 60] {
    let mut bytes = [0u8; NLMSG_HEADER_BYTES + 60];
    let len = bytes.len() as u32;
    bytes[0..4].copy_from_slice(&len.to_ne_bytes());
    bytes[4..6].copy_from_slice(&TCPDIAG_GETSOCK.to_ne_bytes());
    bytes[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    bytes[8..12].copy_from_slice(&sequence.to_ne_bytes());
    // struct inet_diag_req: family (ignored by a dump), address lengths, extensions, the
    // 48-byte socket id (all zero: any), states, dbs.
    let body = &mut bytes[NLMSG_HEADER_BYTES..];
    body[3] = 1 << (INET_DIAG_SKMEMINFO - 1);
    body[52..56].copy_from_slice(&MEMORY_STATES.to_ne_bytes());
    bytes
}

/// Adds the charged memory of every socket in one datagram of a memory dump to `sum`; true
/// when the datagram ends the dump.
fn sum_charged(mut bytes: &[u8], sum: &mut u64) -> io::Result<bool> {
    let invalid = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("sock_diag answer: {what}"),
        )
    };
    let word = |b: &[u8], at: usize| {
        b.get(at..at + 4)
            .map(|w| u32::from_ne_bytes(w.try_into().expect("4 bytes")))
    };
    while !bytes.is_empty() {
        let len = word(bytes, 0).ok_or_else(|| invalid("a truncated header"))? as usize;
        if !(NLMSG_HEADER_BYTES..=bytes.len()).contains(&len) {
            return Err(invalid("a message longer than its datagram"));
        }
        let kind = u16::from_ne_bytes([bytes[4], bytes[5]]);
        // Both carry an errno (0 for a clean end), negated.
        let code = word(bytes, NLMSG_HEADER_BYTES).map_or(0, |w| w as i32);
        match kind {
            NLMSG_DONE | NLMSG_ERROR if code < 0 => {
                return Err(io::Error::from_raw_os_error(-code))
            }
            NLMSG_DONE => return Ok(true),
            TCPDIAG_GETSOCK => {
                *sum += charged(
                    bytes
                        .get(NLMSG_HEADER_BYTES + INET_DIAG_MSG_BYTES..len)
                        .unwrap_or_default(),
                )
            }
            _ => {}
        }
        bytes = bytes.get((len + 3) & !3..).unwrap_or_default();
    }
    Ok(false)
}

/// The charged bytes in one socket's attributes (`wmem_queued + rmem_alloc + fwd_alloc`, as
/// `SocketDiag::charged_bytes`); 0 without `INET_DIAG_SKMEMINFO`.
fn charged(mut attributes: &[u8]) -> u64 {
    while attributes.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([attributes[0], attributes[1]]));
        let kind = u16::from_ne_bytes([attributes[2], attributes[3]]);
        if len < 4 || len > attributes.len() {
            break;
        }
        if kind == INET_DIAG_SKMEMINFO {
            let value = |i: usize| {
                attributes.get(4 + 4 * i..8 + 4 * i).map_or(0, |w| {
                    u64::from(u32::from_ne_bytes(w.try_into().expect("4 bytes")))
                })
            };
            return value(SK_MEMINFO_WMEM_QUEUED)
                + value(SK_MEMINFO_RMEM_ALLOC)
                + value(SK_MEMINFO_FWD_ALLOC);
        }
        attributes = attributes.get((len + 3) & !3..).unwrap_or_default();
    }
    0
}

/// What a request asks for: which attributes, of sockets in which states.
struct Query {
    extensions: ExtensionFlags,
    states: StateFlags,
}

impl Query {
    /// `TCP_INFO`, `SK_MEMINFO` and the congestion control's state of sockets in any state.
    /// The request's extension bits are a byte, too few for `INET_DIAG_BBRINFO` (16): the
    /// kernel gives any congestion control's state to the `VEGASINFO` bit.
    fn full() -> Query {
        Query {
            extensions: ExtensionFlags::INFO
                | ExtensionFlags::SKMEMINFO
                | ExtensionFlags::VEGASINFO,
            states: StateFlags::all(),
        }
    }
}

/// Appends one sock_diag request for TCP sockets, with its sequence number and flags.
fn request(
    family: u8,
    socket_id: SocketId,
    query: &Query,
    (sequence, flags): (u32, u16),
    out: &mut Vec<u8>,
) {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | flags;
    header.sequence_number = sequence;
    let mut message = NetlinkMessage::new(
        header,
        SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: query.extensions.clone(),
            states: query.states.clone(),
            socket_id,
        })
        .into(),
    );
    message.finalize();
    let at = out.len();
    out.resize(at + message.buffer_len(), 0);
    message.serialize(&mut out[at..]);
}

impl Key {
    fn socket_id(&self) -> (u8, SocketId) {
        let family = if self.local.is_ipv4() {
            AF_INET
        } else {
            AF_INET6
        };
        let half = |word: u64| (word as u32).to_ne_bytes();
        let mut cookie = [0u8; 8];
        cookie[..4].copy_from_slice(&half(self.cookie));
        cookie[4..].copy_from_slice(&half(self.cookie >> 32));
        let id = SocketId {
            source_port: self.local.port(),
            destination_port: self.remote.port(),
            source_address: self.local.ip(),
            destination_address: self.remote.ip(),
            interface_id: 0,
            cookie,
        };
        (family, id)
    }
}

/// Lookups sent at once: their answers (about 400 bytes each) must fit the netlink socket's
/// receive buffer, or the kernel drops them.
const LOOKUPS_PER_SEND: usize = 128;

/// How often, at most, the namespace's memory is summed. The sum needs a full dump, and a
/// dump walks the namespace's whole established hash table whatever it holds: the host's
/// (262,144 buckets, 2 MiB, on an 8 GiB host) unless the namespace was made with a table of
/// its own (`net.ipv4.tcp_child_ehash_entries`, as the lab makes its namespaces). Every
/// 10 ms on both sides (then two walks each) it cost half the goodput of a loopback flow
/// (perf: `tcp_diag_dump`).
pub const NAMESPACE_EVERY: Duration = Duration::from_millis(100);

/// At least this many times the last walk's CPU time passes between two sums, so they cost
/// at most 0.5% of a core. Walking the host's table took 1.2 ms idle and about 2.6 ms
/// beside a loopback flow at full speed, where at `NAMESPACE_EVERY` it was 2.6% of the
/// sending daemon's CPU (`perf record -p`, one zero-copy flow, bbr): a cost the pair pays
/// and iperf3 does not. So the host namespace is summed every 240-520 ms; a lab namespace,
/// whose own table of 16,384 buckets walks in about 0.1 ms, every `NAMESPACE_EVERY`.
const NAMESPACE_COST_FACTOR: u32 = 200;

/// The time from one sum of the namespace to the next, after a walk that took `walk_cpu`.
fn namespace_spacing(walk_cpu: Duration) -> Duration {
    NAMESPACE_EVERY.max(walk_cpu * NAMESPACE_COST_FACTOR)
}

/// A socket a sampler watches, as the kernel looks it up: its addresses and cookie.
struct Key {
    cookie: u64,
    local: SocketAddr,
    remote: SocketAddr,
}

/// The sockets a sampler watches, in the caller's order, as the lookup requests that find
/// them: built once, so a tick serializes nothing.
pub struct Watched {
    count: usize,
    /// `LOOKUPS_PER_SEND` requests each; the one for socket `i` has sequence number `i`.
    requests: Vec<Vec<u8>>,
}

impl Watched {
    /// Watches `fds` (a session's connected data sockets).
    pub fn new<F: AsFd>(fds: impl IntoIterator<Item = F>) -> io::Result<Watched> {
        let not_inet = || io::Error::new(io::ErrorKind::InvalidInput, "not an IP socket");
        let keys = fds
            .into_iter()
            .map(|fd| {
                let socket = socket2::SockRef::from(&fd);
                Ok(Key {
                    cookie: cookie(&fd)?,
                    local: socket.local_addr()?.as_socket().ok_or_else(not_inet)?,
                    remote: socket.peer_addr()?.as_socket().ok_or_else(not_inet)?,
                })
            })
            .collect::<io::Result<Vec<_>>>()?;
        let query = Query::full();
        let requests = keys
            .chunks(LOOKUPS_PER_SEND)
            .enumerate()
            .map(|(batch, keys)| {
                let mut bytes = Vec::new();
                for (i, key) in keys.iter().enumerate() {
                    let (family, socket_id) = key.socket_id();
                    let sequence = (batch * LOOKUPS_PER_SEND + i) as u32;
                    request(family, socket_id, &query, (sequence, 0), &mut bytes);
                }
                bytes
            })
            .collect();
        Ok(Watched {
            count: keys.len(),
            requests,
        })
    }
}

/// What one tick learns of the watched sockets and, when due, of the whole namespace.
#[derive(Debug)]
pub struct Snapshot<'a> {
    /// In the watched order; `None` for a socket the kernel no longer has.
    pub sockets: &'a [Option<Sampled>],
    /// TCP memory charged to every TCP socket of the namespace, bytes; only on ticks at
    /// least `NAMESPACE_EVERY` apart, further where a walk costs more (`namespace_spacing`).
    /// Read with getsockopt ([`Source::Getsockopt`]), the sum of the watched sockets only.
    pub namespace_charged_bytes: Option<u64>,
}

/// Set to `getsockopt`, makes every sampler read its sockets with getsockopt even where
/// sock_diag works: how a test on a kernel with sock_diag takes the fallback's path.
pub const SAMPLE_BY_ENV: &str = "OSCIL_SAMPLE_BY";

/// How the kernel is asked.
enum Reads {
    Diag(Diag),
    Getsockopt,
}

/// A sampler's view of the kernel: exact lookups of its sockets every tick (hash lookups,
/// batched into one send), and the namespace's sum when due; or, where sock_diag is
/// refused, two `getsockopt` calls per socket.
pub struct Probe {
    reads: Reads,
    source: Source,
    watched: Watched,
    /// Each tick's answers, in the watched order: reused, so a tick allocates no list.
    found: Vec<Option<Sampled>>,
    /// The last sum of the namespace, and the time to the next.
    namespace_at: Option<(Instant, Duration)>,
}

/// Whether `e` means sock_diag is not available here, rather than that it failed: no
/// handler for the family (inet_diag or tcp_diag not loaded: `EOPNOTSUPP`, or `ENOENT`
/// for sockets that exist), netlink forbidden (a seccomp filter, a container: `EPERM`,
/// `EACCES`), or no such protocol.
fn refused(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
        || matches!(
            e.raw_os_error(),
            Some(
                libc::EOPNOTSUPP
                    | libc::ENOENT
                    | libc::EPERM
                    | libc::EACCES
                    | libc::EPROTONOSUPPORT
                    | libc::EAFNOSUPPORT
            )
        )
}

impl Probe {
    /// Asks sock_diag once for the watched sockets and the namespace; where the kernel
    /// refuses, reads them with getsockopt from then on and says why ([`Probe::source`]).
    pub fn new(watched: Watched) -> io::Result<Probe> {
        if std::env::var(SAMPLE_BY_ENV).is_ok_and(|v| v == "getsockopt") {
            return Ok(Probe::by_getsockopt(
                watched,
                format!("{SAMPLE_BY_ENV}=getsockopt"),
            ));
        }
        let mut probe = Probe::by_getsockopt(watched, String::new());
        match probe.open_diag() {
            Ok(diag) => {
                probe.reads = Reads::Diag(diag);
                probe.source = Source::SockDiag;
            }
            Err(e) if refused(&e) => {
                probe.source = Source::Getsockopt {
                    why: format!("sock_diag refused: {e}"),
                }
            }
            Err(e) => return Err(e),
        }
        Ok(probe)
    }

    /// A probe that reads each socket with getsockopt, for `why`.
    fn by_getsockopt(watched: Watched, why: String) -> Probe {
        Probe {
            reads: Reads::Getsockopt,
            source: Source::Getsockopt { why },
            found: vec![None; watched.count],
            watched,
            namespace_at: None,
        }
    }

    /// sock_diag, once it has answered for the watched sockets and the namespace: with
    /// inet_diag loaded but not tcp_diag, lookups say "no such socket" of every one.
    fn open_diag(&mut self) -> io::Result<Diag> {
        let mut diag = Diag::open()?;
        diag.look_up(&self.watched, &mut self.found)?;
        if self.found.iter().all(Option::is_none) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "it finds none of the session's own sockets (tcp_diag not loaded?)",
            ));
        }
        diag.namespace_charged_bytes()?;
        Ok(diag)
    }

    /// How this probe reads its sockets.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The watched sockets at `now`, and the namespace's memory if it was last summed long
    /// enough before (`namespace_spacing`). `fds` are the watched sockets again, in the
    /// same order: read only where sock_diag is refused.
    pub fn snapshot<F: AsFd>(
        &mut self,
        now: Instant,
        fds: impl IntoIterator<Item = F>,
    ) -> io::Result<Snapshot<'_>> {
        // A tenth of slack, so ticks that wake a little early or late keep the cadence.
        let due = !matches!(self.namespace_at,
            Some((at, spacing)) if now.saturating_duration_since(at) < spacing * 9 / 10);
        let namespace_charged_bytes = match &mut self.reads {
            Reads::Diag(diag) => {
                diag.look_up(&self.watched, &mut self.found)?;
                if due {
                    let cpu_before = sys::thread_cpu_time();
                    let sum = diag.namespace_charged_bytes()?;
                    let walk_cpu = sys::thread_cpu_time().saturating_sub(cpu_before);
                    self.namespace_at = Some((now, namespace_spacing(walk_cpu)));
                    Some(sum)
                } else {
                    None
                }
            }
            Reads::Getsockopt => {
                for (slot, fd) in self.found.iter_mut().zip(fds) {
                    *slot = ask(fd.as_fd());
                }
                due.then(|| {
                    self.namespace_at = Some((now, NAMESPACE_EVERY));
                    self.found
                        .iter()
                        .flatten()
                        .map(|s| charged_of(&s.mem))
                        .sum()
                })
            }
        };
        Ok(Snapshot {
            sockets: &self.found,
            namespace_charged_bytes,
        })
    }
}

/// `TCP_INFO`, `SO_MEMINFO` and `TCP_CC_INFO` of one socket; `None` once it is closed (as
/// sock_diag no longer lists it) or the kernel will not say.
fn ask(fd: BorrowedFd<'_>) -> Option<Sampled> {
    let info = tcp_info::read(fd).ok()?;
    (info.state != TCP_CLOSE).then_some(Sampled {
        info,
        mem: crate::socket::meminfo::read(fd).ok()?,
        bbr: cc_info::read_bbr(fd).ok()?,
    })
}

/// `TCP_CLOSE` (include/net/tcp_states.h).
const TCP_CLOSE: u8 = 7;

/// The memory a socket holds as the kernel charges it: queued send data, the receive
/// queue, and pages reserved ahead (the dump's sum, `charged`, counts the same).
fn charged_of(m: &SkMemInfo) -> u64 {
    u64::from(m.wmem_queued_bytes) + u64::from(m.rmem_alloc_bytes) + u64::from(m.fwd_alloc_bytes)
}

/// Parses one datagram of an answer, calling `each` with every answer's sequence number and
/// its socket: `None` for the end of a dump, or for a lookup of a socket that is gone (the
/// kernel answers `ENOENT` or `ESTALE`, not an error here). True when it holds the end of a
/// dump.
fn walk_messages(
    mut bytes: &[u8],
    each: &mut impl FnMut(u32, Option<SocketDiag>),
) -> io::Result<bool> {
    let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidData, e);
    let mut done = false;
    while !bytes.is_empty() {
        let message = NetlinkMessage::<SockDiagMessage>::deserialize(bytes)
            .map_err(|e| invalid(format!("sock_diag answer: {e}")))?;
        let len = message.header.length as usize;
        let sequence = message.header.sequence_number;
        match message.payload {
            NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(response)) => {
                each(sequence, Some(socket_diag(&response)));
            }
            NetlinkPayload::Done(_) => {
                done = true;
                each(sequence, None);
            }
            NetlinkPayload::Error(error) => match error.to_io() {
                // ENOENT: no socket has the 4-tuple now; ESTALE: one has, another socket.
                e if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESTALE)) => {
                    each(sequence, None)
                }
                e => return Err(e),
            },
            _ => {}
        }
        if len == 0 || len > bytes.len() {
            break;
        }
        // Messages are 4-byte aligned within the datagram.
        bytes = &bytes[(len + 3) & !3..];
    }
    Ok(done)
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
        bbr: None,
    };
    for nla in &response.nlas {
        match nla {
            Nla::TcpInfo(bytes) => diag.info = Some(tcp_info::from_bytes(bytes)),
            Nla::Other(attribute) if attribute.kind() == INET_DIAG_BBRINFO => {
                diag.bbr = bbr_of(attribute)
            }
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

/// BBR's state from its attribute (the parser keeps attributes it does not know as bytes).
fn bbr_of(attribute: &impl netlink_packet_core::Nla) -> Option<BbrInfo> {
    let mut bytes = vec![0u8; attribute.value_len()];
    attribute.emit_value(&mut bytes);
    cc_info::bbr_from_bytes(&bytes)
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
        assert!(
            info.bytes_received >= Some(payload.len() as u64),
            "{info:?}"
        );
        let mem = server_side.mem.expect("INET_DIAG_SKMEMINFO");
        assert!(mem.rmem_alloc_bytes as usize >= payload.len(), "{mem:?}");
        assert!(server_side.charged_bytes() >= payload.len() as u64);
        // And it agrees with getsockopt on the same socket.
        let direct = crate::socket::meminfo::read(&server).unwrap();
        assert_eq!(direct.rmem_alloc_bytes, mem.rmem_alloc_bytes);
        assert_eq!(direct.rcvbuf_bytes, mem.rcvbuf_bytes);
    }

    #[test]
    fn snapshot_keeps_the_watched_order_and_sums_the_namespace_when_due() {
        let (mut client, server) = loopback_pair();
        let (other, _other_server) = loopback_pair();
        client.write_all(&[7u8; 30_000]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        // Server first: the snapshot answers in the order asked, not the kernel's.
        let mut probe = Probe::new(Watched::new([&server, &client, &other]).unwrap()).unwrap();
        let start = Instant::now();
        let fds = || [&server, &client, &other];
        let first = probe.snapshot(start, fds()).unwrap();
        let Sampled {
            info: server_info,
            mem: server_mem,
            ..
        } = first.sockets[0].expect("server found");
        let client_info = first.sockets[1].expect("client found").info;
        assert!(
            server_info.bytes_received >= Some(30_000),
            "{server_info:?}"
        );
        assert!(server_mem.rmem_alloc_bytes >= 30_000, "{server_mem:?}");
        assert_eq!(client_info.bytes_received, Some(0));
        assert_eq!(first.sockets[2].map(|s| s.info.state), Some(1));
        assert!(first.namespace_charged_bytes.unwrap() >= 30_000);
        // The sum is due again only after NAMESPACE_EVERY, or later if the walk was costly.
        let (_, spacing) = probe.namespace_at.unwrap();
        assert!(spacing >= NAMESPACE_EVERY, "{spacing:?}");
        let soon = probe.snapshot(start + NAMESPACE_EVERY / 2, fds()).unwrap();
        assert_eq!(soon.namespace_charged_bytes, None);
        assert!(soon.sockets[0].is_some());
        assert!(probe
            .snapshot(start + spacing, fds())
            .unwrap()
            .namespace_charged_bytes
            .is_some());
        // A socket closed since it was watched is no longer established (or gone), and the
        // lookup of it is not an error.
        other.shutdown(std::net::Shutdown::Both).unwrap();
        let later = probe.snapshot(start + NAMESPACE_EVERY * 3, fds()).unwrap();
        assert!(
            !matches!(later.sockets[2], Some(s) if s.info.state == 1),
            "{later:?}"
        );
        assert!(later.sockets[0].is_some());
    }

    #[test]
    fn by_getsockopt_a_snapshot_says_what_sock_diag_says_and_sums_only_its_sockets() {
        let (mut client, server) = loopback_pair();
        for (socket, congestion) in [(&client, "bbr"), (&server, "cubic")] {
            let name = congestion.as_bytes();
            sys::set_bytes(
                socket.as_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                name,
            )
            .unwrap();
        }
        client.write_all(&[7u8; 30_000]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let watched = || Watched::new([&server, &client]).unwrap();
        let mut diag = Probe::new(watched()).unwrap();
        assert_eq!(diag.source(), &Source::SockDiag, "this kernel has tcp_diag");
        let mut asked = Probe::by_getsockopt(watched(), "a test".into());
        assert!(matches!(asked.source(), Source::Getsockopt { why } if why == "a test"));
        let now = Instant::now();
        let dumped = diag.snapshot(now, [&server, &client]).unwrap();
        let (by_diag, namespace) = (dumped.sockets.to_vec(), dumped.namespace_charged_bytes);
        let by_getsockopt = asked.snapshot(now, [&server, &client]).unwrap();
        for (a, b) in by_diag.iter().zip(by_getsockopt.sockets) {
            let (a, b) = (a.unwrap(), b.unwrap());
            assert_eq!(a.info.state, b.info.state);
            assert_eq!(a.info.bytes_received, b.info.bytes_received);
            assert_eq!(a.mem.rmem_alloc_bytes, b.mem.rmem_alloc_bytes);
            // BBR's state, where a socket runs BBR, the same both ways.
            assert_eq!(a.bbr.map(|b| b.min_rtt_us), b.bbr.map(|b| b.min_rtt_us));
        }
        let bbr = by_diag[1]
            .unwrap()
            .bbr
            .expect("INET_DIAG_BBRINFO of the bbr client");
        assert!(bbr.min_rtt_us.is_some() && bbr.cwnd_gain > 0.0, "{bbr:?}");
        assert_eq!(
            by_diag[0].unwrap().bbr,
            None,
            "cubic gives no state of its own"
        );
        // The namespace holds these and more; getsockopt sees these only.
        let own: u64 = [&server, &client]
            .iter()
            .map(|s| crate::socket::meminfo::read(s).unwrap())
            .map(|m| {
                u64::from(m.wmem_queued_bytes)
                    + u64::from(m.rmem_alloc_bytes)
                    + u64::from(m.fwd_alloc_bytes)
            })
            .sum();
        assert_eq!(by_getsockopt.namespace_charged_bytes, Some(own));
        assert!(namespace >= Some(own), "{namespace:?} < {own}");
        // Due again only after NAMESPACE_EVERY, as with sock_diag.
        let soon = asked
            .snapshot(now + NAMESPACE_EVERY / 2, [&server, &client])
            .unwrap();
        assert_eq!(soon.namespace_charged_bytes, None);
        // A socket the peer reset is closed: it reads as gone, as sock_diag no longer
        // lists it.
        let mut lone = Probe::by_getsockopt(Watched::new([&client]).unwrap(), "a test".into());
        socket2::SockRef::from(&server)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(server);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let gone = lone.snapshot(now, [&client]).unwrap();
        assert!(gone.sockets[0].is_none(), "{gone:?}");
    }

    #[test]
    fn refusals_are_told_from_failures() {
        for errno in [libc::EOPNOTSUPP, libc::ENOENT, libc::EPERM, libc::EACCES] {
            assert!(refused(&io::Error::from_raw_os_error(errno)), "{errno}");
        }
        assert!(refused(&io::Error::new(
            io::ErrorKind::NotFound,
            "none found"
        )));
        assert!(!refused(&io::Error::from_raw_os_error(libc::ENOBUFS)));
        assert!(!refused(&io::Error::new(
            io::ErrorKind::InvalidData,
            "garbled"
        )));
    }

    #[test]
    fn a_costly_walk_spaces_the_sums_to_half_a_percent_of_a_core() {
        // A cheap walk keeps the 100 ms cadence...
        assert_eq!(
            namespace_spacing(Duration::from_micros(100)),
            NAMESPACE_EVERY
        );
        assert_eq!(namespace_spacing(Duration::ZERO), NAMESPACE_EVERY);
        // ...a walk of the host's table waits until it is 0.5% of the time between sums.
        let spacing = namespace_spacing(Duration::from_micros(1_200));
        assert_eq!(spacing, Duration::from_millis(240));
        assert_eq!(
            Duration::from_micros(1_200).as_secs_f64() / spacing.as_secs_f64(),
            0.005
        );
    }

    #[test]
    fn one_memory_walk_counts_both_families() {
        let pair = |addr: &str| {
            let listener = std::net::TcpListener::bind(addr).unwrap();
            let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            (client, listener.accept().unwrap().0)
        };
        let Ok(v6) = std::panic::catch_unwind(|| pair("[::1]:0")) else {
            return eprintln!("skipped: no IPv6 loopback");
        };
        let v4 = pair("127.0.0.1:0");
        let payload = vec![3u8; 200_000];
        for mut client in [&v4.0, &v6.0] {
            client.write_all(&payload).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        // Each unread receive queue holds its bytes; the namespace holds other sockets too.
        let sum = Diag::open().unwrap().namespace_charged_bytes().unwrap();
        assert!(sum >= 2 * payload.len() as u64, "{sum}");
    }

    #[test]
    fn lookups_find_more_sockets_than_one_send_holds() {
        let pairs: Vec<_> = (0..LOOKUPS_PER_SEND + 3).map(|_| loopback_pair()).collect();
        let servers = pairs.iter().map(|(_, server)| server);
        let mut probe = Probe::new(Watched::new(servers.clone()).unwrap()).unwrap();
        let snapshot = probe.snapshot(Instant::now(), servers).unwrap();
        assert_eq!(snapshot.sockets.len(), pairs.len());
        assert!(snapshot.sockets.iter().all(Option::is_some));
    }
}

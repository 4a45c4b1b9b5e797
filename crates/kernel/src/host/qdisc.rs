//! rtnetlink's view of the queue below TCP on the way out: the route to the peer names the
//! egress device (`RTM_GETROUTE`), and that device's root qdisc gives its statistics (an
//! `RTM_GETQDISC` dump, `TCA_STATS2`'s `TCA_STATS_QUEUE`), what `tc -s qdisc` prints, read
//! as numbers. The root's figures cover its children: htb, tbf, prio and the
//! multiqueue `mq` count a child's backlog and drops in their own (`mq` sums its queues'
//! when asked), so one request per tick gives the device's whole queue. Asking needs no
//! privilege. The messages are built and read by hand, as the sock_diag memory dump is.

use std::io;
use std::net::IpAddr;

use netlink_sys::{protocols::NETLINK_ROUTE, Socket};

const NLMSG_HEADER_BYTES: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
/// `struct rtmsg` and `struct tcmsg`'s lengths.
const RTMSG_BYTES: usize = 12;
const TCMSG_BYTES: usize = 20;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const TCA_STATS2: u16 = 7;
const TCA_STATS_QUEUE: u16 = 3;
/// `tcm_parent` naming the egress root (`TC_H_ROOT`).
const TC_H_ROOT: u32 = u32::MAX;
/// An attribute's type without its nested and byte-order flags.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// A root qdisc's statistics as the kernel keeps them: the backlog now, the drops and
/// requeues since it was made (32-bit counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QdiscStats {
    /// Tells a qdisc replaced between two readings (its counters start again) from one
    /// whose counters grew.
    pub handle: u32,
    pub backlog_bytes: u32,
    pub backlog_packets: u32,
    pub drops: u32,
    pub requeues: u32,
}

/// A route netlink socket, opened once per sampler and asked again each tick.
pub struct Rtnetlink {
    socket: Socket,
    /// The request being sent and the answer's datagrams, kept: a tick allocates nothing.
    request: Vec<u8>,
    buf: Vec<u8>,
    sequence: u32,
}

impl Rtnetlink {
    /// Opens the socket in the calling thread's network namespace.
    pub fn open() -> io::Result<Self> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&netlink_sys::SocketAddr::new(0, 0))?;
        socket.set_non_blocking(true)?;
        Ok(Rtnetlink {
            socket,
            request: Vec::with_capacity(64),
            buf: vec![0; 32 << 10],
            sequence: 0,
        })
    }

    /// The index of the device the route to `peer` leaves by (`lo` for an address of
    /// this host).
    pub fn egress_ifindex(&mut self, peer: IpAddr) -> io::Result<u32> {
        let peer = peer.to_canonical();
        let (family, address): (u8, Vec<u8>) = match peer {
            IpAddr::V4(a) => (libc::AF_INET as u8, a.octets().to_vec()),
            IpAddr::V6(a) => (libc::AF_INET6 as u8, a.octets().to_vec()),
        };
        let mut body = vec![0u8; RTMSG_BYTES];
        body[0] = family;
        body[1] = (address.len() * 8) as u8;
        push_attribute(&mut body, RTA_DST, &address);
        let mut oif = None;
        self.exchange(RTM_GETROUTE, 0, &body, |kind, answer| {
            if kind == RTM_NEWROUTE {
                oif = attributes(answer.get(RTMSG_BYTES..).unwrap_or_default())
                    .find(|&(kind, _)| kind == RTA_OIF)
                    .and_then(|(_, value)| word(value, 0));
            }
        })?;
        oif.ok_or_else(|| invalid("the route to the peer names no output device"))
    }

    /// The statistics of the root qdisc of device `ifindex`, from a dump of the
    /// namespace's qdiscs (a get of the root answers only with `NLM_F_ECHO`, which also
    /// tells every `tc monitor` of a change each tick; a dump tells no one).
    pub fn root_qdisc(&mut self, ifindex: u32) -> io::Result<QdiscStats> {
        let mut body = [0u8; TCMSG_BYTES];
        body[4..8].copy_from_slice(&ifindex.to_ne_bytes());
        let mut found = None;
        self.exchange(RTM_GETQDISC, NLM_F_DUMP, &body, |kind, answer| {
            let is_root = word(answer, 4) == Some(ifindex) && word(answer, 12) == Some(TC_H_ROOT);
            if kind == RTM_NEWQDISC && is_root && found.is_none() {
                found = Some(root_stats(answer));
            }
        })?;
        found.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("rtnetlink: device {ifindex} has no root qdisc"),
            )
        })?
    }

    /// Sends one request of `kind` (a dump with `NLM_F_DUMP` in `flags`) and gives `each`
    /// every message of the answer, by type and body, until it ends. The socket does not
    /// block: the kernel queues an answer, or a dump's next part, before the call that asks
    /// for it returns, so a reply that is not there is an error, never a sampler stuck.
    fn exchange(
        &mut self,
        kind: u16,
        flags: u16,
        body: &[u8],
        mut each: impl FnMut(u16, &[u8]),
    ) -> io::Result<()> {
        self.sequence = self.sequence.wrapping_add(1);
        self.request.clear();
        let len = (NLMSG_HEADER_BYTES + body.len()) as u32;
        self.request.extend_from_slice(&len.to_ne_bytes());
        self.request.extend_from_slice(&kind.to_ne_bytes());
        self.request
            .extend_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
        self.request.extend_from_slice(&self.sequence.to_ne_bytes());
        self.request.extend_from_slice(&0u32.to_ne_bytes());
        self.request.extend_from_slice(body);
        self.socket.send(&self.request, 0)?;
        loop {
            let len = self.socket.recv(&mut &mut self.buf[..], 0)?;
            let mut bytes = &self.buf[..len];
            while !bytes.is_empty() {
                let message_len =
                    word(bytes, 0).ok_or_else(|| invalid("a truncated header"))? as usize;
                if !(NLMSG_HEADER_BYTES..=bytes.len()).contains(&message_len) {
                    return Err(invalid("a message longer than its datagram"));
                }
                let (got, sequence) = (u16::from_ne_bytes([bytes[4], bytes[5]]), word(bytes, 8));
                let message = &bytes[NLMSG_HEADER_BYTES..message_len];
                bytes = bytes.get((message_len + 3) & !3..).unwrap_or_default();
                // An answer to an earlier request that gave up is skipped.
                if sequence != Some(self.sequence) {
                    continue;
                }
                match got {
                    NLMSG_DONE => return Ok(()),
                    NLMSG_ERROR => {
                        let code = word(message, 0).unwrap_or(0) as i32;
                        return match code {
                            0 => Ok(()),
                            code => Err(io::Error::from_raw_os_error(-code)),
                        };
                    }
                    got => each(got, message),
                }
            }
            if flags & NLM_F_DUMP == 0 {
                return Ok(());
            }
        }
    }
}

/// A qdisc's statistics from its message's body (`struct tcmsg`, then attributes).
fn root_stats(answer: &[u8]) -> io::Result<QdiscStats> {
    let handle = word(answer, 8).ok_or_else(|| invalid("a truncated tcmsg"))?;
    let stats2 = attributes(answer.get(TCMSG_BYTES..).unwrap_or_default())
        .find(|&(kind, _)| kind == TCA_STATS2)
        .ok_or_else(|| invalid("the qdisc has no TCA_STATS2"))?
        .1;
    // struct gnet_stats_queue: qlen, backlog, drops, requeues, overlimits.
    let queue = attributes(stats2)
        .find(|&(kind, _)| kind == TCA_STATS_QUEUE)
        .map(|(_, value)| value)
        .filter(|value| value.len() >= 16)
        .ok_or_else(|| invalid("the qdisc's TCA_STATS2 has no TCA_STATS_QUEUE"))?;
    let at = |i: usize| word(queue, 4 * i).unwrap_or(0);
    Ok(QdiscStats {
        handle,
        backlog_packets: at(0),
        backlog_bytes: at(1),
        drops: at(2),
        requeues: at(3),
    })
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("rtnetlink: {what}"))
}

fn word(bytes: &[u8], at: usize) -> Option<u32> {
    bytes
        .get(at..at + 4)
        .map(|w| u32::from_ne_bytes(w.try_into().expect("4 bytes")))
}

fn push_attribute(out: &mut Vec<u8>, kind: u16, value: &[u8]) {
    out.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    out.resize((out.len() + 3) & !3, 0);
}

/// A run of netlink attributes as (type, value); stops at the first malformed one.
fn attributes(mut bytes: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(u16::from_ne_bytes(bytes.get(0..2)?.try_into().ok()?));
        let kind = u16::from_ne_bytes(bytes.get(2..4)?.try_into().ok()?) & NLA_TYPE_MASK;
        let value = bytes.get(4..len.max(4))?;
        bytes = bytes.get((len + 3) & !3..).unwrap_or_default();
        Some((kind, value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// `lo`'s index: always 1.
    const LO: u32 = 1;

    #[test]
    fn the_route_to_this_host_leaves_by_lo() {
        let mut rt = Rtnetlink::open().unwrap();
        assert_eq!(rt.egress_ifindex(Ipv4Addr::LOCALHOST.into()).unwrap(), LO);
        assert_eq!(rt.egress_ifindex(Ipv6Addr::LOCALHOST.into()).unwrap(), LO);
        let mapped: IpAddr = Ipv4Addr::LOCALHOST.to_ipv6_mapped().into();
        assert_eq!(rt.egress_ifindex(mapped).unwrap(), LO);
    }

    #[test]
    fn los_root_qdisc_reads_and_a_missing_device_is_an_error() {
        let mut rt = Rtnetlink::open().unwrap();
        // lo's noqueue holds nothing; asking twice on one socket works.
        for _ in 0..2 {
            let lo = rt.root_qdisc(LO).unwrap();
            assert_eq!((lo.backlog_bytes, lo.backlog_packets), (0, 0), "{lo:?}");
        }
        let e = rt.root_qdisc(u32::MAX >> 1).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    }

    #[test]
    fn attributes_walk_padded_values_and_stop_at_a_truncated_one() {
        let mut bytes = Vec::new();
        push_attribute(&mut bytes, 1, &[9, 9, 9]);
        push_attribute(&mut bytes, 0x8000 | 7, &[1, 2, 3, 4]);
        assert_eq!(bytes.len(), 16);
        bytes.extend_from_slice(&[200, 0, 5, 0]);
        let got: Vec<(u16, &[u8])> = attributes(&bytes).collect();
        assert_eq!(got, [(1, &[9u8, 9, 9][..]), (7, &[1u8, 2, 3, 4][..])]);
    }
}

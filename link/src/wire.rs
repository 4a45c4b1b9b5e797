//! What one TUN read costs on the wire: a read with `IFF_VNET_HDR` is a `virtio_net_hdr`
//! followed by an IP packet that may be a GSO super-packet of many segments.

/// Size of `struct virtio_net_hdr` (the TUN default, without `num_buffers`).
pub const VNET_HDR_LEN: usize = 10;

/// The Ethernet header netem charges each packet on veth; a TUN has none, so we add it to
/// keep goodput comparable with a netem link.
pub const ETHERNET_HEADER_BYTES: u64 = 14;

const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_ECN: u8 = 0x80;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the TCP checksum field holds only the pseudo-header sum,
/// and the kernel finishes the checksum (or trusts it, delivering locally).
const F_NEEDS_CSUM: u8 = 1;

const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;

/// Wire cost of one read: how many packets it becomes on the wire and their total bytes,
/// each segment carrying its own IP/TCP headers and an Ethernet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireSize {
    /// Packets on the wire (1 unless the read is a GSO super-packet).
    pub segments: u32,
    /// Bytes on the wire, Ethernet header included for each segment.
    pub bytes: u64,
    /// Bytes on the wire of one full segment (all but the last of a GSO packet are full).
    pub segment_bytes: u64,
    /// Whether [`truncate_tcp_gso`] can cut the packet to its first segments: a TCP GSO
    /// packet whose checksum the kernel finishes.
    pub truncatable: bool,
}

impl WireSize {
    /// The wire cost of the first `segments` segments alone.
    pub fn first(&self, segments: u32) -> WireSize {
        if segments >= self.segments {
            return *self;
        }
        WireSize {
            segments,
            bytes: segments as u64 * self.segment_bytes,
            ..*self
        }
    }
}

/// Computes the wire cost of a TUN read (`frame` = vnet header + IP packet).
/// A frame too short to parse counts as one packet of its own length.
pub fn wire_size(frame: &[u8]) -> WireSize {
    let ip = frame.get(VNET_HDR_LEN..).unwrap_or(&[]);
    let ip_len = ip.len() as u64;
    let single = WireSize {
        segments: 1,
        bytes: ip_len + ETHERNET_HEADER_BYTES,
        segment_bytes: ip_len + ETHERNET_HEADER_BYTES,
        truncatable: false,
    };
    if frame.len() < VNET_HDR_LEN {
        return single;
    }
    let gso_type = frame[1] & !GSO_ECN;
    let vnet_hdr_len = u16::from_le_bytes([frame[2], frame[3]]) as u64;
    let gso_size = u16::from_le_bytes([frame[4], frame[5]]) as u64;
    if gso_type == GSO_NONE || gso_size == 0 {
        return single;
    }
    let parsed = headers_len(ip);
    let header_len = parsed.unwrap_or(vnet_hdr_len).min(ip_len);
    let payload = ip_len - header_len;
    let segments = payload.div_ceil(gso_size).max(1);
    WireSize {
        segments: segments as u32,
        bytes: ip_len + (segments - 1) * header_len + segments * ETHERNET_HEADER_BYTES,
        segment_bytes: header_len + gso_size + ETHERNET_HEADER_BYTES,
        truncatable: matches!(gso_type, GSO_TCPV4 | GSO_TCPV6)
            && frame[0] & F_NEEDS_CSUM != 0
            && parsed.is_some(),
    }
}

/// Cuts a TCP GSO packet (`frame` = vnet header + IP packet) to its first `segments`
/// segments, as a router's drop-tail queue would keep the segments that fit and drop the
/// rest. Returns the new frame length, or None if the packet is not a truncatable TCP GSO
/// packet longer than that.
///
/// The surgery: the IPv4 total length and header checksum, or the IPv6 payload length;
/// FIN and PSH cleared, since they belong to the lost last segment; the TCP checksum field,
/// which with `F_NEEDS_CSUM` holds the pseudo-header sum including the TCP length, gets
/// the new length (RFC 1624 incremental update); a single remaining segment stops being
/// GSO. The payload itself is not touched.
pub fn truncate_tcp_gso(frame: &mut [u8], segments: u32) -> Option<usize> {
    let size = wire_size(frame);
    if !size.truncatable || segments == 0 || segments >= size.segments {
        return None;
    }
    let gso_size = u16::from_le_bytes([frame[4], frame[5]]) as usize;
    let ip = &mut frame[VNET_HDR_LEN..];
    let headers = headers_len(ip)? as usize;
    let l3_len = if ip[0] >> 4 == 4 {
        ((ip[0] & 0x0f) as usize) * 4
    } else {
        40
    };
    let new_ip_len = headers + segments as usize * gso_size;
    let (old_l4, new_l4) = ((ip.len() - l3_len) as u16, (new_ip_len - l3_len) as u16);
    if ip[0] >> 4 == 4 {
        ip[2..4].copy_from_slice(&(new_ip_len as u16).to_be_bytes());
        ip[10..12].copy_from_slice(&[0, 0]);
        let check = !ones_complement_sum(&ip[..l3_len]);
        ip[10..12].copy_from_slice(&check.to_be_bytes());
    } else {
        ip[4..6].copy_from_slice(&((new_ip_len - 40) as u16).to_be_bytes());
    }
    let tcp = &mut ip[l3_len..];
    tcp[13] &= !(TCP_FIN | TCP_PSH);
    let pseudo = u16::from_be_bytes([tcp[16], tcp[17]]);
    let pseudo = ones_complement_sum(&[pseudo, !old_l4, new_l4].map(u16::to_be_bytes).concat());
    tcp[16..18].copy_from_slice(&pseudo.to_be_bytes());
    if segments == 1 {
        frame[1] = GSO_NONE;
        frame[4..6].copy_from_slice(&[0, 0]);
    }
    Some(VNET_HDR_LEN + new_ip_len)
}

/// The 16-bit ones' complement sum of big-endian words (RFC 1071), not complemented.
fn ones_complement_sum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]) as u32)
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Length of the IP and transport headers each segment repeats (TCP or UDP; IPv6 without
/// extension headers), or None when the packet is not one of those.
fn headers_len(ip: &[u8]) -> Option<u64> {
    let version = ip.first()? >> 4;
    let (l3_len, proto) = match version {
        4 => (((ip[0] & 0x0f) as usize) * 4, *ip.get(9)?),
        6 => (40, *ip.get(6)?),
        _ => return None,
    };
    let l4_len = match proto {
        6 => ((ip.get(l3_len + 12)? >> 4) as usize) * 4,
        17 => 8,
        _ => return None,
    };
    Some((l3_len + l4_len) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packets and bytes on the wire.
    fn cost(frame: &[u8]) -> (u32, u64) {
        let size = wire_size(frame);
        (size.segments, size.bytes)
    }

    /// vnet header + IPv4 + TCP header with 12 bytes of options (doff 8), then payload.
    fn tcp4_frame(gso_type: u8, gso_size: u16, payload: usize) -> Vec<u8> {
        let mut frame = vec![0u8; VNET_HDR_LEN];
        frame[1] = gso_type;
        frame[2..4].copy_from_slice(&66u16.to_le_bytes()); // hdr_len as TUN reports it
        frame[4..6].copy_from_slice(&gso_size.to_le_bytes());
        let mut ip = vec![0u8; 20 + 32];
        ip[0] = 0x45;
        ip[9] = 6;
        ip[20 + 12] = 8 << 4;
        frame.extend_from_slice(&ip);
        frame.extend(std::iter::repeat_n(0xab, payload));
        frame
    }

    #[test]
    fn plain_packet_is_one_segment_plus_ethernet() {
        let frame = tcp4_frame(GSO_NONE, 0, 1448);
        assert_eq!(cost(&frame), (1, 1500 + 14));
    }

    #[test]
    fn gso_packet_charges_each_segment_its_headers() {
        // 10 full segments of 1448 and one of 100: 11 packets of 52 header bytes each.
        let frame = tcp4_frame(1, 1448, 10 * 1448 + 100);
        let expected_bytes = 10 * (52 + 1448 + 14) + (52 + 100 + 14);
        assert_eq!(cost(&frame), (11, expected_bytes));
        // The ECN bit does not change the count.
        let frame = tcp4_frame(1 | GSO_ECN, 1448, 2 * 1448);
        assert_eq!(wire_size(&frame).segments, 2);
    }

    #[test]
    fn tcp6_headers_are_parsed() {
        let mut frame = vec![0u8; VNET_HDR_LEN];
        frame[1] = 4;
        frame[4..6].copy_from_slice(&1428u16.to_le_bytes());
        let mut ip = vec![0u8; 40 + 20];
        ip[0] = 0x60;
        ip[6] = 6;
        ip[40 + 12] = 5 << 4;
        frame.extend_from_slice(&ip);
        frame.extend(std::iter::repeat_n(0, 3 * 1428));
        assert_eq!(cost(&frame), (3, 3 * (60 + 1428 + 14)));
    }

    #[test]
    fn garbage_counts_as_one_packet() {
        assert_eq!(cost(&[1, 2, 3]), (1, 14));
        let mut frame = tcp4_frame(1, 1000, 0);
        frame.truncate(VNET_HDR_LEN + 3);
        assert_eq!(wire_size(&frame).segments, 1);
    }

    /// A TCP GSO frame as TUN hands it over: NEEDS_CSUM, IPv4 header with a valid checksum,
    /// TCP with ACK|PSH|FIN and the pseudo-header sum of the whole TCP length.
    fn tso4_frame(gso_size: u16, payload: usize) -> Vec<u8> {
        let mut frame = tcp4_frame(GSO_TCPV4, gso_size, payload);
        frame[0] = F_NEEDS_CSUM;
        let ip_len = (frame.len() - VNET_HDR_LEN) as u16;
        let ip = &mut frame[VNET_HDR_LEN..];
        ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
        ip[12..20].copy_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        let check = !rfc1071_sum(&ip[..20]);
        ip[10..12].copy_from_slice(&check.to_be_bytes());
        ip[20 + 13] = 0x10 | TCP_PSH | TCP_FIN;
        let pseudo = pseudo_sum(ip_len - 20);
        ip[20 + 16..20 + 18].copy_from_slice(&pseudo.to_be_bytes());
        frame
    }

    /// The IPv4 pseudo-header sum for 10.0.0.1 -> 10.0.0.2, TCP, of `tcp_len` bytes, worked
    /// out by hand: 0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 6 = 0x1409, plus the length.
    fn pseudo_sum(tcp_len: u16) -> u16 {
        let sum = 0x1409u32 + tcp_len as u32;
        ((sum & 0xffff) + (sum >> 16)) as u16
    }

    /// RFC 1071 sum written out for the fixtures.
    fn rfc1071_sum(bytes: &[u8]) -> u16 {
        let mut sum = 0u32;
        for pair in bytes.chunks(2) {
            sum += (pair[0] as u32) << 8 | pair.get(1).copied().unwrap_or(0) as u32;
        }
        while sum >> 16 != 0 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    #[test]
    fn truncation_keeps_the_first_segments_with_consistent_headers() {
        // 3 full segments of 1448 and one of 100; keep 2: 52 header bytes + 2 * 1448.
        let mut frame = tso4_frame(1448, 3 * 1448 + 100);
        let before = wire_size(&frame);
        assert!(before.truncatable);
        assert_eq!(before.first(2).bytes, 2 * (52 + 1448 + 14));
        let len = truncate_tcp_gso(&mut frame, 2).expect("truncatable");
        assert_eq!(len, VNET_HDR_LEN + 52 + 2 * 1448);
        let frame = &frame[..len];
        let ip = &frame[VNET_HDR_LEN..];
        assert_eq!(
            u16::from_be_bytes([ip[2], ip[3]]),
            2948,
            "IPv4 total length"
        );
        assert_eq!(
            rfc1071_sum(&ip[..20]),
            0xffff,
            "IPv4 header checksum verifies"
        );
        assert_eq!(ip[20 + 13], 0x10, "ACK kept, PSH and FIN cleared");
        let pseudo = u16::from_be_bytes([ip[20 + 16], ip[20 + 17]]);
        assert_eq!(
            pseudo,
            pseudo_sum(2948 - 20),
            "pseudo-header sum of the new length"
        );
        assert_eq!(frame[1], GSO_TCPV4, "still GSO");
        assert_eq!(cost(frame), (2, 2 * (52 + 1448 + 14)));
    }

    #[test]
    fn truncation_to_one_segment_is_a_plain_packet() {
        let mut frame = tso4_frame(1448, 2 * 1448);
        let len = truncate_tcp_gso(&mut frame, 1).expect("truncatable");
        assert_eq!(len, VNET_HDR_LEN + 52 + 1448);
        assert_eq!(
            (frame[0], frame[1], frame[4], frame[5]),
            (F_NEEDS_CSUM, GSO_NONE, 0, 0)
        );
        assert_eq!(cost(&frame[..len]), (1, 52 + 1448 + 14));
    }

    #[test]
    fn tcp6_truncation_sets_the_payload_length() {
        let mut frame = vec![0u8; VNET_HDR_LEN];
        frame[0] = F_NEEDS_CSUM;
        frame[1] = GSO_TCPV6;
        frame[4..6].copy_from_slice(&1428u16.to_le_bytes());
        let mut ip = vec![0u8; 40 + 20];
        ip[0] = 0x60;
        ip[6] = 6;
        ip[40 + 12] = 5 << 4;
        ip[40 + 13] = 0x10 | TCP_FIN;
        frame.extend_from_slice(&ip);
        frame.extend(std::iter::repeat_n(0, 3 * 1428));
        let len = truncate_tcp_gso(&mut frame, 2).expect("truncatable");
        assert_eq!(len, VNET_HDR_LEN + 60 + 2 * 1428);
        let ip = &frame[VNET_HDR_LEN..];
        assert_eq!(u16::from_be_bytes([ip[4], ip[5]]), 20 + 2 * 1428);
        assert_eq!(ip[40 + 13], 0x10);
    }

    #[test]
    fn what_cannot_be_truncated_is_left_alone() {
        // No NEEDS_CSUM: the TCP checksum covers the payload and would be wrong.
        let mut frame = tcp4_frame(GSO_TCPV4, 1448, 3 * 1448);
        assert!(!wire_size(&frame).truncatable);
        assert_eq!(truncate_tcp_gso(&mut frame, 1), None);
        // Not GSO, or no segment to drop.
        let mut frame = tso4_frame(1448, 3 * 1448);
        assert_eq!(truncate_tcp_gso(&mut frame, 3), None);
        assert_eq!(truncate_tcp_gso(&mut frame, 0), None);
        let mut plain = tcp4_frame(GSO_NONE, 0, 1448);
        assert_eq!(truncate_tcp_gso(&mut plain, 1), None);
    }
}

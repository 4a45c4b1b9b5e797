//! What one TUN read costs on the wire: a read with `IFF_VNET_HDR` is a `virtio_net_hdr`
//! followed by an IP packet that may be a GSO super-packet of many segments.

/// Size of `struct virtio_net_hdr` (the TUN default, without `num_buffers`).
pub const VNET_HDR_LEN: usize = 10;

/// The Ethernet header netem charges each packet on veth; a TUN has none, so we add it to
/// keep goodput comparable with a netem link.
pub const ETHERNET_HEADER_BYTES: u64 = 14;

const GSO_NONE: u8 = 0;
const GSO_ECN: u8 = 0x80;

/// Wire cost of one read: how many packets it becomes on the wire and their total bytes,
/// each segment carrying its own IP/TCP headers and an Ethernet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireSize {
    /// Packets on the wire (1 unless the read is a GSO super-packet).
    pub segments: u32,
    /// Bytes on the wire, Ethernet header included for each segment.
    pub bytes: u64,
}

/// Computes the wire cost of a TUN read (`frame` = vnet header + IP packet).
/// A frame too short to parse counts as one packet of its own length.
pub fn wire_size(frame: &[u8]) -> WireSize {
    let ip = frame.get(VNET_HDR_LEN..).unwrap_or(&[]);
    let ip_len = ip.len() as u64;
    let single = WireSize {
        segments: 1,
        bytes: ip_len + ETHERNET_HEADER_BYTES,
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
    let header_len = headers_len(ip).unwrap_or(vnet_hdr_len).min(ip_len);
    let payload = ip_len - header_len;
    let segments = payload.div_ceil(gso_size).max(1);
    WireSize {
        segments: segments as u32,
        bytes: ip_len + (segments - 1) * header_len + segments * ETHERNET_HEADER_BYTES,
    }
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
        assert_eq!(
            wire_size(&frame),
            WireSize {
                segments: 1,
                bytes: 1500 + 14
            }
        );
    }

    #[test]
    fn gso_packet_charges_each_segment_its_headers() {
        // 10 full segments of 1448 and one of 100: 11 packets of 52 header bytes each.
        let frame = tcp4_frame(1, 1448, 10 * 1448 + 100);
        let expected_bytes = 10 * (52 + 1448 + 14) + (52 + 100 + 14);
        assert_eq!(
            wire_size(&frame),
            WireSize {
                segments: 11,
                bytes: expected_bytes
            }
        );
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
        assert_eq!(
            wire_size(&frame),
            WireSize {
                segments: 3,
                bytes: 3 * (60 + 1428 + 14)
            }
        );
    }

    #[test]
    fn garbage_counts_as_one_packet() {
        assert_eq!(
            wire_size(&[1, 2, 3]),
            WireSize {
                segments: 1,
                bytes: 14
            }
        );
        let mut frame = tcp4_frame(1, 1000, 0);
        frame.truncate(VNET_HDR_LEN + 3);
        assert_eq!(wire_size(&frame).segments, 1);
    }
}

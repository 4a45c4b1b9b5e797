//! `TCP_INFO`: the kernel's per-connection TCP state, with units in the field names.

use std::io;
use std::os::fd::AsFd;

use serde::{Deserialize, Serialize};

use oscil_model::socket::{Chrono, FieldGroup};

use crate::sys;

/// A typed copy of `struct tcp_info`. Rates are converted to bits per second (the kernel
/// reports bytes per second); times are in microseconds as the kernel gives them. The
/// fields of the first `struct tcp_info` (Linux 2.6) are always there; each later one is
/// `None` on a kernel whose structure ends before it ([`FieldGroup`]): a zero there would
/// read as a measurement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpInfo {
    /// `TCP_ESTABLISHED` = 1, ... (include/net/tcp_states.h).
    pub state: u8,
    /// Congestion-avoidance state: 0 open, 1 disorder, 2 CWR, 3 recovery, 4 loss.
    pub ca_state: u8,
    pub retransmits: u8,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    pub rto_us: u32,
    pub snd_mss_bytes: u32,
    pub rcv_mss_bytes: u32,
    /// Segments sent and not yet acknowledged (in flight, including lost and sacked).
    pub unacked_segs: u32,
    pub sacked_segs: u32,
    pub lost_segs: u32,
    pub retrans_segs: u32,
    pub rcv_ssthresh_bytes: u32,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub snd_ssthresh_segs: u32,
    pub snd_cwnd_segs: u32,
    pub rcv_rtt_us: u32,
    pub rcv_space_bytes: u32,
    pub total_retrans: u32,
    pub pacing_rate_bps: Option<u64>,
    pub max_pacing_rate_bps: Option<u64>,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    /// Bytes in the write queue not yet sent: what `TCP_NOTSENT_LOWAT` bounds.
    pub notsent_bytes: Option<u32>,
    pub min_rtt_us: Option<u32>,
    pub delivery_rate_bps: Option<u64>,
    pub busy_time_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    pub bytes_sent: Option<u64>,
    pub bytes_retrans: Option<u64>,
    /// The peer's advertised window as this end saw it last (5.4).
    pub snd_wnd_bytes: Option<u32>,
    /// The window this end advertised last (6.2).
    pub rcv_wnd_bytes: Option<u32>,
    /// The handshake negotiated ECN (`tcpi_options`' `TCPI_OPT_ECN`).
    pub ecn_negotiated: bool,
    /// Segments acknowledged with an ECN echo since the connection began (4.18).
    pub delivered_ce_segs: Option<u32>,
}

/// `TCPI_OPT_ECN` (include/uapi/linux/tcp.h): ECN was negotiated at the handshake.
const TCPI_OPT_ECN: u8 = 8;

/// Where the sender's time went since the connection began; `None` on a kernel without
/// the counters (before 4.10).
pub fn chrono(info: &TcpInfo) -> Option<Chrono> {
    Some(Chrono {
        busy_us: info.busy_time_us?,
        rwnd_limited_us: info.rwnd_limited_us?,
        sndbuf_limited_us: info.sndbuf_limited_us?,
    })
}

impl TcpInfo {
    /// An estimate of bytes in flight: segments in flight as the kernel counts them
    /// (`tcp_packets_in_flight`: unacked - sacked - lost + retransmitted) times the send
    /// MSS. Segments are not always full-sized, so this is an estimate, not a count.
    pub fn inflight_bytes_est(&self) -> u64 {
        let segs = u64::from(self.unacked_segs)
            .saturating_sub(u64::from(self.sacked_segs) + u64::from(self.lost_segs))
            + u64::from(self.retrans_segs);
        segs * u64::from(self.snd_mss_bytes)
    }
}

/// Kernel pacing/delivery rates saturate at `u64::MAX` bytes/s ("unlimited"); keep that
/// meaning rather than wrapping when converting to bits.
fn bytes_to_bits(bytes_per_s: u64) -> u64 {
    bytes_per_s.saturating_mul(8)
}

/// `raw` of which the kernel filled `len` bytes: each later field only where `len` holds
/// its group.
fn from_raw(t: &libc::tcp_info, len: usize) -> TcpInfo {
    let has = |group: FieldGroup| group.held_by(len);
    TcpInfo {
        state: t.tcpi_state,
        ca_state: t.tcpi_ca_state,
        retransmits: t.tcpi_retransmits,
        // Bitfields `tcpi_snd_wscale:4, tcpi_rcv_wscale:4`: snd in the low nibble.
        snd_wscale: t.tcpi_snd_rcv_wscale & 0x0f,
        rcv_wscale: t.tcpi_snd_rcv_wscale >> 4,
        rto_us: t.tcpi_rto,
        snd_mss_bytes: t.tcpi_snd_mss,
        rcv_mss_bytes: t.tcpi_rcv_mss,
        unacked_segs: t.tcpi_unacked,
        sacked_segs: t.tcpi_sacked,
        lost_segs: t.tcpi_lost,
        retrans_segs: t.tcpi_retrans,
        rcv_ssthresh_bytes: t.tcpi_rcv_ssthresh,
        rtt_us: t.tcpi_rtt,
        rttvar_us: t.tcpi_rttvar,
        snd_ssthresh_segs: t.tcpi_snd_ssthresh,
        snd_cwnd_segs: t.tcpi_snd_cwnd,
        rcv_rtt_us: t.tcpi_rcv_rtt,
        rcv_space_bytes: t.tcpi_rcv_space,
        total_retrans: t.tcpi_total_retrans,
        pacing_rate_bps: has(FieldGroup::PacingRate).then_some(bytes_to_bits(t.tcpi_pacing_rate)),
        max_pacing_rate_bps: has(FieldGroup::PacingRate)
            .then_some(bytes_to_bits(t.tcpi_max_pacing_rate)),
        bytes_acked: has(FieldGroup::ByteCounts).then_some(t.tcpi_bytes_acked),
        bytes_received: has(FieldGroup::ByteCounts).then_some(t.tcpi_bytes_received),
        notsent_bytes: has(FieldGroup::Notsent).then_some(t.tcpi_notsent_bytes),
        min_rtt_us: has(FieldGroup::Notsent).then_some(t.tcpi_min_rtt),
        delivery_rate_bps: has(FieldGroup::DeliveryRate)
            .then_some(bytes_to_bits(t.tcpi_delivery_rate)),
        busy_time_us: has(FieldGroup::Chrono).then_some(t.tcpi_busy_time),
        rwnd_limited_us: has(FieldGroup::Chrono).then_some(t.tcpi_rwnd_limited),
        sndbuf_limited_us: has(FieldGroup::Chrono).then_some(t.tcpi_sndbuf_limited),
        bytes_sent: has(FieldGroup::BytesSent).then_some(t.tcpi_bytes_sent),
        bytes_retrans: has(FieldGroup::BytesSent).then_some(t.tcpi_bytes_retrans),
        snd_wnd_bytes: has(FieldGroup::SndWnd).then_some(t.tcpi_snd_wnd),
        rcv_wnd_bytes: has(FieldGroup::RcvWnd).then_some(t.tcpi_rcv_wnd),
        ecn_negotiated: t.tcpi_options & TCPI_OPT_ECN != 0,
        delivered_ce_segs: has(FieldGroup::Delivered).then_some(t.tcpi_delivered_ce),
    }
}

/// Reads `TCP_INFO` of a TCP socket; fields the kernel's structure is too short to hold
/// are `None`.
pub fn read(fd: impl AsFd) -> io::Result<TcpInfo> {
    let (raw, len) = sys::tcp_info(fd.as_fd())?;
    Ok(from_raw(&raw, len))
}

/// The same from the bytes of a sock_diag `INET_DIAG_INFO` attribute.
pub fn from_bytes(bytes: &[u8]) -> TcpInfo {
    let (raw, len) = sys::tcp_info_from_bytes(bytes);
    from_raw(&raw, len)
}

/// How many bytes of `struct tcp_info` this kernel returns: asked of a fresh TCP socket
/// (the kernel copies its whole structure whatever the socket's state), so a host's facts
/// say it before any connection.
pub fn kernel_bytes() -> io::Result<usize> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    Ok(sys::tcp_info(socket.as_fd())?.1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::loopback_pair;
    use std::io::{Read, Write};

    #[test]
    fn established_pair_after_data_has_rtt_and_counts_bytes() {
        let (mut client, mut server) = loopback_pair();
        let payload = vec![7u8; 100_000];
        client.write_all(&payload).unwrap();
        let mut got = vec![0u8; payload.len()];
        server.read_exact(&mut got).unwrap();
        // The ACK for the last bytes may still be on its way; give it a moment.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let info = read(&client).unwrap();
        assert_eq!(info.state, 1, "TCP_ESTABLISHED (include/net/tcp_states.h)");
        assert!(info.rtt_us > 0, "rtt_us {}", info.rtt_us);
        assert!(info.snd_mss_bytes > 0);
        assert!(info.snd_cwnd_segs > 0);
        assert_eq!(
            info.bytes_acked,
            Some(payload.len() as u64 + 1),
            "bytes_acked counts the SYN"
        );
        assert!(info.bytes_sent >= Some(payload.len() as u64));
        assert_eq!(info.notsent_bytes, Some(0));
        assert_eq!(info.inflight_bytes_est(), 0, "everything was acknowledged");
        let srv = read(&server).unwrap();
        let n = payload.len() as u64;
        let received = srv.bytes_received.unwrap();
        assert!((n..=n + 1).contains(&received), "{received}");
    }

    /// The lengths `struct tcp_info` has had (include/uapi/linux/tcp.h, by the release
    /// that last grew it), with the fields of TcpInfo each one first holds, and the offset
    /// and width of one of those fields. 232 is what 5.10 and 6.1 return, 248 6.12's
    /// (both read in the kernel matrix's guests).
    /// A length, its release, the fields it added, and where one of them sits (offset,
    /// width).
    type Release = (
        usize,
        &'static str,
        &'static [&'static str],
        Option<(usize, usize)>,
    );

    const HISTORY: &[Release] = &[
        (104, "2.6", &[], None),
        (120, "3.15", &["pacing_rate"], Some((104, 8))),
        (
            136,
            "4.1",
            &["bytes_acked", "bytes_received"],
            Some((128, 8)),
        ),
        (144, "4.2", &[], None),
        (160, "4.6", &["notsent_bytes", "min_rtt"], Some((144, 4))),
        (168, "4.9", &["delivery_rate"], Some((160, 8))),
        (
            192,
            "4.10",
            &["busy", "rwnd_limited", "sndbuf_limited"],
            Some((176, 8)),
        ),
        (200, "4.18", &["delivered_ce"], Some((196, 4))),
        (
            224,
            "4.19",
            &["bytes_sent", "bytes_retrans"],
            Some((200, 8)),
        ),
        (232, "5.4", &["snd_wnd"], Some((228, 4))),
        (240, "6.2", &["rcv_wnd"], Some((232, 4))),
        (248, "6.7", &[], None),
    ];

    /// Which of the later fields `info` holds, by the names in `HISTORY`.
    fn present(info: &TcpInfo) -> Vec<&'static str> {
        let fields = [
            ("pacing_rate", info.pacing_rate_bps.is_some()),
            ("bytes_acked", info.bytes_acked.is_some()),
            ("bytes_received", info.bytes_received.is_some()),
            ("notsent_bytes", info.notsent_bytes.is_some()),
            ("min_rtt", info.min_rtt_us.is_some()),
            ("delivery_rate", info.delivery_rate_bps.is_some()),
            ("busy", info.busy_time_us.is_some()),
            ("rwnd_limited", info.rwnd_limited_us.is_some()),
            ("sndbuf_limited", info.sndbuf_limited_us.is_some()),
            ("delivered_ce", info.delivered_ce_segs.is_some()),
            ("bytes_sent", info.bytes_sent.is_some()),
            ("bytes_retrans", info.bytes_retrans.is_some()),
            ("snd_wnd", info.snd_wnd_bytes.is_some()),
            ("rcv_wnd", info.rcv_wnd_bytes.is_some()),
        ];
        fields.into_iter().filter(|f| f.1).map(|f| f.0).collect()
    }

    #[test]
    fn each_historical_length_holds_exactly_the_fields_of_its_release() {
        // Every byte non-zero: a field the buffer holds is never mistaken for absent.
        let full: Vec<u8> = (0..size_of::<libc::tcp_info>())
            .map(|i| (i % 251 + 1) as u8)
            .collect();
        let mut expected = Vec::new();
        for &(len, release, added, sample) in HISTORY {
            expected.extend_from_slice(added);
            let info = from_bytes(&full[..len]);
            assert_eq!(present(&info), expected, "{len} bytes ({release})");
            // The fields of the first structure are read whatever the length.
            assert_eq!(
                info.total_retrans.to_le_bytes(),
                full[100..104],
                "{release}"
            );
            assert_eq!(
                info.rcv_space_bytes.to_le_bytes(),
                full[96..100],
                "{release}"
            );
            // The last field this release added carries the bytes at its offset.
            if let Some((at, width)) = sample {
                let raw = u64::from_le_bytes({
                    let mut w = [0u8; 8];
                    w[..width].copy_from_slice(&full[at..at + width]);
                    w
                });
                // Rates come in bytes/s and are kept in bits/s, saturating ("unlimited").
                let bits = raw.saturating_mul(8);
                let (read, raw) = match release {
                    "3.15" => (info.pacing_rate_bps, bits),
                    "4.9" => (info.delivery_rate_bps, bits),
                    _ => (
                        match release {
                            "4.1" => info.bytes_received,
                            "4.6" => info.notsent_bytes.map(u64::from),
                            "4.10" => info.rwnd_limited_us,
                            "4.18" => info.delivered_ce_segs.map(u64::from),
                            "4.19" => info.bytes_sent,
                            "5.4" => info.snd_wnd_bytes.map(u64::from),
                            _ => info.rcv_wnd_bytes.map(u64::from),
                        },
                        raw,
                    ),
                };
                assert_eq!(read, Some(raw), "{release}");
                // One byte short of that field: the release's fields are gone again.
                let short = present(&from_bytes(&full[..at + width - 1]));
                assert!(
                    added.iter().all(|f| !short.contains(f)),
                    "{release}, {} bytes: {short:?}",
                    at + width - 1
                );
            }
        }
        assert_eq!(present(&from_bytes(&full)).len(), expected.len());
    }

    #[test]
    fn each_groups_end_is_where_its_last_field_ends_in_the_kernels_struct() {
        use std::mem::{offset_of, size_of};
        let end = |offset: usize, width: usize| offset + width;
        let expected = [
            (
                FieldGroup::PacingRate,
                end(offset_of!(libc::tcp_info, tcpi_max_pacing_rate), 8),
            ),
            (
                FieldGroup::ByteCounts,
                end(offset_of!(libc::tcp_info, tcpi_bytes_received), 8),
            ),
            (
                FieldGroup::Notsent,
                end(offset_of!(libc::tcp_info, tcpi_min_rtt), 4),
            ),
            (
                FieldGroup::DeliveryRate,
                end(offset_of!(libc::tcp_info, tcpi_delivery_rate), 8),
            ),
            (
                FieldGroup::Chrono,
                end(offset_of!(libc::tcp_info, tcpi_sndbuf_limited), 8),
            ),
            (
                FieldGroup::Delivered,
                end(offset_of!(libc::tcp_info, tcpi_delivered_ce), 4),
            ),
            (
                FieldGroup::BytesSent,
                end(offset_of!(libc::tcp_info, tcpi_bytes_retrans), 8),
            ),
            (
                FieldGroup::SndWnd,
                end(offset_of!(libc::tcp_info, tcpi_snd_wnd), 4),
            ),
            (
                FieldGroup::RcvWnd,
                end(offset_of!(libc::tcp_info, tcpi_rcv_wnd), 4),
            ),
        ];
        for (group, end_bytes) in expected {
            assert_eq!(group.end_bytes(), end_bytes, "{group:?}");
        }
        assert!(size_of::<libc::tcp_info>() >= FieldGroup::RcvWnd.end_bytes());
    }

    #[test]
    fn the_groups_absent_from_a_length_are_those_it_cannot_hold() {
        assert_eq!(FieldGroup::absent_from(104), FieldGroup::ALL.to_vec());
        assert_eq!(
            FieldGroup::absent_from(232),
            vec![FieldGroup::RcvWnd],
            "5.10 and 6.1"
        );
        assert_eq!(
            FieldGroup::absent_from(224),
            vec![FieldGroup::SndWnd, FieldGroup::RcvWnd]
        );
        assert!(FieldGroup::absent_from(248).is_empty(), "6.12");
        assert!(FieldGroup::ALL
            .iter()
            .all(|g| g.fields()[0].starts_with("tcpi_")));
    }

    #[test]
    fn this_kernel_returns_at_least_what_6_2_did() {
        // The development kernel is 6.18: every field oscil reads is there.
        let len = kernel_bytes().unwrap();
        assert!(len >= 240, "{len}");
        assert!(FieldGroup::absent_from(len).is_empty());
        let (mut client, mut server) = loopback_pair();
        client.write_all(b"x").unwrap();
        server.read_exact(&mut [0u8]).unwrap();
        assert_eq!(present(&read(&client).unwrap()).len(), 14);
    }

    #[test]
    fn read_on_a_non_tcp_fd_is_an_error() {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(read(&udp).is_err());
    }
}

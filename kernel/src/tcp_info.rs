//! `TCP_INFO`: the kernel's per-connection TCP state, with units in the field names.

use std::io;
use std::os::fd::AsFd;

use serde::{Deserialize, Serialize};

use crate::sys;

/// A typed copy of `struct tcp_info`. Rates are converted to bits per second (the kernel
/// reports bytes per second); times are in microseconds as the kernel gives them.
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
    pub pacing_rate_bps: u64,
    pub max_pacing_rate_bps: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    /// Bytes in the write queue not yet sent: what `TCP_NOTSENT_LOWAT` bounds.
    pub notsent_bytes: u32,
    pub min_rtt_us: u32,
    pub delivery_rate_bps: u64,
    pub busy_time_us: u64,
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    /// `None` on kernels whose `TCP_INFO` ends before the field (it came in 5.19 / 6.2):
    /// a zero there would read as a closed window.
    pub snd_wnd_bytes: Option<u32>,
    pub rcv_wnd_bytes: Option<u32>,
}

/// Where a sender's time went since the connection began (the kernel's "chrono" counters,
/// in jiffies, shown in microseconds): busy with data to send, and of that, held back by
/// the peer's receive window or by its own send buffer. The rest of busy is the network
/// (cwnd, pacing); the time not busy, the application (nothing to send).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Chrono {
    pub busy_us: u64,
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
}

impl Chrono {
    pub fn of(info: &TcpInfo) -> Self {
        Chrono {
            busy_us: info.busy_time_us,
            rwnd_limited_us: info.rwnd_limited_us,
            sndbuf_limited_us: info.sndbuf_limited_us,
        }
    }

    /// The time spent between `before` and `self`.
    pub fn since(self, before: Chrono) -> Chrono {
        Chrono {
            busy_us: self.busy_us.saturating_sub(before.busy_us),
            rwnd_limited_us: self.rwnd_limited_us.saturating_sub(before.rwnd_limited_us),
            sndbuf_limited_us: self
                .sndbuf_limited_us
                .saturating_sub(before.sndbuf_limited_us),
        }
    }
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

impl From<&libc::tcp_info> for TcpInfo {
    fn from(t: &libc::tcp_info) -> Self {
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
            pacing_rate_bps: bytes_to_bits(t.tcpi_pacing_rate),
            max_pacing_rate_bps: bytes_to_bits(t.tcpi_max_pacing_rate),
            bytes_acked: t.tcpi_bytes_acked,
            bytes_received: t.tcpi_bytes_received,
            notsent_bytes: t.tcpi_notsent_bytes,
            min_rtt_us: t.tcpi_min_rtt,
            delivery_rate_bps: bytes_to_bits(t.tcpi_delivery_rate),
            busy_time_us: t.tcpi_busy_time,
            rwnd_limited_us: t.tcpi_rwnd_limited,
            sndbuf_limited_us: t.tcpi_sndbuf_limited,
            bytes_sent: t.tcpi_bytes_sent,
            bytes_retrans: t.tcpi_bytes_retrans,
            snd_wnd_bytes: Some(t.tcpi_snd_wnd),
            rcv_wnd_bytes: Some(t.tcpi_rcv_wnd),
        }
    }
}

/// Reads `TCP_INFO` of a TCP socket. The window fields are `None` where the kernel's
/// structure is too short to hold them; other fields a much older kernel lacks stay zero.
pub fn read(fd: impl AsFd) -> io::Result<TcpInfo> {
    let (raw, len) = sys::tcp_info(fd.as_fd())?;
    Ok(from_raw(&raw, len))
}

/// The same from the bytes of a sock_diag `INET_DIAG_INFO` attribute.
pub fn from_bytes(bytes: &[u8]) -> TcpInfo {
    let (raw, len) = sys::tcp_info_from_bytes(bytes);
    from_raw(&raw, len)
}

/// `raw` of which the kernel filled `len` bytes.
fn from_raw(raw: &libc::tcp_info, len: usize) -> TcpInfo {
    let mut info = TcpInfo::from(raw);
    let holds = |offset: usize| len >= offset + std::mem::size_of::<u32>();
    if !holds(std::mem::offset_of!(libc::tcp_info, tcpi_snd_wnd)) {
        info.snd_wnd_bytes = None;
    }
    if !holds(std::mem::offset_of!(libc::tcp_info, tcpi_rcv_wnd)) {
        info.rcv_wnd_bytes = None;
    }
    info
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
            payload.len() as u64 + 1,
            "bytes_acked counts the SYN"
        );
        assert!(info.bytes_sent >= payload.len() as u64);
        assert_eq!(info.notsent_bytes, 0);
        assert_eq!(info.inflight_bytes_est(), 0, "everything was acknowledged");
        let srv = read(&server).unwrap();
        let n = payload.len() as u64;
        assert!(
            (n..=n + 1).contains(&srv.bytes_received),
            "{}",
            srv.bytes_received
        );
    }

    #[test]
    fn read_on_a_non_tcp_fd_is_an_error() {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(read(&udp).is_err());
    }
}

//! `TCP_CC_INFO`: what a flow's congestion control says of its own state, which `TCP_INFO`
//! does not hold. Only BBR's is kept: it is the one whose model of the path (a bandwidth
//! estimate and a min RTT) explains what it sends; cubic and reno give nothing, and DCTCP
//! and Vegas are not built into the kernels oscil is tested on. sock_diag gives the same
//! bytes as `INET_DIAG_BBRINFO` in the lookup the samplers already make.

use std::io;
use std::os::fd::AsFd;

use crate::sys;

/// BBR's state as `struct tcp_bbr_info` (include/uapi/linux/inet_diag.h) gives it, with
/// units in the names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BbrInfo {
    /// The max-filtered delivery rate BBR paces by; `None` before its first estimate.
    pub bw_bps: Option<u64>,
    /// BBR's min-filtered RTT; `None` before any RTT sample (the kernel's `~0U`).
    pub min_rtt_us: Option<u32>,
    /// The gains, as ratios (the kernel gives them shifted left 8 bits).
    pub pacing_gain: f64,
    pub cwnd_gain: f64,
}

/// `bbr_bw_lo`, `bbr_bw_hi`, `bbr_min_rtt`, `bbr_pacing_gain`, `bbr_cwnd_gain`: five u32.
/// Out-of-tree BBR versions append fields after these, so longer is fine.
pub const TCP_BBR_INFO_BYTES: usize = 20;

/// The fixed point of BBR's gains (`BBR_SCALE`, 8 bits).
const GAIN_UNIT: f64 = 256.0;

/// BBR's state from the bytes of a `tcp_bbr_info`; `None` when too short to be one.
pub fn bbr_from_bytes(bytes: &[u8]) -> Option<BbrInfo> {
    let word = |i: usize| {
        bytes
            .get(4 * i..4 * i + 4)
            .map(|w| u32::from_ne_bytes(w.try_into().expect("4 bytes")))
    };
    let bw_bytes_per_s = u64::from(word(0)?) | u64::from(word(1)?) << 32;
    Some(BbrInfo {
        bw_bps: (bw_bytes_per_s > 0).then(|| bw_bytes_per_s.saturating_mul(8)),
        min_rtt_us: word(2).filter(|&us| us != u32::MAX),
        pacing_gain: f64::from(word(3)?) / GAIN_UNIT,
        cwnd_gain: f64::from(word(4)?) / GAIN_UNIT,
    })
}

/// BBR's state of a socket by `getsockopt` (the fallback where sock_diag is refused):
/// `None` when its congestion control is not BBR. `TCP_CC_INFO` does not say whose
/// structure it filled, so the name (`TCP_CONGESTION`) is asked first.
pub fn read_bbr(fd: impl AsFd) -> io::Result<Option<BbrInfo>> {
    let fd = fd.as_fd();
    let mut name = [0u8; 16];
    let len = sys::get_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, &mut name)?;
    if name[..len].split(|&b| b == 0).next() != Some(b"bbr") {
        return Ok(None);
    }
    let mut info = [0u8; TCP_BBR_INFO_BYTES];
    let len = sys::get_bytes(fd, libc::IPPROTO_TCP, libc::TCP_CC_INFO, &mut info)?;
    Ok(bbr_from_bytes(&info[..len]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::loopback_pair;
    use std::io::{Read, Write};

    fn set_congestion(s: &std::net::TcpStream, name: &str) {
        sys::set_bytes(
            s.as_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_bytes(),
        )
        .unwrap();
    }

    #[test]
    fn the_bytes_of_a_tcp_bbr_info_read_as_the_header_lays_them_out() {
        // 10 Gbit/s is 1.25e9 bytes/s: past 32 bits only in its high word at 2^32 and up.
        let words: [u32; 5] = [0x2a05_f200, 1, 20_000, 739, 512];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let bbr = bbr_from_bytes(&bytes).unwrap();
        assert_eq!(bbr.bw_bps, Some((0x2a05_f200u64 + (1 << 32)) * 8));
        assert_eq!(bbr.min_rtt_us, Some(20_000));
        // Startup's gain is 2/ln 2, 2.885, stored as 739/256.
        assert!((bbr.pacing_gain - 2.887).abs() < 1e-3, "{bbr:?}");
        assert_eq!(bbr.cwnd_gain, 2.0);
        assert!(bbr_from_bytes(&bytes[..19]).is_none());
        // No estimate yet: neither a bandwidth of 0 nor an RTT of ~0 is a measurement.
        let fresh: Vec<u8> = [0, 0, u32::MAX, 739, 739]
            .iter()
            .flat_map(|w: &u32| w.to_ne_bytes())
            .collect();
        let fresh = bbr_from_bytes(&fresh).unwrap();
        assert_eq!((fresh.bw_bps, fresh.min_rtt_us), (None, None));
    }

    #[test]
    fn a_bbr_socket_gives_its_state_and_a_cubic_one_none() {
        let (mut client, mut server) = loopback_pair();
        set_congestion(&client, "bbr");
        let payload = vec![5u8; 1 << 20];
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; 1 << 20];
            server.read_exact(&mut got).unwrap();
            server
        });
        client.write_all(&payload).unwrap();
        let server = reader.join().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let bbr = read_bbr(&client).unwrap().expect("bbr gives TCP_CC_INFO");
        assert!(bbr.bw_bps > Some(0), "{bbr:?}");
        // BBR's min RTT is TCP's (both the lowest sample BBR's window has kept).
        let tcp_min_rtt = crate::socket::tcp_info::read(&client).unwrap().min_rtt_us;
        assert!(bbr.min_rtt_us >= tcp_min_rtt, "{bbr:?} {tcp_min_rtt:?}");
        assert!(bbr.pacing_gain > 0.0 && bbr.cwnd_gain > 0.0, "{bbr:?}");
        set_congestion(&server, "cubic");
        assert_eq!(read_bbr(&server).unwrap(), None);
    }
}

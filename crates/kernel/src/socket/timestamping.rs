//! Kernel TX timestamps (`SO_TIMESTAMPING`) of single writes: when a write's last byte
//! left for the device and was acknowledged. The socket is set up once
//! to report software timestamps keyed by byte offset (`OPT_ID`) without payload
//! (`OPT_TSONLY`); a write asks for its timestamps with a control message, so only tagged
//! writes cost anything.

use std::io;
use std::os::fd::AsFd;
use std::time::Duration;

use crate::sys;

/// What the socket reports: software timestamps, keyed, without the payload.
const REPORT_FLAGS: u32 = libc::SOF_TIMESTAMPING_SOFTWARE
    | libc::SOF_TIMESTAMPING_OPT_ID
    | libc::SOF_TIMESTAMPING_OPT_TSONLY;

/// What a tagged write asks for: the two points sender.csv reports. Each timestamp wakes
/// the writer (EPOLLERR) to drain it, so the qdisc's (`TX_SCHED`), which nothing reported,
/// is not asked for: at 10 ms sampling that was 100 wake-ups a second per flow for nothing.
const TX_FLAGS: u32 = libc::SOF_TIMESTAMPING_TX_SOFTWARE | libc::SOF_TIMESTAMPING_TX_ACK;

/// Which point of a write's journey a timestamp marks (`SCM_TSTAMP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxPoint {
    /// Handed to the device driver: the end of the time in the send queue.
    Sent,
    /// Acknowledged by the peer.
    Acked,
}

/// One TX timestamp from the error queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxStamp {
    /// Offset of the write's last byte, counted from the first byte written after
    /// [`enable`] (modulo 2^32).
    pub key: u32,
    pub point: TxPoint,
    /// `CLOCK_REALTIME`, since the Unix epoch.
    pub at: Duration,
}

/// Why a socket cannot give TX timestamps.
#[derive(Debug, thiserror::Error)]
pub enum TimestampingError {
    #[error("the kernel refused SO_TIMESTAMPING (software, OPT_ID, OPT_TSONLY): {0}")]
    Refused(io::Error),
}

/// Sets the socket up to report TX timestamps of tagged writes. Call before the first
/// write: keys count bytes from here.
pub fn enable(socket: &impl AsFd) -> Result<(), TimestampingError> {
    sys::set_bytes(
        socket.as_fd(),
        libc::SOL_SOCKET,
        sys::SO_TIMESTAMPING,
        &REPORT_FLAGS.to_ne_bytes(),
    )
    .map_err(TimestampingError::Refused)
}

/// Whether a connected socket takes [`enable`]; leaves it as it was.
pub fn check(socket: &impl AsFd) -> Result<(), TimestampingError> {
    enable(socket)?;
    let off = 0u32.to_ne_bytes();
    sys::set_bytes(socket.as_fd(), libc::SOL_SOCKET, sys::SO_TIMESTAMPING, &off)
        .map_err(TimestampingError::Refused)
}

/// Writes `buf` once, asking for its TX timestamps; never blocks (`WouldBlock` when full).
pub fn write_tagged(socket: &impl AsFd, buf: &[u8]) -> io::Result<usize> {
    sys::send_with_tx_flags(socket.as_fd(), buf, TX_FLAGS)
}

/// Takes every TX timestamp waiting on the socket's error queue.
pub fn drain(socket: &impl AsFd) -> io::Result<Vec<TxStamp>> {
    let mut stamps = Vec::new();
    while let Some(entry) = sys::recv_errqueue(socket.as_fd())? {
        if let Some(stamp) = stamp_of(&entry) {
            stamps.push(stamp);
        }
    }
    Ok(stamps)
}

fn stamp_of(entry: &sys::ErrQueueEntry) -> Option<TxStamp> {
    if entry.origin != libc::SO_EE_ORIGIN_TIMESTAMPING {
        return None;
    }
    let point = match entry.info {
        0 => TxPoint::Sent,
        2 => TxPoint::Acked,
        _ => return None,
    };
    let ts = entry.software?;
    let at = Duration::new(
        u64::try_from(ts.tv_sec).ok()?,
        u32::try_from(ts.tv_nsec).ok()?,
    );
    // A zero timestamp means the kernel filled only a hardware slot.
    (at > Duration::ZERO).then_some(TxStamp {
        key: entry.data,
        point,
        at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::time::SystemTime;

    #[test]
    fn a_tagged_write_reports_sent_and_acked_keyed_by_its_last_byte() {
        let (client, mut server) = crate::test_util::loopback_pair();
        enable(&client).unwrap();
        let before = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap();
        // Untagged bytes first: the key must count them too.
        assert_eq!(
            sys::send_with_tx_flags(client.as_fd(), &[1; 100], 0).unwrap(),
            100
        );
        assert_eq!(write_tagged(&client, &[2; 1000]).unwrap(), 1000);
        let mut got = [0u8; 1100];
        server.read_exact(&mut got).unwrap();
        let mut stamps = Vec::new();
        for _ in 0..100 {
            stamps.extend(drain(&client).unwrap());
            if stamps.len() >= 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let points: Vec<TxPoint> = stamps.iter().map(|s| s.point).collect();
        assert_eq!(points, [TxPoint::Sent, TxPoint::Acked]);
        for s in &stamps {
            assert_eq!(s.key, 1099);
            assert!(s.at >= before, "{s:?} before {before:?}");
        }
        assert!(stamps[0].at <= stamps[1].at);
    }
}

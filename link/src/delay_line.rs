//! The packets of one direction between arrival and delivery, in one preallocated byte
//! ring: delivery order is arrival order (one FIFO serializer, one constant delay), so a
//! ring suffices and no packet needs an allocation of its own.

use std::collections::VecDeque;

use crate::wire::VNET_HDR_LEN;

/// Room reserved for one read: a vnet header and a 64 KB GSO packet.
pub const MAX_FRAME: usize = VNET_HDR_LEN + 65_536;

#[derive(Debug)]
struct Entry {
    start: usize,
    len: usize,
    deliver_ns: u64,
}

/// A FIFO of frames with their delivery times.
#[derive(Debug)]
pub struct DelayLine {
    buf: Vec<u8>,
    entries: VecDeque<Entry>,
    /// Where the next frame would go if it fits.
    tail: usize,
    /// Start of the slice handed out by the last `reserve`.
    reserved_at: usize,
}

impl DelayLine {
    /// A ring of `capacity_bytes` (at least two frames), every page written once here:
    /// faulting pages in on first use, at up to 1.25 GB/s, made deliveries late while the
    /// ring filled for the first time on long, fast links.
    pub fn new(capacity_bytes: usize) -> Self {
        let mut buf = vec![0u8; capacity_bytes.max(2 * MAX_FRAME)];
        for page in buf.chunks_mut(4096) {
            page[0] = std::hint::black_box(0);
        }
        DelayLine {
            buf,
            entries: VecDeque::new(),
            tail: 0,
            reserved_at: 0,
        }
    }

    /// Space for the next frame (`MAX_FRAME` bytes), or None while the ring is full.
    pub fn reserve(&mut self) -> Option<&mut [u8]> {
        let start = match self.entries.front() {
            None => 0,
            Some(front) if self.tail > front.start => {
                if self.buf.len() - self.tail >= MAX_FRAME {
                    self.tail
                } else if front.start >= MAX_FRAME {
                    0
                } else {
                    return None;
                }
            }
            Some(front) if front.start - self.tail >= MAX_FRAME => self.tail,
            Some(_) => return None,
        };
        self.reserved_at = start;
        Some(&mut self.buf[start..start + MAX_FRAME])
    }

    /// Keeps the first `len` bytes of the last reserved slice as a frame due at `deliver_ns`.
    /// `deliver_ns` must not be earlier than the previous frame's.
    pub fn commit(&mut self, len: usize, deliver_ns: u64) {
        let len = len.min(MAX_FRAME);
        self.entries.push_back(Entry {
            start: self.reserved_at,
            len,
            deliver_ns,
        });
        self.tail = self.reserved_at + len;
    }

    /// The oldest frame and its delivery time.
    pub fn front(&self) -> Option<(&[u8], u64)> {
        self.entries
            .front()
            .map(|e| (&self.buf[e.start..e.start + e.len], e.deliver_ns))
    }

    /// Drops the oldest frame.
    pub fn pop(&mut self) {
        self.entries.pop_front();
        if self.entries.is_empty() {
            self.tail = 0;
        }
    }

    /// Frames held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(line: &mut DelayLine, fill: u8, len: usize, at: u64) -> bool {
        match line.reserve() {
            Some(buf) => {
                buf[..len].fill(fill);
                line.commit(len, at);
                true
            }
            None => false,
        }
    }

    #[test]
    fn frames_come_out_in_order_with_their_bytes() {
        let mut line = DelayLine::new(1 << 20);
        for i in 0..100u8 {
            assert!(push(&mut line, i, 1000 + i as usize, i as u64));
        }
        for i in 0..100u8 {
            let (frame, at) = line.front().unwrap();
            assert_eq!((frame.len(), at), (1000 + i as usize, i as u64));
            assert!(frame.iter().all(|&b| b == i));
            line.pop();
        }
        assert!(line.is_empty());
    }

    #[test]
    fn full_ring_refuses_then_wraps_after_pops() {
        let mut line = DelayLine::new(3 * MAX_FRAME);
        let mut pushed = 0;
        while push(&mut line, 1, 40_000, pushed) {
            pushed += 1;
        }
        assert_eq!(line.len() as u64, pushed);
        assert!(
            pushed >= 4,
            "three frames of room hold at least four 40 KB frames"
        );
        // Free the two oldest: the next frame wraps to the start of the ring.
        line.pop();
        line.pop();
        assert!(push(&mut line, 9, 40_000, 100));
        // The wrapped frame is delivered last and intact.
        while line.len() > 1 {
            line.pop();
        }
        let (frame, at) = line.front().unwrap();
        assert_eq!(
            (frame.len(), at, frame[0], frame[39_999]),
            (40_000, 100, 9, 9)
        );
    }
}

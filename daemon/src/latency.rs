//! The writer's view of latency on one flow: TX timestamps of one tagged write per sampling
//! interval (how long that write waited in the send queue, and until it was acknowledged),
//! and the POLLOUT wake-ups (not-sent bytes when the kernel woke the writer). Called from
//! the data loop and the sampler, so the loop itself stays a loop.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use hdrhistogram::Histogram;
use oscil_kernel::tcp_info;
use oscil_kernel::timestamping::{self, TxPoint, TxStamp};
use oscil_protocol::control::WakeupFigures;
use std::os::fd::{AsFd, OwnedFd};

use tokio::io::unix::AsyncFd;
use tokio::net::TcpStream;

use crate::flow::Payload;

/// Tagged writes awaiting their timestamps; older ones are dropped (a reset socket never
/// reports them).
const MAX_PENDING_TAGS: usize = 64;

/// A tagged write: the key its timestamps carry and when it was written (`CLOCK_REALTIME`,
/// the clock of the kernel's software timestamps).
struct Tag {
    key: u32,
    written_at: Duration,
}

/// What the sampler learned of the tagged writes since its last tick, in microseconds.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct Completed {
    pub(crate) residence_us: Option<u64>,
    pub(crate) write_to_ack_us: Option<u64>,
}

/// Shared by a flow's writer and the sampler.
pub(crate) struct TxProbe {
    /// False when the kernel refused timestamping: no write is tagged.
    timestamps: bool,
    tag_due: AtomicBool,
    pending: Mutex<VecDeque<Tag>>,
    /// Timestamps the writer drained (only it reads the error queue, see [`Writer`]), not
    /// yet matched.
    drained: Mutex<Vec<TxStamp>>,
    wakeups: Mutex<Wakeups>,
}

/// Histograms of the writer's wake-ups.
struct Wakeups {
    notsent_bytes: Histogram<u64>,
    wake_to_write_us: Histogram<u64>,
}

fn realtime() -> Duration {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
}

/// Values up to 2^40 (bytes or microseconds) to 3 significant digits; larger ones are
/// counted at the top.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 1 << 40, 3).expect("valid bounds")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn micros(d: Duration) -> u64 {
    d.as_micros().try_into().unwrap_or(u64::MAX)
}

impl TxProbe {
    pub(crate) fn new(timestamps: bool) -> Self {
        TxProbe {
            timestamps,
            tag_due: AtomicBool::new(timestamps),
            pending: Mutex::new(VecDeque::new()),
            drained: Mutex::new(Vec::new()),
            wakeups: Mutex::new(Wakeups {
                notsent_bytes: histogram(),
                wake_to_write_us: histogram(),
            }),
        }
    }

    /// Takes the timestamps the writer drained, and asks for the next tagged write.
    pub(crate) fn collect(&self) -> Completed {
        let mut done = Completed::default();
        if !self.timestamps {
            return done;
        }
        let stamps = std::mem::take(&mut *lock(&self.drained));
        let mut pending = lock(&self.pending);
        for stamp in stamps {
            let Some(i) = pending.iter().position(|t| t.key == stamp.key) else {
                continue;
            };
            let waited = micros(stamp.at.saturating_sub(pending[i].written_at));
            match stamp.point {
                TxPoint::Sent => done.residence_us = Some(waited),
                TxPoint::Acked => {
                    done.write_to_ack_us = Some(waited);
                    pending.remove(i);
                }
            }
        }
        self.tag_due.store(true, Ordering::Relaxed);
        done
    }

    /// Timestamps the writer took off the error queue, for the sampler.
    fn keep_stamps(&self, stamps: Vec<TxStamp>) {
        let mut drained = lock(&self.drained);
        if drained.len() < MAX_PENDING_TAGS * 2 {
            drained.extend(stamps);
        }
    }

    fn record_wakeup(&self, notsent_bytes: u64, wake_to_write: Duration) {
        let mut w = lock(&self.wakeups);
        w.notsent_bytes.saturating_record(notsent_bytes);
        w.wake_to_write_us.saturating_record(micros(wake_to_write));
    }

    /// The wake-up figures so far.
    pub(crate) fn wakeup_figures(&self, flow: u32) -> WakeupFigures {
        let w = lock(&self.wakeups);
        let (n, t) = (&w.notsent_bytes, &w.wake_to_write_us);
        let some = |h: &Histogram<u64>, v: u64| (!h.is_empty()).then_some(v);
        WakeupFigures {
            flow,
            wakeups: n.len(),
            notsent_p50_bytes: some(n, n.value_at_quantile(0.5)),
            notsent_max_bytes: some(n, n.max()),
            wake_to_write_p50_us: some(t, t.value_at_quantile(0.5)),
            wake_to_write_max_us: some(t, t.max()),
        }
    }
}

/// One flow's writer: what it needs to remember between writes.
pub(crate) struct Writer<'a> {
    probe: &'a TxProbe,
    /// A second descriptor of the data socket, for waiting on: a queued TX timestamp raises
    /// EPOLLERR, which tokio keeps as "write closed" for good, so the writer drains the
    /// error queue and registers this descriptor afresh (`None` only while it does).
    fd: Option<AsyncFd<OwnedFd>>,
    /// Bytes written so far: the key of a tagged write's last byte follows from it.
    offset_bytes: u64,
    /// The last write found the socket full, so the next readiness is a POLLOUT wake-up.
    blocked: bool,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(probe: &'a TxProbe, stream: &TcpStream) -> io::Result<Self> {
        Ok(Writer {
            probe,
            fd: Some(crate::sys::register_writable(
                stream.as_fd().try_clone_to_owned()?,
            )?),
            offset_bytes: 0,
            blocked: false,
        })
    }

    /// Waits until the socket is writable and offers `payload` once (by `sendfile` when
    /// `zerocopy`, except the tagged write, which needs `sendmsg`): the bytes the kernel took
    /// (0 when it was full after all, or the wake-up brought only TX timestamps).
    pub(crate) async fn write(&mut self, payload: &Payload, zerocopy: bool) -> io::Result<usize> {
        let fd = self.fd.as_ref().expect("registered between writes");
        let mut guard = fd.writable().await?;
        if guard.ready().is_write_closed() {
            // Timestamps raise EPOLLERR; a real error or close (nothing queued) shows in
            // the write below.
            let stamps = timestamping::drain(guard.get_inner()).unwrap_or_default();
            if !stamps.is_empty() {
                drop(guard);
                self.probe.keep_stamps(stamps);
                return self.reregister().map(|()| 0);
            }
        }
        let socket = guard.get_inner();
        let woke = self.blocked.then(Instant::now);
        let notsent_bytes = woke.and_then(|_| tcp_info::read(socket).ok()?.notsent_bytes.into());
        let tagged = self.probe.tag_due.swap(false, Ordering::Relaxed);
        let written_at = realtime();
        let result = if tagged {
            timestamping::write_tagged(socket, payload.bytes())
        } else {
            payload.offer(socket, zerocopy)
        };
        match result {
            Ok(n) => {
                if tagged && n > 0 {
                    self.remember_tag(n, written_at);
                }
                if let (Some(woke), Some(notsent)) = (woke, notsent_bytes) {
                    self.probe.record_wakeup(u64::from(notsent), woke.elapsed());
                }
                self.offset_bytes += n as u64;
                self.blocked = false;
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.probe.tag_due.fetch_or(tagged, Ordering::Relaxed);
                self.blocked = true;
                guard.clear_ready();
                Ok(0)
            }
            Err(e) => Err(e),
        }
    }

    /// Registers the descriptor afresh: tokio would otherwise keep the EPOLLERR of the
    /// timestamps just drained as "write closed" and wake the writer in a loop.
    fn reregister(&mut self) -> io::Result<()> {
        let fd = self.fd.take().expect("registered").into_inner();
        self.fd = Some(crate::sys::register_writable(fd)?);
        Ok(())
    }

    fn remember_tag(&self, n: usize, written_at: Duration) {
        let key = (self.offset_bytes + n as u64 - 1) as u32;
        let mut pending = lock(&self.probe.pending);
        if pending.len() == MAX_PENDING_TAGS {
            pending.pop_front();
        }
        pending.push_back(Tag { key, written_at });
    }
}

//! The writer's view of latency on one flow: TX timestamps of one tagged write per sampling
//! interval (how long that write waited in the send queue, and until it was acknowledged),
//! the POLLOUT wake-ups (not-sent bytes when the kernel woke the writer), and the markers
//! (`oscil_model::files::markers`). Called from the data loop and the sampler, so the loop
//! itself stays a loop.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use oscil_kernel::socket::tcp_info;
use oscil_kernel::socket::timestamping::{self, TxPoint, TxStamp};
use oscil_model::files::markers::{Marker, MarkerSchedule};
use oscil_model::files::rows::WakeupFigures;
use oscil_model::run::clock::realtime_unix_ns;
use oscil_model::socket::WriteMode;
use std::os::fd::{AsFd, OwnedFd};

use tokio::io::unix::AsyncFd;
use tokio::net::TcpStream;
use tokio::sync::mpsc::UnboundedSender;

use crate::flow::payload::Payload;

/// Tagged writes awaiting their timestamps; older ones are dropped (a reset socket never
/// reports them). Enough for a write to wait 100 s in the queue at one tag per 100 ms
/// interval and still give `pending_write_age_us` from its own write time: 64 held 6.4 s,
/// shorter than the queue of a default-lowat run at 5% of 1 Gbit/s.
const MAX_PENDING_TAGS: usize = 1024;

/// A tagged write: the key its timestamps carry and when it was written (`CLOCK_REALTIME`,
/// the clock of the kernel's software timestamps).
struct Tag {
    key: u32,
    written_at: Duration,
    /// Its "sent" timestamp arrived: it left the send queue.
    sent: bool,
}

/// What the sampler learned of the tagged writes since its last tick, in microseconds.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct Completed {
    pub(crate) residence_us: Option<u64>,
    pub(crate) write_to_ack_us: Option<u64>,
    /// The age of the oldest tagged write still in the send queue: a lower bound of its
    /// residence, so a queue that holds writes longer than the run still shows.
    pub(crate) pending_write_age_us: Option<u64>,
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

/// The writer's wake-ups: the current interval's, which the writer records and the sampler
/// reports and folds into the session's, so `sender.csv` and `run.json` come from one
/// record.
struct Wakeups {
    interval: Tally,
    session: Tally,
}

/// Wake-ups recorded: histograms for the medians and the exact largest values (a
/// histogram's max is only its bucket's top).
struct Tally {
    notsent_bytes: Histogram<u64>,
    wake_to_write_us: Histogram<u64>,
    notsent_max_bytes: u64,
    wake_to_write_max_us: u64,
}

impl Tally {
    fn new() -> Self {
        Tally {
            notsent_bytes: histogram(),
            wake_to_write_us: histogram(),
            notsent_max_bytes: 0,
            wake_to_write_max_us: 0,
        }
    }

    fn record(&mut self, notsent_bytes: u64, wake_to_write_us: u64) {
        self.notsent_bytes.saturating_record(notsent_bytes);
        self.wake_to_write_us.saturating_record(wake_to_write_us);
        self.notsent_max_bytes = self.notsent_max_bytes.max(notsent_bytes);
        self.wake_to_write_max_us = self.wake_to_write_max_us.max(wake_to_write_us);
    }

    /// The medians are their buckets' tops, never above the exact largest value.
    fn figures(&self, flow: u32) -> WakeupFigures {
        let (n, t) = (&self.notsent_bytes, &self.wake_to_write_us);
        let some = |v: u64| (!n.is_empty()).then_some(v);
        let median = |h: &Histogram<u64>, max: u64| some(h.value_at_quantile(0.5).min(max));
        WakeupFigures {
            flow,
            wakeups: n.len(),
            notsent_p50_bytes: median(n, self.notsent_max_bytes),
            notsent_max_bytes: some(self.notsent_max_bytes),
            wake_to_write_p50_us: median(t, self.wake_to_write_max_us),
            wake_to_write_max_us: some(self.wake_to_write_max_us),
        }
    }

    /// Adds `other`'s wake-ups to these and empties it.
    fn absorb(&mut self, other: &mut Tally) {
        if other.notsent_bytes.is_empty() {
            return;
        }
        for (ours, theirs) in [
            (&mut self.notsent_bytes, &mut other.notsent_bytes),
            (&mut self.wake_to_write_us, &mut other.wake_to_write_us),
        ] {
            ours.add(&*theirs).expect("histograms of one shape");
            theirs.reset();
        }
        self.notsent_max_bytes = self.notsent_max_bytes.max(other.notsent_max_bytes);
        self.wake_to_write_max_us = self.wake_to_write_max_us.max(other.wake_to_write_max_us);
        other.notsent_max_bytes = 0;
        other.wake_to_write_max_us = 0;
    }
}

/// Values up to 2^40 (bytes or microseconds) to 2 significant digits (medians to 1%);
/// larger ones are counted at the top. Two digits, not three: the sampler empties every
/// flow's interval histograms on each tick, and 4,480 counters take ~2 us to add and
/// clear where 3 digits' 32,768 take ~11 us.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 1 << 40, 2).expect("valid bounds")
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
                interval: Tally::new(),
                session: Tally::new(),
            }),
        }
    }

    /// Takes the timestamps the writer drained, and asks for the next tagged write;
    /// `now` is `CLOCK_REALTIME`, the clock of `Tag::written_at`.
    pub(crate) fn collect(&self, now: Duration) -> Completed {
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
                TxPoint::Sent => {
                    done.residence_us = Some(waited);
                    pending[i].sent = true;
                }
                TxPoint::Acked => {
                    done.write_to_ack_us = Some(waited);
                    pending.remove(i);
                }
            }
        }
        done.pending_write_age_us = pending
            .iter()
            .find(|t| !t.sent)
            .map(|t| micros(now.saturating_sub(t.written_at)));
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
        lock(&self.wakeups)
            .interval
            .record(notsent_bytes, micros(wake_to_write));
    }

    /// The wake-ups since the last call (for the sampler's row), which then count towards
    /// the session's.
    pub(crate) fn take_interval_wakeups(&self, flow: u32) -> WakeupFigures {
        let mut w = lock(&self.wakeups);
        let figures = w.interval.figures(flow);
        let Wakeups { interval, session } = &mut *w;
        session.absorb(interval);
        figures
    }

    /// The wake-ups of the whole session: every interval's, including any since the last
    /// sample.
    pub(crate) fn session_wakeups(&self, flow: u32) -> WakeupFigures {
        let mut w = lock(&self.wakeups);
        let Wakeups { interval, session } = &mut *w;
        session.absorb(interval);
        session.figures(flow)
    }
}

/// Where a flow's writer sets its markers and tells the session about them.
pub(crate) struct MarkerTap {
    pub(crate) flow: u32,
    pub(crate) schedule: MarkerSchedule,
    pub(crate) tx: UnboundedSender<Marker>,
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
    /// The next readiness is a POLLOUT wake-up: the last write found the socket full, or
    /// (per wake-up) `poll` was asked after it.
    blocked: bool,
    mode: WriteMode,
    markers: Option<MarkerTap>,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(
        probe: &'a TxProbe,
        stream: &TcpStream,
        mode: WriteMode,
        markers: Option<MarkerTap>,
    ) -> io::Result<Self> {
        Ok(Writer {
            probe,
            fd: Some(crate::sys::register_writable(
                stream.as_fd().try_clone_to_owned()?,
            )?),
            offset_bytes: 0,
            blocked: false,
            mode,
            markers,
        })
    }

    /// Waits until the socket is writable and offers `payload` once (by `sendfile` when
    /// `zerocopy`, except the tagged write, which needs `sendmsg`): the bytes the kernel took
    /// (0 when it was full after all, or the wake-up brought only TX timestamps). Until
    /// `EAGAIN`, the next call writes at once unless this one found the socket full; per
    /// wake-up, only when `poll` now says writable, else at the next POLLOUT.
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
        let notsent_bytes = woke.and_then(|_| tcp_info::read(socket).ok()?.notsent_bytes);
        let tagged = self.probe.tag_due.swap(false, Ordering::Relaxed);
        let written_at = Duration::from_nanos(realtime_unix_ns());
        let result = if tagged {
            timestamping::write_tagged(socket, payload.bytes())
        } else {
            payload.offer(socket, zerocopy)
        };
        match result {
            Ok(n) => {
                let per_wake = self.mode == WriteMode::PerWake;
                if per_wake && !oscil_kernel::polls_writable(socket)? {
                    guard.clear_ready();
                }
                drop(guard);
                if tagged && n > 0 {
                    self.remember_tag(n, written_at);
                }
                if let (Some(woke), Some(notsent)) = (woke, notsent_bytes) {
                    self.probe.record_wakeup(u64::from(notsent), woke.elapsed());
                }
                if n > 0 {
                    self.mark(written_at);
                }
                self.offset_bytes += n as u64;
                self.blocked = per_wake;
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

    /// Sets the marker due, if one is, on the write that began at `written_at` and has not
    /// yet been counted: one comparison on every other write.
    fn mark(&mut self, written_at: Duration) {
        let Some(tap) = &mut self.markers else { return };
        let sent_unix_ns = written_at.as_nanos().try_into().unwrap_or(u64::MAX);
        if let Some(k) = tap.schedule.due(sent_unix_ns) {
            // The session is gone when nobody receives: its end stops this writer too.
            let _ = tap.tx.send(Marker {
                flow: tap.flow,
                k,
                offset_bytes: self.offset_bytes,
                sent_unix_ns,
            });
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
        pending.push_back(Tag {
            key,
            written_at,
            sent: false,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_reports_its_own_wakeups_and_the_session_all_of_them() {
        let probe = TxProbe::new(false);
        for notsent in [32_760, 30_000, 100] {
            probe.record_wakeup(notsent, Duration::from_micros(notsent / 10));
        }
        let first = probe.take_interval_wakeups(3);
        assert_eq!(first.flow, 3);
        assert_eq!(first.wakeups, 3);
        // The median to 1%, the largest exactly (a histogram's max is its bucket's top).
        let p50 = first.notsent_p50_bytes.unwrap();
        assert!(p50.abs_diff(30_000) <= 300, "{first:?}");
        assert_eq!(first.notsent_max_bytes, Some(32_760));
        assert_eq!(first.wake_to_write_max_us, Some(3276));

        // One wake-up: its median is itself, not its bucket's top.
        probe.record_wakeup(15_796, Duration::from_micros(1001));
        let one = probe.take_interval_wakeups(3);
        assert_eq!(one.notsent_p50_bytes, Some(15_796));
        assert_eq!(one.wake_to_write_p50_us, Some(1001));

        let quiet = probe.take_interval_wakeups(3);
        assert_eq!(quiet.wakeups, 0);
        assert_eq!(quiet.notsent_max_bytes, None);
        assert_eq!(quiet.wake_to_write_p50_us, None);

        probe.record_wakeup(40_000, Duration::from_millis(5));
        let session = probe.session_wakeups(3);
        assert_eq!(session.wakeups, 5);
        assert_eq!(session.notsent_max_bytes, Some(40_000));
        assert_eq!(session.wake_to_write_max_us, Some(5000));
        // What the session already counted is no interval's any more.
        assert_eq!(probe.take_interval_wakeups(3).wakeups, 0);
    }

    #[test]
    fn a_write_still_queued_reports_its_age_until_its_sent_timestamp_comes() {
        let probe = TxProbe::new(true);
        let s = Duration::from_secs;
        for (key, written) in [(99, 10), (199, 11)] {
            lock(&probe.pending).push_back(Tag {
                key,
                written_at: s(written),
                sent: false,
            });
        }
        let at = |now| probe.collect(s(now));
        assert_eq!(at(13).pending_write_age_us, Some(3_000_000), "the oldest");
        let stamp = |key, point, at| TxStamp {
            key,
            point,
            at: s(at),
        };
        probe.keep_stamps(vec![stamp(99, TxPoint::Sent, 14)]);
        let first_left = at(15);
        assert_eq!(first_left.residence_us, Some(4_000_000));
        assert_eq!(
            first_left.pending_write_age_us,
            Some(4_000_000),
            "the second"
        );
        probe.keep_stamps(vec![
            stamp(199, TxPoint::Sent, 16),
            stamp(99, TxPoint::Acked, 16),
        ]);
        let none_left = at(17);
        assert_eq!(none_left.pending_write_age_us, None);
        assert_eq!(none_left.write_to_ack_us, Some(6_000_000));
    }
}

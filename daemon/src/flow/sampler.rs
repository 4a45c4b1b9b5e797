//! The daemon's side of every flow, sampled on the shared `Ticker` through sock_diag: exact
//! lookups of all the session's sockets in one netlink round trip instead of two
//! `getsockopt` calls per socket, and the namespace's own TCP memory from a dump.

use std::ops::{ControlFlow, Range};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use oscil_kernel::host::load::HostLoadSince;
use oscil_kernel::host::netstat::QueueEventsSince;
use oscil_kernel::host::schedstat::RunQueueWaits;
use oscil_kernel::rows::{host_sample, sender_sample};
use oscil_kernel::socket::diag::{Probe, Watched};
use oscil_kernel::socket::tcp_info::{self, TcpInfo};
use oscil_kernel::ticker::{covered_s, intervals_by, Ticker};
use oscil_model::files::rows::{SenderSample, Side};
use oscil_model::run::clock::realtime_unix_ns;
use oscil_model::socket::{Chrono, Source};
use oscil_protocol::control::DaemonMessage;
use tokio::sync::{mpsc, oneshot};

use crate::flow::Flow;
use crate::shared::ProcFiles;

/// Why the sampler stopped sampling; the session ends with it as the reason.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SamplerError {
    #[error("cannot identify a data socket (cookie, addresses): {0}")]
    Identify(std::io::Error),
    #[error("cannot open a sock_diag socket: {0}")]
    Open(std::io::Error),
    #[error("sock_diag: {0}")]
    Snapshot(std::io::Error),
    /// `/proc/net/sockstat` could not be read.
    #[error(transparent)]
    Sockstat(#[from] oscil_kernel::ReadError),
    #[error("cannot start the sampler thread: {0}")]
    Thread(std::io::Error),
}

/// What the sampler thread needs for a session.
struct Sampler {
    flows: Vec<Flow>,
    probe: Probe,
    proc: Arc<ProcFiles>,
    start: Instant,
    interval: Duration,
    /// The namespace's receive-queue events since the last sample.
    queue: QueueEventsSince,
    /// Each flow's cumulative counters at the last sample.
    last: Vec<FlowCounters>,
    /// The process's threads' waits for a CPU at the last sample: a starved writer.
    waits: RunQueueWaits,
    /// The host's own load: the egress qdisc, softnet, the CPUs.
    load: HostLoadSince,
}

/// A flow's cumulative `tcp_info` counters, kept between samples to give each row its
/// interval's share; `None` where the kernel lacks them.
#[derive(Debug, Clone, Copy, Default)]
struct FlowCounters {
    /// `tcpi_bytes_acked` counts the SYN; one byte in a first row is not worth a rule.
    bytes_acked: Option<u64>,
    chrono: Option<Chrono>,
    /// `tcpi_delivered_ce`, kept only where ECN was negotiated: without it no segment can
    /// be marked, and its column is empty rather than 0.
    delivered_ce_segs: Option<u32>,
}

/// What a flow's counters grew by between two samples.
struct Growth {
    spent: Option<Chrono>,
    acked_bytes: Option<u64>,
    delivered_ce_segs: Option<u64>,
}

impl FlowCounters {
    fn of(info: &TcpInfo) -> Self {
        FlowCounters {
            bytes_acked: info.bytes_acked,
            chrono: tcp_info::chrono(info),
            delivered_ce_segs: info.delivered_ce_segs.filter(|_| info.ecn_negotiated),
        }
    }

    /// Time spent, bytes acknowledged and segments marked between `before` and `self` (a
    /// first sample counts from zero).
    fn since(self, before: FlowCounters) -> Growth {
        let grown = |now: u64, then: Option<u64>| now.saturating_sub(then.unwrap_or(0));
        Growth {
            spent: self
                .chrono
                .map(|now| now.since(before.chrono.unwrap_or_default())),
            acked_bytes: self.bytes_acked.map(|now| grown(now, before.bytes_acked)),
            delivered_ce_segs: self
                .delivered_ce_segs
                .map(|now| grown(now.into(), before.delivered_ce_segs.map(u64::from))),
        }
    }
}

impl Sampler {
    fn open(
        flows: Vec<Flow>,
        proc: Arc<ProcFiles>,
        start: Instant,
        interval: Duration,
    ) -> Result<Self, SamplerError> {
        let watched =
            Watched::new(flows.iter().map(|f| &*f.stream)).map_err(SamplerError::Identify)?;
        let probe = Probe::new(watched).map_err(SamplerError::Open)?;
        let peer = flows.first().and_then(|f| f.stream.peer_addr().ok());
        let (load, gaps) = HostLoadSince::open(peer.map(|a| a.ip()), Instant::now());
        // The reader names the columns left empty (its rows carry none); the why is here.
        for (source, why) in gaps {
            eprintln!(
                "oscil-daemon: cannot read the {} ({why}): host.csv leaves its columns empty",
                source.what()
            );
        }
        Ok(Sampler {
            load,
            queue: QueueEventsSince::new(proc.tcpext().ok().as_ref()),
            last: vec![FlowCounters::default(); flows.len()],
            waits: RunQueueWaits::new(),
            flows,
            probe,
            proc,
            start,
            interval,
        })
    }

    /// Every flow the kernel still lists and the host, at `now`, covering `intervals`.
    fn sample(
        &mut self,
        now: Instant,
        intervals: Range<u64>,
    ) -> Result<DaemonMessage, SamplerError> {
        let t_s = now.duration_since(self.start).as_secs_f64();
        let span_s = covered_s(t_s, &intervals, self.interval.as_secs_f64());
        let fds = self.flows.iter().map(|f| &*f.stream);
        let snapshot = self
            .probe
            .snapshot(now, fds)
            .map_err(SamplerError::Snapshot)?;
        let sockstat = self
            .proc
            .sockstat
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .read()?;
        // A socket the kernel no longer has was closed: its writer reports why.
        let now_unix = Duration::from_nanos(realtime_unix_ns());
        let flows = self
            .flows
            .iter()
            .zip(snapshot.sockets)
            .zip(self.last.iter_mut())
            .filter_map(|((flow, socket), last)| {
                let socket = socket.as_ref()?;
                let now = FlowCounters::of(&socket.info);
                let grown = now.since(std::mem::replace(last, now));
                let bytes = flow.written.swap(0, Ordering::Relaxed);
                // Also asks the writer for the next interval's tagged write.
                let completed = flow.probe.collect(now_unix);
                let wakeups = flow.probe.take_interval_wakeups(flow.index);
                Some(
                    SenderSample {
                        residence_us: completed.residence_us,
                        write_to_ack_us: completed.write_to_ack_us,
                        pending_write_age_us: completed.pending_write_age_us,
                        acked_bytes: grown.acked_bytes,
                        delivered_ce_segs: grown.delivered_ce_segs,
                        group: Some(flow.group),
                        ..sender_sample(t_s, flow.index, (bytes, span_s), socket)
                    }
                    .with_wakeups(&wakeups)
                    .with_chrono(grown.spent),
                )
            })
            .collect();
        Ok(DaemonMessage::Samples {
            host: host_sample(
                t_s,
                Side::Sender,
                &sockstat,
                self.queue.next(self.proc.tcpext().ok().as_ref()),
                snapshot.namespace_charged_bytes,
                self.waits.since_last(),
            )
            .with_load(&self.load.next(now)),
            flows,
        })
    }
}

/// How long the session task may fall behind the sampler before the sampler waits for it
/// (and merges intervals): with 1,000 flows the task that writes samples to the reader
/// shares the runtime with 1,000 busy writers and is sometimes not polled for a second.
const QUEUE_S: f64 = 3.0;

/// How far ahead of the daemon's clock the reader's may be when it stops: its start message
/// took that long to arrive.
const CLOCK_GAP: Duration = Duration::from_secs(1);

/// How often the sampler hands its samples to the session task, which writes them to the
/// reader in one write: at 10 ms, a write per tick cost a wake-up of the session task, a
/// system call and a wake-up of the reader's control task a hundred times a second.
const SEND_EVERY: Duration = Duration::from_millis(100);

/// Samples sent to the session task at once: as many ticks as `SEND_EVERY` holds, at least 1.
fn batch_len(interval: Duration) -> usize {
    (SEND_EVERY.as_nanos() / interval.as_nanos().max(1)).max(1) as usize
}

/// Batches the channel holds: `QUEUE_S` of them, at least 4.
fn queue_len(interval: Duration) -> usize {
    let batch_s = interval.as_secs_f64() * batch_len(interval) as f64;
    ((QUEUE_S / batch_s).ceil() as usize).clamp(4, 4096)
}

/// What the sampler thread hands the session task: samples to send in one write, or why
/// sampling stopped.
pub(crate) type Batch = Result<Vec<DaemonMessage>, SamplerError>;

/// Samples waiting to go to the session task, a batch at a time.
struct Outbox {
    tx: mpsc::Sender<Batch>,
    batch: Vec<DaemonMessage>,
    per_batch: usize,
}

impl Outbox {
    fn new(tx: mpsc::Sender<Batch>, per_batch: usize) -> Self {
        Outbox {
            tx,
            batch: Vec::with_capacity(per_batch),
            per_batch,
        }
    }

    /// Adds a sample and sends the batch once full; on an error sends what the batch holds,
    /// then the error. Breaks when sampling is over: an error, or the session gone.
    fn push(&mut self, sampled: Result<DaemonMessage, SamplerError>) -> ControlFlow<()> {
        match sampled {
            Ok(message) => self.batch.push(message),
            Err(e) => {
                self.flush();
                let _ = self.tx.blocking_send(Err(e));
                return ControlFlow::Break(());
            }
        }
        if self.batch.len() < self.per_batch {
            return ControlFlow::Continue(());
        }
        let full = std::mem::replace(&mut self.batch, Vec::with_capacity(self.per_batch));
        match self.tx.blocking_send(Ok(full)) {
            Ok(()) => ControlFlow::Continue(()),
            Err(_) => ControlFlow::Break(()),
        }
    }

    /// Sends what the batch holds, if anything.
    fn flush(&mut self) {
        if !self.batch.is_empty() {
            let _ = self.tx.blocking_send(Ok(std::mem::take(&mut self.batch)));
        }
    }
}

/// Samples on its own OS thread on the shared `Ticker` until the returned sender sends or
/// is dropped, then takes a last sample: up to the intervals the reader said it sampled
/// (sent `Some(n)`), or of the partial interval. A tick that wakes late covers every
/// interval it slept through in one sample, and its rows' `span_s` say so; a control
/// connection slower than that for `QUEUE_S` holds the thread back rather than piling
/// samples up in memory.
pub(crate) fn spawn(
    flows: Vec<Flow>,
    proc: Arc<ProcFiles>,
    start: Instant,
    interval: Duration,
) -> Spawned {
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<Option<u64>>();
    let (tx, rx) = mpsc::channel(queue_len(interval));
    let (source_tx, source) = oneshot::channel();
    let report = tx.clone();
    let spawned = std::thread::Builder::new()
        .name("sampler".into())
        .spawn(move || {
            // Without the privilege it runs at the default priority; lateness shows in run.json.
            let _ = oscil_kernel::prioritise_this_thread();
            let mut sampler = match Sampler::open(flows, proc, start, interval) {
                Ok(sampler) => sampler,
                Err(e) => return drop(tx.blocking_send(Err(e))),
            };
            let _ = source_tx.send(sampler.probe.source().clone());
            let mut outbox = Outbox::new(tx, batch_len(interval));
            let mut ticker = Ticker::new(start, interval);
            let end = loop {
                match ticker.wait(&stop_rx) {
                    ControlFlow::Continue((intervals, now)) => {
                        if outbox.push(sampler.sample(now, intervals)).is_break() {
                            return;
                        }
                    }
                    ControlFlow::Break(end) => break end.flatten(),
                }
            };
            // The reader's clock runs ahead of this one by the time its start message took;
            // a count further ahead than `CLOCK_GAP` is not believed (it would hold the thread).
            let most = intervals_by(start.elapsed() + CLOCK_GAP, interval);
            let end = end.map(|n| n.min(most));
            while let Some((intervals, now)) = ticker.finish(end) {
                if outbox.push(sampler.sample(now, intervals)).is_break() {
                    return;
                }
            }
            outbox.flush();
        });
    if let Err(e) = spawned {
        let _ = report.try_send(Err(SamplerError::Thread(e)));
    }
    Spawned {
        stop: stop_tx,
        samples: rx,
        source,
    }
}

/// A running sampler: where to tell it to stop (with the intervals the reader sampled),
/// its samples, and how it reads the sockets once it has opened them.
pub(crate) struct Spawned {
    pub stop: std::sync::mpsc::Sender<Option<u64>>,
    pub samples: mpsc::Receiver<Batch>,
    pub source: oneshot::Receiver<Source>,
}

//! The daemon's side of every flow, sampled on the shared `Ticker` through sock_diag: exact
//! lookups of all the session's sockets in one netlink round trip instead of two
//! `getsockopt` calls per socket, and the namespace's own TCP memory from a dump.

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use oscil_kernel::diag::{Probe, Watched};
use oscil_protocol::control::DaemonMessage;
use oscil_protocol::ticker::{covered_s, Ticker};
use oscil_protocol::{HostSample, SenderSample, Side};
use tokio::sync::mpsc;

use crate::flow::Flow;
use crate::ProcFiles;

/// What the sampler thread needs for a session.
struct Sampler {
    flows: Vec<Flow>,
    probe: Probe,
    proc: Arc<ProcFiles>,
    start: Instant,
    interval: Duration,
}

impl Sampler {
    fn open(
        flows: Vec<Flow>,
        proc: Arc<ProcFiles>,
        start: Instant,
        interval: Duration,
    ) -> Result<Self, String> {
        let watched = Watched::new(flows.iter().map(|f| &*f.stream))
            .map_err(|e| format!("cannot identify a data socket (cookie, addresses): {e}"))?;
        let probe =
            Probe::new(watched).map_err(|e| format!("cannot open a sock_diag socket: {e}"))?;
        Ok(Sampler {
            flows,
            probe,
            proc,
            start,
            interval,
        })
    }

    /// Every flow the kernel still lists and the host, at `now`, covering `intervals`.
    fn sample(&mut self, now: Instant, intervals: Range<u64>) -> Result<DaemonMessage, String> {
        let t_s = now.duration_since(self.start).as_secs_f64();
        let span_s = covered_s(t_s, &intervals, self.interval.as_secs_f64());
        let snapshot = self
            .probe
            .snapshot(now)
            .map_err(|e| format!("sock_diag: {e}"))?;
        let sockstat = self
            .proc
            .sockstat
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .read()
            .map_err(|e| e.to_string())?;
        // A socket the kernel no longer has was closed: its writer reports why.
        let flows = self
            .flows
            .iter()
            .zip(&snapshot.sockets)
            .filter_map(|(flow, socket)| {
                let (info, mem) = socket.as_ref()?;
                let bytes = flow.written.swap(0, Ordering::Relaxed);
                // Also asks the writer for the next interval's tagged write.
                let completed = flow.probe.collect();
                let wakeups = flow.probe.take_interval_wakeups(flow.index);
                Some(
                    SenderSample {
                        residence_us: completed.residence_us,
                        write_to_ack_us: completed.write_to_ack_us,
                        ..SenderSample::from_kernel(t_s, flow.index, (bytes, span_s), info, mem)
                    }
                    .with_wakeups(&wakeups),
                )
            })
            .collect();
        Ok(DaemonMessage::Samples {
            host: HostSample::from_kernel(
                t_s,
                Side::Sender,
                &sockstat,
                snapshot.namespace_charged_bytes,
            ),
            flows,
        })
    }
}

/// How long the session task may fall behind the sampler before the sampler waits for it
/// (and merges intervals): with 1,000 flows the task that writes samples to the reader
/// shares the runtime with 1,000 busy writers and is sometimes not polled for a second.
const QUEUE_S: f64 = 3.0;

/// Samples the channel holds: `QUEUE_S` of them, at least 4.
fn queue_len(interval: Duration) -> usize {
    ((QUEUE_S / interval.as_secs_f64()).ceil() as usize).clamp(4, 4096)
}

/// Samples on its own OS thread on the shared `Ticker` until the returned sender sends or
/// is dropped, then samples the partial interval once more. A tick that wakes late covers
/// every interval it slept through in one sample, and its rows' `span_s` say so; a control
/// connection slower than that for `QUEUE_S` holds the thread back rather than piling
/// samples up in memory.
pub(crate) fn spawn(
    flows: Vec<Flow>,
    proc: Arc<ProcFiles>,
    start: Instant,
    interval: Duration,
) -> (
    std::sync::mpsc::Sender<()>,
    mpsc::Receiver<Result<DaemonMessage, String>>,
) {
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let (tx, rx) = mpsc::channel(queue_len(interval));
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
            let mut ticker = Ticker::new(start, interval);
            while let Some((intervals, now)) = ticker.wait(&stop_rx) {
                if tx.blocking_send(sampler.sample(now, intervals)).is_err() {
                    return;
                }
            }
            if let Some((intervals, now)) = ticker.partial() {
                let _ = tx.blocking_send(sampler.sample(now, intervals));
            }
        });
    if let Err(e) = spawned {
        let _ = report.try_send(Err(format!("cannot start the sampler thread: {e}")));
    }
    (stop_tx, rx)
}

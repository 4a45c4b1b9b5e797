//! Samples the reader's side of every flow at the interval, on absolute deadlines, through
//! sock_diag (one netlink round trip for every flow, and the namespace's TCP memory).
//!
//! It runs on its own OS thread: when the reading tasks keep the async workers busy, their
//! timers fire late, and a sample 100 ms late is a wrong throughput figure.

use std::ops::{ControlFlow, Range};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use oscil_kernel::host::load::HostLoadSince;
use oscil_kernel::host::netstat::QueueEventsSince;
use oscil_kernel::host::schedstat::RunQueueWaits;
use oscil_kernel::host::{netstat, sockstat};
use oscil_kernel::rows::{host_sample, reader_sample};
use oscil_kernel::socket::diag::{Probe, Sampled, Watched};
use oscil_kernel::ticker::{covered_s, Ticker};
use oscil_kernel::{ProcFile, TcpExt};
use oscil_model::files::rows::{Phase, ReaderSample, Side};
use oscil_model::host::Sockstat;
use oscil_model::pattern::{phase_of_sample, PhaseSpan};
use oscil_model::run::absent;
use oscil_rundir::RunDirError;

use crate::read::Flow;
use crate::record::SharedRecorder;
use crate::summary::progress::Progress;

pub struct Sampler {
    pub flows: Vec<Arc<Flow>>,
    pub recorder: SharedRecorder,
    pub start: Instant,
    pub interval: Duration,
    pub schedule: Vec<PhaseSpan>,
    pub progress: Progress,
}

/// Why sampling stopped before it was told to.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    #[error("recording the run: {0}")]
    Record(#[from] RunDirError),
    #[error("flow {flow}: the kernel no longer lists its socket")]
    Socket { flow: u32 },
    #[error("sampling the sockets with sock_diag: {0}")]
    Diag(#[from] std::io::Error),
    /// `/proc/net/sockstat` or `/proc/net/netstat` (the error names which).
    #[error("{0}")]
    Proc(#[from] oscil_kernel::ReadError),
}

/// What a running sampler reads: opened once, so a tick reads and parses, nothing more.
struct Sources {
    probe: Probe,
    sockstat: ProcFile<Sockstat>,
    netstat: ProcFile<TcpExt>,
    queue: QueueEventsSince,
    /// Each flow's `tcpi_bytes_received` at the last sample, for `delivered_bytes`.
    received_bytes: Vec<u64>,
    /// The process's threads' waits for a CPU at the last sample: the reading threads
    /// starved while this one, in the real-time class, still wakes on time.
    waits: RunQueueWaits,
    /// The host's own load: the egress qdisc, softnet, the CPUs.
    load: HostLoadSince,
}

impl Sampler {
    /// Samples until `stop` receives how many intervals the run covers (or its sender is
    /// dropped), then takes a last sample up to there, so that the bytes read since the last
    /// tick are not lost.
    pub fn run(self, stop: Receiver<u64>) -> Result<(), SampleError> {
        // Without the privilege it runs at the default priority; lateness shows in run.json.
        let _ = oscil_kernel::prioritise_this_thread();
        let mut netstat = netstat::open()?;
        let peer = self.flows.first().and_then(|f| f.stream.peer_addr().ok());
        let (load, load_gaps) = HostLoadSince::open(peer.map(|a| a.ip()), Instant::now());
        let mut sources = Sources {
            probe: Probe::new(Watched::new(self.flows.iter().map(|f| &f.stream))?)?,
            sockstat: sockstat::open()?,
            queue: QueueEventsSince::new(netstat.read().ok().as_ref()),
            netstat,
            received_bytes: vec![0; self.flows.len()],
            waits: RunQueueWaits::new(),
            load,
        };
        // Said once, in run.json: a sampler without sock_diag sees only its own sockets,
        // and a source of the host's load it could not open leaves its columns empty.
        let absent: Vec<_> = absent::of_sampling(Side::Reader, sources.probe.source())
            .into_iter()
            .chain(
                load_gaps
                    .iter()
                    .map(|(source, why)| absent::of_host_load(Side::Reader, *source, Some(why))),
            )
            .collect();
        if !absent.is_empty() {
            self.recorder.record(|r| {
                r.writer.meta_mut().absent.extend(absent);
                Ok(())
            })?;
        }
        let mut ticker = Ticker::new(self.start, self.interval);
        let end = loop {
            match ticker.wait(&stop) {
                ControlFlow::Continue((intervals, now)) => {
                    self.sample(&mut sources, now, intervals)?
                }
                ControlFlow::Break(end) => break end,
            }
        };
        while let Some((intervals, now)) = ticker.finish(end) {
            self.sample(&mut sources, now, intervals)?;
        }
        self.progress.finish();
        Ok(())
    }

    /// One row per flow at `now`, with the bytes read in `intervals`.
    fn sample(
        &self,
        sources: &mut Sources,
        now: Instant,
        intervals: Range<u64>,
    ) -> Result<(), SampleError> {
        let t_s = now.duration_since(self.start).as_secs_f64();
        let phase = phase_of_sample(&self.schedule, t_s, self.interval.as_secs_f64())
            .or_else(|| self.schedule.last().map(|s| s.phase))
            .unwrap_or(Phase::Fast);
        let span_s = covered_s(t_s, &intervals, self.interval.as_secs_f64());
        let snapshot = sources
            .probe
            .snapshot(now, self.flows.iter().map(|f| &f.stream))?;
        let mut total_bytes = 0;
        let mut rows = Vec::with_capacity(self.flows.len());
        let received = sources.received_bytes.iter_mut();
        for ((flow, socket), received) in self.flows.iter().zip(snapshot.sockets).zip(received) {
            let Sampled { info, mem, .. } = socket
                .as_ref()
                .ok_or(SampleError::Socket { flow: flow.index })?;
            let bytes = flow.take_bytes_read(intervals.clone());
            total_bytes += bytes;
            let delivered_bytes = info.bytes_received.map(|now| {
                let delivered = now.saturating_sub(*received);
                *received = now;
                delivered
            });
            rows.push(ReaderSample {
                delivered_bytes,
                group: Some(flow.group),
                ..reader_sample(
                    t_s,
                    flow.index,
                    phase,
                    (bytes, span_s),
                    flow.budget_bytes(),
                    info,
                    mem,
                )
            });
        }
        let host = host_sample(
            t_s,
            Side::Reader,
            &sources.sockstat.read()?,
            sources.queue.next(sources.netstat.read().ok().as_ref()),
            snapshot.namespace_charged_bytes,
            sources.waits.since_last(),
        )
        .with_load(&sources.load.next(now));
        self.recorder.record(|r| r.reader(&rows, &host))?;
        self.progress.update(t_s, total_bytes);
        Ok(())
    }
}

//! Samples the reader's side of every flow at the interval, on absolute deadlines.
//!
//! It runs on its own OS thread: when the reading tasks keep the async workers busy, their
//! timers fire late, and a sample 100 ms late is a wrong throughput figure.

use std::ops::Range;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use oscil_kernel::{meminfo, sockstat, tcp_info};
use oscil_protocol::pattern::phase_of_sample;
use oscil_protocol::ticker::Ticker;
use oscil_protocol::{HostSample, Phase, PhaseSpan, ReaderSample, RunDirError, Side};

use crate::flow::Flow;
use crate::progress::Progress;
use crate::recorder::SharedRecorder;

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
    #[error("flow {flow}: reading TCP_INFO or SO_MEMINFO: {source}")]
    Socket { flow: u32, source: std::io::Error },
    #[error("reading /proc/net/sockstat: {0}")]
    Sockstat(#[from] oscil_kernel::ReadError),
}

impl Sampler {
    /// Samples until `stop` receives (or its sender is dropped), then takes a last sample so
    /// that the bytes read since the last tick are not lost.
    pub fn run(self, stop: Receiver<()>) -> Result<(), SampleError> {
        let mut ticker = Ticker::new(self.start, self.interval);
        while let Some((intervals, now)) = ticker.wait(&stop) {
            self.sample(now, intervals)?;
        }
        if let Some((intervals, now)) = ticker.partial() {
            self.sample(now, intervals)?;
        }
        self.progress.finish();
        Ok(())
    }

    /// One row per flow at `now`, with the bytes read in `intervals`.
    fn sample(&self, now: Instant, intervals: Range<u64>) -> Result<(), SampleError> {
        let t_s = now.duration_since(self.start).as_secs_f64();
        let phase = phase_of_sample(&self.schedule, t_s, self.interval.as_secs_f64())
            .or_else(|| self.schedule.last().map(|s| s.phase))
            .unwrap_or(Phase::Fast);
        let span_s = covered_s(t_s, &intervals, self.interval.as_secs_f64());
        let mut total_bytes = 0;
        let mut rows = Vec::with_capacity(self.flows.len());
        for flow in &self.flows {
            let socket_error = |source| SampleError::Socket {
                flow: flow.index,
                source,
            };
            let info = tcp_info::read(&flow.stream).map_err(socket_error)?;
            let mem = meminfo::read(&flow.stream).map_err(socket_error)?;
            let bytes = flow.take_bytes_read(intervals.clone());
            total_bytes += bytes;
            rows.push(ReaderSample::from_kernel(
                t_s,
                flow.index,
                phase,
                (bytes, span_s),
                flow.budget_bytes(),
                &info,
                &mem,
            ));
        }
        let host = HostSample::from_sockstat(t_s, Side::Reader, &sockstat::read()?);
        self.recorder.record(|r| r.reader(&rows, &host))?;
        self.progress.update(t_s, total_bytes);
        Ok(())
    }
}

/// The seconds of reading a sample at `t_s` holds: the bytes of `intervals`, cut at `t_s`
/// for the last, partial one (reads are filed under the interval they completed in).
fn covered_s(t_s: f64, intervals: &Range<u64>, interval_s: f64) -> f64 {
    let end_s = (intervals.end as f64 * interval_s).min(t_s);
    (end_s - intervals.start as f64 * interval_s).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_tick_covers_every_interval_it_slept_through() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(covered_s(0.1003, &(0..1), 0.1), 0.1));
        assert!(close(covered_s(0.4501, &(1..4), 0.1), 0.3));
        // The last sample of a run, taken 30 ms into its interval.
        assert!(close(covered_s(0.53, &(5..6), 0.1), 0.03));
    }
}

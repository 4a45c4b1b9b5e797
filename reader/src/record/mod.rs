//! Everything recorded during a run goes through here: rows to the run directory as they
//! come, and into the running summary.

pub(crate) mod checks;
pub(crate) mod probe;
pub(crate) mod sampler;
pub(crate) mod trace;

use std::sync::{Arc, Mutex, PoisonError};

use oscil_model::files::markers::{MarkerCounts, RunSpan};
use oscil_model::files::rows::{HostSample, ReaderSample, SenderSample};
use oscil_model::files::trace::{SenderTrace, TraceRow};
use oscil_model::host::HostLoadSource;
use oscil_model::run::clock::ClockEstimate;
use oscil_model::run::sampling::{Sampling, Tally};
use oscil_rundir::trace::TraceCsv;
use oscil_rundir::{RunDirError, RunWriter};

use crate::read::Flow;
use crate::stream::Stream;
use crate::summary::SummaryBuilder;

/// How often rows are pushed to the files: often enough that a run cut short keeps nearly
/// everything, rarely enough that 10 ms sampling does not write the files 300 times a second.
const FLUSH_EVERY_S: f64 = 1.0;

pub struct Recorder {
    pub writer: RunWriter,
    pub summary: SummaryBuilder,
    /// The daemon's trace rows, when the run asked for them (`--trace`); no file until the
    /// first row.
    pub sender_trace: Option<TraceCsv<SenderTrace>>,
    /// The daemon's trace rows that arrived, written or past the cap.
    pub sender_trace_rows: u64,
    /// Both sides' samples as JSON lines on stdout (`--json-stream`).
    pub stream: Option<Stream>,
    reader_ticks: Tally,
    sender_ticks: Tally,
    flushed_at_s: f64,
}

impl Recorder {
    pub fn new(writer: RunWriter, summary: SummaryBuilder, flows: u32, interval_s: f64) -> Self {
        Recorder {
            sender_trace: None,
            sender_trace_rows: 0,
            stream: None,
            writer,
            summary,
            reader_ticks: Tally::new(flows, interval_s),
            sender_ticks: Tally::new(flows, interval_s),
            flushed_at_s: 0.0,
        }
    }

    /// One interval of the reader's side.
    pub fn reader(&mut self, rows: &[ReaderSample], host: &HostSample) -> Result<(), RunDirError> {
        for row in rows {
            self.writer.reader_row(row)?;
            self.summary.reader(row);
        }
        if let Some(stream) = &mut self.stream {
            stream.reader(rows, host);
        }
        let span_s = rows.first().map_or(0.0, |r| r.span_s);
        self.reader_ticks
            .tick(host.t_s, span_s, rows.iter().map(|r| r.flow));
        self.reader_ticks.host(host);
        self.host(host)
    }

    /// One interval of the daemon's side, as it arrived over the control connection.
    pub fn sender(&mut self, rows: &[SenderSample], host: &HostSample) -> Result<(), RunDirError> {
        for row in rows {
            self.writer.sender_row(row)?;
        }
        self.summary.sender(rows);
        if let Some(stream) = &mut self.stream {
            stream.sender(rows, host);
        }
        let span_s = rows.first().map_or(0.0, |r| r.span_s);
        self.sender_ticks
            .tick(host.t_s, span_s, rows.iter().map(|r| r.flow));
        self.sender_ticks.host(host);
        self.host(host)
    }

    /// Takes the daemon's trace rows into `dir` (the run asked for them).
    pub fn trace_sender_into(&mut self, dir: &std::path::Path) {
        self.sender_trace = Some(TraceCsv::new(dir));
    }

    /// The daemon's trace rows, as they arrived over the control connection; none unless
    /// the run asked for them.
    pub fn trace_sender(&mut self, rows: &[TraceRow<SenderTrace>]) -> Result<(), RunDirError> {
        self.sender_trace_rows += rows.len() as u64;
        self.sender_trace
            .as_mut()
            .map_or(Ok(()), |csv| csv.write(rows))
    }

    fn host(&mut self, host: &HostSample) -> Result<(), RunDirError> {
        self.writer.host_row(host)?;
        self.summary.host(host);
        if host.t_s >= self.flushed_at_s + FLUSH_EVERY_S {
            self.flushed_at_s = host.t_s;
            self.writer.flush()?;
        }
        Ok(())
    }

    /// Every flow's markers, at the end: into `markers.csv` by flow and `k`, and into the
    /// summary; what became of them, for `run.json`. Those still unread are censored at
    /// `span`'s end.
    pub fn markers(
        &mut self,
        flows: &[Arc<Flow>],
        span: RunSpan,
        clock: &ClockEstimate,
    ) -> Result<MarkerCounts, RunDirError> {
        let mut counts = MarkerCounts::default();
        for book in flows.iter().filter_map(|f| f.markers.as_ref()) {
            let (rows, flow_counts) = book.take_rows(span, clock);
            for row in &rows {
                self.writer.marker_row(row)?;
                self.summary.marker(row);
            }
            counts.add(&flow_counts);
        }
        Ok(counts)
    }

    /// Both sides' sampling over a run whose reader ran `intervals` intervals, for
    /// `run.json`.
    /// The sources of the host's load the daemon's rows never carried.
    pub fn sender_load_missing(&self) -> Vec<HostLoadSource> {
        self.sender_ticks.host_load_missing()
    }

    pub fn sampling(&self, intervals: u64) -> Sampling {
        Sampling {
            reader: self.reader_ticks.clone().finish(intervals),
            sender: self.sender_ticks.clone().finish(intervals),
        }
    }
}

/// The recorder shared by the sampler thread and the control task. The run closes it to
/// finish the directory; a task still running then (one just aborted, say) records nothing
/// more instead of holding the run up.
#[derive(Clone)]
pub struct SharedRecorder(Arc<Mutex<Option<Recorder>>>);

impl SharedRecorder {
    /// Whether the run takes the daemon's trace rows.
    pub fn traces(&self) -> bool {
        let guard = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        guard.as_ref().is_some_and(|r| r.sender_trace.is_some())
    }

    pub fn new(recorder: Recorder) -> Self {
        SharedRecorder(Arc::new(Mutex::new(Some(recorder))))
    }

    /// Runs `record` on the recorder unless it is closed.
    pub fn record(
        &self,
        record: impl FnOnce(&mut Recorder) -> Result<(), RunDirError>,
    ) -> Result<(), RunDirError> {
        let mut guard = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        guard.as_mut().map_or(Ok(()), record)
    }

    /// Takes the recorder out; `None` if it was already taken.
    pub fn close(&self) -> Option<Recorder> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

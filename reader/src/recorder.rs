//! Everything recorded during a run goes through here: rows to the run directory as they
//! come, and into the running summary.

use std::sync::{Arc, Mutex, PoisonError};

use oscil_protocol::{HostSample, ReaderSample, RunDirError, RunWriter, SenderSample};

use crate::summary::SummaryBuilder;

pub struct Recorder {
    pub writer: RunWriter,
    pub summary: SummaryBuilder,
}

impl Recorder {
    /// One interval of the reader's side.
    pub fn reader(&mut self, rows: &[ReaderSample], host: &HostSample) -> Result<(), RunDirError> {
        for row in rows {
            self.writer.reader_row(row)?;
            self.summary.reader(row);
        }
        self.host(host)
    }

    /// One interval of the daemon's side, as it arrived over the control connection.
    pub fn sender(&mut self, rows: &[SenderSample], host: &HostSample) -> Result<(), RunDirError> {
        for row in rows {
            self.writer.sender_row(row)?;
        }
        self.summary.sender(rows);
        self.host(host)
    }

    fn host(&mut self, host: &HostSample) -> Result<(), RunDirError> {
        self.writer.host_row(host)?;
        self.summary.host(host);
        self.writer.flush()
    }
}

/// The recorder shared by the sampler thread and the control task. The run closes it to
/// finish the directory; a task still running then (one just aborted, say) records nothing
/// more instead of holding the run up.
#[derive(Clone)]
pub struct SharedRecorder(Arc<Mutex<Option<Recorder>>>);

impl SharedRecorder {
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

//! Everything recorded during a run goes through here: rows to the run directory as they
//! come, and into the running summary.

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

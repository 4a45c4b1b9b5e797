//! The per-ACK trace's files (`trace-sender.csv`, `trace-reader.csv`): their columns, a
//! writer that stops at a cap, and the loader the report uses.

use std::marker::PhantomData;
use std::path::Path;

use oscil_model::files::trace::{TraceRow, TraceSide};

use crate::write::CsvFile;
use crate::{load_csv, Columns, Limits, RowError, RunDirError};

/// Rows one side writes at most: about 40 s of 1 Gbit/s ACKs. Past it the run keeps going
/// and `run.json` counts what was not written, so a long fast run cannot fill the disk.
pub const MAX_TRACE_ROWS: u64 = 2_000_000;

impl<S: TraceSide> Columns for TraceRow<S> {
    fn declared_rows(_: &Limits) -> u64 {
        MAX_TRACE_ROWS
    }
    fn check(&self, limits: &Limits) -> Result<(), RowError> {
        limits.check_flow(self.flow)?;
        limits.check_signed_time("t_s", self.t_s)
    }
}

/// A trace file written as rows come, created with the first row (a side that traced
/// nothing leaves no file), never past [`MAX_TRACE_ROWS`].
pub struct TraceCsv<S> {
    dir: std::path::PathBuf,
    file: Option<CsvFile>,
    rows: u64,
    /// Rows refused past the cap.
    pub not_written: u64,
    side: PhantomData<S>,
}

impl<S: TraceSide> TraceCsv<S> {
    pub fn new(dir: &Path) -> Self {
        TraceCsv {
            dir: dir.to_path_buf(),
            file: None,
            rows: 0,
            not_written: 0,
            side: PhantomData,
        }
    }

    pub fn write(&mut self, rows: &[TraceRow<S>]) -> Result<(), RunDirError> {
        let file = match &mut self.file {
            Some(file) => file,
            None => self.file.insert(CsvFile::create::<TraceRow<S>>(&self.dir)?),
        };
        for row in rows {
            if self.rows >= MAX_TRACE_ROWS {
                self.not_written += 1;
                continue;
            }
            file.row(row)?;
            self.rows += 1;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> Result<(), RunDirError> {
        self.file.as_mut().map_or(Ok(()), CsvFile::flush)
    }
}

/// One side's trace rows from a run directory; empty when the file is absent.
pub fn load<S: TraceSide>(dir: &Path, limits: &Limits) -> Result<Vec<TraceRow<S>>, RunDirError> {
    if std::fs::symlink_metadata(dir.join(S::FILE)).is_err() {
        return Ok(Vec::new());
    }
    Ok(load_csv::<TraceRow<S>>(dir, limits)?.rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use oscil_model::files::columns::Row;
    use oscil_model::files::trace::{
        ReaderTrace, SenderTrace, TraceKind, TRACE_READER_CSV, TRACE_SENDER_CSV,
    };

    #[test]
    fn rows_round_trip_through_a_file_with_every_column() {
        let dir = tempfile::tempdir().unwrap();
        let mut csv = TraceCsv::<SenderTrace>::new(dir.path());
        let mut ack = TraceRow::new(1.5, TraceKind::Probe, 0);
        ack.snd_una = Some(4_000_000_000);
        ack.snd_wnd = Some(65535);
        let mut state = TraceRow::new(1.75, TraceKind::CongState, 0);
        state.cong_state = Some(4);
        csv.write(&[ack.clone(), state.clone()]).unwrap();
        csv.flush().unwrap();
        let limits = Limits::declared(1, 100_000, 10.0, None);
        let back = load::<SenderTrace>(dir.path(), &limits).unwrap();
        assert_eq!(back, vec![ack, state]);
        let header = std::fs::read_to_string(dir.path().join(TRACE_SENDER_CSV)).unwrap();
        assert_eq!(
            header.lines().next().unwrap(),
            TraceRow::<SenderTrace>::columns().join(",")
        );
        assert!(load::<ReaderTrace>(dir.path(), &limits).unwrap().is_empty());
        assert!(!dir.path().join(TRACE_READER_CSV).exists());
    }

    #[test]
    fn a_row_of_a_flow_the_run_lacks_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut csv = TraceCsv::<ReaderTrace>::new(dir.path());
        csv.write(&[TraceRow::new(0.5, TraceKind::RcvbufGrow, 3)])
            .unwrap();
        csv.flush().unwrap();
        let limits = Limits::declared(2, 100_000, 10.0, None);
        let error = load::<ReaderTrace>(dir.path(), &limits).unwrap_err();
        assert!(error.to_string().contains("flow 3"), "{error}");
    }
}

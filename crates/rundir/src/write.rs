//! Writing a run directory as the run goes: `run.json` first (saying the run is in
//! progress) and again at the end, atomically; each CSV's header from its row's columns,
//! then rows in the same order.

use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use oscil_model::files::markers::MarkerRow;
use oscil_model::files::rows::{HostSample, ReaderSample, SenderSample};
use oscil_model::run::{Ending, RunMeta, RunStatus, RUN_JSON};

use crate::error::{io_error, RunDirError};
use crate::limits::Columns;
use crate::safe_fs::{self, SafeFsError};

/// Writes a run directory row by row; every `flush` makes what was written durable
/// enough for a report, so nothing is lost when the run is cut short.
pub struct RunWriter {
    dir: PathBuf,
    meta: RunMeta,
    reader: CsvFile,
    sender: CsvFile,
    host: CsvFile,
    markers: Option<CsvFile>,
    reserve: Option<Reserve>,
}

/// Room held on the run's file system from the start, let go at the end so `run.json`
/// can still say how the run ended (a full disk among the reasons) when the rows filled it.
struct Reserve(PathBuf);

impl Reserve {
    /// Several times what a final `run.json` takes.
    const BYTES: usize = 256 << 10;
    const FILE: &'static str = ".oscil-reserve";

    fn make(dir: &Path) -> Result<Reserve, RunDirError> {
        let path = dir.join(Reserve::FILE);
        let mut file = create_afresh(&path, 0o600)?;
        let reserve = Reserve(path);
        // Written, not only sized: a sparse file holds no room.
        std::io::Write::write_all(&mut file, &vec![0; Reserve::BYTES])
            .map_err(io_error(&reserve.0))?;
        Ok(reserve)
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// One CSV file being written, with its header; also for the trace files (`crate::trace`).
pub(crate) struct CsvFile {
    path: PathBuf,
    writer: csv::Writer<BufWriter<File>>,
}

/// `path` created anew, never through a link left in the directory (`force` reuses one,
/// and a killed run leaves its files).
fn create_afresh(path: &Path, mode: u32) -> Result<File, RunDirError> {
    match safe_fs::create_new(path, mode) {
        Err(SafeFsError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::AlreadyExists =>
        {
            fs::remove_file(path).map_err(io_error(path))?;
            Ok(safe_fs::create_new(path, mode)?)
        }
        other => Ok(other?),
    }
}

impl CsvFile {
    pub(crate) fn create<R: Columns>(dir: &Path) -> Result<Self, RunDirError> {
        let path = dir.join(R::FILE);
        let file = create_afresh(&path, 0o644)?;
        let mut writer = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(BufWriter::with_capacity(256 << 10, file));
        writer
            .write_record(R::columns())
            .map_err(|source| RunDirError::BadCsv {
                path: path.clone(),
                source,
            })?;
        Ok(CsvFile { path, writer })
    }

    pub(crate) fn row<R: Columns>(&mut self, row: &R) -> Result<(), RunDirError> {
        self.writer
            .serialize(row)
            .map_err(|source| RunDirError::BadCsv {
                path: self.path.clone(),
                source,
            })
    }

    pub(crate) fn flush(&mut self) -> Result<(), RunDirError> {
        self.writer.flush().map_err(io_error(&self.path))
    }
}

impl RunWriter {
    /// Creates the directory (or reuses an empty one; a non-empty one only with `force`),
    /// writes `run.json` saying the run is in progress and the CSV headers.
    pub fn create(dir: &Path, force: bool, meta: RunMeta) -> Result<Self, RunDirError> {
        safe_fs::check_trusted_dir(dir)?;
        fs::create_dir_all(dir).map_err(io_error(dir))?;
        safe_fs::check_trusted_dir(dir)?;
        let mut entries = fs::read_dir(dir).map_err(io_error(dir))?;
        if !force && entries.next().is_some() {
            return Err(RunDirError::NotEmpty(dir.to_owned()));
        }
        let markers = match meta.config.marker_every_us {
            Some(_) => Some(CsvFile::create::<MarkerRow>(dir)?),
            None => None,
        };
        let writer = RunWriter {
            dir: dir.to_owned(),
            meta,
            reader: CsvFile::create::<ReaderSample>(dir)?,
            sender: CsvFile::create::<SenderSample>(dir)?,
            host: CsvFile::create::<HostSample>(dir)?,
            markers,
            reserve: Some(Reserve::make(dir)?),
        };
        writer.write_meta()?;
        Ok(writer)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn meta(&self) -> &RunMeta {
        &self.meta
    }

    /// Changes to the metadata reach disk at the next `write_meta` or `finish`.
    pub fn meta_mut(&mut self) -> &mut RunMeta {
        &mut self.meta
    }

    pub fn reader_row(&mut self, row: &ReaderSample) -> Result<(), RunDirError> {
        self.reader.row(row)
    }

    pub fn sender_row(&mut self, row: &SenderSample) -> Result<(), RunDirError> {
        self.sender.row(row)
    }

    pub fn host_row(&mut self, row: &HostSample) -> Result<(), RunDirError> {
        self.host.row(row)
    }

    /// A row of `markers.csv`; nothing in a run without markers.
    pub fn marker_row(&mut self, row: &MarkerRow) -> Result<(), RunDirError> {
        self.markers.as_mut().map_or(Ok(()), |file| file.row(row))
    }

    /// Pushes buffered rows to the files.
    pub fn flush(&mut self) -> Result<(), RunDirError> {
        self.reader.flush()?;
        self.sender.flush()?;
        self.host.flush()?;
        self.markers.as_mut().map_or(Ok(()), CsvFile::flush)
    }

    /// Writes a whole file of `R` rows at once (`probe.csv` at the run's end).
    pub fn whole_file<R: Columns>(&self, rows: &[R]) -> Result<(), RunDirError> {
        let mut file = CsvFile::create::<R>(&self.dir)?;
        rows.iter().try_for_each(|row| file.row(row))?;
        file.flush()
    }

    /// Rewrites `run.json` through a temporary file and a rename, so it is never half
    /// written, once the directory is checked again.
    pub fn write_meta(&self) -> Result<(), RunDirError> {
        safe_fs::check_trusted_dir(&self.dir)?;
        let mut text = serde_json::to_vec_pretty(&self.meta).expect("RunMeta serializes");
        text.push(b'\n');
        Ok(safe_fs::write_atomic(
            &self.dir.join(RUN_JSON),
            &text,
            0o644,
        )?)
    }

    /// Flushes every file and records how the run ended. Rows that could not be written
    /// (a full disk) make the run partial with the cause, said in `run.json`, which the
    /// reserve let go just before leaves room for.
    pub fn finish(mut self, mut ending: Ending) -> Result<RunMeta, RunDirError> {
        let flushed = self.flush();
        drop(self.reserve.take());
        if let Err(e) = flushed {
            ending.reason = match ending.status {
                RunStatus::Partial => format!("{}; then {e}", ending.reason),
                _ => format!("the run's last rows were not written: {e}"),
            };
            ending.status = RunStatus::Partial;
        }
        self.meta.ending = ending;
        self.write_meta()?;
        Ok(self.meta)
    }
}

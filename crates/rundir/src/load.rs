//! Reading a run directory within what its `run.json` declares: regular files only, rows
//! and bytes bounded, every row checked; a CSV cut mid-row keeps its complete rows.

use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use oscil_model::files::markers::MarkerRow;
use oscil_model::files::markers::MARKERS_CSV;
use oscil_model::files::rows::{HostSample, ReaderSample, SenderSample};
use oscil_model::lab::LabRecord;
use oscil_model::run::{RunMeta, FORMAT_VERSION, RUN_JSON};

use crate::bounds::{MAX_META_BYTES, MAX_ROW_BYTES};
use crate::error::{io_error, Damage, RunDirError};
use crate::limits::{Columns, Limits};
use crate::safe_fs::{self, LineBound, SafeFsError};

/// A run directory read back whole.
#[derive(Debug, Clone)]
pub struct Run {
    pub dir: PathBuf,
    pub meta: RunMeta,
    pub reader: Vec<ReaderSample>,
    pub sender: Vec<SenderSample>,
    pub host: Vec<HostSample>,
    /// Empty for a run without markers (and for runs recorded before them).
    pub markers: Vec<MarkerRow>,
    /// The idle probe's round trips; empty for a run without it.
    pub probe: Vec<oscil_model::files::probe::ProbeRow>,
    /// Files whose last row was cut short and dropped.
    pub cut: Vec<Cut>,
}

impl Run {
    /// The run's name on charts: its label, else the directory's name, escaped and
    /// bounded ([`oscil_model::text::escape_stored`]) wherever it came from.
    pub fn label(&self) -> String {
        oscil_model::text::escape_stored(&self.meta.label.clone().unwrap_or_else(|| {
            self.dir
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_else(|| self.dir.display().to_string())
        }))
    }
}

/// `dir` holds a `run.json` at `path`, or what it is instead (nothing, a file, a campaign);
/// a failure that is not "absent" (a permission) keeps the OS's word.
fn check_is_run_dir(dir: &Path, path: &Path) -> Result<(), RunDirError> {
    use std::io::ErrorKind;
    let unreadable = |path: &Path, error| RunDirError::Unreadable {
        path: path.to_owned(),
        error,
    };
    match path.symlink_metadata() {
        Ok(_) => return Ok(()),
        Err(e) if !matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Err(unreadable(path, e))
        }
        Err(_) => {}
    }
    match dir.metadata() {
        Err(e) if e.kind() == ErrorKind::NotFound => Err(RunDirError::NoSuchDir(dir.to_owned())),
        Err(e) => Err(unreadable(dir, e)),
        Ok(meta) if !meta.is_dir() => Err(RunDirError::FileNotRun(dir.to_owned())),
        Ok(_) if crate::campaign::is_campaign(dir) => {
            Err(RunDirError::CampaignNotRun(dir.to_owned()))
        }
        Ok(_) => Err(RunDirError::NotARunDir(dir.to_owned())),
    }
}

/// Reads `run.json` alone: a regular file of bounded size whose declarations are in range.
pub fn load_meta(dir: &Path) -> Result<RunMeta, RunDirError> {
    let path = dir.join(RUN_JSON);
    check_is_run_dir(dir, &path)?;
    let text = safe_fs::read_bounded(&path, MAX_META_BYTES)?;
    let version: Option<u32> = serde_json::from_slice::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("format_version")?.as_u64())
        .map(|v| v as u32);
    if let Some(found) = version.filter(|&v| v > FORMAT_VERSION) {
        return Err(RunDirError::NewerFormat { path, found });
    }
    let meta = serde_json::from_slice::<RunMeta>(&text)
        .or_else(|error| upgraded(&text).ok_or(error))
        .map_err(|error| RunDirError::BadMeta {
            path: path.clone(),
            error,
        })?;
    Limits::of(&meta).map_err(|why| RunDirError::Damaged {
        path,
        why: why.into(),
    })?;
    Ok(meta)
}

/// A `run.json` written before the lab's record was typed, read as today's: the reader kept
/// its `--meta` file as `lab` whatever it held, so a `lab` that is not a lab's record is the
/// person's own description and becomes `meta`. `None` when that does not make it readable.
fn upgraded(text: &[u8]) -> Option<RunMeta> {
    let mut value: serde_json::Value = serde_json::from_slice(text).ok()?;
    let object = value.as_object_mut()?;
    let lab = object.get("lab")?;
    if object.contains_key("meta") || serde_json::from_value::<LabRecord>(lab.clone()).is_ok() {
        return None;
    }
    let free = object.remove("lab")?;
    object.insert("meta".into(), free);
    serde_json::from_value(value).ok()
}

/// A CSV's rows, and what was dropped from its end when it was cut mid-row.
#[derive(Debug, Clone, PartialEq)]
pub struct Table<R> {
    pub rows: Vec<R>,
    pub cut: Option<Cut>,
}

/// The incomplete last row of a file cut mid-row (a crash, a full disk): dropped, counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    pub file: &'static str,
    /// Rows dropped: the one incomplete row.
    pub rows: u64,
    /// Bytes after the last complete row.
    pub bytes: u64,
}

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} was cut mid-row: {} incomplete row ({} bytes) dropped",
            self.file, self.rows, self.bytes
        )
    }
}

/// The length of the part of `file` (of `len` bytes) that ends with its last newline.
fn complete_len(file: &mut File, len: u64) -> std::io::Result<u64> {
    let mut end = len;
    let mut chunk = vec![0u8; 64 << 10];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let part = &mut chunk[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(part)?;
        if let Some(at) = part.iter().rposition(|&b| b == b'\n') {
            return Ok(start + at as u64 + 1);
        }
        // No row is longer than MAX_ROW_BYTES: a longer tail is not a cut row.
        if len - start > MAX_ROW_BYTES * 4 {
            return Ok(len);
        }
        end = start;
    }
    Ok(0)
}

/// Reads one CSV of a run directory within `limits`: a regular file, its header naming
/// every column, at most [`Limits::rows`] rows and [`Limits::bytes`] bytes, every row in
/// range. A last row cut short is dropped and said in [`Table::cut`].
pub fn load_csv<R: Columns>(dir: &Path, limits: &Limits) -> Result<Table<R>, RunDirError> {
    let path = dir.join(R::FILE);
    let (mut file, len) = safe_fs::open_regular(&path)?;
    let limit_bytes = limits.bytes::<R>();
    if len > limit_bytes {
        return Err(SafeFsError::TooLarge {
            path,
            found_bytes: len,
            limit_bytes,
        }
        .into());
    }
    let complete = complete_len(&mut file, len).map_err(io_error(&path))?;
    file.seek(SeekFrom::Start(0)).map_err(io_error(&path))?;
    let cut = (complete < len).then_some(Cut {
        file: R::FILE,
        rows: 1,
        bytes: len - complete,
    });
    let bounded = LineBound::new(file.take(complete), MAX_ROW_BYTES);
    let rows = read_rows::<R>(&path, csv::Reader::from_reader(bounded), limits)?;
    Ok(Table { rows, cut })
}

fn read_rows<R: Columns>(
    path: &Path,
    mut reader: csv::Reader<LineBound<std::io::Take<File>>>,
    limits: &Limits,
) -> Result<Vec<R>, RunDirError> {
    let bad_csv = |source: csv::Error| match source.kind() {
        csv::ErrorKind::Io(e) if LineBound::<File>::is_long_line(e) => SafeFsError::LongLine {
            path: path.to_owned(),
            limit_bytes: MAX_ROW_BYTES,
        }
        .into(),
        _ => RunDirError::BadCsv {
            path: path.to_owned(),
            source,
        },
    };
    let headers = reader.headers().map_err(bad_csv)?.clone();
    if let Some(column) = R::columns()
        .iter()
        .filter(|column| !R::added_later().contains(column))
        .find(|column| !headers.iter().any(|h| h == **column))
    {
        return Err(RunDirError::MissingColumn {
            path: path.to_owned(),
            column,
        });
    }
    let limit = limits.rows::<R>();
    let mut rows = Vec::new();
    for (index, row) in reader.deserialize::<R>().enumerate() {
        if index as u64 >= limit {
            return Err(RunDirError::TooManyRows {
                path: path.to_owned(),
                limit,
                flows: limits.flows,
                end_s: limits.end_s,
            });
        }
        let row = row.map_err(bad_csv)?;
        row.check(limits).map_err(|source| RunDirError::Damaged {
            path: path.to_owned(),
            why: Damage::Row {
                row: index as u64 + 1,
                source,
            },
        })?;
        rows.push(row);
    }
    Ok(rows)
}

/// Reads one CSV of a run directory within the limits its `run.json` sets, keeping only
/// the rows (for the lab's live view and its end figures).
pub fn load_rows<R: Columns>(dir: &Path) -> Result<Vec<R>, RunDirError> {
    let meta = load_meta(dir)?;
    let limits = Limits::of(&meta).expect("load_meta checked it");
    Ok(load_csv::<R>(dir, &limits)?.rows)
}

/// Reads a whole run directory, each file within the limits its `run.json` sets.
pub fn load(dir: &Path) -> Result<Run, RunDirError> {
    let meta = load_meta(dir)?;
    let limits = Limits::of(&meta).expect("load_meta checked it");
    fn rows<R>(cut: &mut Vec<Cut>, table: Table<R>) -> Vec<R> {
        cut.extend(table.cut);
        table.rows
    }
    let mut cut = Vec::new();
    let reader = rows(&mut cut, load_csv(dir, &limits)?);
    let sender = rows(&mut cut, load_csv(dir, &limits)?);
    let host = rows(&mut cut, load_csv(dir, &limits)?);
    // Present as anything at all (a link, a FIFO): read, so it is refused, not skipped.
    let markers = match fs::symlink_metadata(dir.join(MARKERS_CSV)) {
        Ok(_) => rows(&mut cut, load_csv(dir, &limits)?),
        Err(_) => Vec::new(),
    };
    let probe = match fs::symlink_metadata(dir.join(oscil_model::files::probe::PROBE_CSV)) {
        Ok(_) => rows(&mut cut, load_csv(dir, &limits)?),
        Err(_) => Vec::new(),
    };
    Ok(Run {
        dir: dir.to_owned(),
        meta,
        reader,
        sender,
        host,
        markers,
        probe,
        cut,
    })
}

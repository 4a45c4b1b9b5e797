//! The run directory on disk: the interface between the reader, which writes it as the run
//! goes, and the report, which reads only it. What each file holds is `oscil-model`'s
//! (`run.json` is `oscil_model::run::RunMeta`, each CSV a row type whose fields are its
//! columns); this crate writes them (`write`), reads them back within bounds (`load`,
//! `limits`), and keeps the campaign directory and the lab's files.
//!
//! ```text
//! <out>/run.json    what was run and how it ended (RunMeta)
//! <out>/reader.csv  ReaderSample rows
//! <out>/sender.csv  SenderSample rows
//! <out>/host.csv    HostSample rows
//! <out>/markers.csv MarkerRow rows, only in runs with --marker-every
//! <out>/probe.csv   ProbeRow rows, only in runs with the idle probe
//! ```
//!
//! `run.json` is written first, saying the run is partial, and rewritten (atomically) when
//! the run ends, so a reader that is killed still leaves a directory that says so.

mod bounds;
pub mod campaign;
mod error;
pub mod json_error;
pub mod lab;
mod limits;
mod load;
pub mod safe_fs;
mod sys;
pub mod trace;
mod write;

pub use bounds::{
    CLOCK_RESOLUTION_S, MAX_BYTES_PER_S, MAX_FLOWS, MAX_META_BYTES, MAX_ROW_BYTES, MAX_RUN_S,
};
pub use error::{Damage, DeclarationError, RowError, RunDirError};
pub use limits::{Columns, Limits};
pub use load::{load, load_csv, load_meta, load_rows, Cut, Run, Table};
pub use write::RunWriter;

#[cfg(test)]
mod tests;

//! What oscil's pieces say to each other: the control protocol between reader and daemon,
//! the sample records, the reading pattern's timetable, the run directory that the report
//! reads, and the parsers for the units people type.

pub mod address;
pub mod auth;
pub mod campaign;
pub mod cli;
pub mod clock;
pub mod control;
pub mod key;
pub mod markers;
pub mod pattern;
pub mod phase_figures;
pub mod records;
pub mod rundir;
pub mod safe_fs;
pub mod sampling;
mod sys;
pub mod text;
pub mod ticker;
pub mod trace;
pub mod tracer;
pub mod units;

pub use pattern::{PatternConfig, PhaseSpan, SlowRate, SlowRule};
pub use records::{HostSample, Phase, ReaderSample, SenderSample, Side};
pub use rundir::{Ending, Run, RunConfig, RunDirError, RunMeta, RunStatus, RunWriter};

//! The lab's files in a run directory: the record `oscil-reader --lab-record` keeps
//! (`run.json`'s `lab`, typed in `oscil_model::lab`) and the emulated link's `link.json`,
//! each read within bounds.

use std::path::Path;

use oscil_model::lab::LabRecord;
use oscil_model::run::link_health::{self, LinkHealth, LINK_JSON};

use crate::safe_fs;

/// Why a file given as a lab record is not one.
#[derive(Debug, thiserror::Error)]
pub enum LabRecordError {
    #[error(transparent)]
    File(#[from] safe_fs::SafeFsError),
    #[error("{path}: not a lab record ({source})")]
    Bad {
        path: String,
        source: serde_json::Error,
    },
}

/// The most bytes a lab record may hold: it names a run's settings, not its data.
const MAX_RECORD_BYTES: u64 = 1 << 20;

/// Replaces `path` with `record` atomically, never through a link.
pub fn write_record(path: &Path, record: &LabRecord) -> Result<(), safe_fs::SafeFsError> {
    safe_fs::write_atomic(path, &record.to_json(), 0o644)
}

/// Reads a record the lab wrote: a regular file of bounded size holding one.
pub fn read_record(path: &Path) -> Result<LabRecord, LabRecordError> {
    let text = safe_fs::read_bounded(path, MAX_RECORD_BYTES)?;
    serde_json::from_slice(&text).map_err(|source| LabRecordError::Bad {
        path: path.display().to_string(),
        source,
    })
}

/// The largest `link.json` read: oscil-link's is about 2 KB.
const MAX_LINK_JSON_BYTES: u64 = 1 << 20;

/// What `dir/link.json` says of the emulator; a run without one (not from the lab), or
/// with netem's, has nothing to say.
pub fn link_health(dir: &Path) -> LinkHealth {
    match safe_fs::read_bounded(&dir.join(LINK_JSON), MAX_LINK_JSON_BYTES) {
        Ok(text) => link_health::judge_json(&text),
        Err(_) => LinkHealth::default(),
    }
}

/// Why the run in `dir` counts in no verdict, by the two rules the lab and the report share:
/// its emulated link was late ([`link_health`]), or its reader or sender was starved of
/// CPU (`oscil_model::run::starvation`, from `run.json`'s `sampling`). `None` when neither.
pub fn spoiled(dir: &Path) -> Option<String> {
    link_health(dir).spoiled.or_else(|| {
        let meta = crate::load::load_meta(dir).ok()?;
        oscil_model::run::starvation::starved(meta.sampling.as_ref()?, meta.config.interval_us)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_without_link_json_is_not_judged() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(link_health(dir.path()), LinkHealth::default());
    }
}

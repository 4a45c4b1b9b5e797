//! The campaign directory's bookkeeping: `campaign.json` saved atomically after every
//! change, an earlier attempt set aside, each run's outcome read back from its run
//! directory, and how the campaign ended.

use std::path::{Path, PathBuf};

use oscil_model::campaign::{Campaign, CampaignRunStatus, REVERSE_DIR};
use oscil_rundir::campaign;

use super::error::LabError;
use super::session::{last_line, ReaderEnd, REVERSE_READER_LOG};

/// A run's status from what it left: `run.json` says complete or partial (and why); no
/// `run.json` means the reader never got going. A `--direction both` run is complete when
/// both pairs are; else partial, saying which pair fell short and why.
pub fn outcome(
    run_dir: &Path,
    result: &Result<ReaderEnd, LabError>,
    reader_log: &Path,
) -> (CampaignRunStatus, Option<String>) {
    let end = match result {
        Err(error) => return (CampaignRunStatus::Failed, Some(error.to_string())),
        Ok(end) => end,
    };
    let forward = pair_outcome(run_dir, end, reader_log);
    let Some(reverse_end) = &end.reverse else {
        return forward;
    };
    let reverse_log = reader_log.with_file_name(REVERSE_READER_LOG);
    match pair_outcome(&run_dir.join(REVERSE_DIR), reverse_end, &reverse_log) {
        (CampaignRunStatus::Complete, None) => forward,
        (CampaignRunStatus::Complete, Some(why)) if forward.0 == CampaignRunStatus::Complete => {
            let reasons = forward.1.into_iter().chain([format!("reverse: {why}")]);
            (forward.0, Some(reasons.collect::<Vec<_>>().join("; ")))
        }
        (_, why) if forward.0 == CampaignRunStatus::Complete => {
            let why = why.unwrap_or_else(|| "no reason recorded".into());
            (CampaignRunStatus::Partial, Some(format!("reverse: {why}")))
        }
        _ => forward,
    }
}

/// One pair's status: its reader's end and its run directory.
fn pair_outcome(
    run_dir: &Path,
    end: &ReaderEnd,
    reader_log: &Path,
) -> (CampaignRunStatus, Option<String>) {
    match oscil_rundir::load_meta(run_dir) {
        Ok(meta)
            if meta.ending.status == oscil_model::run::RunStatus::Complete
                && end.code == Some(0) =>
        {
            (CampaignRunStatus::Complete, None)
        }
        // The pattern ran and no byte was lost; a sampler merged some intervals, and the
        // reason says which side and how many.
        Ok(meta)
            if meta.ending.status == oscil_model::run::RunStatus::Holes && end.code == Some(0) =>
        {
            (CampaignRunStatus::Complete, Some(meta.ending.reason))
        }
        Ok(meta) => {
            let why = if end.stopped {
                "the lab was asked to stop: "
            } else {
                ""
            };
            (
                CampaignRunStatus::Partial,
                Some(format!("{why}{}", meta.ending.reason)),
            )
        }
        Err(_) => {
            let code = end
                .code
                .map_or("a signal".into(), |c| format!("status {c}"));
            let reason = format!("oscil-reader exited with {code}: {}", last_line(reader_log));
            (CampaignRunStatus::Failed, Some(reason))
        }
    }
}

/// The campaign directory and its `campaign.json`, saved after every change.
pub struct CampaignDir {
    pub dir: PathBuf,
    pub campaign: Campaign,
}

impl CampaignDir {
    pub fn save(&self) -> Result<(), LabError> {
        Ok(campaign::save(&self.dir, &self.campaign)?)
    }

    pub(crate) fn set(
        &mut self,
        index: usize,
        status: CampaignRunStatus,
        reason: Option<String>,
    ) -> Result<(), LabError> {
        let run = &mut self.campaign.runs[index];
        run.status = status;
        run.reason = reason;
        run.link_spoiled = match status {
            CampaignRunStatus::Complete | CampaignRunStatus::Partial => {
                oscil_rundir::lab::spoiled(&self.dir.join(&run.dir))
            }
            _ => None,
        };
        self.save()
    }
}

/// Keeps an earlier attempt's files (a partial, failed or spoiled run being redone) as
/// `<name>.attempt-<n>` (a run directory or its logs): nothing a campaign wrote is ever
/// overwritten.
pub fn set_aside(run_dir: &Path) -> Result<(), LabError> {
    if !run_dir.exists() {
        return Ok(());
    }
    let name = run_dir
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let aside = (1..)
        .map(|n| run_dir.with_file_name(format!("{name}.attempt-{n}")))
        .find(|p| !p.exists())
        .expect("some attempt number is free");
    std::fs::rename(run_dir, &aside)
        .map_err(|source| LabError::io("cannot move aside", run_dir.to_owned(), source))
}

/// How a job ended, for the exit code.
pub enum Finished {
    /// Every run complete (or nothing to do).
    Complete,
    /// Some run is not complete: failed or partial.
    Incomplete,
    /// A signal stopped the campaign; it can be resumed.
    Interrupted(i32),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_earlier_attempt_is_kept_beside_the_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("runs/x/rep-1");
        std::fs::create_dir_all(&run_dir).unwrap();
        std::fs::write(run_dir.join("run.json"), "{}").unwrap();
        set_aside(&run_dir).unwrap();
        assert!(!run_dir.exists());
        assert!(dir.path().join("runs/x/rep-1.attempt-1/run.json").is_file());
        std::fs::create_dir_all(&run_dir).unwrap();
        set_aside(&run_dir).unwrap();
        assert!(dir.path().join("runs/x/rep-1.attempt-2").is_dir());
    }

    #[test]
    fn outcome_reads_the_run_directory() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("reader.log");
        std::fs::write(
            &log,
            "oscil-reader: connecting\noscil-reader: connection refused\n",
        )
        .unwrap();
        let end = Ok(ReaderEnd {
            code: Some(1),
            stopped: false,
            reverse: None,
        });
        let (status, reason) = outcome(&dir.path().join("none"), &end, &log);
        assert_eq!(status, CampaignRunStatus::Failed);
        assert_eq!(
            reason.unwrap(),
            "oscil-reader exited with status 1: oscil-reader: connection refused"
        );
        let error = Err(LabError::Setup(
            "oscil-link did not start within 5 s".into(),
        ));
        let (status, reason) = outcome(dir.path(), &error, &log);
        assert_eq!(
            (status, reason.as_deref()),
            (
                CampaignRunStatus::Failed,
                Some("oscil-link did not start within 5 s")
            )
        );
    }
}

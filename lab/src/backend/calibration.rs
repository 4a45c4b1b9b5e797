//! A pair's calibration run on a backend, before the first run that waits for its slow
//! rate (the rule itself is `crate::plan::calibrate`).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oscil_model::campaign::{Calibration, CampaignRun, CampaignRunStatus};

use super::Backend;
use crate::campaign::dir::{outcome, set_aside};
use crate::campaign::error::LabError;
use crate::campaign::ui::human_duration;
use crate::plan::calibrate::{self, CALIBRATION};

/// Why a pair's calibration gave no slow rate, so its runs cannot go.
#[derive(Debug, thiserror::Error)]
pub enum CalibrationError {
    #[error("no slow rate: the calibration run failed ({0})")]
    Setup(Box<LabError>),
    #[error("no slow rate: the calibration run failed ({} holds no slow rate)", .0.display())]
    NoSlowRate(PathBuf),
    #[error("no slow rate: the calibration run failed ({status}: {reason})")]
    Ended { status: String, reason: String },
}

/// Before `run`: when it waits for its pair's calibration (`crate::plan::calibrate`), runs
/// that on `backend` and fixes `run`'s slow rate by it, telling `say` what it does. Returns
/// the calibration, for `campaign.json`, or why `run` cannot go.
pub fn calibrate_before(
    backend: &mut dyn Backend,
    campaign_dir: &Path,
    run: &mut CampaignRun,
    say: &mut dyn FnMut(&str),
) -> Result<Option<Calibration>, CalibrationError> {
    if !calibrate::awaits(run) {
        return Ok(None);
    }
    let pair = run
        .pair
        .as_deref()
        .map_or(String::new(), |p| format!(" of {p}"));
    let full_speed = Duration::from_millis(calibrate::plan(run).settings.pattern.fast_ms);
    say(&format!(
        "oscil-lab: calibrating the path{pair}: {} at full speed, to fix every run's slow rate",
        human_duration(full_speed)
    ));
    let calibration = run_calibration(backend, campaign_dir, run)?;
    say(&calibrate::describe(
        &calibration,
        run.settings.pattern.fraction,
    ));
    calibrate::apply_to(run, &calibration);
    Ok(Some(calibration))
}

/// Runs the calibration for `like`'s pair on `backend`, its files under `campaign_dir`
/// (an earlier attempt's set aside), its logs in `logs/calibration[_<pair>]`.
fn run_calibration(
    backend: &mut dyn Backend,
    campaign_dir: &Path,
    like: &CampaignRun,
) -> Result<Calibration, CalibrationError> {
    let run = calibrate::plan(like);
    let run_dir = campaign_dir.join(&run.dir);
    let logs = campaign_dir.join("logs").join(match &run.pair {
        Some(pair) => format!("{CALIBRATION}_{pair}"),
        None => CALIBRATION.into(),
    });
    let prepared = set_aside(&run_dir).and_then(|()| {
        for dir in [run_dir.parent().unwrap_or(campaign_dir), &logs] {
            std::fs::create_dir_all(dir)
                .map_err(|source| LabError::io("cannot create", dir.to_owned(), source))?;
        }
        Ok(())
    });
    prepared.map_err(|e| CalibrationError::Setup(Box::new(e)))?;
    let result = backend.run(&run, &run_dir, &logs, &mut |_: Duration| {});
    match outcome(&run_dir, &result, &logs.join("reader.log")) {
        (CampaignRunStatus::Complete, _) => {
            let now_ms = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            calibrate::measured(&run, &run_dir, now_ms).ok_or(CalibrationError::NoSlowRate(run_dir))
        }
        (status, reason) => Err(CalibrationError::Ended {
            status: format!("{status:?}").to_lowercase(),
            reason: reason.unwrap_or_else(|| "no reason given".into()),
        }),
    }
}

//! Running a campaign on one backend: the loop over the plan, each run's calibration
//! first when it waits for one, each attempt's outcome saved, a spoiled run redone.

use oscil_model::campaign::{CampaignRun, CampaignRunStatus};

use crate::backend::calibration::calibrate_before;
use crate::backend::Backend;
use crate::campaign::dir::{outcome, set_aside, CampaignDir};
use crate::campaign::error::LabError;
use crate::campaign::ui::Ui;
use crate::plan::calibrate;
use crate::sys;

/// How a campaign's loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every run was tried.
    Done,
    /// A stop signal came; the rest stays pending for `--resume`.
    Interrupted(i32),
}

/// How many times a run whose link the emulator could not hold is run again. A spoiled run
/// counts in no verdict, and a busy moment of the host (a build finishing beside it) spoils
/// runs in a row: `scripts/lab --quick` right after a build once had both its runs left
/// out and no comparison at all, where a minute later both counted. One more attempt
/// gives the campaign its figures without hiding a host that cannot hold the path: a run
/// spoiled twice stays flagged.
pub const SPOILED_REDOS: u32 = 1;

/// Runs every run that is not complete, in plan order.
pub fn execute(
    cdir: &mut CampaignDir,
    backend: &mut dyn Backend,
    ui: &mut Ui,
) -> Result<Ended, LabError> {
    for index in 0..cdir.campaign.runs.len() {
        if let Some(signal) = sys::stop_signal() {
            return Ok(Ended::Interrupted(signal));
        }
        let mut run = cdir.campaign.runs[index].clone();
        if run.status == CampaignRunStatus::Complete {
            continue;
        }
        let calibrated = calibrate_before(backend, &cdir.dir, &mut run, &mut |line| ui.line(line));
        match calibrated {
            Ok(Some(calibration)) => {
                calibrate::apply(&mut cdir.campaign, calibration);
                cdir.save()?;
            }
            Ok(None) => {}
            Err(why) => {
                let reason = why.to_string();
                let run_dir = cdir.dir.join(&run.dir);
                ui.finish_run(&run, CampaignRunStatus::Failed, Some(&reason), &run_dir);
                cdir.set(index, CampaignRunStatus::Failed, Some(reason))?;
                continue;
            }
        }
        for redo in 0..=SPOILED_REDOS {
            attempt(cdir, index, &run, backend, ui)?;
            let Some(why) = cdir.campaign.runs[index].link_spoiled.clone() else {
                break;
            };
            if redo == SPOILED_REDOS || sys::stop_signal().is_some() {
                break;
            }
            ui.redo(&run, &why);
        }
    }
    Ok(match sys::stop_signal() {
        Some(signal) => Ended::Interrupted(signal),
        None => Ended::Done,
    })
}

/// One attempt at a run: an earlier attempt's run directory and logs set aside, the run on
/// the backend, its outcome saved.
fn attempt(
    cdir: &mut CampaignDir,
    index: usize,
    run: &CampaignRun,
    backend: &mut dyn Backend,
    ui: &mut Ui,
) -> Result<(), LabError> {
    let run_dir = cdir.dir.join(&run.dir);
    set_aside(&run_dir)?;
    if let Some(parent) = run_dir.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|source| LabError::io("cannot create", parent.to_owned(), source))?;
    }
    let logs = cdir.dir.join("logs").join(format!(
        "{:03}_{}_rep-{}",
        run.position, run.label, run.repetition
    ));
    set_aside(&logs)?;
    std::fs::create_dir_all(&logs)
        .map_err(|source| LabError::io("cannot create", logs.clone(), source))?;
    ui.start_run(run);
    let result = backend.run(run, &run_dir, &logs, &mut |elapsed| {
        ui.tick(run, &run_dir, elapsed)
    });
    let (status, reason) = outcome(&run_dir, &result, &logs.join("reader.log"));
    cdir.set(index, status, reason.clone())?;
    ui.finish_run(run, status, reason.as_deref(), &run_dir);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use oscil_model::campaign::Campaign;
    use oscil_model::lab::Sides;
    use oscil_rundir::campaign;

    use super::*;
    use crate::campaign::session::ReaderEnd;
    use crate::plan::matrix::{
        configurations, plan_runs, AxisValue, Matrix, Setting, SlowRateChoice,
    };
    use oscil_model::campaign::{Backend as BackendKind, Order, CAMPAIGN_FORMAT_VERSION};

    /// A backend on which no run can start: the loop's bookkeeping, without a kernel.
    struct Refusing {
        tried: Vec<(String, u32)>,
    }

    impl Backend for Refusing {
        fn ends(&self) -> Sides<String> {
            Sides {
                sender: "s".into(),
                receiver: "r".into(),
            }
        }
        fn facts(&self) -> serde_json::Value {
            serde_json::Value::Null
        }
        fn per_run_overhead(&self) -> Duration {
            Duration::ZERO
        }
        fn receiver_kernel(&self) -> &str {
            "6.18.0"
        }
        fn run(
            &mut self,
            run: &CampaignRun,
            _: &Path,
            _: &Path,
            _: &mut dyn FnMut(Duration),
        ) -> Result<ReaderEnd, LabError> {
            self.tried.push((run.label.clone(), run.repetition));
            Err(LabError::Setup(format!("no room for {}", run.label)))
        }
        fn close(&mut self) -> Result<(), LabError> {
            Ok(())
        }
    }

    /// Two configurations of two runs each on real hosts (no path), the slow rate
    /// `slow_rate`.
    fn campaign_dir(dir: &Path, slow_rate: SlowRateChoice) -> CampaignDir {
        let lowat = |label: &str, bytes| AxisValue {
            label: Some(label.into()),
            set: Setting::Lowat(bytes),
        };
        let matrix = Matrix {
            axes: vec![vec![lowat("a", None), lowat("b", Some(1))]],
            slow_rate,
            ..Matrix::default()
        };
        let runs = plan_runs(&configurations(&matrix), 2, Order::Grouped, 0);
        let campaign = Campaign {
            format_version: CAMPAIGN_FORMAT_VERSION,
            software: "test".into(),
            created_unix_ms: 0,
            backend: BackendKind::Netns,
            sender: "s".into(),
            receiver: "r".into(),
            order: Order::Grouped,
            seed: 0,
            repeat: 2,
            runs,
            hosts: None,
            calibrations: Vec::new(),
        };
        CampaignDir {
            dir: dir.to_owned(),
            campaign,
        }
    }

    #[test]
    fn every_run_not_complete_is_tried_in_order_and_each_outcome_is_saved() {
        let dir = tempfile::tempdir().unwrap();
        let mut cdir = campaign_dir(
            dir.path(),
            SlowRateChoice::Given(oscil_model::pattern::BitRate::from_bps(1_000_000)),
        );
        cdir.campaign.runs[1].status = CampaignRunStatus::Complete;
        let mut backend = Refusing { tried: Vec::new() };
        let mut ui = Ui::new(3, Duration::ZERO, Duration::ZERO, Path::new("/nonexistent"));
        let ended = execute(&mut cdir, &mut backend, &mut ui).unwrap();
        assert_eq!(ended, Ended::Done);
        let tried: Vec<(&str, u32)> = backend
            .tried
            .iter()
            .map(|(l, r)| (l.as_str(), *r))
            .collect();
        assert_eq!(
            tried,
            [("a", 1), ("b", 1), ("b", 2)],
            "the complete run is skipped"
        );
        let saved = campaign::load(dir.path()).unwrap();
        let statuses: Vec<CampaignRunStatus> = saved.runs.iter().map(|r| r.status).collect();
        use CampaignRunStatus::{Complete, Failed};
        assert_eq!(statuses, [Failed, Complete, Failed, Failed]);
        assert_eq!(saved.runs[3].reason.as_deref(), Some("no room for b"));
        assert!(dir.path().join("logs/004_b_rep-2").is_dir());
    }

    #[test]
    fn a_run_waiting_for_a_calibration_that_fails_fails_saying_so_and_the_next_tries_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut cdir = campaign_dir(dir.path(), SlowRateChoice::PerPath);
        let mut backend = Refusing { tried: Vec::new() };
        let mut ui = Ui::new(4, Duration::ZERO, Duration::ZERO, Path::new("/nonexistent"));
        execute(&mut cdir, &mut backend, &mut ui).unwrap();
        let tried: Vec<&str> = backend.tried.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(
            tried, ["calibration"; 4],
            "no run went without its slow rate"
        );
        let saved = campaign::load(dir.path()).unwrap();
        assert!(saved.calibrations.is_empty());
        for run in &saved.runs {
            assert_eq!(run.status, CampaignRunStatus::Failed);
            assert_eq!(
                run.reason.as_deref(),
                Some("no slow rate: the calibration run failed (failed: no room for calibration)")
            );
        }
        assert!(dir.path().join("logs/calibration").is_dir());
    }
}

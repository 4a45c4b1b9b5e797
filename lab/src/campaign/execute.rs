//! Running a campaign: the campaign directory's bookkeeping (every state change saved
//! atomically to `campaign.json`), the loop over the plan on a backend, and each run's
//! outcome read back from its run directory.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oscil_model::campaign::{Calibration, Campaign, CampaignRun, CampaignRunStatus};
use oscil_model::lab::Sides;
use oscil_rundir::campaign::{self, CampaignError};
use oscil_rundir::safe_fs::{self, SafeFsError};

use super::session::{last_line, Ends, ReaderEnd, RunFiles, SessionError};
use super::sysctl::RestoreError;
use super::ui::{human_duration, Ui};
use crate::plan::calibrate::{self, CALIBRATION};
use crate::remote::host::HostError;
use crate::sys;

/// Everything that can stop the lab, each said in one line.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("{0}")]
    Host(#[from] HostError),
    #[error("{0}")]
    Session(#[from] SessionError),
    #[error("{0}")]
    Restore(#[from] RestoreError),
    #[error("{0}")]
    Campaign(#[from] CampaignError),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] SafeFsError),
    #[error(transparent)]
    Unpack(#[from] crate::remote::unpack::UnpackError),
    /// A host another campaign holds, or whose lock could not be taken.
    #[error(transparent)]
    Lock(#[from] crate::remote::lock::LockError),
    #[error("{0}")]
    Setup(String),
    /// A new campaign's `--out` holds something: a bad value, exit 2 as in the reader.
    #[error("{shown} is not empty: --resume {shown} continues its campaign, --force starts afresh there", shown = .0.display())]
    OutInUse(PathBuf),
    /// `--out` cannot be made a directory (a file is there): a bad value, exit 2.
    #[error(transparent)]
    Out(oscil_rundir::RunDirError),
    /// `--resume DIR`'s campaign.json does not say how it ran: another program made it.
    #[error("campaign.json does not say how it ran (no hosts.lab_backend): not a campaign this oscil-lab made, so it cannot be resumed")]
    NotResumable,
}

impl LabError {
    pub fn io(what: &'static str, path: PathBuf, source: std::io::Error) -> LabError {
        LabError::Io { what, path, source }
    }

    /// True when the command line names what cannot work (a used or unmakeable `--out`,
    /// no campaign in `--resume DIR`, no `restore DIR`): exit 2, as in every binary.
    pub fn is_bad_path(&self) -> bool {
        match self {
            LabError::OutInUse(_) | LabError::Out(_) | LabError::NotResumable => true,
            LabError::Campaign(e) => e.is_bad_path(),
            LabError::Restore(e) => matches!(e, RestoreError::NoDir(_)),
            _ => false,
        }
    }
}

/// Where runs happen: the namespace lab or two real hosts.
pub trait Backend {
    /// The two ends, as `campaign.json` names them.
    fn ends(&self) -> Sides<String>;
    /// What the backend recorded about its hosts.
    fn facts(&self) -> serde_json::Value;
    /// Time a run takes beyond its pattern, for estimates.
    fn per_run_overhead(&self) -> Duration;
    /// The receiver's kernel release (`uname -r`): what the plan's axes are checked against.
    fn receiver_kernel(&self) -> &str;
    /// One run, leaving its run directory at `run_dir` on this machine.
    fn run(
        &mut self,
        run: &CampaignRun,
        run_dir: &Path,
        logs: &Path,
        tick: &mut dyn FnMut(Duration),
    ) -> Result<ReaderEnd, LabError>;
    /// Puts back everything the backend changed. Also done on drop, quietly.
    fn close(&mut self) -> Result<(), LabError>;
}

/// A fresh private directory (the lab's tag and a random name, mode 0700) for the lab's key
/// and scratch files: never a guessable path another user could have made first, and
/// known as this lab's to a later one if this one is killed.
pub fn private_dir() -> Result<tempfile::TempDir, LabError> {
    let prefix = format!(
        "{}_{}",
        crate::leftovers::tag(),
        crate::leftovers::KEY_DIR_KIND
    );
    Ok(safe_fs::private_temp_dir(&prefix)?)
}

/// Writes a fresh campaign key into `dir` as `key`, created exclusively (never through a
/// link left there), mode 0600; returns its path.
pub fn write_key(dir: &Path) -> Result<PathBuf, LabError> {
    use std::io::Write;
    let path = dir.join("key");
    let key = oscil_protocol::key::generate_key()
        .map_err(|source| LabError::io("cannot read", "/dev/urandom".into(), source))?;
    safe_fs::create_new(&path, 0o600)?
        .write_all(key.as_bytes())
        .map_err(|source| LabError::io("cannot write", path.clone(), source))?;
    Ok(path)
}

/// Runs the daemon and the reader for one run; `on_daemon` hears the daemon's PID once it
/// listens and `None` once it is stopped (the hosts backend records it for `restore`).
pub fn run_session(
    ends: &Ends,
    run: &CampaignRun,
    files: &RunFiles,
    tick: &mut dyn FnMut(Duration),
    on_daemon: Option<&mut dyn FnMut(Option<u32>) -> Result<(), LabError>>,
) -> Result<ReaderEnd, LabError> {
    let (mut daemon, port) = ends.start_daemon(files.daemon_log)?;
    let mut on_daemon = on_daemon;
    if let Some(record) = on_daemon.as_mut() {
        record(Some(daemon.pid))?;
    }
    let result = ends.run_reader(run, port, files, tick);
    daemon.stop(Duration::from_secs(5));
    if let Some(record) = on_daemon.as_mut() {
        record(None)?;
    }
    Ok(result?)
}

/// A run's status from what it left: `run.json` says complete or partial (and why); no
/// `run.json` means the reader never got going.
pub fn outcome(
    run_dir: &Path,
    result: &Result<ReaderEnd, LabError>,
    reader_log: &Path,
) -> (CampaignRunStatus, Option<String>) {
    let end = match result {
        Err(error) => return (CampaignRunStatus::Failed, Some(error.to_string())),
        Ok(end) => end,
    };
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

    fn set(
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

/// How a job ended, for the exit code.
pub enum Finished {
    /// Every run complete (or nothing to do).
    Complete,
    /// Some run is not complete: failed or partial.
    Incomplete,
    /// A signal stopped the campaign; it can be resumed.
    Interrupted(i32),
}

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
            ui.line(&format!(
                "[{}] {} rep-{}: running it again, spoiled ({why}; this attempt is kept beside it, outside the verdicts)",
                run.position, run.label, run.repetition
            ));
            ui.add_redo(&run);
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
    use super::*;
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
        let mut cdir = campaign_dir(dir.path(), SlowRateChoice::Given(1_000_000));
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

    #[test]
    fn keys_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = private_dir().unwrap();
        let path = write_key(dir.path()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap().len(), 64);
    }

    /// Another user pre-creates the lab's old guessable directory, `/tmp/oscil-lab-<pid>`,
    /// with `key` a link to a file of theirs: the lab neither uses that directory nor
    /// writes through a link planted in one it is handed.
    #[test]
    fn a_planted_directory_and_key_link_are_not_followed() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let scratch = tempfile::tempdir().unwrap();
        let theirs = scratch.path().join("theirs");
        std::fs::write(&theirs, "mine").unwrap();
        let planted = std::env::temp_dir().join(format!("oscil-lab-{}", std::process::id()));
        std::fs::create_dir(&planted).unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::os::unix::fs::symlink(&theirs, planted.join("key")).unwrap();
        if oscil_testkit::is_root() {
            // As root, the planted directory belongs to nobody, as an attacker's would.
            let chown = std::process::Command::new("chown")
                .args(["-h", "65534:65534"])
                .arg(&planted)
                .arg(planted.join("key"))
                .status()
                .unwrap();
            assert!(chown.success());
        }
        let dir = private_dir().unwrap();
        assert_ne!(dir.path(), planted);
        let meta = std::fs::metadata(dir.path()).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        assert_eq!(meta.uid(), std::fs::metadata("/proc/self").unwrap().uid());
        write_key(dir.path()).unwrap();
        // Handed the planted directory itself, the key is refused, not written through.
        let err = write_key(&planted).unwrap_err().to_string();
        assert!(err.contains("File exists"), "{err}");
        assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "mine");
        std::fs::remove_dir_all(&planted).unwrap();
    }
}

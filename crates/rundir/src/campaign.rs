//! The campaign directory on disk: `campaign.json` read within bounds and written
//! atomically, and each run's directory reached without following a link out of it. The
//! record itself is `oscil_model::campaign`.

use std::path::{Component, Path, PathBuf};

use oscil_model::campaign::{
    is_plain_label, Campaign, CampaignRun, CampaignRunStatus, CAMPAIGN_FORMAT_VERSION,
    CAMPAIGN_JSON,
};
use oscil_model::socket::is_congestion_name;
use oscil_model::text::escape_peer;

use crate::safe_fs::{self, SafeFsError};

/// The most bytes a `campaign.json` may hold (a plan of 10,000 runs takes ~15 MB).
pub const MAX_CAMPAIGN_BYTES: u64 = 64 << 20;

/// Why a campaign directory cannot be read or written; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    #[error("{0}: no such directory")]
    NoSuchDir(PathBuf),
    #[error("{0}: not a campaign directory (no campaign.json)")]
    NotACampaign(PathBuf),
    /// A run's directory where a campaign's was expected.
    #[error("{0}: a run directory (run.json, oscil-reader's), not a campaign directory (campaign.json, oscil-lab's --out)")]
    RunNotCampaign(PathBuf),
    /// A file where a campaign directory was expected.
    #[error("{0}: a file, not a campaign directory")]
    FileNotCampaign(PathBuf),
    /// The OS would not say whether the directory holds a campaign (a permission, most often).
    #[error("{}: {}", .path.display(), oscil_model::error_text::os_error(.error))]
    Unreadable {
        path: PathBuf,
        /// Said in the line, not as a cause after it.
        error: std::io::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a campaign.json this oscil-lab can read: {}", .path.display(), crate::json_error::describe(.error))]
    Bad {
        path: PathBuf,
        /// Said in the line, not as a cause after it.
        error: serde_json::Error,
    },
    #[error("{path}: campaign format {found} is newer than this build reads ({CAMPAIGN_FORMAT_VERSION})")]
    NewerFormat { path: PathBuf, found: u32 },
    /// Not a regular file, too large, or (for the lab) owned or writable by another user.
    #[error(transparent)]
    File(#[from] SafeFsError),
    /// A run's label or directory that is not the plain name the lab gives.
    #[error("{path}: {why}; refused")]
    Unsafe { path: PathBuf, why: String },
}

/// The runs that finished, each with its directory under `campaign_dir`, or why that
/// directory is not to be read (a link out of the campaign).
pub fn complete_runs<'a>(
    campaign: &'a Campaign,
    campaign_dir: &'a Path,
) -> impl Iterator<Item = (&'a CampaignRun, Result<PathBuf, CampaignError>)> + 'a {
    campaign
        .runs
        .iter()
        .filter(|run| run.status == CampaignRunStatus::Complete)
        .map(move |run| (run, run_dir(campaign_dir, run)))
}

/// `run`'s directory under `campaign_dir`, when every directory on the way down from the
/// campaign is a directory and not a link (which could lead anywhere).
pub fn run_dir(campaign_dir: &Path, run: &CampaignRun) -> Result<PathBuf, CampaignError> {
    let mut path = campaign_dir.to_owned();
    for part in run.dir.components() {
        path.push(part);
        let meta = path
            .symlink_metadata()
            .map_err(|source| CampaignError::Io {
                path: path.clone(),
                source,
            })?;
        if !meta.file_type().is_dir() {
            return Err(CampaignError::Unsafe {
                path: path.clone(),
                why: "not a directory (a link out of the campaign?)".into(),
            });
        }
    }
    Ok(path)
}

/// True when `dir` holds a `campaign.json` (in any form: a link or a FIFO there is
/// refused when read, not taken for a run directory).
pub fn is_campaign(dir: &Path) -> bool {
    dir.join(CAMPAIGN_JSON).symlink_metadata().is_ok()
}

/// Every run's label is plain and its directory is `runs/<label>/rep-<k>`, so nothing in
/// `campaign.json` can point outside the campaign directory or into another run's.
fn check_runs(path: &Path, campaign: &Campaign) -> Result<(), CampaignError> {
    let unsafe_run = |why: String| CampaignError::Unsafe {
        path: path.to_owned(),
        why,
    };
    for run in &campaign.runs {
        if !is_plain_label(&run.label) {
            let shown = escape_peer(&run.label);
            return Err(unsafe_run(format!("label \"{shown}\" is not a plain name")));
        }
        if let Some(cc) = run
            .settings
            .congestion
            .as_deref()
            .filter(|cc| !is_congestion_name(cc))
        {
            let shown = escape_peer(cc);
            return Err(unsafe_run(format!("congestion \"{shown}\" is not a name")));
        }
        if let Some(pair) = run.pair.as_deref().filter(|p| !is_plain_label(p)) {
            let shown = escape_peer(pair);
            return Err(unsafe_run(format!("pair \"{shown}\" is not a plain name")));
        }
        let expected = Path::new("runs")
            .join(run.pair.as_deref().unwrap_or_default())
            .join(&run.label)
            .join(format!("rep-{}", run.repetition));
        let plain = run
            .dir
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
        if !plain || run.dir != expected {
            return Err(unsafe_run(format!(
                "run directory {:?} is not {}",
                run.dir,
                expected.display()
            )));
        }
    }
    Ok(())
}

/// `dir` is there and holds a `campaign.json`, or which of the two it lacks.
pub fn check_is_campaign(dir: &Path) -> Result<(), CampaignError> {
    use std::io::ErrorKind;
    let path = dir.join(CAMPAIGN_JSON);
    let unreadable = |path: &Path, error| CampaignError::Unreadable {
        path: path.to_owned(),
        error,
    };
    match path.symlink_metadata() {
        Ok(_) => return Ok(()),
        Err(e) if !matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Err(unreadable(&path, e))
        }
        Err(_) => {}
    }
    match dir.metadata() {
        Err(e) if e.kind() == ErrorKind::NotFound => Err(CampaignError::NoSuchDir(dir.to_owned())),
        Err(e) => Err(unreadable(dir, e)),
        Ok(meta) if !meta.is_dir() => Err(CampaignError::FileNotCampaign(dir.to_owned())),
        Ok(_) if dir.join(oscil_model::run::RUN_JSON).exists() => {
            Err(CampaignError::RunNotCampaign(dir.to_owned()))
        }
        Ok(_) => Err(CampaignError::NotACampaign(dir.to_owned())),
    }
}

impl CampaignError {
    /// True when the directory the command line names is no campaign at all: a bad value
    /// (exit 2), not a failure.
    pub fn is_bad_path(&self) -> bool {
        matches!(
            self,
            CampaignError::NoSuchDir(_)
                | CampaignError::NotACampaign(_)
                | CampaignError::RunNotCampaign(_)
                | CampaignError::FileNotCampaign(_)
                | CampaignError::Unreadable { .. }
                | CampaignError::Bad { .. }
        )
    }
}

/// Reads `campaign.json`: a regular file of bounded size whose runs name only plain
/// directories inside the campaign.
pub fn load(dir: &Path) -> Result<Campaign, CampaignError> {
    let path = dir.join(CAMPAIGN_JSON);
    check_is_campaign(dir)?;
    let text = safe_fs::read_bounded(&path, MAX_CAMPAIGN_BYTES)?;
    let found = serde_json::from_slice::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("format_version")?.as_u64());
    if let Some(found) = found.filter(|&v| v > u64::from(CAMPAIGN_FORMAT_VERSION)) {
        return Err(CampaignError::NewerFormat {
            path,
            found: found as u32,
        });
    }
    let campaign = serde_json::from_slice(&text).map_err(|error| CampaignError::Bad {
        path: path.clone(),
        error,
    })?;
    check_runs(&path, &campaign)?;
    Ok(campaign)
}

/// Writes `campaign.json` atomically (a temporary file renamed over it), so a crash or a
/// signal mid-write never leaves a campaign that cannot be resumed; only into a directory
/// that is root's or this user's all the way up, checked at every save.
pub fn save(dir: &Path, campaign: &Campaign) -> Result<(), CampaignError> {
    safe_fs::check_trusted_dir(dir)?;
    let text = serde_json::to_vec_pretty(campaign).expect("a campaign always serializes");
    Ok(safe_fs::write_atomic(
        &dir.join(CAMPAIGN_JSON),
        &text,
        0o644,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use oscil_model::campaign::{Backend, Order, PathSettings, RunSettings};

    fn campaign() -> Campaign {
        let settings = RunSettings {
            path: Some(PathSettings {
                rate_bps: 1_000_000_000,
                rtt_us: 466_000,
                loss_pct: 0.0,
                queue_packets: None,
            }),
            lowat_bytes: Some(131072),
            wmem_bytes: Some([4096, 16384, 536870912]),
            rmem_bytes: None,
            adv_win_scale: None,
            congestion: Some("cubic".into()),
            ..RunSettings::default()
        };
        let run = |repetition, status| CampaignRun {
            label: "1gbit_466ms_cubic_lowat-131072".into(),
            repetition,
            position: repetition,
            dir: PathBuf::from(format!(
                "runs/1gbit_466ms_cubic_lowat-131072/rep-{repetition}"
            )),
            settings: settings.clone(),
            status,
            reason: None,
            pair: None,
            link_spoiled: None,
        };
        Campaign {
            format_version: CAMPAIGN_FORMAT_VERSION,
            software: "oscil-lab 0.1.0".into(),
            created_unix_ms: 1,
            backend: Backend::Netns,
            sender: "oscil-snd-1".into(),
            receiver: "oscil-rcv-1".into(),
            order: Order::Shuffled,
            seed: 7,
            repeat: 2,
            runs: vec![
                run(1, CampaignRunStatus::Complete),
                run(2, CampaignRunStatus::Failed),
            ],
            hosts: None,
            calibrations: Vec::new(),
        }
    }

    #[test]
    fn saves_loads_and_lists_complete_runs() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_campaign(dir.path()));
        save(dir.path(), &campaign()).unwrap();
        assert!(is_campaign(dir.path()));
        let loaded = load(dir.path()).unwrap();
        assert_eq!(loaded, campaign());
        let run_dir = dir.path().join("runs/1gbit_466ms_cubic_lowat-131072/rep-1");
        std::fs::create_dir_all(&run_dir).unwrap();
        let complete: Vec<_> = complete_runs(&loaded, dir.path()).collect();
        assert_eq!(complete.len(), 1);
        assert_eq!(complete[0].1.as_ref().unwrap(), &run_dir);
        std::fs::remove_dir(&run_dir).unwrap();
        std::os::unix::fs::symlink("/", &run_dir).unwrap();
        let err = complete_runs(&loaded, dir.path())
            .next()
            .unwrap()
            .1
            .unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
        let text = std::fs::read_to_string(dir.path().join(CAMPAIGN_JSON)).unwrap();
        assert!(text.contains(r#""status": "failed""#), "{text}");
    }

    #[test]
    fn run_directories_outside_the_campaign_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for (label, run_dir) in [
            ("../../etc", "runs/../../etc/rep-1"),
            ("x", "/etc"),
            ("x", "runs/y/rep-1"),
            ("a\u{1b}[2J", "runs/a\u{1b}[2J/rep-1"),
        ] {
            let mut bad = campaign();
            bad.runs[0].label = label.into();
            bad.runs[0].dir = run_dir.into();
            save(dir.path(), &bad).unwrap();
            let err = load(dir.path()).unwrap_err().to_string();
            assert!(err.ends_with("; refused"), "{err}");
            assert!(!err.contains('\u{1b}'), "{err}");
        }
    }

    #[test]
    fn a_campaign_json_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join(CAMPAIGN_JSON)).unwrap();
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn newer_format_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CAMPAIGN_JSON), r#"{"format_version": 99}"#).unwrap();
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("format 99"), "{err}");
    }
}

//! Where runs happen: the namespace lab, two real hosts, or a fleet of pairs of them. Each
//! sets up its own hosts and puts them back, so the campaign's loop does not care which.

pub(crate) mod calibration;
pub(crate) mod fleet;
pub(crate) mod hosts;
pub(crate) mod netns;

use std::path::{Path, PathBuf};
use std::time::Duration;

use oscil_model::campaign::CampaignRun;
use oscil_model::lab::Sides;
use oscil_rundir::safe_fs;

use crate::campaign::error::LabError;
use crate::campaign::session::{Ends, ReaderEnd, RunFiles};

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

/// Hears the daemon's PID and port once it listens, and `None` once it is stopped.
pub type OnDaemon<'a> = &'a mut dyn FnMut(Option<(u32, u16)>) -> Result<(), LabError>;

/// Runs the daemon and the reader for one run; `on_daemon` hears the daemon's PID and port
/// once it listens and `None` once it is stopped (the hosts backend records the PID for
/// `restore`, and captures on the port).
pub fn run_session(
    ends: &Ends,
    run: &CampaignRun,
    files: &RunFiles,
    tick: &mut dyn FnMut(Duration),
    on_daemon: Option<OnDaemon>,
) -> Result<ReaderEnd, LabError> {
    let (mut daemon, port) = ends.start_daemon(files.daemon_log)?;
    let mut on_daemon = on_daemon;
    if let Some(record) = on_daemon.as_mut() {
        record(Some((daemon.pid, port)))?;
    }
    let result = ends.run_reader(run, port, files, tick);
    daemon.stop(Duration::from_secs(5));
    if let Some(record) = on_daemon.as_mut() {
        record(None)?;
    }
    Ok(result?)
}

#[cfg(test)]
mod tests {
    use super::*;

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

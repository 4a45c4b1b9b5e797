//! The TCP sysctls under test: which side each belongs to, reading and writing them on a
//! host, and `restore.json`, the values to put back, written before the first change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use oscil_rundir::campaign::RunSettings;
use serde::{Deserialize, Serialize};

use oscil_protocol::text::escape_peer;
use oscil_rundir::safe_fs::{self, SafeFsError};

use crate::host::{Host, HostArgError, HostError};

pub const WMEM: &str = "net.ipv4.tcp_wmem";
pub const LOWAT: &str = "net.ipv4.tcp_notsent_lowat";
pub const RMEM: &str = "net.ipv4.tcp_rmem";
pub const ADV_WIN_SCALE: &str = "net.ipv4.tcp_adv_win_scale";
/// Set on the sender's host.
pub const SENDER_KEYS: [&str; 2] = [WMEM, LOWAT];
/// Set on the receiver's host.
pub const RECEIVER_KEYS: [&str; 2] = [RMEM, ADV_WIN_SCALE];
/// Recorded in each run's metadata, per side.
pub const RECORDED: [&str; 5] = [
    WMEM,
    RMEM,
    LOWAT,
    ADV_WIN_SCALE,
    "net.ipv4.tcp_congestion_control",
];

pub type Sysctls = BTreeMap<String, String>;

/// Reads `keys` on `host`, white space normalised (`4096 16384 4194304`).
pub fn read(host: &Host, keys: &[&str]) -> Result<Sysctls, HostError> {
    let mut argv = vec!["sysctl", "-n"];
    argv.extend(keys);
    let text = host.run(&argv)?;
    let values = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "));
    Ok(keys.iter().map(|k| k.to_string()).zip(values).collect())
}

/// Sets each key to its value on `host`, in one command.
pub fn write(host: &Host, values: &Sysctls) -> Result<(), HostError> {
    let pairs: Vec<String> = values.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut argv = vec!["sysctl", "-q", "-w"];
    argv.extend(pairs.iter().map(String::as_str));
    host.run(&argv).map(drop)
}

/// What a run asks of each side, `original` standing in for every `default`.
pub fn wanted(settings: &RunSettings, original: &Sysctls, keys: &[&str]) -> Sysctls {
    let triple = |t: [u64; 3]| format!("{} {} {}", t[0], t[1], t[2]);
    keys.iter()
        .map(|&key| {
            let value = match key {
                WMEM => settings.wmem_bytes.map(triple),
                RMEM => settings.rmem_bytes.map(triple),
                LOWAT => settings.lowat_bytes.map(|b| b.to_string()),
                ADV_WIN_SCALE => settings.adv_win_scale.map(|v| v.to_string()),
                _ => None,
            };
            let value = value
                .or_else(|| original.get(key).cloned())
                .unwrap_or_default();
            (key.to_owned(), value)
        })
        .collect()
}

pub const RESTORE_JSON: &str = "restore.json";

/// `restore.json`: what to put back on each host, and a daemon left to stop. Present only
/// while a campaign may have changed something.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RestoreFile {
    pub hosts: Vec<HostRestore>,
    /// The daemon of the run in progress, so a crash does not leave it listening.
    #[serde(default)]
    pub daemon: Option<RunningDaemon>,
    /// The campaign's temporary directories on the hosts (they hold its key).
    #[serde(default)]
    pub temp_dirs: Vec<TempDirRecord>,
}

/// Where one of the campaign's temporary directories lives on a host: a record in
/// `restore.json`, so a restore removes it (it is not itself a temporary directory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TempDirRecord {
    pub host: Host,
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostRestore {
    pub host: Host,
    /// Each key's value before the campaign changed it.
    pub sysctls: Sysctls,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunningDaemon {
    pub host: Host,
    pub pid: u32,
}

/// Something in a restore file the lab never records (the file may have been shaped by
/// someone else): names are escaped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Host(#[from] HostArgError),
    #[error("sysctl \"{0}\" is not one the lab sets")]
    NotSysctl(String),
    #[error("{key} = \"{value}\" is not a value")]
    NotValue { key: String, value: String },
    #[error("\"{0}\" is not a directory the lab makes ({WORK_DIR_TEMPLATE})")]
    NotWorkDir(String),
}

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("{0}: no such directory")]
    NoDir(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not a regular file, too large, or owned or writable by another user.
    #[error(transparent)]
    File(#[from] SafeFsError),
    /// Something the lab never records: a sysctl not on its list, an ssh option that
    /// runs a command, a directory it did not make.
    #[error("{path}: {why}; refused, nothing was changed")]
    Refused { path: PathBuf, why: RecordError },
    #[error("{path}: not a valid restore.json: {source}")]
    Bad {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{0}")]
    Host(#[from] HostError),
}

/// The most bytes a `restore.json` may hold.
const MAX_RESTORE_BYTES: u64 = 1 << 20;

/// The sysctls the lab sets on a host, and so the only ones a restore puts back.
pub fn is_restorable(key: &str) -> bool {
    SENDER_KEYS.contains(&key) || RECEIVER_KEYS.contains(&key)
}

/// A sysctl value as the lab records them: up to three integers.
fn is_sysctl_value(value: &str) -> bool {
    let numbers: Vec<&str> = value.split(' ').collect();
    numbers.len() <= 3
        && numbers.iter().all(|n| {
            let digits = n.strip_prefix('-').unwrap_or(n);
            (1..=20).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
        })
}

/// The shape of the temporary directories the lab makes on a host (`mktemp -d` with
/// this template).
pub const WORK_DIR_TEMPLATE: &str = "/tmp/oscil-lab.XXXXXX";

fn is_work_dir(path: &str) -> bool {
    path.strip_prefix("/tmp/oscil-lab.").is_some_and(|suffix| {
        suffix.len() == 6 && suffix.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

impl RestoreFile {
    /// Reads `dir/restore.json` when there is one: a regular file of bounded size, owned
    /// by root (or this user) and writable by nobody else in a directory likewise, holding
    /// only what the lab records ([`RestoreFile::check`]).
    pub fn load(dir: &Path) -> Result<Option<RestoreFile>, RestoreError> {
        let path = dir.join(RESTORE_JSON);
        match path.symlink_metadata() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(RestoreError::Io { path, source }),
            Ok(_) => {}
        }
        safe_fs::check_trusted(dir)?;
        safe_fs::check_trusted(&path)?;
        let text = safe_fs::read_bounded(&path, MAX_RESTORE_BYTES)?;
        let file: RestoreFile =
            serde_json::from_slice(&text).map_err(|source| RestoreError::Bad {
                path: path.clone(),
                source,
            })?;
        file.check()
            .map_err(|why| RestoreError::Refused { path, why })?;
        Ok(Some(file))
    }

    /// Why this file holds something the lab never records, if it does.
    pub fn check(&self) -> Result<(), RecordError> {
        for host in &self.hosts {
            host.host.check()?;
            for (key, value) in &host.sysctls {
                if !is_restorable(key) {
                    return Err(RecordError::NotSysctl(escape_peer(key)));
                }
                if !is_sysctl_value(value) {
                    return Err(RecordError::NotValue {
                        key: key.clone(),
                        value: escape_peer(value),
                    });
                }
            }
        }
        if let Some(daemon) = &self.daemon {
            daemon.host.check()?;
        }
        for dir in &self.temp_dirs {
            dir.host.check()?;
            if !is_work_dir(&dir.path) {
                return Err(RecordError::NotWorkDir(escape_peer(&dir.path)));
            }
        }
        Ok(())
    }

    /// Written through a temporary file and a rename: never half a file.
    pub fn save(&self, dir: &Path) -> Result<(), RestoreError> {
        let text = serde_json::to_vec_pretty(self).expect("restore file serializes");
        Ok(safe_fs::write_atomic(
            &dir.join(RESTORE_JSON),
            &text,
            0o600,
        )?)
    }

    /// Stops the recorded daemon (if that PID is still an oscil-daemon), puts every value
    /// back, removes the temporary directories, then `restore.json`. Tries every host
    /// before reporting a failure.
    pub fn restore(&self, dir: &Path) -> Result<(), RestoreError> {
        if let Some(daemon) = &self.daemon {
            let pid = daemon.pid.to_string();
            let script = "grep -qx oscil-daemon /proc/$1/comm 2>/dev/null && kill $1; true";
            daemon.host.run(&["sh", "-c", script, "sh", &pid])?;
        }
        let mut first_error = None;
        for host in &self.hosts {
            if let Err(e) = write(&host.host, &host.sysctls) {
                first_error.get_or_insert(e);
            }
        }
        for dir in &self.temp_dirs {
            if let Err(e) = remove_work_dir(&dir.host, &dir.path) {
                first_error.get_or_insert(e);
            }
        }
        if let Some(e) = first_error {
            return Err(e.into());
        }
        let path = dir.join(RESTORE_JSON);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(RestoreError::Io { path, source: e })
            }
            _ => Ok(()),
        }
    }
}

/// Removes the lab's work directory `path` on `host` only when it is a directory (not a
/// link) owned by the user the command runs as; one already gone is fine.
pub fn remove_work_dir(host: &Host, path: &str) -> Result<(), HostError> {
    let script = r#"[ -e "$1" ] || [ -L "$1" ] || exit 0
if [ -d "$1" ] && [ ! -L "$1" ] && [ "$(stat -c %u -- "$1")" = "$(id -u)" ]; then
    exec rm -rf -- "$1"
fi
echo "$1: not a directory the lab made (a link, or another user's); left alone" >&2
exit 1"#;
    host.run(&["sh", "-c", script, "sh", path]).map(drop)
}

/// `oscil-lab restore DIR`: finishes what a crashed campaign left. Nothing to do is fine;
/// no such directory is an error.
pub fn restore_dir(dir: &Path) -> Result<bool, RestoreError> {
    if !dir.is_dir() {
        return Err(RestoreError::NoDir(dir.to_owned()));
    }
    match RestoreFile::load(dir)? {
        Some(file) => file.restore(dir).map(|()| true),
        None => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_take_the_recorded_values() {
        let settings = RunSettings {
            lowat_bytes: Some(131072),
            rmem_bytes: Some([4096, 131072, 6291456]),
            ..RunSettings::default()
        };
        let original: Sysctls = [
            (WMEM, "4096 16384 4194304"),
            (LOWAT, "4294967295"),
            (RMEM, "4096 131072 6291456"),
            (ADV_WIN_SCALE, "1"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let sender = wanted(&settings, &original, &SENDER_KEYS);
        assert_eq!(sender[WMEM], "4096 16384 4194304");
        assert_eq!(sender[LOWAT], "131072");
        let receiver = wanted(&settings, &original, &RECEIVER_KEYS);
        assert_eq!(receiver[RMEM], "4096 131072 6291456");
        assert_eq!(receiver[ADV_WIN_SCALE], "1");
        assert_eq!(receiver.len(), 2);
    }

    #[test]
    fn restore_file_round_trips_and_nothing_to_restore_is_fine() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!restore_dir(dir.path()).unwrap());
        let file = RestoreFile {
            hosts: vec![HostRestore {
                host: Host::Netns("x".into()),
                sysctls: Sysctls::from([(LOWAT.to_string(), "1".to_string())]),
            }],
            daemon: Some(RunningDaemon {
                host: Host::Local,
                pid: 7,
            }),
            temp_dirs: vec![TempDirRecord {
                host: Host::Local,
                path: "/tmp/oscil-lab.Ab3x9Z".into(),
            }],
        };
        file.save(dir.path()).unwrap();
        assert_eq!(RestoreFile::load(dir.path()).unwrap(), Some(file));
    }
}

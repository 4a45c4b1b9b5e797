//! The TCP sysctls under test: which side each belongs to, reading and writing them on a
//! host, and `restore.json`, the values to put back, written before the first change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use oscil_protocol::campaign::RunSettings;
use serde::{Deserialize, Serialize};

use crate::host::{Host, HostError};

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
    pub temp_dirs: Vec<TempDir>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TempDir {
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

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a valid restore.json: {source}")]
    Bad {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{0}")]
    Host(#[from] HostError),
}

impl RestoreFile {
    pub fn load(dir: &Path) -> Result<Option<RestoreFile>, RestoreError> {
        let path = dir.join(RESTORE_JSON);
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(RestoreError::Io { path, source }),
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|source| RestoreError::Bad { path, source })
    }

    /// Written through a temporary file and a rename: never half a file.
    pub fn save(&self, dir: &Path) -> Result<(), RestoreError> {
        let path = dir.join(RESTORE_JSON);
        let tmp = dir.join(".restore.json.tmp");
        let io = |source| RestoreError::Io {
            path: path.clone(),
            source,
        };
        let text = serde_json::to_vec_pretty(self).expect("restore file serializes");
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)
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
            if let Err(e) = dir.host.run(&["rm", "-rf", &dir.path]) {
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

/// `oscil-lab restore DIR`: finishes what a crashed campaign left. Nothing to do is fine.
pub fn restore_dir(dir: &Path) -> Result<bool, RestoreError> {
    match RestoreFile::load(dir)? {
        Some(file) => file.restore(dir).map(|()| true),
        None => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::unset_settings;
    use oscil_protocol::PatternConfig;

    #[test]
    fn defaults_take_the_recorded_values() {
        let settings = RunSettings {
            lowat_bytes: Some(131072),
            rmem_bytes: Some([4096, 131072, 6291456]),
            ..unset_settings(1, 100_000, PatternConfig::CLOUDFLARE)
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
            temp_dirs: vec![TempDir {
                host: Host::Local,
                path: "/tmp/oscil-lab.x".into(),
            }],
        };
        file.save(dir.path()).unwrap();
        assert_eq!(RestoreFile::load(dir.path()).unwrap(), Some(file));
    }
}

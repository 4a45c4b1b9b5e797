//! The TCP sysctls under test: which side each belongs to, reading and writing them on a
//! host, and `restore.json`, the values to put back, written before the first change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use oscil_model::campaign::RunSettings;
use oscil_model::sysctl::{Side, Sysctl, SysctlValues};
use serde::{Deserialize, Serialize};

use oscil_model::text::escape_peer;
use oscil_rundir::safe_fs::{self, SafeFsError};

use crate::remote::host::{Host, HostArgError, HostError};

/// Recorded in each run's record, per side: what the lab sets, and the congestion control
/// the host defaults to (the daemon sets one per socket).
pub fn recorded() -> Vec<Sysctl> {
    let mut keys: Vec<Sysctl> = RunSettings::sysctls_set().collect();
    keys.push(Sysctl::TcpCongestionControl);
    keys
}

/// Reads `keys` on `host` by name: `sysctl -e` prints `NAME = VALUE` for each it has (and
/// nothing for one this kernel lacks), and each value is matched to its name, never to
/// its line's place.
pub fn read(host: &Host, keys: &[Sysctl]) -> Result<SysctlValues, HostError> {
    let mut argv = vec!["sysctl", "-e"];
    argv.extend(keys.iter().map(|k| k.name()));
    let text = host.run(&argv)?;
    by_name(&text, keys).map_err(|detail| HostError::Failed {
        host: host.name(),
        command: argv.join(" "),
        detail: detail.to_string(),
    })
}

/// A line of `sysctl`'s answer the lab cannot take; every text from the host is escaped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum SysctlAnswerError {
    #[error("{0} is not NAME = VALUE")]
    NotNameValue(String),
    #[error("it named {0}, not asked")]
    NotAsked(String),
    /// The value's own parser's words.
    #[error("{0}")]
    Value(String),
}

/// `sysctl`'s `NAME = VALUE` lines, each value typed by its name among `keys`.
fn by_name(text: &str, keys: &[Sysctl]) -> Result<SysctlValues, SysctlAnswerError> {
    text.lines()
        .map(|line| {
            let (name, value) = line
                .split_once(" = ")
                .ok_or_else(|| SysctlAnswerError::NotNameValue(escape_peer(line)))?;
            let sysctl = keys
                .iter()
                .copied()
                .find(|k| k.name() == name.trim())
                .ok_or_else(|| SysctlAnswerError::NotAsked(escape_peer(name)))?;
            let value = sysctl
                .parse(value)
                .map_err(|e| SysctlAnswerError::Value(escape_peer(&e.to_string())))?;
            Ok((sysctl, value))
        })
        .collect()
}

/// Sets each sysctl to its value on `host`, in one command.
pub fn write(host: &Host, values: &SysctlValues) -> Result<(), HostError> {
    let pairs: Vec<String> = values.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut argv = vec!["sysctl", "-q", "-w"];
    argv.extend(pairs.iter().map(String::as_str));
    host.run(&argv).map(drop)
}

/// What a run asks of the host on `side`: each sysctl its settings set there, `original`'s
/// value standing in for every `default` (and left out where `original` lacks it).
pub fn wanted(settings: &RunSettings, original: &SysctlValues, side: Side) -> SysctlValues {
    settings
        .sysctls()
        .into_iter()
        .filter(|(sysctl, _)| sysctl.side() == side)
        .filter_map(|(sysctl, value)| {
            Some((sysctl, value.or_else(|| original.get(sysctl).cloned())?))
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
    /// Each sysctl's value before the campaign changed it, by name, in the kernel's text:
    /// read back, it is checked against the sysctls the lab sets ([`RestoreFile::check`]).
    pub sysctls: BTreeMap<String, String>,
}

impl HostRestore {
    /// What to put back on `host`, the host of `side`: of `values`, the sysctls the lab
    /// sets there.
    pub fn new(host: Host, side: Side, values: &SysctlValues) -> HostRestore {
        HostRestore {
            host,
            sysctls: values
                .0
                .iter()
                .filter(|(sysctl, _)| sysctl.side() == side && is_restorable(**sysctl))
                .map(|(sysctl, value)| (sysctl.name().to_owned(), value.to_string()))
                .collect(),
        }
    }

    /// The values to put back, typed; `Err` names the first that is not a value of a
    /// sysctl the lab sets.
    fn values(&self) -> Result<SysctlValues, RecordError> {
        self.sysctls
            .iter()
            .map(|(name, text)| {
                let sysctl = Sysctl::from_name(name)
                    .filter(|s| is_restorable(*s))
                    .ok_or_else(|| RecordError::NotSysctl(escape_peer(name)))?;
                let value = sysctl.parse(text).map_err(|_| RecordError::NotValue {
                    key: name.clone(),
                    value: escape_peer(text),
                })?;
                Ok((sysctl, value))
            })
            .collect()
    }
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
fn is_restorable(sysctl: Sysctl) -> bool {
    RunSettings::sysctls_set().any(|s| s == sysctl)
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
            host.values()?;
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
            let values = host.values().map_err(|why| RestoreError::Refused {
                path: dir.join(RESTORE_JSON),
                why,
            })?;
            if let Err(e) = write(&host.host, &values) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use oscil_model::sysctl::SysctlValue;

    #[test]
    fn defaults_take_the_recorded_values() {
        let settings = RunSettings {
            lowat_bytes: Some(131072),
            rmem_bytes: Some([4096, 131072, 6291456]),
            ..RunSettings::default()
        };
        let original = by_name(
            "net.ipv4.tcp_wmem = 4096\t16384\t4194304\n\
             net.ipv4.tcp_notsent_lowat = 4294967295\n\
             net.ipv4.tcp_rmem = 4096\t131072\t6291456\n\
             net.ipv4.tcp_adv_win_scale = 1",
            &recorded(),
        )
        .unwrap();
        let sender = wanted(&settings, &original, Side::Sender);
        let text = |values: &SysctlValues, s: Sysctl| values.get(s).unwrap().to_string();
        assert_eq!(text(&sender, Sysctl::TcpWmem), "4096 16384 4194304");
        assert_eq!(text(&sender, Sysctl::TcpNotsentLowat), "131072");
        assert_eq!(sender.0.len(), 2);
        let receiver = wanted(&settings, &original, Side::Receiver);
        assert_eq!(text(&receiver, Sysctl::TcpRmem), "4096 131072 6291456");
        assert_eq!(text(&receiver, Sysctl::TcpAdvWinScale), "1");
        assert_eq!(receiver.0.len(), 2);
    }

    /// Values go with their names whatever the order of the lines, and a line that is not
    /// one asked for is an error, not a shifted value.
    #[test]
    fn values_are_read_back_by_name() {
        let keys = [Sysctl::TcpWmem, Sysctl::TcpNotsentLowat];
        let read = by_name(
            "net.ipv4.tcp_notsent_lowat = 131072\nnet.ipv4.tcp_wmem = 1\t2\t3",
            &keys,
        )
        .unwrap();
        assert_eq!(
            read.get(Sysctl::TcpWmem),
            Some(&SysctlValue::Triple([1, 2, 3]))
        );
        assert_eq!(
            read.get(Sysctl::TcpNotsentLowat),
            Some(&SysctlValue::Integer(131072))
        );
        let one_missing = by_name("net.ipv4.tcp_wmem = 1 2 3", &keys).unwrap();
        assert_eq!(one_missing.0.len(), 1);
        assert_eq!(
            by_name("net.ipv4.tcp_rmem = 1 2 3", &keys).unwrap_err(),
            SysctlAnswerError::NotAsked("net.ipv4.tcp_rmem".into())
        );
        assert_eq!(
            by_name("131072", &keys).unwrap_err().to_string(),
            "131072 is not NAME = VALUE"
        );
    }

    #[test]
    fn restore_file_round_trips_and_nothing_to_restore_is_fine() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(RestoreFile::load(dir.path()).unwrap(), None);
        let values = SysctlValues::from_iter([
            (Sysctl::TcpNotsentLowat, SysctlValue::Integer(1)),
            (
                Sysctl::TcpCongestionControl,
                SysctlValue::Name("bbr".into()),
            ),
        ]);
        let file = RestoreFile {
            hosts: vec![HostRestore::new(
                Host::Netns("x".into()),
                Side::Sender,
                &values,
            )],
            daemon: Some(RunningDaemon {
                host: Host::Local,
                pid: 7,
            }),
            temp_dirs: vec![TempDirRecord {
                host: Host::Local,
                path: "/tmp/oscil-lab.Ab3x9Z".into(),
            }],
        };
        assert_eq!(
            file.hosts[0].sysctls,
            BTreeMap::from([("net.ipv4.tcp_notsent_lowat".to_owned(), "1".to_owned())]),
            "only what the lab sets is put back"
        );
        file.save(dir.path()).unwrap();
        assert_eq!(RestoreFile::load(dir.path()).unwrap(), Some(file));
    }
}

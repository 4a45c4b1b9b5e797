//! One campaign per host at a time. A campaign holds a lock on every host it measures on
//! for its whole life: `flock` on `/run/oscil-lab/net-<inode>.lock`, one file per network
//! namespace (the sysctls the lab sets belong to one), held open by the lab itself on this
//! machine and, on a remote host, by a shell its own ssh connection keeps alive. Either way
//! the lock dies with its holder: a killed lab closes the file, or its ssh's standard
//! input, and the kernel releases the lock. The file says who holds it, for the campaign
//! that is refused.

use std::fs::{DirBuilder, File, OpenOptions, TryLockError};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use oscil_model::text::escape_peer;

use super::host::Host;

/// Where the locks live on every host: root's alone (`/run/lock` is writable by all).
pub const LOCK_DIR: &str = "/run/oscil-lab";
/// The most of a lock file read back to say who holds it.
const HOLDER_BYTES: u64 = 512;

/// The remote side: the lock file of this host's network namespace, taken without
/// waiting; `locked` once held (then held until standard input ends), else `held` and
/// who holds it.
const REMOTE: &str = r#"set -e
d=/run/oscil-lab
mkdir -p -m 0755 "$d"
[ "$(stat -c %u "$d")" = 0 ] && [ ! -L "$d" ] || { echo "$d is not root's" >&2; exit 3; }
f="$d/net-$(stat -L -c %i /proc/self/ns/net).lock"
exec 9<>"$f"
if ! flock -n 9; then printf 'held %s\n' "$(head -c 512 "$f" | tr '\n' ' ')"; exit 0; fi
printf '%s\n' "$1" >"$f"
echo locked
exec cat >/dev/null"#;

/// A host held for this campaign until dropped.
#[derive(Debug)]
pub enum HostLock {
    Local(File),
    Remote(Child),
}

/// How long a remote lock's ssh may take to end once its standard input has.
const RELEASE_PATIENCE: Duration = Duration::from_secs(5);

impl Drop for HostLock {
    fn drop(&mut self) {
        if let HostLock::Local(file) = self {
            // Closing the file would release it too; said here so the release is visible.
            let _ = file.unlock();
        }
        if let HostLock::Remote(child) = self {
            // The end of its standard input ends the remote shell, and its lock, before
            // ssh itself ends: a campaign started next finds the host free. Killing ssh
            // alone leaves the lock until the remote sshd notices, a moment later.
            drop(child.stdin.take());
            let deadline = Instant::now() + RELEASE_PATIENCE;
            while Instant::now() < deadline {
                match child.try_wait() {
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                    Ok(Some(_)) | Err(_) => break,
                }
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    #[error("{host} is in use by another campaign: {holder} (oscil-lab runs one campaign per host; wait for it to end or stop it)")]
    Held { host: String, holder: String },
    #[error("{host}: cannot take the campaign lock ({LOCK_DIR}): {why}")]
    Failed { host: String, why: String },
}

/// Who a campaign is, as its lock files say: its directory, process and machine.
pub fn holder(campaign_dir: &Path) -> String {
    let machine = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let dir = std::path::absolute(campaign_dir).unwrap_or_else(|_| campaign_dir.to_owned());
    format!(
        "campaign {} (oscil-lab pid {} on {}, since {})",
        dir.display(),
        std::process::id(),
        machine.trim(),
        humantime::format_rfc3339_seconds(std::time::SystemTime::now())
    )
}

/// Takes `host`'s lock for `who`, without waiting.
pub fn take(host: &Host, who: &str) -> Result<HostLock, LockError> {
    let failed = |why: String| LockError::Failed {
        host: host.name(),
        why,
    };
    match host {
        Host::Local => match take_local(who).map_err(|e| failed(e.to_string()))? {
            LocalLock::Taken(lock) => Ok(lock),
            LocalLock::Held(holder) => Err(LockError::Held {
                host: host.name(),
                holder,
            }),
        },
        Host::Netns(_) => Err(failed("a namespace the lab made is never shared".into())),
        Host::Ssh(ssh) => {
            // A connection of its own: the shared one may outlive a killed lab.
            let mut own = ssh.clone();
            own.control_path = None;
            let mut child = Host::Ssh(own)
                .command(&["sh", "-c", REMOTE, "sh", who])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0)
                .spawn()
                .map_err(|e| failed(format!("cannot run ssh: {e}")))?;
            let mut line = String::new();
            let stdout = child.stdout.take().expect("piped");
            let _ = BufReader::new(stdout.take(HOLDER_BYTES + 16)).read_line(&mut line);
            if line.trim() == "locked" {
                return Ok(HostLock::Remote(child));
            }
            let _ = child.kill();
            let output = child.wait_with_output();
            if let Some(holder) = line.strip_prefix("held ") {
                return Err(LockError::Held {
                    host: host.name(),
                    holder: escape_peer(holder.trim()),
                });
            }
            let stderr = output
                .map(|o| String::from_utf8_lossy(&o.stderr).trim().to_owned())
                .unwrap_or_default();
            Err(failed(escape_peer(
                stderr.lines().last().unwrap_or("ssh ended"),
            )))
        }
    }
}

/// This machine's lock, taken or held by another campaign.
enum LocalLock {
    Taken(HostLock),
    /// Who holds it, as its file says (escaped).
    Held(String),
}

/// Why this machine's lock could not be tried.
#[derive(Debug, thiserror::Error)]
enum LocalLockError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{LOCK_DIR} is not root's alone; refused")]
    NotRoots,
    #[error("{}: {source}", .path.display())]
    Open {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// This machine's lock for `who`, or who holds it.
fn take_local(who: &str) -> Result<LocalLock, LocalLockError> {
    let dir = Path::new(LOCK_DIR);
    match DirBuilder::new().mode(0o755).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e.into()),
        _ => {}
    }
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return Err(LocalLockError::NotRoots);
    }
    let net = std::fs::metadata("/proc/self/ns/net")?;
    let path = dir.join(format!("net-{}.lock", net.ino()));
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|source| LocalLockError::Open { path, source })?;
    match file.try_lock() {
        Ok(()) => {
            file.set_len(0)?;
            file.write_all(format!("{who}\n").as_bytes())?;
            Ok(LocalLock::Taken(HostLock::Local(file)))
        }
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = (&file).take(HOLDER_BYTES).read_to_string(&mut holder);
            Ok(LocalLock::Held(escape_peer(holder.trim())))
        }
        Err(TryLockError::Error(e)) => Err(e.into()),
    }
}

/// Takes every host's lock at once (in parallel); each host's outcome in order. A caller
/// that cannot use them all drops the ones it got.
pub fn take_each(hosts: &[Host], who: &str) -> Vec<Result<HostLock, LockError>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = hosts
            .iter()
            .map(|h| s.spawn(move || take(h, who)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("lock thread"))
            .collect()
    })
}

/// Every host's lock, or the first reason one could not be had (the others released).
pub fn take_all(hosts: &[Host], who: &str) -> Result<Vec<HostLock>, LockError> {
    take_each(hosts, who).into_iter().collect()
}

/// As [`take_all`], trying a held host again for up to `patience`: a lab killed a moment
/// ago lets its remote hosts go only once their sshd has seen its connection close.
pub fn take_all_within(
    hosts: &[Host],
    who: &str,
    patience: Duration,
) -> Result<Vec<HostLock>, LockError> {
    let deadline = Instant::now() + patience;
    loop {
        match take_all(hosts, who) {
            Err(LockError::Held { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(500))
            }
            taken => return taken,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two campaigns on this machine: the second is refused, told who holds it, and gets
    /// the lock once the first has let it go. Needs root (the lock lives in /run).
    #[test]
    fn a_held_host_is_refused_with_its_holder_until_released() {
        if oscil_testkit::lacks_root("the lock directory in /run") {
            return;
        }
        let first = take(&Host::Local, "campaign /tmp/first").unwrap();
        let refused = take(&Host::Local, "campaign /tmp/second").unwrap_err();
        assert!(
            refused
                .to_string()
                .starts_with("this machine is in use by another campaign: campaign /tmp/first"),
            "{refused}"
        );
        drop(first);
        take(&Host::Local, "campaign /tmp/second").unwrap();
    }
}

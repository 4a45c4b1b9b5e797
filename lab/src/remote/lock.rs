//! One campaign per host at a time. A campaign holds a lock on every host it measures on
//! for its whole life: `flock` on `/run/oscil-lab/net-<inode>.lock`, one file per network
//! namespace (the sysctls the lab sets belong to one), held open by the lab itself on this
//! machine and, on a remote host, by a shell its own ssh connection keeps alive. Either way
//! the lock dies with its holder: a killed lab closes the file, or its ssh's standard
//! input, and the kernel releases the lock. The file says who holds it, for the campaign
//! that is refused.

use std::fs::{DirBuilder, File, OpenOptions, TryLockError};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use oscil_model::text::escape_peer;

use super::host::Host;

/// Where the locks live on every host: root's alone, mode 0700, each lock file 0600.
/// `flock(2)` works on a file opened for reading, so a lock file anyone may open is a lock
/// anyone may hold, blocking every campaign (`/run/lock` is writable by all).
pub const LOCK_DIR: &str = "/run/oscil-lab";
/// The most of a lock file read back to say who holds it.
const HOLDER_BYTES: u64 = 512;

/// The remote side, run as `sh -c REMOTE sh WHO DIR`: the lock file of this host's network
/// namespace, taken without waiting; `locked` once held (then held until standard input
/// ends), else `held` and who holds it. The directory and the file must be root's alone
/// (owner, mode, no link), as in [`take_local`], an older oscil's directory tightened as
/// [`tighten_older`] does; a file is made with `noclobber`, which refuses a planted link.
const REMOTE: &str = r#"set -e
umask 077
d=$2
refuse() { echo "$1; refused (remove it while no campaign runs)" >&2; exit 3; }
[ -L "$d" ] && refuse "$d is a symbolic link"
[ -e "$d" ] || mkdir -m 0700 "$d"
[ ! -L "$d" ] && [ -d "$d" ] || refuse "$d is not a directory"
m=$(stat -c %a "$d")
if [ "$(stat -c %u "$d")" = 0 ] && [ "$m" != 700 ] && [ $((0$m & 022)) = 0 ]; then
    chmod 0700 "$d" && rm -f "$d"/*.lock
    echo "$d: made root's alone (mode $m -> 700, an older oscil's), its lock files removed" >&2
fi
[ "$(stat -c %u:%a "$d")" = 0:700 ] || refuse "$d is not root's alone (owner:mode $(stat -c %u:%a "$d"), not 0:700)"
f="$d/net-$(stat -L -c %i /proc/self/ns/net).lock"
[ -L "$f" ] && refuse "$f is a symbolic link"
[ -e "$f" ] || (set -C; : >"$f") || refuse "$f cannot be made"
[ ! -L "$f" ] && [ -f "$f" ] || refuse "$f is not a regular file"
[ "$(stat -c %u:%a:%h "$f")" = 0:600:1 ] || refuse "$f is not root's alone (owner:mode:links $(stat -c %u:%a:%h "$f"), not 0:600:1)"
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
        Host::Local => {
            match take_local(Path::new(LOCK_DIR), who).map_err(|e| failed(e.to_string()))? {
                LocalLock::Taken(lock) => Ok(lock),
                LocalLock::Held(holder) => Err(LockError::Held {
                    host: host.name(),
                    holder,
                }),
            }
        }
        Host::Netns(_) => Err(failed("a namespace the lab made is never shared".into())),
        Host::Ssh(ssh) => {
            // A connection of its own: the shared one may outlive a killed lab.
            let mut own = ssh.clone();
            own.control_path = None;
            let mut child = Host::Ssh(own)
                .command(&["sh", "-c", REMOTE, "sh", who, LOCK_DIR])
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
#[derive(Debug)]
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
    #[error(
        "{}: a {kind} of uid {uid} mode {found:o}, not root's alone (mode {mode:o}); refused (remove it while no campaign runs)",
        .path.display()
    )]
    NotRoots {
        path: PathBuf,
        kind: &'static str,
        uid: u32,
        found: u32,
        mode: u32,
    },
    #[error("{}: {source}", .path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// This machine's lock in `dir` for `who`, or who holds it. The directory must be root's
/// with mode 0700 and the file root's with mode 0600, neither a link: nobody else can open
/// it, so nobody else can hold it. A directory an older oscil made (root's, 0755) is
/// tightened first ([`tighten_older`]).
fn take_local(dir: &Path, who: &str) -> Result<LocalLock, LocalLockError> {
    match DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e.into()),
        _ => {}
    }
    let mut meta = std::fs::symlink_metadata(dir)?;
    if tighten_older(dir, &meta)? {
        meta = std::fs::symlink_metadata(dir)?;
    }
    root_alone(dir, &meta, meta.is_dir(), 0o700)?;
    let net = std::fs::metadata("/proc/self/ns/net")?;
    let path = dir.join(format!("net-{}.lock", net.ino()));
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|source| LocalLockError::Open {
            path: path.clone(),
            source,
        })?;
    let meta = file.metadata()?;
    root_alone(&path, &meta, meta.is_file() && meta.nlink() == 1, 0o600)?;
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

/// Refuses a lock directory or file that is not of its kind (`kind_ok`), not root's, or
/// not of `mode` exactly, in one line that says what to do.
fn root_alone(
    path: &Path,
    meta: &std::fs::Metadata,
    kind_ok: bool,
    mode: u32,
) -> Result<(), LocalLockError> {
    let found = meta.mode() & 0o7777;
    if kind_ok && meta.uid() == 0 && found == mode {
        return Ok(());
    }
    Err(LocalLockError::NotRoots {
        path: path.to_owned(),
        kind: oscil_model::error_text::file_kind(meta),
        uid: meta.uid(),
        found,
        mode,
    })
}

/// Makes a lock directory an older oscil made (root's, a directory, writable by root
/// alone, but readable by all: 0755) root's alone: mode 0700 and every lock file in it
/// removed, so a descriptor anyone opened before is on a file no campaign uses again (an
/// older lab still running loses its lock). True when it did; anything else is left for
/// [`root_alone`] to refuse.
fn tighten_older(dir: &Path, meta: &std::fs::Metadata) -> std::io::Result<bool> {
    let found = meta.mode() & 0o7777;
    if !meta.is_dir() || meta.uid() != 0 || found == 0o700 || found & 0o022 != 0 {
        return Ok(false);
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "lock") {
            std::fs::remove_file(&path)?;
        }
    }
    crate::progress::say(&format!(
        "oscil-lab: {}: made root's alone (mode {found:o} -> 700, an older oscil's), its lock files removed",
        dir.display()
    ));
    Ok(true)
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
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::process::Command;

    /// A lock directory under a fresh one that every user may pass through, as `/run` is.
    fn lock_dir() -> (tempfile::TempDir, std::path::PathBuf) {
        let scratch = tempfile::tempdir().unwrap();
        fs::set_permissions(scratch.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let dir = scratch.path().join("oscil-lab");
        (scratch, dir)
    }

    fn lock_file(dir: &Path) -> std::path::PathBuf {
        let net = fs::metadata("/proc/self/ns/net").unwrap();
        dir.join(format!("net-{}.lock", net.ino()))
    }

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    /// True when `nobody` could take an exclusive lock on `file` (flock works on a file
    /// opened for reading only).
    fn nobody_can_lock(file: &Path) -> bool {
        let setpriv = ["--reuid=nobody", "--regid=nogroup", "--clear-groups"];
        Command::new("setpriv")
            .args(setpriv)
            .args(["flock", "-n", "-x"])
            .arg(file)
            .arg("true")
            .output()
            .unwrap()
            .status
            .success()
    }

    /// The remote script run here, as ssh runs it: its standard output, error and code.
    fn remote(dir: &Path) -> (String, String, Option<i32>) {
        let out = Command::new("sh")
            .args(["-c", REMOTE, "sh", "campaign /tmp/remote"])
            .arg(dir)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_owned();
        (text(&out.stdout), text(&out.stderr), out.status.code())
    }

    /// Two campaigns on this machine: the second is refused, told who holds it, and gets
    /// the lock once the first has let it go. Needs root (the lock is root's).
    #[test]
    fn a_held_host_is_refused_with_its_holder_until_released() {
        if oscil_testkit::lacks_root("a lock directory of root's") {
            return;
        }
        let (_scratch, dir) = lock_dir();
        let first = taken(&dir, "campaign /tmp/first");
        match take_local(&dir, "campaign /tmp/second").unwrap() {
            LocalLock::Held(holder) => assert_eq!(holder, "campaign /tmp/first"),
            LocalLock::Taken(_) => panic!("taken twice"),
        }
        drop(first);
        taken(&dir, "campaign /tmp/second");
    }

    /// Hole 3 of issue 38: with the directory 0755 and the file 0644, `nobody` could open
    /// the file and hold its lock, blocking every campaign. Now both are root's alone, here
    /// and through the remote script.
    #[test]
    fn nobody_else_can_hold_the_lock() {
        if oscil_testkit::lacks_root("a lock directory of root's and a step as nobody") {
            return;
        }
        let (_scratch, dir) = lock_dir();
        drop(taken(&dir, "campaign /tmp/local"));
        assert_eq!((mode(&dir), mode(&lock_file(&dir))), (0o700, 0o600));
        assert!(!nobody_can_lock(&lock_file(&dir)));
        let (_scratch, dir) = lock_dir();
        let (stdout, stderr, code) = remote(&dir);
        assert_eq!((stdout.as_str(), code), ("locked", Some(0)), "{stderr}");
        assert_eq!((mode(&dir), mode(&lock_file(&dir))), (0o700, 0o600));
        assert!(!nobody_can_lock(&lock_file(&dir)));
        // The control: the same step may lock a file it can open.
        let open = dir.with_file_name("open.lock");
        fs::write(&open, "").unwrap();
        assert!(nobody_can_lock(&open));
    }

    /// A lock directory or file of the wrong mode, or a link, is refused here and remotely,
    /// and nothing is written through a planted link.
    #[test]
    fn a_lock_of_the_wrong_mode_or_a_link_is_refused() {
        if oscil_testkit::lacks_root("a lock directory of root's") {
            return;
        }
        let (scratch, dir) = lock_dir();
        let victim = scratch.path().join("victim");
        fs::write(&victim, "theirs").unwrap();
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        symlink(&victim, lock_file(&dir)).unwrap();
        let refused = take_local(&dir, "campaign /tmp/x").unwrap_err().to_string();
        assert!(
            refused.contains("mode 777, not root's alone (mode 700)"),
            "{refused}"
        );
        let (stdout, stderr, code) = remote(&dir);
        assert_eq!((stdout.as_str(), code), ("", Some(3)), "{stderr}");
        assert!(
            stderr.contains("not root's alone (owner:mode 0:777"),
            "{stderr}"
        );
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        assert!(take_local(&dir, "campaign /tmp/x").is_err());
        let (_, stderr, code) = remote(&dir);
        assert_eq!(code, Some(3), "{stderr}");
        assert!(stderr.contains("is a symbolic link; refused"), "{stderr}");
        assert_eq!(fs::read_to_string(&victim).unwrap(), "theirs");
        fs::remove_file(lock_file(&dir)).unwrap();
        fs::write(lock_file(&dir), "").unwrap();
        fs::set_permissions(lock_file(&dir), fs::Permissions::from_mode(0o644)).unwrap();
        let refused = take_local(&dir, "campaign /tmp/x").unwrap_err().to_string();
        assert!(
            refused.contains("mode 644, not root's alone (mode 600)"),
            "{refused}"
        );
        let (_, stderr, code) = remote(&dir);
        assert_eq!(code, Some(3), "{stderr}");
        let link = scratch.path().join("link");
        symlink(&dir, &link).unwrap();
        let (_, stderr, code) = remote(&link);
        assert!(
            stderr.contains("is a symbolic link; refused"),
            "{code:?} {stderr}"
        );
    }

    fn taken(dir: &Path, who: &str) -> HostLock {
        match take_local(dir, who).unwrap() {
            LocalLock::Taken(lock) => lock,
            LocalLock::Held(holder) => panic!("held by {holder}"),
        }
    }

    /// A directory an older oscil made (0755, its files 0644, perhaps opened by anyone
    /// then) is made root's alone and its lock files new, here and remotely; a held
    /// descriptor on the old file no longer blocks.
    #[test]
    fn an_older_oscils_lock_directory_is_made_roots_alone() {
        if oscil_testkit::lacks_root("a lock directory of root's") {
            return;
        }
        for remotely in [false, true] {
            let (_scratch, dir) = lock_dir();
            fs::create_dir(&dir).unwrap();
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
            fs::write(lock_file(&dir), "an older campaign\n").unwrap();
            fs::set_permissions(lock_file(&dir), fs::Permissions::from_mode(0o644)).unwrap();
            let before = File::open(lock_file(&dir)).unwrap();
            before.lock_shared().unwrap();
            if remotely {
                let (stdout, stderr, code) = remote(&dir);
                assert_eq!((stdout.as_str(), code), ("locked", Some(0)), "{stderr}");
                assert!(stderr.contains("made root's alone"), "{stderr}");
            } else {
                drop(taken(&dir, "campaign /tmp/new"));
            }
            assert_eq!((mode(&dir), mode(&lock_file(&dir))), (0o700, 0o600));
        }
    }
}

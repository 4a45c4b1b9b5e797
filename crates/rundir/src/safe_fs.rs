//! Files a root process opens in directories that other users, remote hosts or a crash may
//! have shaped. Reading: regular files only, never through a link, never a device or a
//! FIFO (which would hang), never more bytes than the caller allows. Writing: created
//! afresh and exclusively, never through a link, replaced atomically. Directories: private
//! temporary ones made fresh, and files that say what to run or delete trusted only when
//! root (or this user) owns them and nobody else may write them.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::sys;

/// Why a file was not opened, read or written; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum SafeFsError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// A link, device, FIFO, socket or directory where a regular file was expected.
    #[error("{path}: not a regular file but a {kind}; refused")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{path}: {found_bytes} bytes, more than the {limit_bytes} allowed")]
    TooLarge {
        path: PathBuf,
        found_bytes: u64,
        limit_bytes: u64,
    },
    /// A line longer than any row this format has, as in a file of zeros.
    #[error("{path}: a line longer than {limit_bytes} bytes")]
    LongLine { path: PathBuf, limit_bytes: u64 },
    #[error("{path}: owned by uid {uid}, neither root nor this user (uid {me}); refused")]
    Owner { path: PathBuf, uid: u32, me: u32 },
    #[error("{path}: writable by other users (mode {mode:o}); refused")]
    Writable { path: PathBuf, mode: u32 },
    /// A link on the way to a directory root writes into: whoever may change it chooses
    /// where the files land.
    #[error("{path}: a symbolic link on the way to a directory to write into; refused (name the directory it points to)")]
    Link { path: PathBuf },
}

impl SafeFsError {
    pub fn io(path: &Path) -> impl FnOnce(io::Error) -> SafeFsError + '_ {
        move |source| SafeFsError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

fn not_regular(path: &Path, meta: &Metadata) -> SafeFsError {
    SafeFsError::NotRegular {
        path: path.to_owned(),
        kind: oscil_model::error_text::file_kind(meta),
    }
}

/// Opens `path` for reading when it is a regular file, not following a link in its last
/// component; the file's length comes back with it. A device or FIFO is refused before it
/// is opened (opening some devices acts), and checked again on the open file.
pub fn open_regular(path: &Path) -> Result<(File, u64), SafeFsError> {
    let before = fs::symlink_metadata(path).map_err(SafeFsError::io(path))?;
    if !before.file_type().is_file() {
        return Err(not_regular(path, &before));
    }
    let file = OpenOptions::new()
        .read(true)
        // O_NONBLOCK: a FIFO swapped in since the check must not block the open.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|source| match source.raw_os_error() {
            Some(libc::ELOOP) => SafeFsError::NotRegular {
                path: path.to_owned(),
                kind: "symbolic link",
            },
            _ => SafeFsError::Io {
                path: path.to_owned(),
                source,
            },
        })?;
    let meta = file.metadata().map_err(SafeFsError::io(path))?;
    if !meta.file_type().is_file() {
        return Err(not_regular(path, &meta));
    }
    Ok((file, meta.len()))
}

/// A regular file read whole, when it holds at most `limit_bytes`.
pub fn read_bounded(path: &Path, limit_bytes: u64) -> Result<Vec<u8>, SafeFsError> {
    let (file, len) = open_regular(path)?;
    let too_large = |found_bytes| SafeFsError::TooLarge {
        path: path.to_owned(),
        found_bytes,
        limit_bytes,
    };
    if len > limit_bytes {
        return Err(too_large(len));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(limit_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(SafeFsError::io(path))?;
    match bytes.len() as u64 {
        grown if grown > limit_bytes => Err(too_large(grown)),
        _ => Ok(bytes),
    }
}

/// A reader that fails once more than `limit_bytes` pass without a newline: a bound on a
/// line-oriented format that holds even when the file's length is within bounds.
pub struct LineBound<R> {
    inner: R,
    limit_bytes: u64,
    since_newline: u64,
}

impl<R: Read> LineBound<R> {
    pub fn new(inner: R, limit_bytes: u64) -> Self {
        LineBound {
            inner,
            limit_bytes,
            since_newline: 0,
        }
    }

    /// True when the last read failed because a line was too long.
    pub fn is_long_line(error: &io::Error) -> bool {
        error.kind() == io::ErrorKind::InvalidData
            && error.get_ref().is_some_and(|e| e.is::<LongLineMark>())
    }
}

#[derive(Debug)]
struct LongLineMark;

impl std::fmt::Display for LongLineMark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a line too long")
    }
}

impl std::error::Error for LongLineMark {}

impl<R: Read> Read for LineBound<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut line = self.since_newline;
        for (i, part) in buf[..n].split(|&b| b == b'\n').enumerate() {
            if i > 0 {
                line = 0;
            }
            line += part.len() as u64;
            if line > self.limit_bytes {
                return Err(io::Error::new(io::ErrorKind::InvalidData, LongLineMark));
            }
        }
        self.since_newline = line;
        Ok(n)
    }
}

/// Creates `path` afresh for writing with `mode`: fails when anything (a file, a link)
/// is already there, so nobody can make the caller write through a planted link.
pub fn create_new(path: &Path, mode: u32) -> Result<File, SafeFsError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(SafeFsError::io(path))
}

/// Replaces `path` with `bytes` (mode `mode`) through a temporary file of a random,
/// exclusive name beside it and a rename: never half a file, never through a link.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), SafeFsError> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".oscil-")
        .permissions(fs::Permissions::from_mode(mode))
        .tempfile_in(dir)
        .map_err(SafeFsError::io(path))?;
    tmp.write_all(bytes).map_err(SafeFsError::io(path))?;
    tmp.persist(path)
        .map(drop)
        .map_err(|e| SafeFsError::io(path)(e.error))
}

/// [`write_atomic`] once `path`'s directory (and every one above it) is checked again
/// ([`check_trusted_dir`]): a report or run directory root writes into, checked before the
/// work, may have been swapped since.
pub fn write_trusted(path: &Path, bytes: &[u8], mode: u32) -> Result<(), SafeFsError> {
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        check_trusted_dir(dir)?;
    }
    write_atomic(path, bytes, mode)
}

/// A fresh directory of a random name under the system's temporary directory, mode 0700,
/// removed when dropped: no other user can have made it first or look inside.
pub fn private_temp_dir(prefix: &str) -> Result<tempfile::TempDir, SafeFsError> {
    private_temp_dir_in(&std::env::temp_dir(), prefix)
}

/// [`private_temp_dir`] under `parent`.
pub fn private_temp_dir_in(parent: &Path, prefix: &str) -> Result<tempfile::TempDir, SafeFsError> {
    tempfile::Builder::new()
        .prefix(prefix)
        .permissions(fs::Permissions::from_mode(0o700))
        .tempdir_in(parent)
        .map_err(SafeFsError::io(parent))
}

/// Checks that `path` (not followed if a link) is owned by root or by this process's user
/// and that no other user may write it: what a file must be before its content may name
/// commands, options or paths for root to act on. A group-writable file is fine when the
/// group is root's.
pub fn check_trusted(path: &Path) -> Result<(), SafeFsError> {
    let meta = fs::symlink_metadata(path).map_err(SafeFsError::io(path))?;
    if meta.file_type().is_symlink() {
        return Err(not_regular(path, &meta));
    }
    check_owner_and_mode(path, &meta, false)
}

/// Checks a directory to write into and every directory above it, as named (made
/// absolute; nothing resolved): each owned by root or this user, writable by nobody else,
/// never a link. Only then can no other user swap a directory or plant a link where the
/// caller writes. A directory above may be writable by all when sticky, as `/tmp` is:
/// nobody else may rename or remove what is in it. The walk ends at the first name not made
/// yet; the caller checks again once it has made them.
pub fn check_trusted_dir(dir: &Path) -> Result<(), SafeFsError> {
    let absolute = std::path::absolute(dir).map_err(SafeFsError::io(dir))?;
    let mut chain: Vec<&Path> = absolute.ancestors().collect();
    chain.reverse();
    let last = chain.len() - 1;
    for (i, path) in chain.into_iter().enumerate() {
        let meta = match fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            found => found.map_err(SafeFsError::io(path))?,
        };
        if meta.file_type().is_symlink() {
            return Err(SafeFsError::Link {
                path: path.to_owned(),
            });
        }
        check_owner_and_mode(path, &meta, i < last)?;
    }
    Ok(())
}

/// Owner root or this user; no write for others, nor for a group other than root's; both
/// allowed on a sticky directory when `sticky_ok`.
fn check_owner_and_mode(path: &Path, meta: &Metadata, sticky_ok: bool) -> Result<(), SafeFsError> {
    let me = sys::effective_uid();
    if meta.uid() != 0 && meta.uid() != me {
        return Err(SafeFsError::Owner {
            path: path.to_owned(),
            uid: meta.uid(),
            me,
        });
    }
    let mode = meta.permissions().mode();
    let group_writable = mode & 0o020 != 0 && meta.gid() != 0;
    let sticky = sticky_ok && meta.is_dir() && mode & 0o1000 != 0;
    if (mode & 0o002 != 0 || group_writable) && !sticky {
        return Err(SafeFsError::Writable {
            path: path.to_owned(),
            mode: mode & 0o7777,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_fifos_and_devices_are_refused_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("zero");
        symlink("/dev/zero", &link).unwrap();
        let err = open_regular(&link).unwrap_err();
        assert!(
            matches!(
                err,
                SafeFsError::NotRegular {
                    kind: "symbolic link",
                    ..
                }
            ),
            "{err}"
        );
        let err = open_regular(Path::new("/dev/zero")).unwrap_err();
        assert!(err.to_string().contains("character device"), "{err}");
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let err = open_regular(&fifo).unwrap_err();
        assert!(err
            .to_string()
            .ends_with("not a regular file but a FIFO; refused"));
        assert!(matches!(
            open_regular(dir.path()),
            Err(SafeFsError::NotRegular {
                kind: "directory",
                ..
            })
        ));
    }

    #[test]
    fn reads_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_bounded(&path, 10).unwrap(), b"0123456789");
        let err = read_bounded(&path, 9).unwrap_err();
        assert!(
            matches!(
                err,
                SafeFsError::TooLarge {
                    found_bytes: 10,
                    limit_bytes: 9,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_line_past_the_bound_fails_the_read() {
        let mut ok = LineBound::new(&b"ab\ncd\nef"[..], 2);
        let mut out = String::new();
        ok.read_to_string(&mut out).unwrap();
        assert_eq!(out, "ab\ncd\nef");
        let mut long = LineBound::new(&b"ab\nabc\nd"[..], 2);
        let err = long.read_to_string(&mut String::new()).unwrap_err();
        assert!(LineBound::<&[u8]>::is_long_line(&err), "{err}");
        let zeros = std::io::repeat(0).take(1 << 20);
        let err = std::io::copy(&mut LineBound::new(zeros, 4096), &mut std::io::sink());
        assert!(LineBound::<&[u8]>::is_long_line(&err.unwrap_err()));
    }

    #[test]
    fn creating_never_follows_a_planted_link() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "theirs").unwrap();
        let key = dir.path().join("key");
        symlink(&victim, &key).unwrap();
        assert!(create_new(&key, 0o600).is_err());
        write_atomic(&key, b"secret", 0o600).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "theirs");
        assert!(!fs::symlink_metadata(&key).unwrap().file_type().is_symlink());
        let mode = fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(fs::read_to_string(&key).unwrap(), "secret");
    }

    #[test]
    fn temporary_directories_are_private_and_fresh() {
        let a = private_temp_dir("oscil-test-").unwrap();
        let b = private_temp_dir("oscil-test-").unwrap();
        assert_ne!(a.path(), b.path());
        let mode = fs::metadata(a.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let meta = fs::metadata(a.path()).unwrap();
        assert_eq!(meta.uid(), sys::effective_uid());
    }

    #[test]
    fn files_others_may_write_are_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("restore.json");
        fs::write(&path, "{}").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        check_trusted(&path).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).unwrap();
        let err = check_trusted(&path).unwrap_err();
        assert!(
            err.to_string()
                .contains("writable by other users (mode 666)"),
            "{err}"
        );
        let link = dir.path().join("link");
        symlink(&path, &link).unwrap();
        assert!(check_trusted(&link).is_err());
    }

    /// The directory and every one above it, as named: a link anywhere on the way, or one
    /// others may write (but a sticky one above), is refused; names not made yet end the walk.
    #[test]
    fn a_directory_to_write_into_is_trusted_all_the_way_up() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("a/b");
        check_trusted_dir(&out).unwrap();
        fs::create_dir_all(&out).unwrap();
        check_trusted_dir(&out).unwrap();
        let sticky = dir.path().join("sticky");
        fs::create_dir(&sticky).unwrap();
        fs::set_permissions(&sticky, fs::Permissions::from_mode(0o1777)).unwrap();
        check_trusted_dir(&sticky.join("mine")).unwrap();
        let err = check_trusted_dir(&sticky).unwrap_err();
        assert!(
            matches!(err, SafeFsError::Writable { mode: 0o1777, .. }),
            "{err}"
        );
        let above = dir.path().join("a");
        fs::set_permissions(&above, fs::Permissions::from_mode(0o777)).unwrap();
        let err = check_trusted_dir(&out).unwrap_err();
        assert!(
            matches!(&err, SafeFsError::Writable { path, .. } if *path == above),
            "{err}"
        );
        fs::set_permissions(&above, fs::Permissions::from_mode(0o755)).unwrap();
        let link = dir.path().join("link");
        symlink(&above, &link).unwrap();
        let err = check_trusted_dir(&link.join("b")).unwrap_err();
        assert!(
            matches!(&err, SafeFsError::Link { path } if *path == link),
            "{err}"
        );
    }
}

//! A run directory copied from a remote host, unpacked as data, not as a file system. The
//! tar stream is read here, in-process (never by `tar -x` as root): only regular files and
//! directories are written, by this process, so they are ours with fixed modes (0644 and
//! 0755); the remote owner and mode never come through. Links, devices, FIFOs, names that
//! lead out of the directory, and more bytes or entries than the run can hold are refused,
//! and the refusal lists each. A refused stream leaves nothing behind: everything lands in
//! a private staging directory beside the destination that becomes the run directory only
//! when the whole stream was sound.

use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use oscil_rundir::safe_fs::{self, SafeFsError};
use tar::EntryType;

/// The most entries a run directory's tar may hold (it has six files).
pub const MAX_ENTRIES: usize = 64;
/// How deep a directory inside the run may be.
const MAX_DEPTH: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    /// Entries that are not regular files or directories, or names out of the directory.
    #[error("{dest}: the copy from the remote host was refused, nothing kept: {}", .refused.join("; "))]
    Refused { dest: PathBuf, refused: Vec<String> },
    #[error("{dest}: the copy from the remote host holds more than {limit} {what}; refused, nothing kept")]
    TooLarge {
        dest: PathBuf,
        limit: u64,
        what: &'static str,
    },
    #[error("{dest}: reading the remote host's tar stream: {source}")]
    Stream { dest: PathBuf, source: io::Error },
    #[error(transparent)]
    File(#[from] SafeFsError),
}

/// What was unpacked, and what of the remote entries was ignored (special mode bits).
#[derive(Debug, Default, PartialEq)]
pub struct Unpacked {
    pub files: usize,
    pub bytes: u64,
    /// Modes that did not come through, worth a warning: setuid, setgid, sticky, writable
    /// by others.
    pub ignored: Vec<String>,
}

/// Unpacks the tar `stream` into `dest`, which must not exist yet, reading at most
/// `limit_bytes` of file content.
pub fn unpack(stream: impl Read, dest: &Path, limit_bytes: u64) -> Result<Unpacked, UnpackError> {
    let parent = dest.parent().unwrap_or(Path::new("."));
    let staging = safe_fs::private_temp_dir_in(parent, ".oscil-unpack-")?;
    let unpacked = unpack_into(stream, staging.path(), dest, limit_bytes)?;
    let io = SafeFsError::io(dest);
    std::fs::set_permissions(staging.path(), std::fs::Permissions::from_mode(0o755))
        .map_err(SafeFsError::io(staging.path()))?;
    std::fs::rename(staging.path(), dest).map_err(io)?;
    // Renamed: nothing left for the guard to remove.
    let _ = staging.keep();
    Ok(unpacked)
}

fn unpack_into(
    stream: impl Read,
    staging: &Path,
    dest: &Path,
    limit_bytes: u64,
) -> Result<Unpacked, UnpackError> {
    let stream_error = |source| UnpackError::Stream {
        dest: dest.to_owned(),
        source,
    };
    let mut archive = tar::Archive::new(stream);
    let mut unpacked = Unpacked::default();
    let mut refused = Vec::new();
    for (index, entry) in archive.entries().map_err(stream_error)?.enumerate() {
        if index >= MAX_ENTRIES {
            return Err(UnpackError::TooLarge {
                dest: dest.to_owned(),
                limit: MAX_ENTRIES as u64,
                what: "entries",
            });
        }
        let mut entry = entry.map_err(stream_error)?;
        let raw = entry.path_bytes().into_owned();
        let name = oscil_protocol::text::escape_peer(&String::from_utf8_lossy(&raw));
        let Some(relative) = plain_relative(&raw) else {
            refused.push(format!(
                "{name}: a name that leads out of the run directory"
            ));
            continue;
        };
        let header = entry.header();
        let mode = header.mode().unwrap_or(0);
        let kind = header.entry_type();
        if let Some(why) = refusal(kind, header.link_name_bytes().as_deref()) {
            refused.push(format!("{name}: {why}"));
            continue;
        }
        if mode & 0o7002 != 0 {
            unpacked
                .ignored
                .push(format!("{name}: mode {:o}", mode & 0o7777));
        }
        if !refused.is_empty() {
            // Already refused: only the rest of the list is wanted.
            continue;
        }
        let path = staging.join(&relative);
        if kind == EntryType::Directory {
            if relative.as_os_str().is_empty() {
                continue; // the run directory itself: ours, made above
            }
            std::fs::DirBuilder::new()
                .mode(0o755)
                .create(&path)
                .map_err(SafeFsError::io(&path))?;
            continue;
        }
        let left = limit_bytes - unpacked.bytes;
        let mut file = safe_fs::create_new(&path, 0o644)?;
        let copied = io::copy(&mut (&mut entry).take(left + 1), &mut file)
            .map_err(|source| SafeFsError::Io { path, source })?;
        if copied > left {
            return Err(UnpackError::TooLarge {
                dest: dest.to_owned(),
                limit: limit_bytes,
                what: "bytes",
            });
        }
        unpacked.bytes += copied;
        unpacked.files += 1;
    }
    match refused.is_empty() {
        true => Ok(unpacked),
        false => Err(UnpackError::Refused {
            dest: dest.to_owned(),
            refused,
        }),
    }
}

/// Why an entry of `kind` is refused, `None` for a regular file or a directory.
fn refusal(kind: EntryType, link: Option<&[u8]>) -> Option<String> {
    let target = || {
        let target = String::from_utf8_lossy(link.unwrap_or_default());
        oscil_protocol::text::escape_peer(&target)
    };
    Some(match kind {
        EntryType::Regular | EntryType::Continuous | EntryType::Directory => return None,
        EntryType::Symlink => format!("a symbolic link (to {})", target()),
        EntryType::Link => format!("a hard link (to {})", target()),
        EntryType::Char => "a character device".into(),
        EntryType::Block => "a block device".into(),
        EntryType::Fifo => "a FIFO".into(),
        other => format!("an entry of type {:?}", other.as_byte() as char),
    })
}

/// `raw` as a path of plain names inside the directory (`./` prefixes dropped), at most
/// [`MAX_DEPTH`] deep; `None` for `..`, an absolute path or anything else.
fn plain_relative(raw: &[u8]) -> Option<PathBuf> {
    let path = Path::new(std::ffi::OsStr::from_bytes(raw));
    let mut relative = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::Normal(name) => relative.push(name),
            _ => return None,
        }
    }
    (relative.components().count() <= MAX_DEPTH).then_some(relative)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use tar::{Builder, Header};

    fn header(name: &[u8], kind: EntryType, mode: u32, size: u64) -> Header {
        let mut header = Header::new_gnu();
        header.as_old_mut().name[..name.len()].copy_from_slice(name);
        header.set_entry_type(kind);
        header.set_mode(mode);
        header.set_size(size);
        header.set_uid(0);
        header.set_gid(0);
        header
    }

    fn append(builder: &mut Builder<Vec<u8>>, mut header: Header, data: &[u8]) {
        header.set_cksum();
        builder.append(&header, data).unwrap();
    }

    /// The run directory's `./` owned by nobody, mode 0777, and `setuid`, a root-owned
    /// setuid file, then whatever `extra` adds.
    fn tar_with(extra: impl FnOnce(&mut Builder<Vec<u8>>)) -> Vec<u8> {
        let mut builder = Builder::new(Vec::new());
        let mut root = header(b"./", EntryType::Directory, 0o777, 0);
        root.set_uid(65534);
        root.set_gid(65534);
        append(&mut builder, root, b"");
        append(
            &mut builder,
            header(b"./run.json", EntryType::Regular, 0o644, 2),
            b"{}",
        );
        append(
            &mut builder,
            header(b"./setuid", EntryType::Regular, 0o4755, 4),
            b"#!sh",
        );
        extra(&mut builder);
        builder.into_inner().unwrap()
    }

    fn leftovers(parent: &Path) -> Vec<String> {
        std::fs::read_dir(parent)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_crafted_tar_is_refused_whole_and_leaves_nothing() {
        let tar = tar_with(|b| {
            let mut link = header(b"./reader.csv", EntryType::Symlink, 0o777, 0);
            link.set_link_name("/etc/shadow").unwrap();
            append(b, link, b"");
            let mut device = header(b"./disk", EntryType::Char, 0o666, 0);
            device.set_device_major(8).unwrap();
            device.set_device_minor(0).unwrap();
            append(b, device, b"");
            append(b, header(b"./fifo", EntryType::Fifo, 0o666, 0), b"");
            append(
                b,
                header(b"../../escape", EntryType::Regular, 0o644, 1),
                b"x",
            );
        });
        let parent = tempfile::tempdir().unwrap();
        let dest = parent.path().join("rep-1");
        let err = unpack(&tar[..], &dest, 1 << 20).unwrap_err();
        let UnpackError::Refused { refused, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(
            refused,
            &[
                "./reader.csv: a symbolic link (to /etc/shadow)",
                "./disk: a character device",
                "./fifo: a FIFO",
                "../../escape: a name that leads out of the run directory",
            ]
        );
        assert!(err.to_string().contains("refused, nothing kept"), "{err}");
        assert!(!dest.exists());
        assert_eq!(leftovers(parent.path()), Vec::<String>::new());
        assert!(!parent.path().parent().unwrap().join("escape").exists());
    }

    #[test]
    fn owners_and_modes_never_come_through() {
        let parent = tempfile::tempdir().unwrap();
        let dest = parent.path().join("rep-1");
        let unpacked = unpack(&tar_with(|_| {})[..], &dest, 1 << 20).unwrap();
        assert_eq!((unpacked.files, unpacked.bytes), (2, 6));
        assert_eq!(unpacked.ignored, ["./: mode 777", "./setuid: mode 4755"]);
        let me = std::fs::metadata("/proc/self").unwrap().uid();
        let dir = std::fs::symlink_metadata(&dest).unwrap();
        assert!(dir.is_dir());
        assert_eq!((dir.uid(), dir.permissions().mode() & 0o7777), (me, 0o755));
        let file = std::fs::symlink_metadata(dest.join("setuid")).unwrap();
        assert!(file.is_file());
        assert_eq!(
            (file.uid(), file.permissions().mode() & 0o7777),
            (me, 0o644)
        );
        assert_eq!(std::fs::read(dest.join("setuid")).unwrap(), b"#!sh");
        assert_eq!(leftovers(parent.path()), ["rep-1"]);
    }

    #[test]
    fn more_bytes_or_entries_than_a_run_holds_are_refused_and_leave_nothing() {
        let parent = tempfile::tempdir().unwrap();
        let dest = parent.path().join("rep-1");
        let big = tar_with(|b| {
            let data = vec![b'0'; 10_000];
            append(
                b,
                header(b"./reader.csv", EntryType::Regular, 0o644, 10_000),
                &data,
            );
        });
        let err = unpack(&big[..], &dest, 5_000).unwrap_err();
        assert!(err.to_string().contains("more than 5000 bytes"), "{err}");
        let many = tar_with(|b| {
            for i in 0..MAX_ENTRIES {
                let name = format!("./f{i}");
                append(
                    b,
                    header(name.as_bytes(), EntryType::Regular, 0o644, 0),
                    b"",
                );
            }
        });
        let err = unpack(&many[..], &dest, 5_000).unwrap_err();
        assert!(err.to_string().contains("more than 64 entries"), "{err}");
        assert!(!dest.exists());
        assert_eq!(leftovers(parent.path()), Vec::<String>::new());
    }
}

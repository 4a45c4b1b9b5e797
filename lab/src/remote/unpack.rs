//! A run directory copied from a remote host, unpacked as data, not as a file system. The
//! tar stream is read here, in-process (never by `tar -x` as root): only regular files and
//! directories are written, by this process, so they are ours with fixed modes (0644 and
//! 0755); the remote owner and mode never come through. Links, devices, FIFOs, names that
//! lead out of the directory, and more bytes or entries than the run can hold are refused,
//! and the refusal lists each. A refused stream leaves nothing behind: everything lands in
//! a private staging directory beside the destination that becomes the run directory only
//! when the whole stream was sound.
//!
//! Every header counts: the tar crate's own handling of GNU long names and PAX headers
//! reads them whole, whatever size they declare, so the stream is read raw and each
//! header's declared size is counted against the byte and entry limits before a byte of
//! it is read; a long name, long link or PAX header holds at most
//! [`MAX_EXTENSION_BYTES`]. [`Deadline`] bounds the time.

use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use oscil_rundir::safe_fs::{self, SafeFsError};
use tar::EntryType;

/// The most entries a run directory's tar may hold, headers of long names and PAX
/// records included (it has up to eight files).
pub const MAX_ENTRIES: usize = 64;
/// The most bytes a GNU long name or long link, or a PAX header, may declare: a path is
/// at most 4 KiB (`PATH_MAX`), and a run's names are short.
pub const MAX_EXTENSION_BYTES: u64 = 4096;
/// How deep a directory inside the run may be.
const MAX_DEPTH: usize = 4;
/// A tar block: every header, and the unit content is padded to.
const BLOCK_BYTES: u64 = 512;

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
    /// A GNU long name or link, or a PAX header, declaring more than it may.
    #[error("{dest}: the copy from the remote host holds {what} of {bytes} bytes (at most {MAX_EXTENSION_BYTES}); refused, nothing kept")]
    LongHeader {
        dest: PathBuf,
        what: &'static str,
        bytes: u64,
    },
    #[error("{dest}: the copy from the remote host took longer than {}, its time limit; refused, nothing kept", humantime::format_duration(*.limit))]
    TimedOut { dest: PathBuf, limit: Duration },
    #[error("{dest}: reading the remote host's tar stream: {source}; nothing kept")]
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

/// A stream that ends with [`io::ErrorKind::TimedOut`] at `deadline`: each read waits for
/// bytes at most until then, so a peer that stalls (or trickles) cannot hold the lab.
pub struct Deadline<R> {
    inner: R,
    deadline: Instant,
    limit: Duration,
}

impl<R> Deadline<R> {
    pub fn new(inner: R, limit: Duration) -> Self {
        Deadline {
            inner,
            deadline: Instant::now() + limit,
            limit,
        }
    }
}

impl<R: Read + AsFd> Read for Deadline<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || !crate::sys::wait_readable(self.inner.as_fd(), left)? {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no end within {}", humantime::format_duration(self.limit)),
            ));
        }
        self.inner.read(buf)
    }
}

/// Unpacks the tar `stream` into `dest`, which must not exist yet, reading at most
/// `limit_bytes` of content (every entry's, padded to its blocks). A stream that times
/// out ([`Deadline`]) after `limit` is refused as such.
pub fn unpack(
    stream: impl Read,
    dest: &Path,
    limit_bytes: u64,
    limit: Duration,
) -> Result<Unpacked, UnpackError> {
    let parent = dest.parent().unwrap_or(Path::new("."));
    let staging = safe_fs::private_temp_dir_in(parent, ".oscil-unpack-")?;
    let unpacked = match unpack_into(stream, staging.path(), dest, limit_bytes) {
        Err(UnpackError::Stream { dest, source }) if source.kind() == io::ErrorKind::TimedOut => {
            return Err(UnpackError::TimedOut { dest, limit })
        }
        other => other?,
    };
    let io = SafeFsError::io(dest);
    std::fs::set_permissions(staging.path(), std::fs::Permissions::from_mode(0o755))
        .map_err(SafeFsError::io(staging.path()))?;
    std::fs::rename(staging.path(), dest).map_err(io)?;
    // Renamed: nothing left for the guard to remove.
    let _ = staging.keep();
    Ok(unpacked)
}

/// What the extension headers before an entry said of it.
#[derive(Default)]
struct Pending {
    path: Option<Vec<u8>>,
    link: Option<Vec<u8>>,
}

/// The headers that describe the next entry rather than being one, by the name messages use.
fn extension(kind: EntryType) -> Option<&'static str> {
    match kind {
        EntryType::GNULongName => Some("a GNU long name"),
        EntryType::GNULongLink => Some("a GNU long link"),
        EntryType::XHeader => Some("a PAX header"),
        EntryType::XGlobalHeader => Some("a PAX global header"),
        _ => None,
    }
}

/// An extension header that says what the lab does not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum ExtensionRefused {
    #[error("a PAX header that is not records")]
    NotRecords,
    #[error("a PAX header overriding an entry's size")]
    Size,
    #[error("a PAX header of a sparse file")]
    Sparse,
}

impl Pending {
    /// Takes in the extension header `kind` holding `data`; the reason when it says what
    /// the lab does not take: a PAX `size` (which would override the header's, the size
    /// counted against the limit) or a sparse file's map.
    fn add(&mut self, kind: EntryType, data: &[u8]) -> Result<(), ExtensionRefused> {
        let name = || data.split(|&b| b == 0).next().unwrap_or_default().to_vec();
        match kind {
            EntryType::GNULongName => self.path = Some(name()),
            EntryType::GNULongLink => self.link = Some(name()),
            EntryType::XHeader => {
                for record in tar::PaxExtensions::new(data) {
                    let record = record.map_err(|_| ExtensionRefused::NotRecords)?;
                    match record.key_bytes() {
                        b"path" => self.path = Some(record.value_bytes().to_vec()),
                        b"linkpath" => self.link = Some(record.value_bytes().to_vec()),
                        b"size" => return Err(ExtensionRefused::Size),
                        key if key.starts_with(b"GNU.sparse") => {
                            return Err(ExtensionRefused::Sparse)
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn is_empty(&self) -> bool {
        self.path.is_none() && self.link.is_none()
    }

    /// The entry's name and link target: from the long name or PAX header before it, if
    /// one came, else from its own header.
    fn take_names<R: Read>(&mut self, entry: &tar::Entry<'_, R>) -> (Vec<u8>, Option<Vec<u8>>) {
        let path = match self.path.take() {
            Some(path) => path,
            None => entry.path_bytes().into_owned(),
        };
        let link = match self.link.take() {
            Some(link) => Some(link),
            None => entry.header().link_name_bytes().map(|l| l.into_owned()),
        };
        (path, link)
    }
}

/// Writes an accepted entry at `path` (in the staging directory): a directory, or a new
/// file of the entry's declared size, whose copy a stalled stream ends with a timeout.
fn write_entry<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    path: PathBuf,
    stream_error: &dyn Fn(io::Error) -> UnpackError,
    unpacked: &mut Unpacked,
) -> Result<(), UnpackError> {
    if entry.header().entry_type() == EntryType::Directory {
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&path)
            .map_err(SafeFsError::io(&path))?;
        return Ok(());
    }
    let size = entry.size();
    let mut file = safe_fs::create_new(&path, 0o644)?;
    let copied = io::copy(&mut entry.take(size), &mut file).map_err(|source| {
        match source.kind() == io::ErrorKind::TimedOut {
            true => stream_error(source),
            false => SafeFsError::Io { path, source }.into(),
        }
    })?;
    unpacked.bytes += copied;
    unpacked.files += 1;
    Ok(())
}

/// What an archive may still hold, counted from its headers before any content is read.
struct Budget<'a> {
    dest: &'a Path,
    limit_bytes: u64,
    /// Every entry's content as declared, padded to its blocks: what the stream may hold
    /// beyond its headers, counted before any of it is read (or skipped).
    declared_bytes: u64,
}

impl Budget<'_> {
    fn too_large(&self, limit: u64, what: &'static str) -> UnpackError {
        UnpackError::TooLarge {
            dest: self.dest.to_owned(),
            limit,
            what,
        }
    }

    /// The entry numbered `index` (from 0), before its header is read.
    fn admit_entry(&self, index: usize) -> Result<(), UnpackError> {
        match index >= MAX_ENTRIES {
            true => Err(self.too_large(MAX_ENTRIES as u64, "entries")),
            false => Ok(()),
        }
    }

    /// An entry of `size` declared bytes; `extension` names a long name or PAX header,
    /// which is read into memory and so held to a smaller bound.
    fn admit_content(
        &mut self,
        extension: Option<&'static str>,
        size: u64,
    ) -> Result<(), UnpackError> {
        if let Some(what) = extension.filter(|_| size > MAX_EXTENSION_BYTES) {
            return Err(UnpackError::LongHeader {
                dest: self.dest.to_owned(),
                what,
                bytes: size,
            });
        }
        let padded = size.div_ceil(BLOCK_BYTES) * BLOCK_BYTES;
        self.declared_bytes = self.declared_bytes.saturating_add(padded);
        match self.declared_bytes > self.limit_bytes {
            true => Err(self.too_large(self.limit_bytes, "bytes")),
            false => Ok(()),
        }
    }
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
    let mut pending = Pending::default();
    let mut budget = Budget {
        dest,
        limit_bytes,
        declared_bytes: 0,
    };
    let entries = archive.entries().map_err(stream_error)?.raw(true);
    for (index, entry) in entries.enumerate() {
        budget.admit_entry(index)?;
        let mut entry = entry.map_err(stream_error)?;
        let size = entry.size();
        let kind = entry.header().entry_type();
        let extension = extension(kind);
        budget.admit_content(extension, size)?;
        if extension.is_some() {
            let mut data = Vec::with_capacity(size as usize);
            entry.read_to_end(&mut data).map_err(stream_error)?;
            if let Err(why) = pending.add(kind, &data) {
                refused.push(why.to_string());
            }
            continue;
        }
        let (raw, link) = pending.take_names(&entry);
        let name = oscil_model::text::escape_peer(&String::from_utf8_lossy(&raw));
        let Some(relative) = plain_relative(&raw) else {
            refused.push(format!(
                "{name}: a name that leads out of the run directory"
            ));
            continue;
        };
        let header = entry.header();
        let mode = header.mode().unwrap_or(0);
        if let Some(why) = refusal(kind, link.as_deref()) {
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
        if relative.as_os_str().is_empty() && kind == EntryType::Directory {
            continue; // the run directory itself: ours, made above
        }
        write_entry(
            &mut entry,
            staging.join(&relative),
            &stream_error,
            &mut unpacked,
        )?;
    }
    if !pending.is_empty() {
        refused.push("a long name or PAX header with no entry after it".into());
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
        oscil_model::text::escape_peer(&target)
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

    const MINUTE: Duration = Duration::from_secs(60);

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
        let err = unpack(&tar[..], &dest, 1 << 20, MINUTE).unwrap_err();
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
        let unpacked = unpack(&tar_with(|_| {})[..], &dest, 1 << 20, MINUTE).unwrap();
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
        let err = unpack(&big[..], &dest, 5_000, MINUTE).unwrap_err();
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
        let err = unpack(&many[..], &dest, 5_000, MINUTE).unwrap_err();
        assert!(err.to_string().contains("more than 64 entries"), "{err}");
        assert!(!dest.exists());
        assert_eq!(leftovers(parent.path()), Vec::<String>::new());
    }

    /// `head`, then zeros without end (64 GiB and more, never held), counting what was
    /// read: how much of a hostile stream the unpacker took in.
    struct Endless {
        head: Vec<u8>,
        read: u64,
    }

    impl Read for &mut Endless {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let at = self.read as usize;
            let n = match self.head.get(at..) {
                Some(rest) if !rest.is_empty() => {
                    let n = rest.len().min(buf.len());
                    buf[..n].copy_from_slice(&rest[..n]);
                    n
                }
                _ => {
                    buf.fill(0);
                    buf.len()
                }
            };
            self.read += n as u64;
            Ok(n)
        }
    }

    /// A header of `kind` for `name` declaring `size` bytes, and nothing after it.
    fn lone_header(name: &[u8], kind: EntryType, size: u64) -> Vec<u8> {
        let mut h = header(name, kind, 0o644, size);
        h.set_cksum();
        h.as_bytes().to_vec()
    }

    /// The streams: a GNU long name or a PAX header declaring 64 GiB (the tar
    /// crate read them whole: 3.13 GB of RSS after 3 GiB), a directory declaring 64 GiB
    /// (skipped without bound on bytes or time). Each is refused after its 512-byte header
    /// and the tar crate's first read past it, and leaves nothing.
    #[test]
    fn headers_declaring_64_gib_are_refused_before_their_bytes_are_read() {
        const GIB_64: u64 = 64 << 30;
        let cases = [
            (
                lone_header(b"././@LongLink", EntryType::GNULongName, GIB_64),
                "holds a GNU long name of 68719476736 bytes (at most 4096); refused, nothing kept",
            ),
            (
                lone_header(b"./PaxHeaders/x", EntryType::XHeader, GIB_64),
                "holds a PAX header of 68719476736 bytes (at most 4096); refused, nothing kept",
            ),
            (
                lone_header(b"./big/", EntryType::Directory, GIB_64),
                "holds more than 1048576 bytes; refused, nothing kept",
            ),
        ];
        let parent = tempfile::tempdir().unwrap();
        let dest = parent.path().join("rep-1");
        for (head, why) in cases {
            let mut stream = Endless { head, read: 0 };
            let err = unpack(&mut stream, &dest, 1 << 20, MINUTE).unwrap_err();
            assert!(err.to_string().ends_with(why), "{err}");
            // The header, and at most a block the tar crate reads ahead.
            assert!(stream.read <= 1024, "read {} bytes", stream.read);
            assert!(!dest.exists());
            assert_eq!(leftovers(parent.path()), Vec::<String>::new());
        }
    }

    #[test]
    fn long_names_and_pax_paths_within_the_cap_name_their_entry() {
        let long = format!("./{}", "n".repeat(200));
        let mut builder = Builder::new(Vec::new());
        let mut h = Header::new_gnu();
        h.set_entry_type(EntryType::Regular);
        h.set_mode(0o644);
        h.set_size(3);
        builder.append_data(&mut h, &long, &b"abc"[..]).unwrap();
        builder
            .append_pax_extensions([("path", &b"./pax-named"[..]), ("mtime", b"1.5")])
            .unwrap();
        append(
            &mut builder,
            header(b"./x", EntryType::Regular, 0o644, 2),
            b"xy",
        );
        let tar = builder.into_inner().unwrap();
        let parent = tempfile::tempdir().unwrap();
        let dest = parent.path().join("rep-1");
        let unpacked = unpack(&tar[..], &dest, 1 << 20, MINUTE).unwrap();
        assert_eq!((unpacked.files, unpacked.bytes), (2, 5));
        assert_eq!(std::fs::read(dest.join(&long[2..])).unwrap(), b"abc");
        assert_eq!(std::fs::read(dest.join("pax-named")).unwrap(), b"xy");
        assert!(!dest.join("x").exists());
    }

    /// A PAX `size` would override the header's, so the size counted against the limit
    /// would not be the one read: refused.
    #[test]
    fn a_pax_size_is_refused() {
        let mut builder = Builder::new(Vec::new());
        builder
            .append_pax_extensions([("size", &b"68719476736"[..])])
            .unwrap();
        append(
            &mut builder,
            header(b"./x", EntryType::Regular, 0o644, 0),
            b"",
        );
        let tar = builder.into_inner().unwrap();
        let parent = tempfile::tempdir().unwrap();
        let err = unpack(&tar[..], &parent.path().join("rep-1"), 1 << 20, MINUTE).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("nothing kept: a PAX header overriding an entry's size"),
            "{err}"
        );
        assert_eq!(leftovers(parent.path()), Vec::<String>::new());
    }

    /// A peer that sends a header and then nothing: the deadline ends the copy (here
    /// 300 ms; the lab's is a minute and more).
    #[test]
    fn a_stalled_stream_ends_at_its_deadline_and_leaves_nothing() {
        let (mut peer, ours) = std::os::unix::net::UnixStream::pair().unwrap();
        let head = lone_header(b"./reader.csv", EntryType::Regular, 1000);
        std::io::Write::write_all(&mut peer, &head).unwrap();
        let parent = tempfile::tempdir().unwrap();
        let dest = parent.path().join("rep-1");
        let limit = Duration::from_millis(300);
        let started = Instant::now();
        let err = unpack(Deadline::new(ours, limit), &dest, 1 << 20, limit).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("took longer than 300ms, its time limit; refused, nothing kept"),
            "{err}"
        );
        assert!(started.elapsed() >= limit);
        assert_eq!(leftovers(parent.path()), Vec::<String>::new());
        drop(peer);
    }
}

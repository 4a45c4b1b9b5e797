//! The kernel's tracepoints, read the way the kernel writes them: a private tracefs
//! instance (never the global buffer, never another tool's), the events enabled with a
//! filter, and each CPU's ring buffer read as raw pages (`trace_pipe_raw`) and decoded with
//! the field offsets the kernel publishes in each event's `format` file. Nothing is parsed
//! from the human-readable trace text.
//!
//! The decoding (`Format::parse`, `decode_page`) is pure and tested on byte fixtures; the
//! `Instance` is the thin I/O layer.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

mod owner;
pub use owner::{remove_leftovers, Owner};
mod kprobe;
pub use kprobe::{remove_leftover_probes, FunctionProbes, ProbeError};

/// Where tracefs is mounted on current kernels.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Names another tracefs root (a test points it at an empty directory to see a run go on
/// without a trace).
pub const TRACEFS_ENV: &str = "OSCIL_TRACEFS";

/// The tracefs root to use: `$OSCIL_TRACEFS` as given, else [`TRACEFS`], mounted there
/// first when it is not (`ip netns exec` gives a namespace a fresh `/sys` without it), by
/// the system call, never a `mount` found on the `PATH`. A failed mount is left for
/// [`Instance::create`] to report.
pub fn root() -> PathBuf {
    if let Some(dir) = std::env::var_os(TRACEFS_ENV) {
        return PathBuf::from(dir);
    }
    let root = PathBuf::from(TRACEFS);
    if !root.join("instances").is_dir() && root.is_dir() {
        if let Ok(target) = std::ffi::CString::new(TRACEFS) {
            let _ = crate::sys::mount_tracefs(&target);
        }
    }
    root
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock of an instance's events.
pub fn monotonic_now_ns() -> u64 {
    crate::sys::monotonic().as_nanos() as u64
}

/// Why tracing could not start.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// No tracefs (not mounted, or a container without it).
    #[error("no tracefs at {0} (mount -t tracefs nodev {0})")]
    NoTracefs(PathBuf),
    /// The kernel has no such tracepoint.
    #[error("the kernel has no tracepoint {0}")]
    NoEvent(String),
    /// A `format` file that does not say what the decoder needs.
    #[error("{path}: {what}")]
    BadFormat { path: PathBuf, what: FormatError },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// Why a `format` file's text is not an event's layout ([`Format::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("ID: {0}")]
    Id(std::num::ParseIntError),
    #[error("no ID line")]
    NoId,
    /// A field's line without its `offset:` or `size:` (`key`) where expected.
    #[error("field {name}: expected {key}N, found {found:?}")]
    Field {
        name: String,
        key: &'static str,
        found: String,
    },
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> TraceError + '_ {
    move |source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One field of an event's record: where it sits and how wide it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub offset: usize,
    pub size: usize,
}

/// An event's layout, from its `format` file.
#[derive(Debug, Clone, PartialEq)]
pub struct Format {
    pub id: u16,
    pub fields: HashMap<String, Field>,
}

impl Format {
    /// Parses the text of `events/<system>/<event>/format`.
    pub fn parse(text: &str) -> Result<Format, FormatError> {
        let mut id = None;
        let mut fields = HashMap::new();
        for line in text.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix("ID:") {
                id = Some(rest.trim().parse::<u16>().map_err(FormatError::Id)?);
            } else if let Some(rest) = line.strip_prefix("field:") {
                let (name, field) = parse_field(rest)?;
                fields.insert(name, field);
            }
        }
        let id = id.ok_or(FormatError::NoId)?;
        Ok(Format { id, fields })
    }

    /// The unsigned value of `name` in `record` (little-endian, 1 to 8 bytes).
    pub fn value(&self, record: &[u8], name: &str) -> Option<u64> {
        let f = self.fields.get(name)?;
        let bytes = record.get(f.offset..f.offset + f.size)?;
        (f.size <= 8).then(|| {
            let mut wide = [0u8; 8];
            wide[..f.size].copy_from_slice(bytes);
            u64::from_le_bytes(wide)
        })
    }
}

/// `const void * skaddr; offset:128; size:8; signed:0;` (tab-separated) → ("skaddr", 128, 8).
fn parse_field(rest: &str) -> Result<(String, Field), FormatError> {
    let mut parts = rest.split(';').map(str::trim);
    let decl = parts.next().unwrap_or_default();
    let name = decl
        .rsplit(|c: char| c.is_whitespace() || c == '*')
        .next()
        .unwrap_or_default();
    let name = name.split('[').next().unwrap_or_default().to_string();
    let mut number = |key: &'static str| -> Result<usize, FormatError> {
        let part = parts.next().unwrap_or_default();
        part.strip_prefix(key)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| FormatError::Field {
                name: name.clone(),
                key,
                found: part.to_owned(),
            })
    };
    let offset = number("offset:")?;
    let size = number("size:")?;
    Ok((name, Field { offset, size }))
}

/// One event from a ring-buffer page: when (the instance's clock, ns) and its record
/// (starting with the common fields, so `Format::value` offsets apply).
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub time_ns: u64,
    /// The CPU whose ring buffer held it: a function's entry and return are on one CPU.
    pub cpu: u32,
    pub id: u16,
    pub data: Vec<u8>,
}

/// What a page held besides its events.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct PageFacts {
    /// The kernel lost events before this page (the writer overran the reader).
    pub missed_events: bool,
}

/// Page header: a u64 timestamp, then `commit` (the bytes of data, two flag bits on top).
const PAGE_HEADER_BYTES: usize = 16;
const COMMIT_FLAGS: u64 = 3 << 30;
const MISSED_EVENTS: u64 = 1 << 31;
/// `type_len` values of the compressed event header.
const PADDING: u32 = 29;
const TIME_EXTEND: u32 = 30;
const TIME_STAMP: u32 = 31;
/// `time_extend` and `time_stamp` carry 27 bits in the header and the rest in `array[0]`.
const TS_SHIFT: u32 = 27;

/// Decodes one `trace_pipe_raw` page of CPU `cpu` into `out`.
pub fn decode_page(page: &[u8], cpu: u32, out: &mut Vec<Record>) -> PageFacts {
    let (Some(ts), Some(commit)) = (le_u64(page, 0), le_u64(page, 8)) else {
        return PageFacts::default();
    };
    let facts = PageFacts {
        missed_events: commit & MISSED_EVENTS != 0,
    };
    let end = (PAGE_HEADER_BYTES + (commit & !COMMIT_FLAGS) as usize).min(page.len());
    let mut time_ns = ts;
    let mut at = PAGE_HEADER_BYTES;
    while at + 4 <= end {
        let Some(header) = le_u32(page, at) else {
            break;
        };
        let (type_len, delta) = (header & 0x1f, u64::from(header >> 5));
        let array0 = le_u32(page, at + 4).map(u64::from);
        match type_len {
            PADDING if delta == 0 => break,
            PADDING => {
                time_ns += delta;
                at = at.saturating_add(4 + array0.unwrap_or(u32::MAX.into()) as usize);
            }
            TIME_EXTEND => {
                time_ns += (array0.unwrap_or(0) << TS_SHIFT) + delta;
                at += 8;
            }
            TIME_STAMP => {
                time_ns = (array0.unwrap_or(0) << TS_SHIFT) + delta;
                at += 8;
            }
            0 => {
                let Some(len) = array0.map(|l| l as usize) else {
                    break;
                };
                time_ns += delta;
                push(out, page, at + 8, len.saturating_sub(4), (time_ns, cpu));
                at += 4 + len;
            }
            n => {
                time_ns += delta;
                push(out, page, at + 4, n as usize * 4, (time_ns, cpu));
                at += 4 + n as usize * 4;
            }
        }
    }
    facts
}

fn push(out: &mut Vec<Record>, page: &[u8], start: usize, len: usize, at: (u64, u32)) {
    let (time_ns, cpu) = at;
    if let Some(data) = page.get(start..start + len) {
        if let Some(id) = data.get(..2).map(|b| u16::from_le_bytes([b[0], b[1]])) {
            out.push(Record {
                time_ns,
                cpu,
                id,
                data: data.to_vec(),
            });
        }
    }
}

fn le_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

fn le_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// One event to enable: a tracepoint (`tcp/tcp_probe`) or a probe of this process's
/// (`<group>/tcp_collapse_entry`), and a filter in the kernel's filter grammar.
#[derive(Debug, Clone)]
pub struct Tracepoint {
    pub name: String,
    pub filter: Option<String>,
}

/// A private tracefs instance, removed when dropped. Its clock is `mono`, so an event's
/// time is `CLOCK_MONOTONIC` in nanoseconds, the clock of Rust's `Instant`.
pub struct Instance {
    dir: PathBuf,
    /// Held open for the instance's life: when it closes, however this process ends
    /// (SIGKILL too), the kernel stops the instance and frees its ring buffers
    /// (`options/disable_on_free`); only the empty directory stays, for
    /// [`remove_leftovers`].
    free_on_exit: Option<File>,
    enabled: Vec<PathBuf>,
    formats: HashMap<u16, (String, Format)>,
    /// Each CPU's `trace_pipe_raw`, with the CPU's number.
    pipes: Vec<(u32, File)>,
    page: Vec<u8>,
}

impl Instance {
    /// Makes `instances/<name>` under `root`, with a `buffer_kb` ring per CPU, and enables
    /// `points` (`system/event`).
    pub fn create(
        root: &Path,
        name: &str,
        buffer_kb: u32,
        points: &[Tracepoint],
    ) -> Result<Instance, TraceError> {
        if !root.join("instances").is_dir() {
            return Err(TraceError::NoTracefs(root.to_path_buf()));
        }
        let dir = root.join("instances").join(name);
        fs::create_dir(&dir).map_err(io_at(&dir))?;
        let mut instance = Instance {
            dir,
            free_on_exit: None,
            enabled: Vec::new(),
            formats: HashMap::new(),
            pipes: Vec::new(),
            page: vec![0; 4096],
        };
        instance.write("trace_clock", "mono")?;
        // Before the buffers grow, so no moment of the instance's life leaves them to a
        // killed owner. A kernel without these (before 3.x) keeps them until the next
        // owner of the program removes the instance.
        if instance.write("options/disable_on_free", "1").is_ok() {
            let free = instance.dir.join("free_buffer");
            instance.free_on_exit = OpenOptions::new().write(true).open(free).ok();
        }
        instance.write("buffer_size_kb", &buffer_kb.to_string())?;
        for point in points {
            instance.enable(root, point)?;
        }
        instance.open_pipes()?;
        Ok(instance)
    }

    fn write(&self, file: &str, value: &str) -> Result<(), TraceError> {
        let path = self.dir.join(file);
        let mut f = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .map_err(io_at(&path))?;
        f.write_all(value.as_bytes()).map_err(io_at(&path))
    }

    fn enable(&mut self, root: &Path, point: &Tracepoint) -> Result<(), TraceError> {
        let format_path = root.join("events").join(&point.name).join("format");
        let text = match fs::read_to_string(&format_path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(TraceError::NoEvent(point.name.clone()))
            }
            Err(e) => return Err(io_at(&format_path)(e)),
        };
        let format = Format::parse(&text).map_err(|what| TraceError::BadFormat {
            path: format_path,
            what,
        })?;
        let event = format!("events/{}", point.name);
        if let Some(filter) = &point.filter {
            self.write(&format!("{event}/filter"), filter)?;
        }
        self.write(&format!("{event}/enable"), "1")?;
        self.enabled.push(self.dir.join(&event).join("enable"));
        self.formats.insert(format.id, (point.name.clone(), format));
        Ok(())
    }

    fn open_pipes(&mut self) -> Result<(), TraceError> {
        let per_cpu = self.dir.join("per_cpu");
        let mut cpus: Vec<(u32, PathBuf)> = fs::read_dir(&per_cpu)
            .map_err(io_at(&per_cpu))?
            .filter_map(|e| {
                let path = e.ok()?.path();
                let n = path
                    .file_name()?
                    .to_str()?
                    .strip_prefix("cpu")?
                    .parse()
                    .ok()?;
                Some((n, path))
            })
            .collect();
        cpus.sort();
        for (cpu, dir) in cpus {
            let path = dir.join("trace_pipe_raw");
            let pipe = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path)
                .map_err(io_at(&path))?;
            self.pipes.push((cpu, pipe));
        }
        Ok(())
    }

    /// The layout of the event a record belongs to, and its name.
    pub fn format(&self, id: u16) -> Option<(&str, &Format)> {
        self.formats.get(&id).map(|(name, f)| (name.as_str(), f))
    }

    /// Every page the kernel has filled (or part-filled) so far, decoded into `out`, in
    /// time order. Returns how many pages said events were lost before them.
    pub fn drain(&mut self, out: &mut Vec<Record>) -> Result<u64, TraceError> {
        let start = out.len();
        let mut missed = 0;
        for (cpu, pipe) in &mut self.pipes {
            loop {
                match pipe.read(&mut self.page) {
                    Ok(0) => break,
                    Ok(n) => {
                        let facts = decode_page(&self.page[..n], *cpu, out);
                        missed += u64::from(facts.missed_events)
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(io_at(&self.dir)(e)),
                }
            }
        }
        out[start..].sort_by_key(|r| r.time_ns);
        Ok(missed)
    }

    /// Events the ring buffers dropped because they were full, summed over CPUs.
    pub fn overruns(&self) -> u64 {
        let Ok(entries) = fs::read_dir(self.dir.join("per_cpu")) else {
            return 0;
        };
        entries
            .filter_map(|e| fs::read_to_string(e.ok()?.path().join("stats")).ok())
            .map(|stats| stat(&stats, "overrun:") + stat(&stats, "dropped events:"))
            .sum()
    }
}

/// `overrun: 12` in a per-CPU `stats` file.
fn stat(stats: &str, key: &str) -> u64 {
    stats
        .lines()
        .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
        .unwrap_or(0)
}

impl Drop for Instance {
    fn drop(&mut self) {
        for enable in &self.enabled {
            let _ = fs::write(enable, "0");
        }
        self.pipes.clear();
        // An open file keeps the instance: this one goes last.
        self.free_on_exit = None;
        let _ = fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from this kernel's `events/tcp/tcp_probe/format` (6.18), cut to the fields
    /// used here.
    const PROBE_FORMAT: &str = "name: tcp_probe
ID: 2273
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:__u8 saddr[28];\toffset:8;\tsize:28;\tsigned:0;
\tfield:__u32 snd_nxt;\toffset:80;\tsize:4;\tsigned:0;
\tfield:__u32 snd_una;\toffset:84;\tsize:4;\tsigned:0;
\tfield:__u64 sock_cookie;\toffset:112;\tsize:8;\tsigned:0;
\tfield:const void * skaddr;\toffset:128;\tsize:8;\tsigned:0;

print fmt: \"family=%s\"";

    #[test]
    fn a_format_file_gives_the_id_and_each_fields_place() {
        let f = Format::parse(PROBE_FORMAT).unwrap();
        assert_eq!(f.id, 2273);
        assert_eq!(
            f.fields["snd_una"],
            Field {
                offset: 84,
                size: 4
            }
        );
        assert_eq!(
            f.fields["saddr"],
            Field {
                offset: 8,
                size: 28
            }
        );
        assert_eq!(
            f.fields["skaddr"],
            Field {
                offset: 128,
                size: 8
            }
        );
        assert_eq!(
            f.fields["sock_cookie"],
            Field {
                offset: 112,
                size: 8
            }
        );
        assert_eq!(Format::parse("format:\n"), Err(FormatError::NoId), "no ID");
        let err = Format::parse("ID: 1\n\tfield:u32 snd_una;\tsize:4;\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "field snd_una: expected offset:N, found \"size:4\""
        );
        let err = Format::parse("ID: x\n").unwrap_err();
        assert!(err.to_string().starts_with("ID: invalid digit"), "{err}");
    }

    /// A page as the ring buffer lays it out: header, then events.
    fn page(ts: u64, events: &[u8], missed: bool) -> Vec<u8> {
        let mut p = ts.to_le_bytes().to_vec();
        let commit = events.len() as u64 | if missed { MISSED_EVENTS } else { 0 };
        p.extend(commit.to_le_bytes());
        p.extend(events);
        p.resize(4096, 0);
        p
    }

    fn header(type_len: u32, delta: u32) -> [u8; 4] {
        (type_len | delta << 5).to_le_bytes()
    }

    #[test]
    fn a_page_decodes_to_its_events_with_their_times() {
        let mut events = Vec::new();
        // A 8-byte record (type_len 2), 10 ns after the page's time.
        events.extend(header(2, 10));
        events.extend([7, 0, 0xaa, 0xbb, 1, 2, 3, 4]);
        // A time extend of 3 << 27 + 5 ns.
        events.extend(header(TIME_EXTEND, 5));
        events.extend(3u32.to_le_bytes());
        // A long record (type_len 0): length word = data + 4; 6 ns later.
        events.extend(header(0, 6));
        events.extend(12u32.to_le_bytes());
        events.extend([9, 0, 1, 1, 2, 2, 3, 3]);
        // Discarded padding of 8 bytes, 1 ns.
        events.extend(header(PADDING, 1));
        events.extend(4u32.to_le_bytes());
        events.extend([0; 4]);
        let mut out = Vec::new();
        let facts = decode_page(&page(1_000, &events, true), 0, &mut out);
        assert!(facts.missed_events);
        let extended = 1_000 + 10 + (3 << 27) + 5;
        assert_eq!(
            out,
            vec![
                Record {
                    time_ns: 1_010,
                    cpu: 0,
                    id: 7,
                    data: vec![7, 0, 0xaa, 0xbb, 1, 2, 3, 4],
                },
                Record {
                    time_ns: extended + 6,
                    cpu: 0,
                    id: 9,
                    data: vec![9, 0, 1, 1, 2, 2, 3, 3],
                },
            ]
        );
    }

    #[test]
    fn a_torn_or_empty_page_decodes_to_nothing_and_never_panics() {
        let mut out = Vec::new();
        decode_page(&[], 0, &mut out);
        decode_page(&[0; 12], 0, &mut out);
        let mut events = header(0, 1).to_vec();
        events.extend(u32::MAX.to_le_bytes());
        decode_page(&page(5, &events, false), 0, &mut out);
        let mut p = page(5, &header(28, 1), false);
        p.truncate(24);
        decode_page(&p, 0, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn field_values_are_read_little_endian_at_their_offsets() {
        let f = Format::parse(PROBE_FORMAT).unwrap();
        let mut record = vec![0u8; 136];
        record[84..88].copy_from_slice(&0xdead_beefu32.to_le_bytes());
        record[112..120].copy_from_slice(&42u64.to_le_bytes());
        assert_eq!(f.value(&record, "snd_una"), Some(0xdead_beef));
        assert_eq!(f.value(&record, "sock_cookie"), Some(42));
        assert_eq!(f.value(&record, "saddr"), None, "wider than 8 bytes");
        assert_eq!(f.value(&record[..100], "sock_cookie"), None, "cut short");
    }
}

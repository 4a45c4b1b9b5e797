//! Tracing one session's sockets while it runs: a private tracefs instance with the
//! session's tracepoints, filtered in the kernel on its sockets (cookies, or the port every
//! one of them shares), drained by a thread into [`TraceRow`]s on the session's clock. Used
//! by the daemon (sender events) and the reader (autotuning).
//!
//! Memory is bounded: the kernel's ring buffers are fixed ([`BUFFER_KB`] per CPU), each
//! drain takes at most what they hold, and a sink that cannot keep up holds the thread
//! back, so the kernel drops events and counts them, rather than oscil piling them up.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::trace::tracefs::{
    monotonic_now_ns, remove_leftover_probes, Format, FunctionProbes, Instance, Record, TraceError,
    Tracepoint,
};

use oscil_model::files::columns::Row;
use oscil_model::files::trace::{TraceKind, TraceRow, TraceSide, TraceSideFacts, TraceSource};

/// Each CPU's ring buffer: 0.5 s of 1 Gbit/s ACKs (~45,000 a second of ~150 bytes) between
/// drains 100 ms apart.
pub const BUFFER_KB: u32 = 4096;

/// How often the thread empties the buffers.
const DRAIN_EVERY: Duration = Duration::from_millis(100);

/// Up to this many sockets the kernel filters on their cookies; beyond, on the port they
/// share (the filter is one line of text), and the rest by cookie here.
const FILTER_COOKIES_UP_TO: usize = 16;

/// The events the daemon traces on its data sockets.
pub const SENDER_KINDS: &[TraceKind] = &[
    TraceKind::Probe,
    TraceKind::Retransmit,
    TraceKind::CongState,
];

/// The events the reader traces on its data sockets: autotuning, and (where the kernel
/// has kprobe events) how long each collapse and prune of the receive queue took.
pub const READER_KINDS: &[TraceKind] = &[
    TraceKind::RcvbufGrow,
    TraceKind::RcvSpaceAdjust,
    TraceKind::TcpCollapse,
    TraceKind::TcpPruneQueue,
    TraceKind::TcpCollapseOfoQueue,
    TraceKind::TcpPruneOfoQueue,
];

/// What to trace.
#[derive(Debug, Clone)]
pub struct TraceRequest {
    pub kinds: &'static [TraceKind],
    /// Each data socket's cookie and flow.
    pub sockets: Vec<(u64, u32)>,
    /// A port field every event of the session's sockets carries and its value: `sport`
    /// and the daemon's port on the daemon, `dport` and the same port on the reader.
    pub port: (&'static str, u16),
    /// The session's start: row times count from it.
    pub start: Instant,
    /// The instance's name under `instances/`, unique to this process and session: an
    /// [`Owner`](crate::trace::tracefs::Owner)'s, so a killed owner's is found and removed.
    pub name: String,
    /// Each CPU's ring buffer, KiB ([`BUFFER_KB`] unless a budget says less).
    pub buffer_kb: u32,
    /// The kprobe event group of this process's function probes (letters, digits, `_`):
    /// [`probe_group`]'s, so a killed process's probes are found and removed.
    pub probe_group: String,
}

/// The kprobe group of `program`'s process `pid`: `oscil_<program>_<pid>`.
pub fn probe_group(program: &str, pid: u32) -> String {
    format!("oscil_{program}_{pid}")
}

/// Whether `group` is [`probe_group`]'s for a process that has ended.
fn is_leftover_group(group: &str) -> bool {
    let pid = group
        .strip_prefix("oscil_")
        .and_then(|rest| rest.rsplit_once('_'))
        .and_then(|(_, pid)| pid.parse::<u32>().ok());
    pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
}

/// Each socket's cookie with its flow, for [`TraceRequest::sockets`].
pub fn cookies<F: std::os::fd::AsFd>(
    flows: impl IntoIterator<Item = (u32, F)>,
) -> std::io::Result<Vec<(u64, u32)>> {
    flows
        .into_iter()
        .map(|(flow, fd)| Ok((crate::socket::diag::cookie(fd)?, flow)))
        .collect()
}

/// The kernel's filter for `kind` on `request`'s sockets.
pub fn filter(kind: TraceKind, request: &TraceRequest) -> String {
    let (field, port) = request.port;
    if kind.has_cookie() && request.sockets.len() <= FILTER_COOKIES_UP_TO {
        let cookies: Vec<String> = request
            .sockets
            .iter()
            .map(|(cookie, _)| format!("sock_cookie == {cookie}"))
            .collect();
        cookies.join(" || ")
    } else {
        format!("{field} == {port}")
    }
}

/// A running trace: stop it with [`Tracer::finish`].
pub struct Tracer {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<TraceSideFacts>,
}

impl Tracer {
    /// Opens the instance under `root` and starts the thread that drains it into `sink`
    /// (which returns `Break` when it wants no more). Without tracefs, or any of the
    /// tracepoints, or the right to use them: the facts saying why.
    pub fn start<S: TraceSide>(
        root: &Path,
        request: TraceRequest,
        mut sink: impl FnMut(Vec<TraceRow<S>>) -> ControlFlow<()> + Send + 'static,
    ) -> Result<Tracer, TraceSideFacts> {
        let (mut traced, mut facts) = open(root, &request)?;
        let mut decoder = Decoder::<S>::new(&request);
        let (stop, stop_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("trace".into())
            .spawn(move || {
                let mut records = Vec::new();
                loop {
                    let stopping = !matches!(
                        stop_rx.recv_timeout(DRAIN_EVERY),
                        Err(RecvTimeoutError::Timeout)
                    );
                    records.clear();
                    match traced.instance.drain(&mut records) {
                        Ok(missed_pages) => facts.lost_events += missed_pages,
                        Err(e) => {
                            facts.absent.push(format!("reading the trace stopped: {e}"));
                            break;
                        }
                    }
                    let rows = decoder.rows(&traced, &records, &mut facts);
                    if (!rows.is_empty() && sink(rows).is_break()) || stopping {
                        break;
                    }
                }
                facts.lost_events += traced.instance.overruns();
                decoder.note_unmatched(&mut facts);
                facts
            })
            .map_err(|e| TraceSideFacts::absent(format!("cannot start the trace thread: {e}")))?;
        Ok(Tracer { stop, thread })
    }

    /// Drains what is left and stops; what was traced.
    pub fn finish(self) -> TraceSideFacts {
        let _ = self.stop.send(());
        self.thread
            .join()
            .unwrap_or_else(|_| TraceSideFacts::absent("the trace thread panicked".into()))
    }
}

/// The instance, and the function probes it enabled, dropped in that order: the kernel
/// removes no probe an instance still has enabled.
struct Traced {
    instance: Instance,
    probes: Option<FunctionProbes>,
}

/// The instance with every tracepoint and function probe of `request` the kernel has; the
/// facts name the others. A killed process's probes go first.
fn open(root: &Path, request: &TraceRequest) -> Result<(Traced, TraceSideFacts), TraceSideFacts> {
    let absent = |e: TraceError| TraceSideFacts::absent(e.to_string());
    if !root.join("instances").is_dir() {
        return Err(absent(TraceError::NoTracefs(root.to_path_buf())));
    }
    let mut facts = TraceSideFacts::default();
    let mut points = Vec::new();
    let mut functions = Vec::new();
    for &kind in request.kinds {
        match kind.source() {
            TraceSource::Function(function) => functions.push(function),
            TraceSource::Tracepoint(name) => {
                if root.join("events").join(name).join("format").is_file() {
                    facts.tracepoints.push(name.to_string());
                    points.push(Tracepoint {
                        name: name.to_string(),
                        filter: Some(filter(kind, request)),
                    });
                } else {
                    facts
                        .absent
                        .push(TraceError::NoEvent(name.to_string()).to_string());
                }
            }
        }
    }
    let probes = probe(root, request, &functions, &mut facts);
    if let Some(probes) = &probes {
        let events = probes.events();
        facts
            .tracepoints
            .extend(events.iter().map(|e| e.name.clone()));
        points.extend(events);
    }
    if points.is_empty() {
        return Err(facts);
    }
    let instance =
        Instance::create(root, &request.name, request.buffer_kb, &points).map_err(absent)?;
    Ok((Traced { instance, probes }, facts))
}

/// Entry and return probes on `functions`, under the request's group, after removing those
/// a killed process left; the facts say which functions are absent and why.
fn probe(
    root: &Path,
    request: &TraceRequest,
    functions: &[&str],
    facts: &mut TraceSideFacts,
) -> Option<FunctionProbes> {
    if functions.is_empty() {
        return None;
    }
    if let Err(e) = remove_leftover_probes(root, is_leftover_group) {
        facts
            .absent
            .push(format!("cannot remove an ended process's probes: {e}"));
    }
    match FunctionProbes::create(root, &request.probe_group, functions) {
        Ok((probes, refused)) => {
            facts.absent.extend(refused.iter().map(|e| e.to_string()));
            Some(probes).filter(|p| p.functions().next().is_some())
        }
        Err(e) => {
            facts.absent.push(format!("{}: {e}", functions.join(", ")));
            None
        }
    }
}

/// How an event without a cookie names its socket: its address in the kernel (`skaddr`)
/// where the event has it, else its ports. 5.10's and 6.1's `tcp_probe` has a cookie but
/// no `skaddr`, so their retransmits and state changes are matched by ports; the port the
/// kernel filters on is the session's, and the other is the flow's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum SocketKey {
    Address(u64),
    Ports(u64, u64),
}

impl SocketKey {
    /// The keys `record` carries, the address first.
    fn of(format: &Format, record: &Record) -> impl Iterator<Item = SocketKey> {
        let value = |field| format.value(&record.data, field);
        let address = value("skaddr").map(SocketKey::Address);
        let ports = value("sport")
            .zip(value("dport"))
            .map(|(s, d)| SocketKey::Ports(s, d));
        address.into_iter().chain(ports)
    }
}

/// Turns records into rows: the kind from the event, the flow from the socket's cookie
/// (or, for events without one, from its address or ports as learnt from events with a
/// cookie), the time on the session's clock.
struct Decoder<S> {
    flows_by_cookie: HashMap<u64, u32>,
    flows_by_key: HashMap<SocketKey, u32>,
    start_mono_ns: u64,
    /// Calls entered and not yet returned, per CPU and function: when, and on which socket.
    open_calls: HashMap<(u32, TraceKind), Vec<(u64, u64)>>,
    /// Returned calls on a socket no event has named yet: the session's socket whose
    /// first autotuning event comes later (matched then), or another socket of the host.
    pending_calls: Vec<Call>,
    /// Calls past [`MAX_PENDING_CALLS`], per kind: said, never matched.
    foreign_calls: HashMap<TraceKind, u64>,
    side: PhantomData<S>,
}

/// A returned call: its function, entry (monotonic ns), socket address and duration (ns).
type Call = (TraceKind, u64, u64, u32);

/// The most calls held for a socket not yet named: a host collapsing other sockets' queues
/// all run long must not grow the reader without bound.
const MAX_PENDING_CALLS: usize = 10_000;

impl<S: TraceSide> Decoder<S> {
    fn new(request: &TraceRequest) -> Self {
        let since_start = request.start.elapsed().as_nanos() as u64;
        Decoder {
            flows_by_cookie: request.sockets.iter().copied().collect(),
            flows_by_key: HashMap::new(),
            start_mono_ns: monotonic_now_ns().saturating_sub(since_start),
            open_calls: HashMap::new(),
            pending_calls: Vec::new(),
            foreign_calls: HashMap::new(),
            side: PhantomData,
        }
    }

    fn rows(
        &mut self,
        traced: &Traced,
        records: &[Record],
        facts: &mut TraceSideFacts,
    ) -> Vec<TraceRow<S>> {
        let mut rows = Vec::with_capacity(records.len());
        for record in records {
            let Some((name, format)) = traced.instance.format(record.id) else {
                continue;
            };
            let call = traced.probes.as_ref().and_then(|p| p.which(name));
            let row =
                match call {
                    Some((function, entry)) => {
                        let Some(kind) = TraceKind::ALL.into_iter().find(
                            |k| matches!(k.source(), TraceSource::Function(f) if f == function),
                        ) else {
                            continue;
                        };
                        self.call(kind, entry, format, record)
                    }
                    None => {
                        let Some(kind) = TraceKind::ALL.into_iter().find(
                            |k| matches!(k.source(), TraceSource::Tracepoint(t) if t == name),
                        ) else {
                            continue;
                        };
                        self.row(kind, format, record)
                    }
                };
            if let Some(row) = row {
                *facts
                    .events
                    .entry(row.kind.as_str().to_string())
                    .or_default() += 1;
                rows.push(row);
            }
        }
        for row in self.rematch() {
            *facts
                .events
                .entry(row.kind.as_str().to_string())
                .or_default() += 1;
            rows.push(row);
        }
        rows
    }

    fn t_s(&self, time_ns: u64) -> f64 {
        (time_ns as i128 - self.start_mono_ns as i128) as f64 / 1e9
    }

    fn row(&mut self, kind: TraceKind, format: &Format, record: &Record) -> Option<TraceRow<S>> {
        let value = |field| format.value(&record.data, field);
        let flow = match value("sock_cookie") {
            Some(cookie) => {
                let flow = *self.flows_by_cookie.get(&cookie)?;
                for key in SocketKey::of(format, record) {
                    self.flows_by_key.insert(key, flow);
                }
                flow
            }
            None => {
                SocketKey::of(format, record).find_map(|k| self.flows_by_key.get(&k).copied())?
            }
        };
        let mut row = TraceRow::new(self.t_s(record.time_ns), kind, flow);
        // After `t_s`, `kind` and `flow`, every column is a field of some tracepoint.
        for &column in &TraceRow::<S>::columns()[3..] {
            if let Some(v) = value(field_of(column)) {
                put(&mut row, column, v);
            }
        }
        Some(row)
    }

    /// A function's entry (remembered) or return: the call's row, at its entry, when it
    /// was on one of the session's sockets. Entry and return of a call are on one CPU,
    /// nested calls of one function return innermost first.
    fn call(
        &mut self,
        kind: TraceKind,
        entry: bool,
        format: &Format,
        record: &Record,
    ) -> Option<TraceRow<S>> {
        let open = self.open_calls.entry((record.cpu, kind)).or_default();
        if entry {
            let sk = format.value(&record.data, "sk").unwrap_or(0);
            open.push((record.time_ns, sk));
            return None;
        }
        let (entered_ns, sk) = open.pop()?;
        let ns = record.time_ns.saturating_sub(entered_ns);
        let call = (kind, entered_ns, sk, u32::try_from(ns).unwrap_or(u32::MAX));
        if let Some(&flow) = self.flows_by_key.get(&SocketKey::Address(sk)) {
            return Some(self.call_row(call, flow));
        }
        if self.pending_calls.len() < MAX_PENDING_CALLS {
            self.pending_calls.push(call);
        } else {
            *self.foreign_calls.entry(kind).or_default() += 1;
        }
        None
    }

    fn call_row(&self, (kind, entered_ns, _, duration_ns): Call, flow: u32) -> TraceRow<S> {
        let mut row = TraceRow::new(self.t_s(entered_ns), kind, flow);
        row.duration_ns = Some(duration_ns);
        row
    }

    /// The rows of held calls whose socket an event has named since (later in the file
    /// than rows after their entry).
    fn rematch(&mut self) -> Vec<TraceRow<S>> {
        let held = std::mem::take(&mut self.pending_calls);
        let (known, unknown): (Vec<Call>, Vec<Call>) = held
            .into_iter()
            .partition(|call| self.flows_by_key.contains_key(&SocketKey::Address(call.2)));
        self.pending_calls = unknown;
        known
            .into_iter()
            .map(|call| self.call_row(call, self.flows_by_key[&SocketKey::Address(call.2)]))
            .collect()
    }

    /// Says how many calls were on sockets not the session's, once, at the end.
    fn note_unmatched(&self, facts: &mut TraceSideFacts) {
        let mut foreign = self.foreign_calls.clone();
        for &(kind, ..) in &self.pending_calls {
            *foreign.entry(kind).or_default() += 1;
        }
        let mut foreign: Vec<_> = foreign.into_iter().collect();
        foreign.sort();
        for (kind, n) in foreign {
            facts.absent.push(format!(
                "{n} calls of {} on sockets not the session's were left out",
                kind.as_str()
            ));
        }
    }
}

/// The tracepoint field a column of [`TraceRow`] comes from: its own name but for two.
fn field_of(column: &str) -> &str {
    match column {
        // `tcp_probe` gives `srtt_us >> 3`: microseconds.
        "srtt_us" => "srtt",
        "measured_us" => "time",
        other => other,
    }
}

/// Sets `column` (one of the tracepoint columns of [`TraceRow`]).
fn put<S>(row: &mut TraceRow<S>, column: &str, v: u64) {
    let narrow = v as u32;
    let slot = match column {
        "snd_nxt" => &mut row.snd_nxt,
        "snd_una" => &mut row.snd_una,
        "snd_cwnd" => &mut row.snd_cwnd,
        "ssthresh" => &mut row.ssthresh,
        "snd_wnd" => &mut row.snd_wnd,
        "srtt_us" => &mut row.srtt_us,
        "rcv_wnd" => &mut row.rcv_wnd,
        "rtt_us" => &mut row.rtt_us,
        "copied" => &mut row.copied,
        "inq" => &mut row.inq,
        "space" => &mut row.space,
        "ooo_space" => &mut row.ooo_space,
        "rcvbuf" => &mut row.rcvbuf,
        "rcv_ssthresh" => &mut row.rcv_ssthresh,
        "window_clamp" => &mut row.window_clamp,
        "measured_us" => &mut row.measured_us,
        "duration_ns" => &mut row.duration_ns,
        "cong_state" => return row.cong_state = Some(v as u8),
        "scaling_ratio" => return row.scaling_ratio = Some(v as u8),
        _ => return,
    };
    *slot = Some(narrow);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(sockets: usize) -> TraceRequest {
        TraceRequest {
            kinds: SENDER_KINDS,
            sockets: (0..sockets as u32)
                .map(|f| (100 + u64::from(f), f))
                .collect(),
            port: ("sport", 5250),
            start: Instant::now(),
            name: "x".into(),
            buffer_kb: BUFFER_KB,
            probe_group: probe_group("test", 1),
        }
    }

    #[test]
    fn few_sockets_are_filtered_by_cookie_many_and_cookieless_events_by_port() {
        let few = request(2);
        assert_eq!(
            filter(TraceKind::Probe, &few),
            "sock_cookie == 100 || sock_cookie == 101"
        );
        assert_eq!(filter(TraceKind::Retransmit, &few), "sport == 5250");
        assert_eq!(filter(TraceKind::Probe, &request(17)), "sport == 5250");
    }

    #[test]
    fn every_column_after_the_first_three_is_set_from_its_field() {
        let mut row =
            TraceRow::<oscil_model::files::trace::SenderTrace>::new(0.0, TraceKind::Probe, 0);
        let columns = &TraceRow::<oscil_model::files::trace::SenderTrace>::columns()[3..];
        for (i, column) in columns.iter().enumerate() {
            put(&mut row, column, i as u64 + 1);
        }
        let json = serde_json::to_value(&row).unwrap();
        for (i, column) in columns.iter().enumerate() {
            assert_eq!(json[column], i + 1, "{column}");
        }
        assert_eq!(
            (field_of("srtt_us"), field_of("snd_una")),
            ("srtt", "snd_una")
        );
    }

    /// Layouts cut from this kernel's (6.18) `format` files to the fields used here.
    const PROBE: &str = "ID: 1\n\tfield:__u32 snd_una;\toffset:84;\tsize:4;\tsigned:0;\n\tfield:__u32 snd_wnd;\toffset:96;\tsize:4;\tsigned:0;\n\tfield:__u32 srtt;\toffset:100;\tsize:4;\tsigned:0;\n\tfield:__u64 sock_cookie;\toffset:112;\tsize:8;\tsigned:0;\n\tfield:const void * skaddr;\toffset:128;\tsize:8;\tsigned:0;\n";
    const CONG: &str = "ID: 2\n\tfield:const void * skaddr;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:__u8 cong_state;\toffset:62;\tsize:1;\tsigned:0;\n";

    fn record(time_ns: u64, id: u16, fields: &[(usize, &[u8])]) -> Record {
        let mut data = vec![0u8; 136];
        data[..2].copy_from_slice(&id.to_le_bytes());
        for (at, bytes) in fields {
            data[*at..*at + bytes.len()].copy_from_slice(bytes);
        }
        Record {
            time_ns,
            cpu: 0,
            id,
            data,
        }
    }

    #[test]
    fn rows_are_of_the_sessions_sockets_on_its_clock_and_cookieless_events_follow_skaddr() {
        let probe = Format::parse(PROBE).unwrap();
        let cong = Format::parse(CONG).unwrap();
        let mut decoder = Decoder::<oscil_model::files::trace::SenderTrace> {
            flows_by_cookie: [(100, 0), (101, 1)].into_iter().collect(),
            flows_by_key: HashMap::new(),
            start_mono_ns: 5_000_000_000,
            open_calls: HashMap::new(),
            pending_calls: Vec::new(),
            foreign_calls: HashMap::new(),
            side: PhantomData,
        };
        let (skaddr, other_skaddr) = (0xffff_8000_dead_0000u64, 0xffff_8000_beef_0000u64);
        // A state change of a socket not yet seen: whose it is cannot be told.
        let early = record(5_100_000_000, 2, &[(8, &skaddr.to_le_bytes()), (62, &[3])]);
        assert!(decoder.row(TraceKind::CongState, &cong, &early).is_none());
        let ack = record(
            6_500_000_000,
            1,
            &[
                (84, &7u32.to_le_bytes()),
                (96, &65536u32.to_le_bytes()),
                (100, &250u32.to_le_bytes()),
                (112, &101u64.to_le_bytes()),
                (128, &skaddr.to_le_bytes()),
            ],
        );
        let row = decoder
            .row(TraceKind::Probe, &probe, &ack)
            .expect("flow 1's ACK");
        assert_eq!((row.t_s, row.flow, row.kind), (1.5, 1, TraceKind::Probe));
        assert_eq!(
            (row.snd_una, row.snd_wnd, row.srtt_us),
            (Some(7), Some(65536), Some(250))
        );
        assert_eq!((row.cong_state, row.rcvbuf), (None, None));
        // Another session's socket passed the kernel's port filter: left out.
        let foreign = record(
            6_600_000_000,
            1,
            &[
                (112, &999u64.to_le_bytes()),
                (128, &other_skaddr.to_le_bytes()),
            ],
        );
        assert!(decoder.row(TraceKind::Probe, &probe, &foreign).is_none());
        let later = record(7_000_000_000, 2, &[(8, &skaddr.to_le_bytes()), (62, &[4])]);
        let row = decoder
            .row(TraceKind::CongState, &cong, &later)
            .expect("now known");
        assert_eq!((row.t_s, row.flow, row.cong_state), (2.0, 1, Some(4)));
        let stranger = record(
            7_100_000_000,
            2,
            &[(8, &other_skaddr.to_le_bytes()), (62, &[4])],
        );
        assert!(decoder
            .row(TraceKind::CongState, &cong, &stranger)
            .is_none());
    }

    /// Debian 12's 6.1 (read in the kernel matrix's guest), cut to the fields used: its
    /// `tcp_probe` has a cookie but no `skaddr`; its retransmits have `skaddr` and ports.
    const PROBE_6_1: &str = "ID: 1342\n\tfield:__u16 sport;\toffset:64;\tsize:2;\tsigned:0;\n\tfield:__u16 dport;\toffset:66;\tsize:2;\tsigned:0;\n\tfield:__u32 snd_una;\toffset:84;\tsize:4;\tsigned:0;\n\tfield:__u64 sock_cookie;\toffset:112;\tsize:8;\tsigned:0;\n";
    const RETRANSMIT_6_1: &str = "ID: 1343\n\tfield:const void * skaddr;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:__u16 sport;\toffset:28;\tsize:2;\tsigned:0;\n\tfield:__u16 dport;\toffset:30;\tsize:2;\tsigned:0;\n";

    #[test]
    fn on_6_1_acks_without_skaddr_count_and_retransmits_follow_their_ports() {
        let probe = Format::parse(PROBE_6_1).unwrap();
        let retransmit = Format::parse(RETRANSMIT_6_1).unwrap();
        let mut decoder = Decoder::<oscil_model::files::trace::SenderTrace> {
            flows_by_cookie: [(100, 0), (101, 1)].into_iter().collect(),
            flows_by_key: HashMap::new(),
            start_mono_ns: 0,
            open_calls: HashMap::new(),
            pending_calls: Vec::new(),
            foreign_calls: HashMap::new(),
            side: PhantomData,
        };
        let ports = |dport: u16| [(64, 5250u16.to_le_bytes()), (66, dport.to_le_bytes())];
        let [sport, dport] = ports(40_001);
        let ack = record(
            1_000_000_000,
            1342,
            &[
                (sport.0, &sport.1),
                (dport.0, &dport.1),
                (84, &9u32.to_le_bytes()),
                (112, &101u64.to_le_bytes()),
            ],
        );
        let row = decoder
            .row(TraceKind::Probe, &probe, &ack)
            .expect("an ACK of flow 1");
        assert_eq!((row.flow, row.snd_una), (1, Some(9)));
        // A retransmit of the same socket: an address never seen, ports that were.
        let again = record(
            2_000_000_000,
            1343,
            &[
                (16, &0xffff_8000_dead_0000u64.to_le_bytes()),
                (28, &5250u16.to_le_bytes()),
                (30, &40_001u16.to_le_bytes()),
            ],
        );
        let row = decoder
            .row(TraceKind::Retransmit, &retransmit, &again)
            .expect("flow 1's retransmit");
        assert_eq!((row.t_s, row.flow), (2.0, 1));
        // Another socket's retransmit on the session's port: left out.
        let other = record(
            2_100_000_000,
            1343,
            &[(28, &5250u16.to_le_bytes()), (30, &40_002u16.to_le_bytes())],
        );
        assert!(decoder
            .row(TraceKind::Retransmit, &retransmit, &other)
            .is_none());
    }

    #[test]
    fn a_call_is_timed_from_its_entry_to_its_return_on_its_cpu() {
        // A kprobe's record: common fields, __probe_ip, then the fetched `sk`.
        let entry = Format::parse("ID: 3\n\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:x64 sk;\toffset:16;\tsize:8;\tsigned:0;\n").unwrap();
        let ret = Format::parse(
            "ID: 4\n\tfield:unsigned long __probe_func;\toffset:8;\tsize:8;\tsigned:0;\n",
        )
        .unwrap();
        let mut decoder = Decoder::<oscil_model::files::trace::ReaderTrace>::new(&request(1));
        decoder.start_mono_ns = 1_000_000_000;
        let sk = 0xffff_8000_dead_0000u64;
        decoder.flows_by_key.insert(SocketKey::Address(sk), 0);
        let at = |time_ns, cpu, id| Record {
            cpu,
            ..record(time_ns, id, &[(16, &sk.to_le_bytes())])
        };
        let kind = TraceKind::TcpCollapse;
        // Two calls at once on two CPUs; the inner of two nested ones returns first.
        assert!(decoder
            .call(kind, true, &entry, &at(2_000_000_000, 0, 3))
            .is_none());
        assert!(decoder
            .call(kind, true, &entry, &at(2_000_001_000, 1, 3))
            .is_none());
        assert!(decoder
            .call(kind, true, &entry, &at(2_000_002_000, 1, 3))
            .is_none());
        let inner = decoder
            .call(kind, false, &ret, &at(2_000_002_500, 1, 4))
            .unwrap();
        assert_eq!((inner.t_s, inner.duration_ns), (1.000002, Some(500)));
        let outer = decoder
            .call(kind, false, &ret, &at(2_000_009_000, 1, 4))
            .unwrap();
        assert_eq!(outer.duration_ns, Some(8_000));
        let first = decoder
            .call(kind, false, &ret, &at(2_000_040_000, 0, 4))
            .unwrap();
        assert_eq!((first.flow, first.duration_ns), (0, Some(40_000)));
        // A return with no entry seen (it came before the trace) is no call.
        assert!(decoder
            .call(kind, false, &ret, &at(3_000_000_000, 0, 4))
            .is_none());
        // A call on a socket no event has named yet is held, and written once one does.
        let later = 0xffff_8000_0123_0000u64;
        let on = |time_ns, id, sk: u64| record(time_ns, id, &[(16, &sk.to_le_bytes())]);
        assert!(decoder
            .call(kind, true, &entry, &on(3_100_000_000, 3, later))
            .is_none());
        assert!(decoder
            .call(kind, false, &ret, &on(3_100_000_700, 4, later))
            .is_none());
        assert!(decoder.rematch().is_empty());
        decoder.flows_by_key.insert(SocketKey::Address(later), 1);
        let held = decoder.rematch();
        assert_eq!(
            held.iter()
                .map(|r| (r.t_s, r.flow, r.duration_ns))
                .collect::<Vec<_>>(),
            [(2.1, 1, Some(700))]
        );
        // Another socket's call is counted, and said, not written.
        let other = Record {
            cpu: 0,
            ..record(4_000_000_000, 3, &[(16, &7u64.to_le_bytes())])
        };
        assert!(decoder.call(kind, true, &entry, &other).is_none());
        assert!(decoder
            .call(kind, false, &ret, &at(4_000_000_100, 0, 4))
            .is_none());
        let mut facts = TraceSideFacts::default();
        decoder.note_unmatched(&mut facts);
        assert_eq!(
            facts.absent,
            ["1 calls of tcp_collapse on sockets not the session's were left out"]
        );
    }

    #[test]
    fn a_probe_group_names_its_process_and_an_ended_ones_is_a_leftover() {
        assert_eq!(probe_group("reader", 42), "oscil_reader_42");
        assert!(!is_leftover_group(&probe_group(
            "reader",
            std::process::id()
        )));
        // PID 4194304 is past the kernel's pid_max limit: no process has it.
        assert!(is_leftover_group(&probe_group("reader", 4_194_304)));
        assert!(!is_leftover_group("perf_probe"));
    }

    #[test]
    fn an_empty_root_says_there_is_no_tracefs() {
        let empty = tempfile::tempdir().unwrap();
        let facts = Tracer::start::<oscil_model::files::trace::SenderTrace>(
            empty.path(),
            request(1),
            |_| ControlFlow::Continue(()),
        )
        .err()
        .expect("no tracefs");
        assert!(facts.absent[0].contains("no tracefs"), "{:?}", facts.absent);
        assert!(facts.tracepoints.is_empty());
    }

    #[test]
    fn a_tracefs_without_the_events_names_each_missing_one() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("instances")).unwrap();
        let facts = open(root.path(), &request(1)).err().expect("no events");
        assert_eq!(facts.absent.len(), SENDER_KINDS.len());
        assert!(facts.absent[1].contains("tcp/tcp_retransmit_skb"));
    }
}

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

use oscil_kernel::tracefs::{monotonic_now_ns, Format, Instance, Record, TraceError, Tracepoint};

use oscil_protocol::trace::{TraceKind, TraceRow, TraceSide, TraceSideFacts};
use oscil_rundir::Columns;

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

/// The events the reader traces on its data sockets.
pub const READER_KINDS: &[TraceKind] = &[TraceKind::RcvbufGrow, TraceKind::RcvSpaceAdjust];

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
    /// The instance's name under `instances/`, unique to this process and session.
    pub name: String,
}

/// Each socket's cookie with its flow, for [`TraceRequest::sockets`].
pub fn cookies<F: std::os::fd::AsFd>(
    flows: impl IntoIterator<Item = (u32, F)>,
) -> std::io::Result<Vec<(u64, u32)>> {
    flows
        .into_iter()
        .map(|(flow, fd)| Ok((oscil_kernel::diag::cookie(fd)?, flow)))
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
        let (mut instance, mut facts) = open(root, &request)?;
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
                    match instance.drain(&mut records) {
                        Ok(missed_pages) => facts.lost_events += missed_pages,
                        Err(e) => {
                            facts.absent.push(format!("reading the trace stopped: {e}"));
                            break;
                        }
                    }
                    let rows = decoder.rows(&instance, &records, &mut facts);
                    if (!rows.is_empty() && sink(rows).is_break()) || stopping {
                        break;
                    }
                }
                facts.lost_events += instance.overruns();
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

/// The instance with every tracepoint of `request` the kernel has; the facts name the
/// others.
fn open(root: &Path, request: &TraceRequest) -> Result<(Instance, TraceSideFacts), TraceSideFacts> {
    let absent = |e: TraceError| TraceSideFacts::absent(e.to_string());
    if !root.join("instances").is_dir() {
        return Err(absent(TraceError::NoTracefs(root.to_path_buf())));
    }
    let mut facts = TraceSideFacts::default();
    let mut points = Vec::new();
    for &kind in request.kinds {
        let name = kind.tracepoint();
        if root.join("events").join(name).join("format").is_file() {
            facts.tracepoints.push(name.to_string());
            points.push(Tracepoint {
                name,
                filter: Some(filter(kind, request)),
            });
        } else {
            facts
                .absent
                .push(TraceError::NoEvent(name.to_string()).to_string());
        }
    }
    if points.is_empty() {
        return Err(facts);
    }
    let instance = Instance::create(root, &request.name, BUFFER_KB, &points).map_err(absent)?;
    Ok((instance, facts))
}

/// Turns records into rows: the kind from the event, the flow from the socket's cookie
/// (or, for events without one, from its address as learnt from events with both), the
/// time on the session's clock.
struct Decoder<S> {
    flows_by_cookie: HashMap<u64, u32>,
    flows_by_skaddr: HashMap<u64, u32>,
    start_mono_ns: u64,
    side: PhantomData<S>,
}

impl<S: TraceSide> Decoder<S> {
    fn new(request: &TraceRequest) -> Self {
        let since_start = request.start.elapsed().as_nanos() as u64;
        Decoder {
            flows_by_cookie: request.sockets.iter().copied().collect(),
            flows_by_skaddr: HashMap::new(),
            start_mono_ns: monotonic_now_ns().saturating_sub(since_start),
            side: PhantomData,
        }
    }

    fn rows(
        &mut self,
        instance: &Instance,
        records: &[Record],
        facts: &mut TraceSideFacts,
    ) -> Vec<TraceRow<S>> {
        let mut rows = Vec::with_capacity(records.len());
        for record in records {
            let Some((name, format)) = instance.format(record.id) else {
                continue;
            };
            let Some(kind) = TraceKind::ALL.into_iter().find(|k| k.tracepoint() == name) else {
                continue;
            };
            let Some(row) = self.row(kind, format, record) else {
                continue;
            };
            *facts.events.entry(kind.as_str().to_string()).or_default() += 1;
            rows.push(row);
        }
        rows
    }

    fn row(&mut self, kind: TraceKind, format: &Format, record: &Record) -> Option<TraceRow<S>> {
        let value = |field| format.value(&record.data, field);
        let skaddr = value("skaddr")?;
        let flow = match value("sock_cookie") {
            Some(cookie) => {
                let flow = *self.flows_by_cookie.get(&cookie)?;
                self.flows_by_skaddr.insert(skaddr, flow);
                flow
            }
            None => *self.flows_by_skaddr.get(&skaddr)?,
        };
        let t_s = (record.time_ns as i128 - self.start_mono_ns as i128) as f64 / 1e9;
        let mut row = TraceRow::new(t_s, kind, flow);
        // After `t_s`, `kind` and `flow`, every column is a field of some tracepoint.
        for &column in &TraceRow::<S>::COLUMNS[3..] {
            if let Some(v) = value(field_of(column)) {
                put(&mut row, column, v);
            }
        }
        Some(row)
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
        let mut row = TraceRow::<oscil_protocol::trace::SenderTrace>::new(0.0, TraceKind::Probe, 0);
        let columns = &TraceRow::<oscil_protocol::trace::SenderTrace>::COLUMNS[3..];
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
        Record { time_ns, id, data }
    }

    #[test]
    fn rows_are_of_the_sessions_sockets_on_its_clock_and_cookieless_events_follow_skaddr() {
        let probe = Format::parse(PROBE).unwrap();
        let cong = Format::parse(CONG).unwrap();
        let mut decoder = Decoder::<oscil_protocol::trace::SenderTrace> {
            flows_by_cookie: [(100, 0), (101, 1)].into_iter().collect(),
            flows_by_skaddr: HashMap::new(),
            start_mono_ns: 5_000_000_000,
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

    #[test]
    fn an_empty_root_says_there_is_no_tracefs() {
        let empty = tempfile::tempdir().unwrap();
        let facts =
            Tracer::start::<oscil_protocol::trace::SenderTrace>(empty.path(), request(1), |_| {
                ControlFlow::Continue(())
            })
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

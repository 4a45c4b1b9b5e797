//! The reader's side of `--trace`: its data sockets' receive-buffer autotuning and, where
//! the kernel has kprobe events, each collapse and prune of their receive queues, traced
//! while the pattern runs straight into `trace-reader.csv`; the calls' durations per phase;
//! and what both sides traced, for `run.json`.

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use std::collections::BTreeMap;

use oscil_kernel::trace::tracefs::Owner;
use oscil_kernel::trace::tracer::{
    cookies, probe_group, TraceRequest, Tracer, BUFFER_KB, READER_KINDS,
};
use oscil_model::files::rows::Phase;
use oscil_model::files::trace::{
    CallFigures, ReaderTrace, TraceFacts, TraceKind, TraceRow, TraceSideFacts, TraceSource,
};
use oscil_model::pattern::PhaseSpan;
use oscil_rundir::trace::TraceCsv;

use crate::read::Flow;

/// The trace file and the first error writing it, and the timed calls' durations (ns) by
/// function and phase.
struct File {
    csv: TraceCsv<ReaderTrace>,
    error: Option<String>,
    calls: BTreeMap<(TraceKind, Phase), Vec<u32>>,
    schedule: Vec<PhaseSpan>,
}

impl File {
    fn tally(&mut self, rows: &[TraceRow<ReaderTrace>]) {
        for row in rows {
            let (Some(ns), TraceSource::Function(_)) = (row.duration_ns, row.kind.source()) else {
                continue;
            };
            if let Some(span) = self.schedule.iter().find(|s| s.contains(row.t_s)) {
                self.calls
                    .entry((row.kind, span.phase))
                    .or_default()
                    .push(ns);
            }
        }
    }
}

/// Each function's calls in each phase: count, median, 99th percentile, largest.
fn call_figures(calls: &mut BTreeMap<(TraceKind, Phase), Vec<u32>>) -> Vec<CallFigures> {
    calls
        .iter_mut()
        .map(|((kind, phase), ns)| {
            ns.sort_unstable();
            let at = |q: f64| f64::from(ns[((ns.len() - 1) as f64 * q).round() as usize]) / 1e3;
            CallFigures {
                function: kind.as_str().to_owned(),
                phase: *phase,
                calls: ns.len() as u64,
                p50_us: at(0.5),
                p99_us: at(0.99),
                max_us: at(1.0),
            }
        })
        .collect()
}

/// The reader's running trace, or why there is none.
pub(crate) struct Tracing {
    tracer: Result<Tracer, TraceSideFacts>,
    file: Arc<Mutex<File>>,
}

impl Tracing {
    /// Starts tracing `flows` into `dir`; `start` is the run's clock, `schedule` its phases.
    pub(crate) fn start(
        dir: &Path,
        flows: &[Arc<Flow>],
        start: std::time::Instant,
        schedule: &[PhaseSpan],
    ) -> Self {
        let file = Arc::new(Mutex::new(File {
            csv: TraceCsv::new(dir),
            error: None,
            calls: BTreeMap::new(),
            schedule: schedule.to_vec(),
        }));
        let shared = file.clone();
        let sink = move |rows: Vec<TraceRow<ReaderTrace>>| {
            let mut file = shared.lock().unwrap_or_else(PoisonError::into_inner);
            file.tally(&rows);
            match file.csv.write(&rows) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    file.error = Some(e.to_string());
                    ControlFlow::Break(())
                }
            }
        };
        let root = oscil_kernel::trace::tracefs::root();
        // What an earlier reader, killed while tracing, left: none of it is in use.
        let _ = oscil_kernel::trace::tracefs::remove_leftovers(&root, PROGRAM);
        let tracer = request(flows, start)
            .map_err(|e| TraceSideFacts::absent(format!("cannot identify a data socket: {e}")))
            .and_then(|request| Tracer::start(&root, request, sink));
        Tracing { tracer, file }
    }

    /// Stops the trace: what it recorded, or why not.
    pub(crate) fn finish(self) -> TraceSideFacts {
        let mut facts = match self.tracer {
            Ok(tracer) => tracer.finish(),
            Err(facts) => facts,
        };
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = file.csv.flush() {
            file.error.get_or_insert(e.to_string());
        }
        if let Some(e) = file.error.take() {
            facts.absent.push(format!("writing the trace stopped: {e}"));
        }
        facts.rows_not_written += file.csv.not_written;
        facts.calls = call_figures(&mut file.calls);
        facts
    }
}

fn request(flows: &[Arc<Flow>], start: std::time::Instant) -> std::io::Result<TraceRequest> {
    let port = match flows.first() {
        Some(flow) => flow.stream.peer_addr()?.port(),
        None => 0,
    };
    Ok(TraceRequest {
        kinds: READER_KINDS,
        sockets: cookies(flows.iter().map(|f| (f.index, &f.stream)))?,
        port: ("dport", port),
        start,
        name: Owner::this_process(PROGRAM)?.instance_name(0),
        buffer_kb: BUFFER_KB,
        probe_group: probe_group("reader", std::process::id()),
    })
}

/// How the reader's tracefs instances are named ([`Owner`]).
const PROGRAM: &str = "reader";

/// The daemon's trace rows as the reader took them: how many arrived, and how many of
/// those were past the cap.
pub(crate) struct Arrived {
    pub rows: u64,
    pub not_written: u64,
}

/// `run.json`'s trace: the reader's side, and the daemon's as its `Ended` said (`None`
/// when it did not end the session properly), with the rows past the cap and those its
/// own count says it traced that never arrived.
pub(crate) fn facts(
    reader: TraceSideFacts,
    sender: Option<TraceSideFacts>,
    arrived: Arrived,
) -> TraceFacts {
    let mut sender = sender.unwrap_or_else(|| {
        TraceSideFacts::absent(
            "the daemon did not say what it traced (an older daemon, or the session did not end properly)"
                .into(),
        )
    });
    sender.rows_not_written += arrived.not_written;
    sender.rows_missing = sender.total_events().saturating_sub(arrived.rows);
    TraceFacts {
        sender: Some(sender),
        reader: Some(reader),
    }
}

/// The trace's hole, when the daemon's rows stopped before its own count of them.
pub(crate) fn holes(facts: &TraceFacts) -> Option<String> {
    let sender = facts.sender.as_ref().filter(|s| s.rows_missing > 0)?;
    Some(format!(
        "the sender's trace stopped early: {} of the {} rows the daemon counted never arrived",
        sender.rows_missing,
        sender.total_events()
    ))
}

//! The reader's side of `--trace`: its data sockets' receive-buffer autotuning, traced
//! while the pattern runs straight into `trace-reader.csv`; and what both sides traced, for
//! `run.json`.

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use oscil_protocol::trace::{ReaderTrace, TraceFacts, TraceRow, TraceSideFacts};
use oscil_rundir::trace::TraceCsv;
use oscil_tracer::{cookies, TraceRequest, Tracer, READER_KINDS};

use crate::flow::Flow;

/// The trace file and the first error writing it.
struct File {
    csv: TraceCsv<ReaderTrace>,
    error: Option<String>,
}

/// The reader's running trace, or why there is none.
pub(crate) struct Tracing {
    tracer: Result<Tracer, TraceSideFacts>,
    file: Arc<Mutex<File>>,
}

impl Tracing {
    /// Starts tracing `flows` into `dir`; `start` is the run's clock.
    pub(crate) fn start(dir: &Path, flows: &[Arc<Flow>], start: std::time::Instant) -> Self {
        let file = Arc::new(Mutex::new(File {
            csv: TraceCsv::new(dir),
            error: None,
        }));
        let shared = file.clone();
        let sink = move |rows: Vec<TraceRow<ReaderTrace>>| {
            let mut file = shared.lock().unwrap_or_else(PoisonError::into_inner);
            match file.csv.write(&rows) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    file.error = Some(e.to_string());
                    ControlFlow::Break(())
                }
            }
        };
        let tracer = request(flows, start)
            .map_err(|e| TraceSideFacts::absent(format!("cannot identify a data socket: {e}")))
            .and_then(|request| Tracer::start(&oscil_kernel::tracefs::root(), request, sink));
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
        name: format!("oscil-reader-{}", std::process::id()),
    })
}

/// `run.json`'s trace: the reader's side, and the daemon's as its `Ended` said (`None`
/// when it did not end the session properly), with the rows past the cap.
pub(crate) fn facts(
    reader: TraceSideFacts,
    sender: Option<TraceSideFacts>,
    sender_not_written: u64,
) -> TraceFacts {
    let mut sender = sender.unwrap_or_else(|| {
        TraceSideFacts::absent(
            "the daemon did not say what it traced (an older daemon, or the session did not end properly)"
                .into(),
        )
    });
    sender.rows_not_written += sender_not_written;
    TraceFacts {
        sender: Some(sender),
        reader: Some(reader),
    }
}

//! The daemon's side of `--trace`: its data sockets' ACKs, retransmits and congestion
//! states, traced while the session streams and sent to the reader as `trace` messages
//! (only to a reader whose hello asked).

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};

use oscil_protocol::control::DaemonMessage;
use oscil_protocol::trace::{SenderTrace, TraceRow, TraceSideFacts};
use oscil_tracer::{cookies, TraceRequest, Tracer, SENDER_KINDS};
use tokio::sync::mpsc;

use crate::flow::Flow;

/// Rows per `trace` message: about 0.8 MB of JSON, well under a control frame's limit.
const ROWS_PER_MESSAGE: usize = 2000;

/// Messages waiting for the session task; past them the trace thread waits (and the
/// kernel's buffers, not the daemon's memory, take the strain).
const QUEUE_MESSAGES: usize = 16;

/// Numbers this process's tracefs instances.
static INSTANCES: AtomicU64 = AtomicU64::new(0);

/// A session's trace: rows to send while it runs, its facts at the end. Holds nothing when
/// the hello did not ask.
pub(crate) struct SessionTrace {
    tracer: Option<Tracer>,
    rows: Option<mpsc::Receiver<Vec<DaemonMessage>>>,
    /// Why nothing is traced, when that was known at the start.
    absent: Option<TraceSideFacts>,
    /// The stopped tracer's facts, to come.
    finished: Option<tokio::task::JoinHandle<TraceSideFacts>>,
}

impl SessionTrace {
    /// Starts tracing `flows` when `asked`; `start` is the session's clock.
    pub(crate) fn start(asked: bool, flows: &[Flow], start: std::time::Instant) -> Self {
        let mut trace = SessionTrace {
            tracer: None,
            rows: None,
            absent: None,
            finished: None,
        };
        if !asked {
            return trace;
        }
        let request = match request(flows, start) {
            Ok(request) => request,
            Err(e) => {
                trace.absent = Some(TraceSideFacts::absent(format!(
                    "cannot identify a data socket: {e}"
                )));
                return trace;
            }
        };
        let (tx, rx) = mpsc::channel(QUEUE_MESSAGES);
        let sink = move |rows: Vec<TraceRow<SenderTrace>>| {
            for chunk in rows.chunks(ROWS_PER_MESSAGE) {
                let message = DaemonMessage::Trace {
                    rows: chunk.to_vec(),
                };
                if tx.blocking_send(vec![message]).is_err() {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        };
        match Tracer::start(&oscil_kernel::tracefs::root(), request, sink) {
            Ok(tracer) => {
                trace.tracer = Some(tracer);
                trace.rows = Some(rx);
            }
            Err(facts) => trace.absent = Some(facts),
        }
        trace
    }

    /// The next rows to send; never ready when nothing is traced.
    pub(crate) async fn recv(&mut self) -> Option<Vec<DaemonMessage>> {
        match &mut self.rows {
            Some(rows) => rows.recv().await,
            None => std::future::pending().await,
        }
    }

    /// Asks the trace to stop: [`SessionTrace::remaining`] then gives its last rows.
    pub(crate) fn stop(&mut self) {
        if let Some(tracer) = self.tracer.take() {
            self.finished = Some(tokio::task::spawn_blocking(move || tracer.finish()));
        }
    }

    /// After [`SessionTrace::stop`]: the next rows still to send, `None` once there are no
    /// more.
    pub(crate) async fn remaining(&mut self) -> Option<Vec<DaemonMessage>> {
        self.rows.as_mut()?.recv().await
    }

    /// What was traced, or `None` when the hello did not ask.
    pub(crate) async fn facts(mut self) -> Option<TraceSideFacts> {
        // A thread waiting to hand over rows nobody will take lets go.
        self.rows = None;
        self.stop();
        match self.finished.take() {
            Some(finished) => finished.await.ok(),
            None => self.absent,
        }
    }
}

fn request(flows: &[Flow], start: std::time::Instant) -> std::io::Result<TraceRequest> {
    let port = match flows.first() {
        Some(flow) => flow.stream.local_addr()?.port(),
        None => 0,
    };
    let n = INSTANCES.fetch_add(1, Ordering::Relaxed);
    Ok(TraceRequest {
        kinds: SENDER_KINDS,
        sockets: cookies(flows.iter().map(|f| (f.index, &*f.stream)))?,
        port: ("sport", port),
        start,
        name: format!("oscil-daemon-{}-{n}", std::process::id()),
    })
}

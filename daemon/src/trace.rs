//! The daemon's side of `--trace`: its data sockets' ACKs, retransmits and congestion
//! states, traced while the session streams and sent to the reader as `trace` messages
//! (only to a reader whose hello asked).

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::Arc;

use oscil_kernel::trace::tracefs::Owner;
use oscil_kernel::trace::tracer::{cookies, TraceRequest, Tracer, BUFFER_KB, SENDER_KINDS};
use oscil_model::files::trace::{SenderTrace, TraceRow, TraceSideFacts};
use oscil_protocol::control::DaemonMessage;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use crate::config::{DaemonConfig, TracePolicy};
use crate::flow::Flow;

/// How the daemon's tracefs instances are named ([`Owner`]).
pub(crate) const PROGRAM: &str = "daemon";

/// The least ring buffer per CPU a trace is given: below it, 100 ms between drains hold
/// too few ACKs to be worth the trace.
const MIN_BUFFER_KB: u32 = 256;

/// Rows per `trace` message: about 0.8 MB of JSON, well under a control frame's limit.
const ROWS_PER_MESSAGE: usize = 2000;

/// Messages waiting for the session task; past them the trace thread waits (and the
/// kernel's buffers, not the daemon's memory, take the strain).
const QUEUE_MESSAGES: usize = 16;

/// Numbers this process's tracefs instances.
static INSTANCES: AtomicU64 = AtomicU64::new(0);

/// Removes the tracefs instances a killed daemon left (the kernel freed their buffers
/// when it died), and says so.
pub(crate) fn remove_leftovers() {
    let root = oscil_kernel::trace::tracefs::root();
    match oscil_kernel::trace::tracefs::remove_leftovers(&root, PROGRAM) {
        Ok(removed) if !removed.is_empty() => eprintln!(
            "oscil-daemon: removed {} trace instance(s) a killed oscil-daemon left in {}: {}",
            removed.len(),
            root.join("instances").display(),
            removed.join(", ")
        ),
        Ok(_) => {}
        Err(e) => eprintln!(
            "oscil-daemon: warning: cannot look for trace instances a killed oscil-daemon left: {e}"
        ),
    }
}

/// Each trace's ring buffer per CPU and how many such traces fit `budget_kb` on `cpus`
/// CPUs: [`BUFFER_KB`] each, less where one of those would not fit, none below
/// [`MIN_BUFFER_KB`].
fn plan(budget_kb: u64, cpus: u32) -> (u32, usize) {
    let cpus = u64::from(cpus.max(1));
    let per_cpu_kb = (budget_kb / cpus).min(u64::from(BUFFER_KB)) as u32;
    if per_cpu_kb < MIN_BUFFER_KB {
        return (0, 0);
    }
    let traces = budget_kb / (u64::from(per_cpu_kb) * cpus);
    (per_cpu_kb, traces as usize)
}

/// Why a session's `--trace` is not granted: said to the reader, which keeps it in run.json.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum TraceRefusal {
    /// `--trace off`.
    #[error("the daemon traces no session (--trace off)")]
    Off,
    /// `--trace keyed` on a daemon without a key.
    #[error("the daemon traces only keyed sessions (--trace keyed) and has no key")]
    NoKey,
    /// `--trace-budget` cannot hold the smallest trace on every CPU.
    #[error("the daemon's trace budget ({budget_mib} MiB, --trace-budget) holds not one trace of {MIN_BUFFER_KB} KiB on each of its {cpus} CPUs")]
    BudgetTooSmall { budget_mib: u64, cpus: u32 },
    /// Every trace the budget holds is in use.
    #[error("the daemon's trace budget ({budget_mib} MiB, --trace-budget) is taken by {traces} traced sessions")]
    BudgetTaken { budget_mib: u64, traces: usize },
}

/// Who may trace, and the ring buffers the traces may pin together, shared out as whole
/// traces of one size (`--trace`, `--trace-budget`).
pub(crate) struct TraceBudget {
    /// Why no session is traced, when none is.
    never: Option<TraceRefusal>,
    per_cpu_kb: u32,
    cpus: u32,
    traces: Arc<Semaphore>,
    most: usize,
    budget_bytes: u64,
    policy: TracePolicy,
    owner: Option<Owner>,
}

/// A trace the budget holds room for, until dropped.
pub(crate) struct TraceGrant {
    per_cpu_kb: u32,
    _room: OwnedSemaphorePermit,
}

impl TraceBudget {
    pub(crate) fn new(config: &DaemonConfig, cpus: u32) -> Self {
        let (per_cpu_kb, most) = plan(config.trace_budget_bytes >> 10, cpus);
        let mib = config.trace_budget_bytes >> 20;
        let never = match config.trace {
            TracePolicy::Off => Some(TraceRefusal::Off),
            TracePolicy::Keyed if config.key.is_none() => Some(TraceRefusal::NoKey),
            _ if most == 0 => Some(TraceRefusal::BudgetTooSmall {
                budget_mib: mib,
                cpus,
            }),
            _ => None,
        };
        TraceBudget {
            never,
            per_cpu_kb,
            cpus,
            traces: Arc::new(Semaphore::new(most)),
            most,
            budget_bytes: config.trace_budget_bytes,
            policy: config.trace,
            owner: Owner::this_process(PROGRAM).ok(),
        }
    }

    /// What the daemon says at start.
    pub(crate) fn describe(&self) -> String {
        if let Some(never) = &self.never {
            return format!("traces: none: {never}");
        }
        let who = match self.policy {
            TracePolicy::Allow => "any session that asks (--trace allow)",
            _ => "keyed sessions (--trace keyed)",
        };
        format!(
            "traces: {who}, {} at once, each {} KiB per CPU on {} CPUs, {} MiB in all (--trace-budget)",
            self.most,
            self.per_cpu_kb,
            self.cpus,
            self.budget_bytes >> 20
        )
    }

    /// Room for one more trace, or why not, in the words the reader records.
    pub(crate) fn grant(&self) -> Result<TraceGrant, TraceRefusal> {
        if let Some(never) = &self.never {
            return Err(never.clone());
        }
        let room =
            self.traces
                .clone()
                .try_acquire_owned()
                .map_err(|_| TraceRefusal::BudgetTaken {
                    budget_mib: self.budget_bytes >> 20,
                    traces: self.most,
                })?;
        Ok(TraceGrant {
            per_cpu_kb: self.per_cpu_kb,
            _room: room,
        })
    }
}

/// A session's trace: rows to send while it runs, its facts at the end. Holds nothing when
/// the hello did not ask.
pub(crate) struct SessionTrace {
    tracer: Option<Tracer>,
    rows: Option<mpsc::Receiver<Vec<DaemonMessage>>>,
    /// Why nothing is traced, when that was known at the start.
    absent: Option<TraceSideFacts>,
    /// The stopped tracer's facts, to come.
    finished: Option<tokio::task::JoinHandle<TraceSideFacts>>,
    /// The budget's room, held until the trace's instance is gone.
    _grant: Option<TraceGrant>,
}

impl SessionTrace {
    /// Starts tracing `flows` when `asked` and `budget` allows; `start` is the session's
    /// clock.
    pub(crate) fn start(
        asked: bool,
        budget: &TraceBudget,
        flows: &[Flow],
        start: std::time::Instant,
    ) -> Self {
        let mut trace = SessionTrace {
            tracer: None,
            rows: None,
            absent: None,
            finished: None,
            _grant: None,
        };
        if !asked {
            return trace;
        }
        let grant = match budget.grant() {
            Ok(grant) => grant,
            Err(why) => {
                trace.absent = Some(TraceSideFacts::absent(why.to_string()));
                return trace;
            }
        };
        let request = match request(flows, start, budget.owner.as_ref(), grant.per_cpu_kb) {
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
        match Tracer::start(&oscil_kernel::trace::tracefs::root(), request, sink) {
            Ok(tracer) => {
                trace.tracer = Some(tracer);
                trace.rows = Some(rx);
                trace._grant = Some(grant);
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

fn request(
    flows: &[Flow],
    start: std::time::Instant,
    owner: Option<&Owner>,
    buffer_kb: u32,
) -> std::io::Result<TraceRequest> {
    let port = match flows.first() {
        Some(flow) => flow.stream.local_addr()?.port(),
        None => 0,
    };
    let owner = owner.ok_or_else(|| std::io::Error::other("this process has no /proc entry"))?;
    let n = INSTANCES.fetch_add(1, Ordering::Relaxed);
    Ok(TraceRequest {
        kinds: SENDER_KINDS,
        sockets: cookies(flows.iter().map(|f| (f.index, &*f.stream)))?,
        port: ("sport", port),
        start,
        name: owner.instance_name(n),
        buffer_kb,
        probe_group: oscil_kernel::trace::tracer::probe_group("daemon", std::process::id()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_shared_out_as_whole_traces_of_one_size() {
        let mib = 1024;
        // This host: 2 CPUs, 64 MiB: 8 traces of 4 MiB per CPU (the 16 took 131 MiB).
        assert_eq!(plan(64 * mib, 2), (4096, 8));
        // 64 CPUs: one trace, 1 MiB per CPU, rather than 256 MiB each.
        assert_eq!(plan(64 * mib, 64), (1024, 1));
        assert_eq!(plan(8 * mib, 2), (4096, 1));
        assert_eq!(plan(7 * mib, 2), (3584, 1));
        // 1,024 CPUs: 64 KiB each would be too little to trace with.
        assert_eq!(plan(64 * mib, 1024), (0, 0));
        assert_eq!(plan(0, 2), (0, 0));
    }

    #[test]
    fn traces_are_granted_by_policy_and_budget_and_refused_in_words() {
        let keyed = DaemonConfig {
            key: Some(
                oscil_protocol::key::Key::new(&oscil_protocol::key::generate_key().unwrap())
                    .unwrap(),
            ),
            trace_budget_bytes: 8 << 20,
            ..DaemonConfig::default()
        };
        let budget = TraceBudget::new(&keyed, 2);
        assert_eq!(
            budget.describe(),
            "traces: keyed sessions (--trace keyed), 1 at once, each 4096 KiB per CPU on 2 CPUs, 8 MiB in all (--trace-budget)"
        );
        let first = budget.grant().unwrap();
        assert_eq!(first.per_cpu_kb, 4096);
        assert_eq!(
            budget.grant().err().unwrap().to_string(),
            "the daemon's trace budget (8 MiB, --trace-budget) is taken by 1 traced sessions"
        );
        drop(first);
        assert!(budget.grant().is_ok(), "room again once the trace is gone");

        let unkeyed = TraceBudget::new(&DaemonConfig::default(), 2);
        let why = "the daemon traces only keyed sessions (--trace keyed) and has no key";
        assert_eq!(unkeyed.grant().err().unwrap().to_string(), why);
        assert_eq!(unkeyed.describe(), format!("traces: none: {why}"));
        let off = DaemonConfig {
            trace: TracePolicy::Off,
            ..keyed.clone()
        };
        assert_eq!(
            TraceBudget::new(&off, 2).grant().err().unwrap().to_string(),
            "the daemon traces no session (--trace off)"
        );
        let open = DaemonConfig {
            trace: TracePolicy::Allow,
            ..DaemonConfig::default()
        };
        assert!(TraceBudget::new(&open, 2).grant().is_ok());
    }
}

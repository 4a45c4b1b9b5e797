//! The sender: serves oscil test sessions. Each session is one control connection plus N
//! data connections on the same port; on every data connection the daemon writes as fast as
//! the kernel accepts, with the socket options the session asked for, and samples its side of
//! every connection at the session's interval, sending the samples over the control
//! connection.
//!
//! Every connection first passes the [`gate`]: capped in number before it authenticates
//! ([`admission`]), one deadline, a small first frame, one generic refusal ([`refusals`]
//! counts them). Only then does a [`session`] take a slot, flows and buffers.

mod admission;
pub mod budget;
mod flow;
mod gate;
mod latency;
mod refusals;
mod sampler;
mod session;
#[allow(unsafe_code)]
mod sys;
mod trace;

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use oscil_kernel::{ProcFile, SocketOptions, Sockstat, TcpExt};
use oscil_protocol::auth::{DataKey, SessionId};
use oscil_protocol::control::{DataHello, DEFAULT_WRITE_BYTES};
use oscil_protocol::key::Key;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{sleep, timeout};

pub use admission::StartupLimits;
pub use gate::GENERIC_REFUSAL;

/// How the daemon serves sessions. `Default` gives the CLI's defaults.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// Options for sessions that leave them unset (per option).
    pub default_options: SocketOptions,
    /// When set, a session must prove it holds this key.
    pub key: Option<Key>,
    /// Sessions served at once; more are refused as busy.
    pub max_sessions: usize,
    /// Data connections one session may ask for.
    pub max_flows: u32,
    /// Data connections of all sessions together.
    pub max_total_flows: u32,
    /// A session's total `SO_MAX_PACING_RATE`, split evenly over its flows.
    pub max_rate_bps: Option<u64>,
    /// Longest a session may stream; longer requests are refused, and a session still
    /// running then is ended.
    pub max_session: Duration,
    /// Unauthenticated connections held at once, with random early drop (sshd's MaxStartups).
    pub max_startups: StartupLimits,
    /// Unauthenticated connections held at once from one source (an IPv4 address, an IPv6 /64).
    pub max_startups_per_source: usize,
    /// The whole pre-authentication phase of a connection: its first bytes, the hello, the
    /// proof, or a data connection's hello.
    pub preauth_timeout: Duration,
    /// Time allowed for each step after authentication: all data connections plus the start
    /// message; also for each control write.
    pub handshake_timeout: Duration,
    /// How often refusals before authentication are summarised in the log.
    pub refusal_summary_every: Duration,
    /// Shortest sampling interval a session may ask for.
    pub min_interval: Duration,
    /// Size of the prefilled buffer each write offers the kernel unless a session asks for
    /// another: 256 KiB, as measured against 64 and 128 KiB with scripts/bench-loopback
    /// (see `flow::write_forever`).
    pub write_chunk_bytes: usize,
    /// How long past its announced duration a session may stream before the daemon ends
    /// it (the reader normally says stop first).
    pub overrun_grace: Duration,
    /// Tag one write per flow per interval with TX timestamps (send-queue residence).
    pub tx_timestamps: bool,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            default_options: SocketOptions::default(),
            key: None,
            max_sessions: 16,
            max_flows: 256,
            max_total_flows: 1024,
            max_rate_bps: None,
            max_session: Duration::from_secs(15 * 60),
            max_startups: StartupLimits::default(),
            max_startups_per_source: 10,
            preauth_timeout: Duration::from_secs(3),
            handshake_timeout: Duration::from_secs(10),
            refusal_summary_every: Duration::from_secs(10),
            min_interval: Duration::from_millis(10),
            write_chunk_bytes: DEFAULT_WRITE_BYTES as usize,
            overrun_grace: Duration::from_secs(5),
            tx_timestamps: true,
        }
    }
}

/// A data connection handed to the session it names.
struct DataConn {
    flow: u32,
    stream: TcpStream,
}

/// Where a session waiting for its data connections takes them, and from whom.
struct Route {
    /// The control connection's address: data connections from elsewhere are refused.
    peer: IpAddr,
    key: DataKey,
    tx: mpsc::Sender<DataConn>,
}

/// The `/proc` files every session's sampler reads, opened once at start so that no flood
/// of connections can take the descriptors they need.
struct ProcFiles {
    sockstat: Mutex<ProcFile<Sockstat>>,
    netstat: Mutex<ProcFile<TcpExt>>,
}

impl ProcFiles {
    fn tcpext(&self) -> Result<TcpExt, oscil_kernel::ReadError> {
        self.netstat
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .read()
    }
}

/// What every connection task shares.
struct Shared {
    config: DaemonConfig,
    sessions: Arc<Semaphore>,
    flows: Arc<Semaphore>,
    admission: Arc<admission::Admission>,
    refusals: refusals::Refusals,
    /// Sessions waiting for data connections, by session id.
    routes: Mutex<HashMap<SessionId, Route>>,
    proc: Arc<ProcFiles>,
    /// The bytes every write offers; their content does not matter.
    payload: flow::Payload,
}

impl Shared {
    /// The session a data hello is for and its data key, if the hello was signed with that
    /// key and comes from the session's address.
    fn route_for(
        &self,
        hello: &DataHello,
        peer: IpAddr,
    ) -> Option<(mpsc::Sender<DataConn>, DataKey)> {
        let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        let route = routes.get(&hello.session_id)?;
        (route.peer == peer && hello.is_signed_by(&route.key))
            .then(|| (route.tx.clone(), route.key.clone()))
    }
}

/// Serves sessions on `listener` until `shutdown` completes; then asks every running session
/// to end (each tells its reader why) and waits a few seconds for them.
pub async fn run(
    listener: TcpListener,
    config: DaemonConfig,
    shutdown: impl Future,
) -> std::io::Result<()> {
    let shared = Arc::new(Shared::new(config)?);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let every = shared.config.refusal_summary_every;
    let mut summary = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let now = std::time::Instant::now();
                    match shared.admission.admit(peer.ip(), rand::random::<f64>(), now) {
                        Ok(ticket) => {
                            let task = gate::handle_connection(stream, peer, shared.clone(), stop_rx.clone(), ticket);
                            tasks.spawn(task);
                        }
                        // Closed at once, holding no descriptor: a full gate says `busy`
                        // (a reader tries again later), anything else gets no byte.
                        Err(why) => {
                            if why.is_busy() {
                                gate::turn_away_busy(stream);
                            }
                            shared.refusals.note(peer.ip(), why);
                        }
                    }
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    eprintln!("oscil-daemon: accept failed: {e}");
                    sleep(Duration::from_millis(100)).await;
                }
            },
            _ = summary.tick() => {
                for line in shared.refusals.take_summary(every) {
                    eprintln!("oscil-daemon: {line}");
                }
            }
            Some(done) = tasks.join_next(), if !tasks.is_empty() => log_panic(done),
        }
    }
    let _ = stop_tx.send(true);
    let drained = timeout(Duration::from_secs(5), async {
        while let Some(done) = tasks.join_next().await {
            log_panic(done);
        }
    })
    .await;
    if drained.is_err() {
        eprintln!(
            "oscil-daemon: {} connections still open at exit",
            tasks.len()
        );
    }
    Ok(())
}

impl Shared {
    fn new(config: DaemonConfig) -> std::io::Result<Shared> {
        let proc_error = |e: oscil_kernel::ReadError| std::io::Error::other(e.to_string());
        let payload = flow::Payload::new(config.write_chunk_bytes)?;
        Ok(Shared {
            sessions: Arc::new(Semaphore::new(config.max_sessions)),
            flows: Arc::new(Semaphore::new(config.max_total_flows as usize)),
            admission: admission::Admission::new(
                config.max_startups,
                config.max_startups_per_source,
                admission::Graces::of(config.preauth_timeout),
            ),
            refusals: refusals::Refusals::default(),
            routes: Mutex::new(HashMap::new()),
            proc: Arc::new(ProcFiles {
                sockstat: Mutex::new(oscil_kernel::sockstat::open().map_err(proc_error)?),
                netstat: Mutex::new(oscil_kernel::netstat::open().map_err(proc_error)?),
            }),
            payload,
            config,
        })
    }
}

fn log_panic(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        eprintln!("oscil-daemon: connection task failed: {e}");
    }
}

/// Checks the daemon's default options on a scratch socket, so a bad `--congestion` fails
/// at start rather than in every session.
pub fn check_default_options(config: &DaemonConfig, ipv6: bool) -> Result<(), String> {
    session::check_congestion_name(&config.default_options)?;
    session::validate_options(&config.default_options, ipv6).map(|_| ())
}

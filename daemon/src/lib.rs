//! The sender: serves oscil test sessions. Each session is one control connection plus N
//! data connections on the same port; on every data connection the daemon writes as fast as
//! the kernel accepts, with the socket options the session asked for, and samples its side of
//! every connection at the session's interval, sending the samples over the control
//! connection.
//!
//! A connection's first bytes tell its kind: a data connection opens with the `OSCD` magic
//! of [`DataHello`], a control connection with a frame length (never that large).

mod flow;
mod session;

use std::collections::HashMap;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use oscil_kernel::SocketOptions;
use oscil_protocol::control::DataHello;
use oscil_protocol::key::Key;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{sleep, timeout};

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
    /// Longest a session may stream; longer requests are refused, and a session still
    /// running then is ended.
    pub max_session: Duration,
    /// Time allowed for each setup step: the hello, a data connection's first bytes, all
    /// data connections plus the start message; also for each control write.
    pub handshake_timeout: Duration,
    /// Shortest sampling interval a session may ask for.
    pub min_interval: Duration,
    /// Size of the prefilled buffer each write offers the kernel; 64 KiB stays in the CPU
    /// cache (256 KiB halved loopback throughput, see scripts/bench-loopback).
    pub write_chunk_bytes: usize,
    /// How long past its announced duration a session may stream before the daemon ends
    /// it (the reader normally says stop first).
    pub overrun_grace: Duration,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            default_options: SocketOptions::default(),
            key: None,
            max_sessions: 16,
            max_flows: 256,
            max_session: Duration::from_secs(15 * 60),
            handshake_timeout: Duration::from_secs(10),
            min_interval: Duration::from_millis(10),
            write_chunk_bytes: 64 << 10,
            overrun_grace: Duration::from_secs(5),
        }
    }
}

/// A data connection handed to the session it names.
struct DataConn {
    flow: u32,
    stream: TcpStream,
}

/// What every connection task shares.
struct Shared {
    config: DaemonConfig,
    sessions: Arc<Semaphore>,
    /// Sessions waiting for or holding data connections, by session id.
    routes: Mutex<HashMap<u64, mpsc::Sender<DataConn>>>,
    /// The bytes every write offers; their content does not matter.
    payload: Arc<[u8]>,
}

/// Serves sessions on `listener` until `shutdown` completes; then asks every running session
/// to end (each tells its reader why) and waits a few seconds for them.
pub async fn run(
    listener: TcpListener,
    config: DaemonConfig,
    shutdown: impl Future,
) -> std::io::Result<()> {
    let payload: Arc<[u8]> = (0..config.write_chunk_bytes)
        .map(|i| b"oscil-daemon payload "[i % 21])
        .collect();
    let shared = Arc::new(Shared {
        sessions: Arc::new(Semaphore::new(config.max_sessions)),
        routes: Mutex::new(HashMap::new()),
        payload,
        config,
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    tasks.spawn(handle_connection(stream, peer, shared.clone(), stop_rx.clone()));
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    eprintln!("oscil-daemon: accept failed: {e}");
                    sleep(Duration::from_millis(100)).await;
                }
            },
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

fn log_panic(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        eprintln!("oscil-daemon: connection task failed: {e}");
    }
}

async fn handle_connection(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) {
    let limit = shared.config.handshake_timeout;
    match timeout(limit, is_data_connection(&stream)).await {
        Ok(Ok(true)) => route_data_connection(stream, peer, &shared).await,
        Ok(Ok(false)) => session::serve(stream, peer, shared, stop).await,
        Ok(Err(e)) => eprintln!("oscil-daemon: connection from {peer}: {e}"),
        Err(_) => eprintln!("oscil-daemon: connection from {peer} sent nothing in {limit:?}"),
    }
}

/// Peeks at the first four bytes without consuming them.
async fn is_data_connection(stream: &TcpStream) -> std::io::Result<bool> {
    let mut first = [0u8; 4];
    loop {
        let n = stream.peek(&mut first).await?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "closed before saying anything",
            ));
        }
        if n == first.len() {
            return Ok(first == DataHello::MAGIC);
        }
        // Fewer than four bytes so far: they arrive together in practice, so poll gently.
        sleep(Duration::from_millis(2)).await;
    }
}

async fn route_data_connection(mut stream: TcpStream, peer: SocketAddr, shared: &Shared) {
    let mut bytes = [0u8; DataHello::LEN];
    let limit = shared.config.handshake_timeout;
    match timeout(limit, stream.read_exact(&mut bytes)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return eprintln!("oscil-daemon: data connection from {peer}: {e}"),
        Err(_) => return eprintln!("oscil-daemon: data connection from {peer}: no hello"),
    }
    let Some(hello) = DataHello::decode(&bytes) else {
        return eprintln!("oscil-daemon: data connection from {peer}: not an oscil data hello");
    };
    let route = shared
        .routes
        .lock()
        .expect("routes lock")
        .get(&hello.session_id)
        .cloned();
    let conn = DataConn {
        flow: hello.flow,
        stream,
    };
    match route {
        Some(tx) if tx.send(conn).await.is_ok() => {}
        _ => eprintln!(
            "oscil-daemon: data connection from {peer} for unknown session {:016x}",
            hello.session_id
        ),
    }
}

/// A session id hard to guess, so a stranger cannot attach data connections to a session.
fn new_session_id() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// Checks the daemon's default options on a scratch socket, so a bad `--congestion` fails
/// at start rather than in every session.
pub fn check_default_options(config: &DaemonConfig, ipv6: bool) -> Result<(), String> {
    session::validate_options(&config.default_options, ipv6).map(|_| ())
}

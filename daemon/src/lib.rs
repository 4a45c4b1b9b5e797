//! The sender: serves oscil test sessions. Each session is one control connection plus N
//! data connections on the same port; on every data connection the daemon writes as fast as
//! the kernel accepts, with the socket options the session asked for, and samples its side of
//! every connection at the session's interval, sending the samples over the control
//! connection.
//!
//! Every connection first passes the [`gate`]: capped in number before it authenticates
//! ([`gate::admission`]), one deadline, a small first frame, one generic refusal
//! ([`gate::refusals`] counts them). Only then does a [`session`] take a slot, and each of
//! its data connections is a [`flow`].

pub mod budget;
pub mod cli;
mod config;
mod dial;
mod flow;
mod gate;
mod listen;
mod session;
mod shared;
#[allow(unsafe_code)]
mod sys;
mod trace;

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{sleep, timeout};

pub use cli::{check_default_options, print_new_key, DefaultOptionsError};
pub use config::{DaemonConfig, TracePolicy};
pub use dial::{NoReader, RETRY_FOR as CONNECT_RETRY_FOR};
pub use gate::admission::{StartupLimits, StartupLimitsError};
pub use gate::GENERIC_REFUSAL;
pub use session::ScratchError;

use crate::shared::Shared;

/// Serves sessions on `listener` until `shutdown` completes; then asks every running session
/// to end (each tells its reader why) and waits a few seconds for them.
pub async fn run(
    listener: TcpListener,
    config: DaemonConfig,
    shutdown: impl Future,
) -> std::io::Result<()> {
    let shared = Arc::new(Shared::new(config)?);
    eprintln!("oscil-daemon: {}", shared.trace.describe());
    trace::remove_leftovers();
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

fn log_panic(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        eprintln!("oscil-daemon: connection task failed: {e}");
    }
}

/// What `oscil-daemon` does once its flags are checked: listens, fits the flows to the
/// open files limit, writes `--port-file`, and serves until Ctrl-C or SIGTERM.
pub async fn serve(
    listen: SocketAddr,
    mut config: DaemonConfig,
    flows_asked: Option<u32>,
    key_words: &str,
    port_file: Option<&Path>,
) -> anyhow::Result<()> {
    let listener = TcpListener::bind(listen).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on {listen}: {}",
            oscil_model::error_text::os_error(&e)
        )
    })?;
    let budget = listen::fit_to_open_files(&config, flows_asked)?;
    config.max_total_flows = budget.max_total_flows;
    let local = listener.local_addr()?;
    if let Some(path) = port_file {
        listen::write_port_file(path, local.port())
            .with_context(|| format!("cannot write --port-file {}", path.display()))?;
    }
    eprintln!("oscil-daemon: listening on {local} ({budget}); {key_words}");
    run(listener, config, listen::shutdown_signal()).await?;
    eprintln!("oscil-daemon: stopped");
    Ok(())
}

/// What `oscil-daemon --connect` does (a sender behind NAT): fits the flows to the open
/// files limit, dials the reader waiting at `reader` (trying again while nothing accepts
/// there, for [`CONNECT_RETRY_FOR`]), serves that one session over connections it opens
/// itself, and returns once the session ended; Ctrl-C or SIGTERM end it early.
pub async fn dial_out(
    reader: SocketAddr,
    mut config: DaemonConfig,
    flows_asked: Option<u32>,
    key_words: &str,
) -> anyhow::Result<()> {
    let budget = listen::fit_to_open_files(&config, flows_asked)?;
    config.max_total_flows = budget.max_total_flows;
    let mut shared = Shared::new(config)?;
    shared.dial = Some(reader);
    let shared = Arc::new(shared);
    eprintln!("oscil-daemon: connecting to the reader at {reader} ({budget}); {key_words}");
    let stream = dial::reach(reader).await?;
    let (conn, auth) = gate::pass_dialed(stream, &shared).await.map_err(|why| {
        anyhow::anyhow!(
            "the reader at {reader} did not authenticate ({}): it holds another key, or is not an oscil-reader --listen",
            why.words()
        )
    })?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let serving = session::serve(conn, reader, auth, shared, stop_rx);
    tokio::pin!(serving);
    tokio::select! {
        () = &mut serving => {}
        () = listen::shutdown_signal() => {
            let _ = stop_tx.send(true);
            let _ = timeout(Duration::from_secs(5), serving).await;
        }
    }
    Ok(())
}

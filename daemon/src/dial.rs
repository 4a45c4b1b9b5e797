//! `--connect`: a daemon behind NAT dials out to a reader that listens (`oscil-reader
//! --listen`). Only who opens the connections changes: the control connection passes the
//! gate's handshake as an accepted one does, and each data connection opens as a reader's
//! would (`open_data_connection`), the listening reader challenging it.

use std::io::{Error, ErrorKind};
use std::net::SocketAddr;
use std::time::Duration;

use oscil_model::error_text::os_error;
use oscil_model::files::probe::PROBE_FLOW;
use oscil_protocol::control::{open_data_connection, Hello};
use oscil_protocol::proof::{DataKey, SessionId};
use tokio::net::TcpStream;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{sleep, timeout, Instant};

use crate::shared::{DataConn, Shared};

/// How long `--connect` keeps trying while nothing accepts at the reader's address (the
/// reader may start after the daemon); each try waits twice the last, up to [`BACKOFF_MAX`].
pub const RETRY_FOR: Duration = Duration::from_secs(30);
const BACKOFF_FIRST: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(4);

/// One connect's limit: a path that drops SYNs (a firewall) is tried again, not waited on.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Data connections opened at once: as many as a reader opens, so a listening reader's cap
/// on connections not yet authenticated is never met by one session.
const CONCURRENT_OPENS: usize = 8;

/// Why `--connect` found no reader.
#[derive(Debug, thiserror::Error)]
#[error(
    "nothing accepted a connection at the reader's address {reader} in {waited_s:.1} s: {last}"
)]
pub struct NoReader {
    reader: SocketAddr,
    waited_s: f64,
    last: String,
}

/// The control connection to the reader, tried again with backoff for [`RETRY_FOR`].
pub(crate) async fn reach(reader: SocketAddr) -> Result<TcpStream, NoReader> {
    let started = Instant::now();
    let mut backoff = BACKOFF_FIRST;
    loop {
        let last = match timeout(CONNECT_TIMEOUT, TcpStream::connect(reader)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => os_error(&e),
            Err(_) => format!("no answer in {} s", CONNECT_TIMEOUT.as_secs()),
        };
        if started.elapsed() + backoff > RETRY_FOR {
            let waited_s = started.elapsed().as_secs_f64();
            return Err(NoReader {
                reader,
                waited_s,
                last,
            });
        }
        sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// Opens the session's data connections (and its idle probe's) to the reader, a few at a
/// time, handing each to the session as the gate hands an accepted one. The first that
/// fails is said in one line and ends the opening: the session then ends at its setup
/// deadline, saying how many came. `None` when the session has no route (it ended).
pub(crate) fn open_data_connections(
    reader: SocketAddr,
    shared: &Shared,
    session_id: SessionId,
    hello: &Hello,
) -> Option<JoinHandle<()>> {
    let (tx, key) = shared.route_of(&session_id)?;
    let mut flows: Vec<u32> = (0..hello.flows).collect();
    if hello.probe {
        flows.push(PROBE_FLOW);
    }
    Some(tokio::spawn(async move {
        for chunk in flows.chunks(CONCURRENT_OPENS) {
            let mut opening = JoinSet::new();
            for &flow in chunk {
                let key = key.clone();
                opening
                    .spawn(async move { (flow, open_one(reader, &key, session_id, flow).await) });
            }
            for (flow, opened) in opening.join_all().await {
                let stream = match opened {
                    Ok(stream) => stream,
                    Err(e) => {
                        return eprintln!(
                            "oscil-daemon: session {session_id}: cannot open data connection {flow} to the reader at {reader}: {}",
                            os_error(&e)
                        )
                    }
                };
                if tx.send(DataConn { flow, stream }).await.is_err() {
                    return;
                }
            }
        }
    }))
}

/// Tries for one data connection: a listening reader may accept a data connection dialed
/// right after the welcome while it still takes connections for a control handshake (it
/// speaks first on those), and drops it once the handshake won; the next try reaches it.
const DATA_TRIES: u32 = 3;

/// One data connection, tried again (after a short wait) when the reader drops it.
async fn open_one(
    reader: SocketAddr,
    key: &DataKey,
    session_id: SessionId,
    flow: u32,
) -> std::io::Result<TcpStream> {
    let mut tries = 1;
    loop {
        match try_open(reader, key, session_id, flow).await {
            Err(_) if tries < DATA_TRIES => sleep(BACKOFF_FIRST * tries).await,
            opened => return opened,
        }
        tries += 1;
    }
}

async fn try_open(
    reader: SocketAddr,
    key: &DataKey,
    session_id: SessionId,
    flow: u32,
) -> std::io::Result<TcpStream> {
    let timed_out = |_| Error::new(ErrorKind::TimedOut, "the reader took too long");
    let mut stream = timeout(CONNECT_TIMEOUT, TcpStream::connect(reader))
        .await
        .map_err(timed_out)??;
    timeout(
        CONNECT_TIMEOUT,
        open_data_connection(&mut stream, key, session_id, flow),
    )
    .await
    .map_err(timed_out)??;
    Ok(stream)
}

//! The pre-authentication phase of every connection. It runs under one deadline for the
//! whole phase, reads at most a few KiB, holds no buffer that grows, and answers a peer that
//! fails with one generic refusal (counted, not logged one by one).
//!
//! A connection's first four bytes tell its kind: a data connection opens with the `OSCD`
//! magic of [`DataHello`], a control connection with a frame length (never that large).

pub(crate) mod admission;
pub(crate) mod refusals;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use oscil_protocol::auth::{AuthError, Authenticated, DaemonHandshake};

use oscil_protocol::control::{
    busy_frame, challenge_data_connection, Connection, DaemonMessage, DataHello, FrameError,
    ReaderMessage, MAX_PREAUTH_FRAME_BYTES,
};
use oscil_protocol::proof::Nonce;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep_until, timeout_at};

use crate::gate::admission::Ticket;
use crate::gate::refusals::Why;
use crate::session::{self, Control};
use crate::shared::{DataConn, Shared};

/// All a peer learns before it authenticates, whatever went wrong.
pub const GENERIC_REFUSAL: &str = "refused";

/// What a connection turned out to be, once it passed the gate.
enum Passed {
    /// A data connection signed for a session from the same address.
    Data(mpsc::Sender<DataConn>, DataConn),
    /// A control connection whose reader proved the key.
    /// Boxed: the hello it carries is large beside a data connection.
    Control(Box<(Control, Authenticated)>),
}

/// Takes a new connection through the gate, then hands it on. The ticket (its place among
/// the unauthenticated) is given back as soon as the gate is passed or failed, or when a
/// newer connection takes its place (see [`crate::gate::admission`]): then it is just closed.
pub(crate) async fn handle_connection(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
    ticket: Ticket,
) {
    let deadline = tokio::time::Instant::now() + shared.config.preauth_timeout;
    let passing = timeout_at(deadline, pass(stream, peer, &shared, deadline, &ticket));
    let passed = tokio::select! {
        passed = passing => passed,
        () = ticket.evicted() => return shared.refusals.note(peer.ip(), Why::Evicted),
    };
    let passed = match passed {
        Ok(Ok(passed)) => passed,
        Ok(Err(why)) => return shared.refusals.note(peer.ip(), why),
        Err(_) => return shared.refusals.note(peer.ip(), Why::Silent),
    };
    drop(ticket);
    match passed {
        Passed::Data(route, conn) => {
            // The session reads one connection per flow: a full queue means a duplicate
            // (only a holder of the data key gets this far), which is closed.
            if route.try_send(conn).is_err() {
                shared.refusals.note(peer.ip(), Why::BadData);
            }
        }
        Passed::Control(passed) => {
            let (conn, auth) = *passed;
            session::serve(conn, peer, auth, shared, stop).await
        }
    }
}

async fn pass(
    mut stream: TcpStream,
    peer: SocketAddr,
    shared: &Shared,
    deadline: tokio::time::Instant,
    ticket: &Ticket,
) -> Result<Passed, Why> {
    let mut first = [0u8; 4];
    stream
        .read_exact(&mut first)
        .await
        .map_err(|_| Why::Silent)?;
    ticket.spoke();
    if first == DataHello::MAGIC {
        return data_connection(stream, peer, shared, first).await;
    }
    let mut conn = Connection::new(stream)
        .with_max_frame_bytes(MAX_PREAUTH_FRAME_BYTES)
        .with_read_ahead(&first);
    match handshake(&mut conn, shared).await {
        Ok(auth) => Ok(Passed::Control(Box::new((conn, auth)))),
        Err(why) => {
            if why == Why::Unauthenticated {
                // The refusal still goes out before the deadline, however long the penalty.
                let penalty = shared.admission.failed(peer.ip(), Instant::now());
                let last_moment = deadline - Duration::from_millis(50);
                sleep_until(last_moment.min(tokio::time::Instant::now() + penalty)).await;
            }
            let refusal = DaemonMessage::Refused {
                reason: GENERIC_REFUSAL.into(),
            };
            let _ = conn.write(&refusal).await;
            Err(why)
        }
    }
}

/// Reads the rest of a data hello and finds the session it names, which must have been
/// opened from the same address and must have signed it; then challenges this connection,
/// so a hello replayed by someone who saw it on the path goes no further.
async fn data_connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    shared: &Shared,
    first: [u8; 4],
) -> Result<Passed, Why> {
    let mut bytes = [0u8; DataHello::LEN];
    bytes[..4].copy_from_slice(&first);
    stream
        .read_exact(&mut bytes[4..])
        .await
        .map_err(|_| Why::Silent)?;
    let hello = DataHello::decode(&bytes).ok_or(Why::BadData)?;
    let (route, key) = shared.route_for(&hello, peer.ip()).ok_or(Why::BadData)?;
    match challenge_data_connection(&mut stream, &hello, &key).await {
        Ok(true) => {}
        Ok(false) => return Err(Why::BadData),
        Err(_) => return Err(Why::Silent),
    }
    let conn = DataConn {
        flow: hello.flow,
        stream,
    };
    Ok(Passed::Data(route, conn))
}

/// Turns away a connection the caps on unauthenticated connections refused, with the one
/// word a reader can act on. Never waits: what the peer already sent is read first (so the
/// close is a FIN that lets the answer arrive, not a reset that discards it), the answer
/// goes into the empty send buffer, and the socket is closed.
pub(crate) fn turn_away_busy(stream: TcpStream) {
    let mut sent = [0u8; MAX_PREAUTH_FRAME_BYTES];
    while matches!(stream.try_read(&mut sent), Ok(1..)) {}
    let _ = stream.try_write(&busy_frame());
}

/// The gate of a control connection the daemon opened itself (`--connect`): no admission
/// (there is one connection, to an address the daemon chose), the same handshake under the
/// same one deadline; a reader that fails it gets the same generic refusal.
pub(crate) async fn pass_dialed(
    stream: TcpStream,
    shared: &Shared,
) -> Result<(Control, Authenticated), Why> {
    let mut conn = Connection::new(stream).with_max_frame_bytes(MAX_PREAUTH_FRAME_BYTES);
    let handshake = timeout_at(
        tokio::time::Instant::now() + shared.config.preauth_timeout,
        handshake(&mut conn, shared),
    );
    match handshake.await {
        Ok(Ok(auth)) => Ok((conn, auth)),
        Ok(Err(why)) => {
            let refusal = DaemonMessage::Refused {
                reason: GENERIC_REFUSAL.into(),
            };
            let _ = conn.write(&refusal).await;
            Err(why)
        }
        Err(_) => Err(Why::Silent),
    }
}

/// The daemon's side of the handshake in [`oscil_protocol::auth`]: hello, challenge, proof.
async fn handshake(conn: &mut Control, shared: &Shared) -> Result<Authenticated, Why> {
    let nonce = Nonce::random().map_err(|e| {
        eprintln!("oscil-daemon: cannot draw a nonce: {e}");
        Why::Silent
    })?;
    let hello = read_message(conn).await?;
    let (awaiting, challenge) = DaemonHandshake::new(shared.config.key.clone(), nonce)
        .on_hello(hello)
        .map_err(why_failed)?;
    conn.write(&challenge).await.map_err(|_| Why::Silent)?;
    let proof = read_message(conn).await?;
    awaiting.on_proof(proof).map_err(why_failed)
}

async fn read_message(conn: &mut Control) -> Result<ReaderMessage, Why> {
    match conn.read().await {
        Ok(Some(message)) => Ok(message),
        Ok(None) | Err(FrameError::Io(_)) => Err(Why::Silent),
        Err(_) => Err(Why::Malformed),
    }
}

fn why_failed(error: AuthError) -> Why {
    match error {
        AuthError::ReaderUnproven => Why::Unauthenticated,
        _ => Why::Malformed,
    }
}

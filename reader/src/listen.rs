//! `--listen`: a reader on a public address waits for a daemon behind NAT to dial in
//! (`oscil-daemon --connect`). It keeps the daemon's protections for a public address: only
//! a daemon that proves the key gets a session (the handshake is the one of
//! `oscil_protocol::auth`, driven by the caller), few connections wait unauthenticated at
//! once (more are closed unread), and each has one short deadline for its whole handshake.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use oscil_kernel::socket::sockopt;
use oscil_model::socket::{OptionsInForce, SocketOptions};
use oscil_protocol::control::{challenge_data_connection, DataHello};
use oscil_protocol::proof::{DataKey, SessionId};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::{sleep, sleep_until, timeout, Instant};

use crate::error::ReaderError;

/// Connections held at once before they authenticate; the next are closed unread. A
/// daemon opens 8 data connections at a time, so one session never meets it.
const MAX_PENDING: usize = 16;

/// The whole pre-authentication phase of one connection: the hello, the daemon's challenge
/// and proof, the welcome (or a data connection's hello and proof). Five seconds leave
/// room for two round trips of a 2 s path.
pub(crate) const PREAUTH_TIMEOUT: Duration = Duration::from_secs(5);

/// A listening socket on `addr`; the reader's own options (SO_RCVBUF) go on it, so every
/// accepted connection has them from its SYN on (the window scale is chosen with them).
pub(crate) fn bind(
    addr: SocketAddr,
    asked: &SocketOptions,
) -> Result<(TcpListener, OptionsInForce), ReaderError> {
    let listen_error = |source| ReaderError::Listen {
        addr: addr.to_string(),
        source,
    };
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4(),
        SocketAddr::V6(_) => TcpSocket::new_v6(),
    }
    .map_err(listen_error)?;
    socket.set_reuseaddr(true).map_err(listen_error)?;
    let in_force = sockopt::apply(&socket, asked)?;
    socket.bind(addr).map_err(listen_error)?;
    let listener = socket.listen(MAX_PENDING as u32).map_err(listen_error)?;
    Ok((listener, in_force))
}

/// The first `wanted` connections whose `handshake` succeeds, each within
/// [`PREAUTH_TIMEOUT`], while at most [`MAX_PENDING`] wait at once; each that fails is said
/// in one line naming `what` and its address. Gives up at `deadline` when there is one.
pub(crate) async fn authenticated<T, F, Fut>(
    listener: &TcpListener,
    what: &str,
    wanted: usize,
    deadline: Option<Instant>,
    handshake: F,
) -> Result<Vec<T>, ReaderError>
where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = Result<T, ReaderError>> + Send + 'static,
    T: Send + 'static,
{
    let pending = Arc::new(Semaphore::new(MAX_PENDING));
    let mut tries = JoinSet::new();
    let mut passed = Vec::with_capacity(wanted);
    let give_up = async {
        match deadline {
            Some(at) => sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(give_up);
    while passed.len() < wanted {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    // Out of file descriptors and the like: back off, keep listening.
                    Err(_) => {
                        sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                // Over the cap: dropped here, closed unread.
                let Ok(permit) = pending.clone().try_acquire_owned() else { continue };
                let attempt = timeout(PREAUTH_TIMEOUT, handshake(stream, peer));
                tries.spawn(async move {
                    let _held = permit;
                    (peer, attempt.await)
                });
            }
            Some(Ok((peer, done))) = tries.join_next(), if !tries.is_empty() => match done {
                Ok(Ok(value)) => passed.push(value),
                Ok(Err(e)) => eprintln!("oscil-reader: refused {what} from {peer}: {e}"),
                Err(_) => eprintln!(
                    "oscil-reader: refused {what} from {peer}: no handshake within {} s",
                    PREAUTH_TIMEOUT.as_secs()
                ),
            },
            () = &mut give_up => {
                return Err(ReaderError::Timeout("waiting for the daemon's data connections"))
            }
        }
    }
    Ok(passed)
}

/// The listening side of one data connection's opening: from the daemon's address, a hello
/// for this session signed with its data key, and the proof for a fresh challenge
/// (`challenge_data_connection`, as the daemon checks a reader's). Its flow and stream.
pub(crate) async fn accept_data(
    mut stream: TcpStream,
    peer: SocketAddr,
    daemon: IpAddr,
    key: DataKey,
    session_id: SessionId,
) -> Result<(u32, TcpStream), ReaderError> {
    if peer.ip() != daemon {
        return Err(ReaderError::DataRefused("not from the daemon's address"));
    }
    let mut bytes = [0u8; DataHello::LEN];
    stream
        .read_exact(&mut bytes)
        .await
        .map_err(|_| ReaderError::DataRefused("closed before a whole data hello"))?;
    let hello = DataHello::decode(&bytes)
        .filter(|hello| hello.session_id == session_id && hello.is_signed_by(&key))
        .ok_or(ReaderError::DataRefused("not a data hello of this session"))?;
    let flow = hello.flow;
    match challenge_data_connection(&mut stream, &hello, &key).await {
        Ok(true) => Ok((flow, stream)),
        Ok(false) => Err(ReaderError::DataRefused("a wrong proof for its challenge")),
        Err(source) => Err(ReaderError::Data { flow, source }),
    }
}

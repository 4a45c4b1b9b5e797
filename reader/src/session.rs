//! Opening a test session: the control connection, the hello, and the data connections.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use oscil_cli::address::IpFamily;
use oscil_kernel::socket::sockopt;
use oscil_model::files::probe::PROBE_FLOW;
use oscil_model::run::clock::{self, realtime_unix_ns, ClockEstimate, Exchange};
use oscil_model::socket::{OptionsInForce, SocketOptions};
use oscil_model::text::escape_peer;
use oscil_protocol::auth::{AuthError, ReaderHandshake};
use oscil_protocol::control::{
    open_data_connection, Connection, DaemonMessage, FrameError, Hello, ReaderMessage, Welcome,
    GROUPS_PROTOCOL_VERSION, OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION,
};
use oscil_protocol::proof::{DataKey, Nonce, SessionId};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{lookup_host, TcpSocket, TcpStream};
use tokio::time::{sleep, timeout, Instant};

use crate::config::{ReaderConfig, SOFTWARE};
use crate::error::ReaderError;

/// How long connecting and the daemon's answer may take before the reader gives up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The least time the daemon's first answer may take before the peer is named as not
/// speaking oscil: an iperf3 server (on its port 5201) accepts, answers one byte and waits.
const FIRST_ANSWER_MIN: Duration = Duration::from_secs(2);

/// The first answer's wait in connect times: the challenge comes one round trip after the
/// hello, and a lost hello is sent again after the first retransmission timeout, which one
/// round-trip sample puts at 3 round trips; 6 leaves room for a busy daemon.
const FIRST_ANSWER_CONNECT_TIMES: u32 = 6;

/// How long the daemon's first answer may take after a connect that took `connect`: two
/// seconds on a LAN or a 466 ms path, more on a longer one, never more than the handshake.
pub(crate) fn first_answer_wait(connect: Duration) -> Duration {
    (connect * FIRST_ANSWER_CONNECT_TIMES).clamp(FIRST_ANSWER_MIN, HANDSHAKE_TIMEOUT)
}

/// A peer that has not yet shown it speaks oscil: its address, and how long its first
/// answer may take.
#[derive(Clone, Copy)]
struct Unproven<'a> {
    addr: &'a str,
    wait: Duration,
}

/// Data connections opened at once. One at a time, 100 flows over a 100 ms RTT took more
/// than the daemon's 10 s setup limit; all at once would meet its limit of 10
/// unauthenticated connections per source. 8 leaves room for the control connection.
const CONCURRENT_OPENS: u32 = 8;

/// A session the daemon accepted, with every data connection open.
pub struct Session {
    pub control_rx: Connection<OwnedReadHalf>,
    pub control_tx: Connection<OwnedWriteHalf>,
    pub welcome: Welcome,
    pub data: Vec<TcpStream>,
    /// The idle probe's connection (`crate::record::probe`), unless `--no-probe`.
    pub probe: Option<TcpStream>,
    pub reader_options: OptionsInForce,
    /// The daemon's clock against ours, in a session with markers.
    pub clock: Option<ClockEstimate>,
}

/// The first wait after the daemon said `busy`; each next one doubles, up to
/// [`BUSY_BACKOFF_MAX`], and is drawn at random between half and all of that, so readers
/// turned away together do not come back together.
const BUSY_BACKOFF_FIRST: Duration = Duration::from_millis(250);
const BUSY_BACKOFF_MAX: Duration = Duration::from_secs(4);

/// Opens a session ([`open_once`], or [`open_listening`] under `--listen`); while the daemon answers `busy`, tries again with
/// backoff until `config.busy_retry` has passed, saying so once on stderr.
pub async fn open(config: &ReaderConfig) -> Result<Session, ReaderError> {
    if config.listen {
        return open_listening(config).await;
    }
    let started = Instant::now();
    let give_up_at = started + config.busy_retry;
    let mut backoff = BUSY_BACKOFF_FIRST;
    let mut retrying = false;
    loop {
        let detail = match open_once(config).await {
            Err(ReaderError::Busy(detail)) => detail,
            other => return other,
        };
        let wait = jittered(backoff);
        if Instant::now() + wait >= give_up_at {
            if !retrying {
                return Err(ReaderError::Busy(detail));
            }
            return Err(ReaderError::StillBusy {
                waited: started.elapsed(),
                detail,
            });
        }
        if !retrying {
            eprintln!(
                "oscil-reader: the daemon at {} is busy ({detail}); trying again for up to {:?} (--busy-retry)",
                config.connect, config.busy_retry
            );
            retrying = true;
        }
        sleep(wait).await;
        backoff = (backoff * 2).min(BUSY_BACKOFF_MAX);
    }
}

/// A random wait between half of `backoff` and all of it.
fn jittered(backoff: Duration) -> Duration {
    let [roll] = oscil_protocol::key::random_bytes::<1>().unwrap_or([255]);
    backoff.mul_f64(0.5 + f64::from(roll) / 510.0)
}

/// One try: the control connection, the handshake, every data connection, `Ready`.
async fn open_once(config: &ReaderConfig) -> Result<Session, ReaderError> {
    let addr = resolve(&config.connect, config.family, config.bind).await?;
    let connect_error = |source| ReaderError::Connect {
        addr: config.connect.clone(),
        source,
    };
    let socket = new_socket(addr, config.bind).map_err(connect_error)?;
    let connecting = Instant::now();
    let stream = timeout(HANDSHAKE_TIMEOUT, socket.connect(addr))
        .await
        .map_err(|_| ReaderError::Timeout("connecting to the daemon"))?
        .map_err(|e| hung_up(&config.connect, e, connect_error))?;
    let peer = Unproven {
        addr: &config.connect,
        wait: first_answer_wait(connecting.elapsed()),
    };
    let control = handshake(config, peer, stream).await?;
    establish(config, control, Flows::Dial(addr)).await
}

/// `--listen`: waits for a daemon to dial in ([`crate::listen`]), takes the first that
/// proves the key, then accepts its data connections.
async fn open_listening(config: &ReaderConfig) -> Result<Session, ReaderError> {
    let addr = resolve(&config.connect, config.family, None).await?;
    let (listener, reader_options) = crate::listen::bind(addr, &config.reader_request)?;
    eprintln!("oscil-reader: waiting on {addr} for oscil-daemon --connect");
    let shared = std::sync::Arc::new(config.clone());
    let mut daemons =
        crate::listen::authenticated(&listener, "a daemon", 1, None, |stream, from| {
            let config = shared.clone();
            async move {
                let addr = from.to_string();
                let wait = crate::listen::PREAUTH_TIMEOUT;
                let peer = Unproven { addr: &addr, wait };
                Ok((handshake(&config, peer, stream).await?, from.ip()))
            }
        })
        .await?;
    let (control, daemon) = daemons.pop().expect("one daemon, as asked");
    let flows = Flows::Accept {
        listener: &listener,
        daemon,
        reader_options,
    };
    establish(config, control, flows).await
}

/// Who opens a session's data connections.
enum Flows<'a> {
    /// This reader, to the daemon's address.
    Dial(SocketAddr),
    /// The daemon, to this listening reader (`--listen`).
    Accept {
        listener: &'a tokio::net::TcpListener,
        daemon: IpAddr,
        reader_options: OptionsInForce,
    },
}

/// An authenticated control connection, its welcome and the session's data key.
struct Control {
    rx: Connection<OwnedReadHalf>,
    tx: Connection<OwnedWriteHalf>,
    welcome: Welcome,
    data_key: DataKey,
}

/// The handshake on a new control connection, whoever opened it.
async fn handshake(
    config: &ReaderConfig,
    peer: Unproven<'_>,
    stream: TcpStream,
) -> Result<Control, ReaderError> {
    // A peer that resets the connection at once fails this first call on it.
    stream.set_nodelay(true).map_err(|e| {
        hung_up(peer.addr, e, |source| ReaderError::Connect {
            addr: peer.addr.to_owned(),
            source,
        })
    })?;
    let (rx, tx) = stream.into_split();
    let (mut rx, mut tx) = (Connection::new(rx), Connection::new(tx));
    let (welcome, data_key) = authenticate(config, peer, &mut rx, &mut tx).await?;
    Ok(Control {
        rx,
        tx,
        welcome,
        data_key,
    })
}

/// The rest of a session's opening once the daemon welcomed it: the welcome checked, every
/// data connection, `Ready`, the clock.
async fn establish(
    config: &ReaderConfig,
    control: Control,
    flows: Flows<'_>,
) -> Result<Session, ReaderError> {
    let Control {
        rx: mut control_rx,
        tx: mut control_tx,
        welcome,
        data_key,
    } = control;
    if !(OLDEST_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&welcome.version) {
        return Err(ReaderError::Version {
            daemon: welcome.version,
        });
    }
    let mut welcome = crate::record::checks::check_welcome(&welcome, config.groups.len())?;
    let asked = config.groups[0].write_mode;
    if welcome.write_mode != asked {
        return Err(ReaderError::WriteMode {
            asked,
            runs: welcome.write_mode,
        });
    }
    if welcome.groups_in_force.is_empty() {
        welcome.groups_in_force = vec![welcome.options_in_force.clone()];
    }
    // An older daemon does not say it echoes the probe: then none is opened.
    let with_probe = config.probe && welcome.probe;
    let (data, probe, reader_options) = match flows {
        Flows::Dial(addr) => {
            dial_flows(config, addr, &data_key, welcome.session_id, with_probe).await?
        }
        Flows::Accept {
            listener,
            daemon,
            reader_options,
        } => {
            let (key, session_id) = (data_key, welcome.session_id);
            let (data, probe) =
                accept_flows(config, listener, daemon, key, session_id, with_probe).await?;
            (data, probe, reader_options)
        }
    };
    // The daemon starts its clock on `Start`: it must hold every connection by then.
    match answer(&mut control_rx, None).await? {
        DaemonMessage::Ready => {}
        DaemonMessage::Ended(ended) => {
            return Err(ReaderError::Refused(escape_peer(&ended.reason)))
        }
        _ => return Err(ReaderError::Unexpected("a ready message")),
    }
    let clock = match config.marker_every {
        Some(_) => Some(measure_clock(&mut control_rx, &mut control_tx).await?),
        None => None,
    };
    Ok(Session {
        control_rx,
        control_tx,
        welcome,
        data,
        probe,
        reader_options,
        clock,
    })
}

/// The data connections and the probe's, as the daemon dialed them to this listening
/// reader, in flow order; each that fails its check is refused in one line and not counted.
async fn accept_flows(
    config: &ReaderConfig,
    listener: &tokio::net::TcpListener,
    daemon: IpAddr,
    key: DataKey,
    session_id: SessionId,
    with_probe: bool,
) -> Result<(Vec<TcpStream>, Option<TcpStream>), ReaderError> {
    let wanted = config.flows as usize + usize::from(with_probe);
    let deadline = Some(Instant::now() + HANDSHAKE_TIMEOUT);
    let accepted = crate::listen::authenticated(
        listener,
        "a data connection",
        wanted,
        deadline,
        |stream, from| crate::listen::accept_data(stream, from, daemon, key.clone(), session_id),
    )
    .await?;
    let mut slots: Vec<Option<TcpStream>> = (0..config.flows).map(|_| None).collect();
    let mut probe = None;
    for (flow, stream) in accepted {
        let slot = match flow {
            PROBE_FLOW if with_probe => &mut probe,
            _ => slots
                .get_mut(flow as usize)
                .ok_or(ReaderError::DataRefused(
                    "the daemon opened a data connection for a flow this session has not",
                ))?,
        };
        if slot.replace(stream).is_some() {
            return Err(ReaderError::DataRefused(
                "the daemon opened a flow's data connection twice",
            ));
        }
    }
    // `wanted` distinct connections, each in its own place: every slot is filled.
    Ok((slots.into_iter().flatten().collect(), probe))
}

/// The data connections and the probe's, dialed to the daemon at `addr`.
async fn dial_flows(
    config: &ReaderConfig,
    addr: SocketAddr,
    data_key: &DataKey,
    session_id: SessionId,
    with_probe: bool,
) -> Result<(Vec<TcpStream>, Option<TcpStream>, OptionsInForce), ReaderError> {
    let (data, reader_options) = open_flows(config, addr, data_key, session_id).await?;
    let probe = match with_probe {
        true => {
            let plain = SocketOptions::default();
            let opened = open_flow(addr, config.bind, &plain, data_key, session_id, PROBE_FLOW);
            Some(opened.await?.0)
        }
        false => None,
    };
    Ok((data, probe, reader_options))
}

/// The session's data connections, a few at a time, in flow order; the options in force
/// on the reader's side (the first connection's, the same on all).
async fn open_flows(
    config: &ReaderConfig,
    addr: SocketAddr,
    data_key: &DataKey,
    session_id: SessionId,
) -> Result<(Vec<TcpStream>, OptionsInForce), ReaderError> {
    let mut data = Vec::with_capacity(config.flows as usize);
    let mut reader_options = None;
    for first in (0..config.flows).step_by(CONCURRENT_OPENS as usize) {
        let mut opening = tokio::task::JoinSet::new();
        for flow in first..config.flows.min(first + CONCURRENT_OPENS) {
            let (bind, asked) = (config.bind, config.reader_request.clone());
            let (key, session_id) = (data_key.clone(), session_id);
            opening.spawn(async move {
                let opened = open_flow(addr, bind, &asked, &key, session_id, flow).await;
                (flow, opened)
            });
        }
        let mut opened = opening.join_all().await;
        opened.sort_by_key(|(flow, _)| *flow);
        for (_, result) in opened {
            let (stream, in_force) = result?;
            reader_options.get_or_insert(in_force);
            data.push(stream);
        }
    }
    Ok((data, reader_options.unwrap_or_default()))
}

/// The clock exchanges of `oscil_model::run::clock`, one after another while nothing streams
/// yet, so the quietest is near the path's bare round trip.
async fn measure_clock(
    rx: &mut Connection<OwnedReadHalf>,
    tx: &mut Connection<OwnedWriteHalf>,
) -> Result<ClockEstimate, ReaderError> {
    let mut exchanges = Vec::with_capacity(clock::EXCHANGES as usize);
    for _ in 0..clock::EXCHANGES {
        let t1_unix_ns = realtime_unix_ns();
        tx.write(&ReaderMessage::ClockProbe { t1_unix_ns }).await?;
        match answer(rx, None).await? {
            DaemonMessage::ClockEcho {
                t1_unix_ns: echoed,
                t2_unix_ns,
                t3_unix_ns,
            } if echoed == t1_unix_ns => exchanges.push(Exchange {
                t1_unix_ns,
                t2_unix_ns,
                t3_unix_ns,
                t4_unix_ns: realtime_unix_ns(),
            }),
            _ => return Err(ReaderError::Unexpected("the echo of a clock probe")),
        }
    }
    ClockEstimate::from_exchanges(&exchanges).ok_or(ReaderError::Clock)
}

/// The handshake of [`oscil_protocol::auth`]: hello, the daemon's challenge (its proof
/// checked before anything derived from the key is sent), the reader's proof, the welcome.
async fn authenticate(
    config: &ReaderConfig,
    peer: Unproven<'_>,
    rx: &mut Connection<OwnedReadHalf>,
    tx: &mut Connection<OwnedWriteHalf>,
) -> Result<(Welcome, DataKey), ReaderError> {
    // One group is said as version 4 says it, so an older daemon serves it too.
    let (version, groups) = match config.groups.as_slice() {
        [_] => (OLDEST_PROTOCOL_VERSION, Vec::new()),
        groups => (GROUPS_PROTOCOL_VERSION, groups.to_vec()),
    };
    let first = &config.groups[0];
    let hello = Hello {
        version,
        software: SOFTWARE.into(),
        nonce: Nonce::random().map_err(ReaderError::Random)?,
        flows: config.flows,
        options: first.sender.clone(),
        interval_us: config.interval.as_micros() as u64,
        duration_us: config.pattern.total().as_micros() as u64,
        write_size_bytes: first.write_size_bytes,
        write_mode: first.write_mode,
        marker_every_us: config.marker_every.map(|d| d.as_micros() as u64),
        probe: config.probe,
        trace: config.trace,
        groups,
    };
    let (handshake, first) = ReaderHandshake::new(config.key.clone(), hello);
    tx.write(&first)
        .await
        .map_err(|e| closed_unanswered(peer, e))?;
    let challenge = answer(rx, Some(peer)).await?;
    let (proof, data_key) = handshake.on_challenge(challenge).map_err(|e| match e {
        AuthError::Version { found } => ReaderError::Version { daemon: found },
        other => ReaderError::Auth(other),
    })?;
    tx.write(&proof).await?;
    match answer(rx, None).await? {
        DaemonMessage::Welcome(welcome) => Ok((welcome, data_key)),
        _ => Err(ReaderError::Unexpected("a welcome")),
    }
}

/// The daemon's next message during setup; a refusal is an error, its words escaped.
/// `before_auth` names the peer while it has not yet shown it speaks oscil.
async fn answer(
    rx: &mut Connection<OwnedReadHalf>,
    before_auth: Option<Unproven<'_>>,
) -> Result<DaemonMessage, ReaderError> {
    // Before authentication, anything but an oscil frame means another service answered
    // (iperf3 on its port, a web server): say so rather than quote a frame length.
    let not_oscil = |addr: &str, detail: &str| ReaderError::NotOscil {
        addr: addr.to_owned(),
        detail: detail.to_owned(),
    };
    let wait = before_auth.map_or(HANDSHAKE_TIMEOUT, |peer| peer.wait);
    let answer = match (timeout(wait, rx.read::<DaemonMessage>()).await, before_auth) {
        (Err(_), Some(peer)) => {
            return Err(ReaderError::Silent {
                addr: peer.addr.to_owned(),
                waited: seconds(wait),
            })
        }
        (Err(_), None) => return Err(ReaderError::Timeout("waiting for the daemon's answer")),
        (Ok(Err(FrameError::TooLarge { .. } | FrameError::Invalid(_))), Some(peer)) => {
            return Err(not_oscil(peer.addr, "its answer is not an oscil frame"))
        }
        (Ok(Err(e)), Some(peer)) => return Err(closed_unanswered(peer, e)),
        (Ok(Ok(None)), Some(peer)) => {
            return Err(ReaderError::ClosedUnanswered {
                addr: peer.addr.to_owned(),
                how: "closed",
            })
        }
        (Ok(answer), _) => answer?,
    };
    match answer {
        Some(DaemonMessage::Refused { reason }) if before_auth.is_some() => {
            Err(ReaderError::RefusedBeforeAuth(escape_peer(&reason)))
        }
        Some(DaemonMessage::Refused { reason }) => Err(ReaderError::Refused(escape_peer(&reason))),
        Some(DaemonMessage::Busy { detail }) => Err(ReaderError::Busy(detail.map_or_else(
            || "at its limit of connections not yet authenticated".to_owned(),
            |d| escape_peer(&d),
        ))),
        Some(message) => Ok(message),
        None => Err(ReaderError::ClosedEarly),
    }
}

/// A peer that has not shown it speaks oscil and hung up (a reset, a closed pipe) is
/// named as such; any other failure is the connection's.
fn closed_unanswered(peer: Unproven<'_>, error: FrameError) -> ReaderError {
    match error {
        FrameError::Io(e) => hung_up(peer.addr, e, |e| ReaderError::Control(FrameError::Io(e))),
        other => ReaderError::Control(other),
    }
}

/// `error` as a peer that reset the connection before answering, when it is one; else as
/// `otherwise` makes it.
fn hung_up(
    addr: &str,
    error: std::io::Error,
    otherwise: impl FnOnce(std::io::Error) -> ReaderError,
) -> ReaderError {
    use std::io::ErrorKind;
    match error.kind() {
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe => {
            ReaderError::ClosedUnanswered {
                addr: addr.to_owned(),
                how: "reset",
            }
        }
        _ => otherwise(error),
    }
}

/// `2 s`, `2.8 s`.
fn seconds(d: Duration) -> String {
    match d.subsec_millis() {
        0 => format!("{} s", d.as_secs()),
        _ => format!("{:.1} s", d.as_secs_f64()),
    }
}

/// The daemon's address in `family`; when it has none, the flag that chose the family is
/// named: `-B`'s address when there is one (it sets the family unless -4/-6 did), else -4/-6.
async fn resolve(
    connect: &str,
    family: IpFamily,
    bind: Option<IpAddr>,
) -> Result<SocketAddr, ReaderError> {
    let addrs: Vec<SocketAddr> = lookup_host(connect)
        .await
        .map_err(|e| ReaderError::Address {
            addr: connect.to_owned(),
            detail: oscil_model::error_text::os_error(&e),
        })?
        .collect();
    if let Some(addr) = addrs.iter().find(|addr| family.allows(addr.ip())) {
        return Ok(*addr);
    }
    let version = |v4: bool| if v4 { "IPv4" } else { "IPv6" };
    let asked_v4 = family == IpFamily::V4;
    let (chosen_by, advice) = match bind {
        Some(ip) => (
            format!("-B {ip} is {}", version(ip.is_ipv4())),
            format!(
                "connect from an {} address of this host, or leave out -B",
                version(!asked_v4)
            ),
        ),
        None => {
            let flag = if asked_v4 { "-4" } else { "-6" };
            (format!("{flag} asks it"), format!("leave out {flag}"))
        }
    };
    Err(ReaderError::NoAddressOfFamily {
        addr: connect.to_owned(),
        family: version(asked_v4),
        chosen_by,
        advice,
    })
}

/// A socket of `addr`'s family, bound to `bind` when the user named a source address.
fn new_socket(addr: SocketAddr, bind: Option<IpAddr>) -> std::io::Result<TcpSocket> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4(),
        SocketAddr::V6(_) => TcpSocket::new_v6(),
    }?;
    if let Some(ip) = bind {
        socket.bind(SocketAddr::new(ip, 0)).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("-B {ip}: {}", oscil_model::error_text::os_error(&e)),
            )
        })?;
    }
    Ok(socket)
}

/// Opens one data connection; the reader's own options (SO_RCVBUF) go on before connect so
/// that the window scale is chosen with them.
async fn open_flow(
    addr: SocketAddr,
    bind: Option<IpAddr>,
    asked: &SocketOptions,
    data_key: &DataKey,
    session_id: SessionId,
    flow: u32,
) -> Result<(TcpStream, OptionsInForce), ReaderError> {
    let io_error = |source| ReaderError::Data { flow, source };
    let socket = new_socket(addr, bind).map_err(io_error)?;
    let in_force = sockopt::apply(&socket, asked)?;
    let mut stream = timeout(HANDSHAKE_TIMEOUT, socket.connect(addr))
        .await
        .map_err(|_| ReaderError::Timeout("opening a data connection"))?
        .map_err(io_error)?;
    timeout(
        HANDSHAKE_TIMEOUT,
        open_data_connection(&mut stream, data_key, session_id, flow),
    )
    .await
    .map_err(|_| ReaderError::Timeout("waiting for the daemon's challenge on a data connection"))?
    .map_err(|e| match e.kind() {
        // Closed before its challenge: what a daemon at its limits does to a connection it
        // cannot hold yet (a flood displaces the oldest), so busy, and tried again.
        std::io::ErrorKind::UnexpectedEof => ReaderError::Busy(match flow {
            PROBE_FLOW => "it closed the idle probe's connection before its challenge".into(),
            _ => format!("it closed data connection {flow} before its challenge"),
        }),
        _ => io_error(e),
    })?;
    Ok((stream, in_force))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_answer_waits_2_s_or_six_connect_times() {
        let ms = Duration::from_millis;
        assert_eq!(first_answer_wait(ms(0)), ms(2000));
        // A 466 ms path: one round trip for the challenge, three more for a lost hello's
        // retransmission, and room besides.
        assert_eq!(first_answer_wait(ms(466)), ms(2796));
        assert_eq!(first_answer_wait(ms(1000)), ms(6000));
        assert_eq!(first_answer_wait(ms(5000)), HANDSHAKE_TIMEOUT);
        assert_eq!(seconds(ms(2000)), "2 s");
        assert_eq!(seconds(ms(2796)), "2.8 s");
    }
}

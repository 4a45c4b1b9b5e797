//! One authenticated test session, from the welcome to the `Ended` message.

use std::net::SocketAddr;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use oscil_kernel::host::{self, netstat};
use oscil_kernel::socket::{sockopt, timestamping};
use oscil_kernel::SockoptError;
use oscil_model::files::markers::{Marker, MarkerSchedule};
use oscil_model::files::probe::PROBE_FLOW;
use oscil_model::files::rows::WakeupFigures;
use oscil_model::files::trace::TraceSideFacts;
use oscil_model::group::group_by_flow;
use oscil_model::run::clock::realtime_unix_ns;
use oscil_model::socket::{OptionsInForce, SocketOptions, Source, WriteMode};
use oscil_model::text::escape_peer;
use oscil_protocol::auth::Authenticated;
use oscil_protocol::control::{
    Connection, DaemonMessage, Ended, FrameError, Hello, ReaderMessage, Welcome,
    MAX_READER_FRAME_BYTES,
};
use oscil_protocol::proof::{DataKey, SessionId};
use oscil_protocol::request::{RequestError, SessionRequest, MIN_PACING_RATE_BPS};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{sleep_until, timeout, Instant};

use crate::config::DaemonConfig;
use crate::flow::latency::MarkerTap;
use crate::flow::payload::Payload;
use crate::flow::{write_forever, Flow};
use crate::shared::{DataConn, ProcFiles, Route, Shared};
use crate::trace::SessionTrace;

pub(crate) type Control = Connection<TcpStream>;

/// What an authenticated session holds while it runs: given back when dropped.
struct Grant {
    /// Per group of the hello ([`Hello::groups`]), in flow order.
    groups: Vec<GroupGrant>,
    _slot: OwnedSemaphorePermit,
    _flows: OwnedSemaphorePermit,
}

/// One group of a granted session: its options merged over the daemon's defaults, what
/// the kernel made of them on a scratch socket, and its writer.
struct GroupGrant {
    flows: u32,
    options: SocketOptions,
    in_force: OptionsInForce,
    write_size_bytes: Option<u32>,
    write_mode: WriteMode,
}

/// Why an authenticated session is not served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    /// A limit that frees up as other sessions end: the reader is told `busy`, and may try
    /// again.
    #[error("daemon busy: {0}")]
    Busy(String),
    /// The request itself cannot be served by this daemon as it runs.
    #[error("{0}")]
    Refused(#[from] SessionError),
}

/// Why a session is refused or ends before it streams; the text is what the reader is told
/// (`Refused`, `Ended`) and what the log says, with the peer's own words escaped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    /// A rule of every session, the reader's and the lab's too.
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error("{flows} flows asked: this daemon serves 1 to {most} flows per session ({flag})")]
    Flows {
        flows: u32,
        most: u32,
        flag: &'static str,
    },
    #[error("sampling interval {interval:?} is shorter than this daemon's minimum {min:?}")]
    IntervalBelowMinimum { interval: Duration, min: Duration },
    #[error("sampling interval {interval:?} is longer than this daemon's session limit {max:?}")]
    IntervalOverSession { interval: Duration, max: Duration },
    #[error(
        "session of {asked:?} asked: longer than this daemon's limit {max:?} (--max-session-time)"
    )]
    TooLong { asked: Duration, max: Duration },
    #[error("no session id: {0}")]
    NoSessionId(std::io::Error),
    #[error("cannot make a write buffer of {bytes} bytes: {source}")]
    WriteBuffer { bytes: u32, source: std::io::Error },
    #[error(transparent)]
    Scratch(#[from] ScratchError),
    #[error(transparent)]
    Options(#[from] SockoptError),
    #[error(transparent)]
    Write(#[from] FrameError),
    #[error("reader did not take a control message within {0:?}")]
    WriteTimeout(Duration),
    #[error("setup timed out after {after:?}: {connected} of {flows} data connections{}", if connected == flows { ", no start message" } else { "" })]
    SetupTimeout {
        after: Duration,
        connected: usize,
        flows: usize,
    },
    #[error("data connection for flow {flow}, but the session has {flows} flows")]
    NoSuchFlow { flow: u32, flows: usize },
    #[error("flow {flow}: {source}")]
    FlowOptions { flow: u32, source: SockoptError },
    #[error("daemon shutting down")]
    ShuttingDown,
    /// What came (or did not come) over the control connection ([`control_ending`]).
    #[error("{0}")]
    Control(String),
}

/// Why socket options cannot be set on a scratch socket ([`validate_options`]).
#[derive(Debug, thiserror::Error)]
pub enum ScratchError {
    #[error("cannot open a socket to check options on: {0}")]
    Socket(std::io::Error),
    #[error(transparent)]
    Options(#[from] SockoptError),
}

/// Serves one authenticated control connection to its end; every way it ends is logged as
/// one line, with the peer's own words escaped.
pub(crate) async fn serve(
    conn: Control,
    peer: SocketAddr,
    auth: Authenticated,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) {
    let mut conn = conn.with_max_frame_bytes(MAX_READER_FRAME_BYTES);
    let config = &shared.config;
    let hello = auth.hello;
    let ipv6 = conn.get_ref().local_addr().is_ok_and(|a| a.is_ipv6());
    let mut grant = match take_grant(&hello, &shared, ipv6) {
        Ok(grant) => grant,
        Err(reason) => return refuse(&mut conn, peer, config, reason).await,
    };
    note_timestamping(&conn, &mut grant);
    let (session_id, route, data_rx) = match open_route(&shared, peer, &hello, auth.data_key) {
        Ok(opened) => opened,
        Err(reason) => return refuse(&mut conn, peer, config, reason).await,
    };
    if let Err(e) = send(&mut conn, config, &welcome(session_id, &hello, &grant)).await {
        return eprintln!("oscil-daemon: session {session_id} from {peer}: welcome: {e}");
    }
    log_start(session_id, peer, &hello, &grant);

    let mut session = Session {
        conn: &mut conn,
        config,
        hello: &hello,
        groups: &grant.groups,
        stop,
        echo: Default::default(),
        trace: &shared.trace,
    };
    let started = Instant::now();
    let cost_before = oscil_kernel::host::cost::of_self();
    let expected = shared.admission.expect(peer.ip(), connections(&hello));
    let dialing = shared
        .dial
        .and_then(|reader| crate::dial::open_data_connections(reader, &shared, session_id, &hello));
    let connected = session.connect_flows(data_rx).await;
    dialing.inspect(JoinHandle::abort);
    drop(expected);
    let connected = connected.and_then(|flows| {
        let payloads = grant.groups.iter().map(|g| payload_for(g, &shared.payload));
        Ok((flows, payloads.collect::<Result<Vec<_>, _>>()?))
    });
    let streamed = match connected {
        Ok((flows, payload)) => {
            drop(route);
            session.stream(flows, &payload, &shared.proc).await
        }
        Err(reason) => Streamed {
            reason: reason.to_string(),
            ..Streamed::default()
        },
    };
    if let Some(Source::Getsockopt { why }) = &streamed.sampled_by {
        eprintln!("oscil-daemon: session {session_id}: sampled by getsockopt: {why}");
    }
    let cost = cost_before
        .zip(oscil_kernel::host::cost::of_self())
        .map(|(b, a)| a.since(&b));
    // Free the slot before saying so, so a reader that starts its next session at once is
    // not refused as busy.
    drop(grant);
    let reason = streamed.reason.clone();
    let ended = DaemonMessage::Ended(Ended {
        reason: streamed.reason,
        tcpext_delta: streamed.tcpext_delta,
        wakeups: streamed.wakeups,
        cost,
        trace: streamed.trace,
        sampled_by: streamed.sampled_by,
    });
    let told = send(&mut conn, config, &ended).await;
    eprintln!(
        "oscil-daemon: session {session_id} from {peer}: end after {:.1} s: {reason}{}",
        started.elapsed().as_secs_f64(),
        could_not_tell(told),
    );
}

/// Tried on the control connection (the kernel takes OPT_ID only on a connected socket): a
/// kernel without TX timestamps leaves a note in the options in force.
fn note_timestamping(conn: &Control, grant: &mut Grant) {
    if let Err(e) = timestamping::check(conn.get_ref()) {
        for group in &mut grant.groups {
            group
                .in_force
                .notes
                .push(format!("{e}: residence_us and write_to_ack_us stay empty"));
        }
    }
}

/// A fresh session id and the route its data connections take to this session, held until
/// the guard drops.
fn open_route<'a>(
    shared: &'a Shared,
    peer: SocketAddr,
    hello: &Hello,
    data_key: DataKey,
) -> Result<(SessionId, RouteGuard<'a>, mpsc::Receiver<DataConn>), Refusal> {
    let session_id =
        SessionId::random().map_err(|e| Refusal::Refused(SessionError::NoSessionId(e)))?;
    let (tx, data_rx) = mpsc::channel(connections(hello));
    let route = RouteGuard::register(
        shared,
        session_id,
        Route {
            peer: peer.ip(),
            key: data_key,
            tx,
        },
    );
    Ok((session_id, route, data_rx))
}

/// A group's write buffer: the daemon's own unless the hello asked for another size.
fn payload_for(group: &GroupGrant, shared: &Payload) -> Result<Payload, SessionError> {
    match group.write_size_bytes {
        Some(bytes) if bytes as usize != shared.len() => Payload::new(bytes as usize)
            .map_err(|source| SessionError::WriteBuffer { bytes, source }),
        _ => Ok(shared.clone()),
    }
}

/// Checks the hello, takes a session slot and the flows, and tries the options on a scratch
/// socket: the grant, or why the session is refused.
fn take_grant(hello: &Hello, shared: &Shared, ipv6: bool) -> Result<Grant, Refusal> {
    let config = &shared.config;
    let options = check_hello(hello, config)?;
    let slot = shared.sessions.clone().try_acquire_owned().map_err(|_| {
        Refusal::Busy(format!(
            "already serving {} sessions (--max-sessions)",
            config.max_sessions
        ))
    })?;
    let flows = shared
        .flows
        .clone()
        .try_acquire_many_owned(hello.flows)
        .map_err(|_| {
            Refusal::Busy(format!(
                "{} flows asked, {} of {} free (--max-total-flows)",
                hello.flows,
                shared.flows.available_permits(),
                config.max_total_flows
            ))
        })?;
    // Each group's options on a scratch socket of its own, once the session has its place.
    let mut groups = Vec::with_capacity(options.len());
    for (group, options) in hello.groups().into_iter().zip(options) {
        groups.push(GroupGrant {
            flows: group.flows,
            in_force: validate_options(&options, ipv6).map_err(SessionError::from)?,
            options,
            write_size_bytes: group.write_size_bytes,
            write_mode: group.write_mode,
        });
    }
    Ok(Grant {
        groups,
        _slot: slot,
        _flows: flows,
    })
}

/// The daemon's answer to a granted hello: this host, the options in force, and what it
/// will run of what was asked.
fn welcome(session_id: SessionId, hello: &Hello, grant: &Grant) -> DaemonMessage {
    DaemonMessage::Welcome(Welcome {
        // In the hello's version: a version 4 reader takes no other.
        version: hello.version,
        software: software(),
        session_id,
        host: host::collect(),
        options_in_force: grant.groups[0].in_force.clone(),
        probe: hello.probe,
        write_mode: hello.write_mode,
        // Said per group only to a hello with groups: a version 4 reader knows none.
        groups_in_force: match hello.groups.is_empty() {
            true => Vec::new(),
            false => grant.groups.iter().map(|g| g.in_force.clone()).collect(),
        },
    })
}

fn log_start(session_id: SessionId, peer: SocketAddr, hello: &Hello, grant: &Grant) {
    let groups: Vec<String> = grant
        .groups
        .iter()
        .map(|g| {
            let notes = &g.in_force.notes;
            format!(
                "{} flows, writes {}, options: {}{}",
                g.flows,
                g.write_mode,
                g.options,
                if notes.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", notes.join("; "))
                },
            )
        })
        .collect();
    eprintln!(
        "oscil-daemon: session {session_id} from {peer} ({:?}): start, every {:?} for {:?}: {}",
        escape_peer(&hello.software),
        Duration::from_micros(hello.interval_us),
        Duration::from_micros(hello.duration_us),
        groups.join("; "),
    );
}

fn could_not_tell(told: Result<(), SessionError>) -> String {
    told.map_or_else(
        |e| format!(" (could not tell the reader: {e})"),
        |_| String::new(),
    )
}

/// Checks a hello against this daemon's limits and merges each group's options over the
/// defaults; `--max-rate` caps each flow's pacing rate at its share of the session's.
fn check_hello(hello: &Hello, config: &DaemonConfig) -> Result<Vec<SocketOptions>, SessionError> {
    // More than all the flows the daemon serves at once would never fit: not busy, refused.
    let (most, flag) = if config.max_total_flows < config.max_flows {
        (
            config.max_total_flows,
            "--max-total-flows, and the open files limit",
        )
    } else {
        (config.max_flows, "--max-flows")
    };
    if hello.flows == 0 || hello.flows > most {
        return Err(SessionError::Flows {
            flows: hello.flows,
            most,
            flag,
        });
    }
    let interval = Duration::from_micros(hello.interval_us);
    if interval < config.min_interval {
        return Err(SessionError::IntervalBelowMinimum {
            interval,
            min: config.min_interval,
        });
    }
    if interval > config.max_session {
        return Err(SessionError::IntervalOverSession {
            interval,
            max: config.max_session,
        });
    }
    let asked = Duration::from_micros(hello.duration_us);
    if asked > config.max_session {
        return Err(SessionError::TooLong {
            asked,
            max: config.max_session,
        });
    }
    SessionRequest::of_hello(hello).validate()?;
    let share = config
        .max_rate_bps
        .map(|rate| (rate / u64::from(hello.flows)).max(MIN_PACING_RATE_BPS));
    let merged = hello
        .groups()
        .into_iter()
        .map(|group| merge(&group.sender, &config.default_options, share));
    Ok(merged.collect())
}

/// The options asked over the daemon's defaults, option by option; the pacing rate at most
/// `share`.
fn merge(asked: &SocketOptions, default: &SocketOptions, share: Option<u64>) -> SocketOptions {
    let pacing = asked.max_pacing_rate_bps.or(default.max_pacing_rate_bps);
    SocketOptions {
        notsent_lowat_bytes: asked.notsent_lowat_bytes.or(default.notsent_lowat_bytes),
        sndbuf_bytes: asked.sndbuf_bytes.or(default.sndbuf_bytes),
        rcvbuf_bytes: asked.rcvbuf_bytes.or(default.rcvbuf_bytes),
        congestion: asked.congestion.clone().or(default.congestion.clone()),
        max_pacing_rate_bps: match (pacing, share) {
            (Some(p), Some(s)) => Some(p.min(s)),
            (p, s) => p.or(s),
        },
        zerocopy: asked.zerocopy || default.zerocopy,
    }
}

/// Applies the options to a scratch socket, so a refused option refuses the session before
/// any data connection exists, and reports what the kernel made of them.
pub(crate) fn validate_options(
    options: &SocketOptions,
    ipv6: bool,
) -> Result<OptionsInForce, ScratchError> {
    let domain = if ipv6 {
        socket2::Domain::IPV6
    } else {
        socket2::Domain::IPV4
    };
    let scratch =
        socket2::Socket::new(domain, socket2::Type::STREAM, None).map_err(ScratchError::Socket)?;
    Ok(sockopt::apply(&scratch, options)?)
}

async fn refuse(conn: &mut Control, peer: SocketAddr, config: &DaemonConfig, reason: Refusal) {
    let message = match &reason {
        Refusal::Busy(detail) => DaemonMessage::Busy {
            detail: Some(detail.clone()),
        },
        Refusal::Refused(why) => DaemonMessage::Refused {
            reason: why.to_string(),
        },
    };
    let told = send(conn, config, &message).await;
    eprintln!(
        "oscil-daemon: session from {peer} refused: {reason}{}",
        could_not_tell(told)
    );
}

/// Writes one message, giving up after the handshake timeout so a reader that stops
/// reading its control connection cannot hold the session forever.
async fn send(
    conn: &mut Control,
    config: &DaemonConfig,
    message: &DaemonMessage,
) -> Result<(), SessionError> {
    send_batch(conn, config, std::slice::from_ref(message)).await
}

/// Writes `messages` in one write, under the same limit as [`send`].
async fn send_batch(
    conn: &mut Control,
    config: &DaemonConfig,
    messages: &[DaemonMessage],
) -> Result<(), SessionError> {
    match timeout(config.handshake_timeout, conn.write_batch(messages)).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(SessionError::WriteTimeout(config.handshake_timeout)),
    }
}

fn software() -> String {
    format!("oscil-daemon {}", env!("CARGO_PKG_VERSION"))
}

/// The session's entry in the data-connection routing table, removed when dropped.
struct RouteGuard<'a> {
    shared: &'a Shared,
    session_id: SessionId,
}

impl<'a> RouteGuard<'a> {
    fn register(shared: &'a Shared, session_id: SessionId, route: Route) -> Self {
        shared
            .routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(session_id, route);
        RouteGuard { shared, session_id }
    }
}

impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        self.shared
            .routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.session_id);
    }
}

struct Session<'a> {
    conn: &'a mut Control,
    config: &'a DaemonConfig,
    hello: &'a Hello,
    groups: &'a [GroupGrant],
    stop: watch::Receiver<bool>,
    /// The idle probe's echo, when the hello asked for one; stops with the session.
    echo: crate::flow::probe::Echo,
    trace: &'a crate::trace::TraceBudget,
}

/// Data connections a session opens: its flows and, when asked, the idle probe.
fn connections(hello: &Hello) -> usize {
    hello.flows as usize + usize::from(hello.probe)
}

/// What can happen while a session waits for its data connections.
enum SetupEvent {
    Control(Result<Option<ReaderMessage>, FrameError>),
    Data(DataConn),
    Deadline,
    Shutdown,
}

/// What can happen while a session streams.
enum RunEvent {
    Control(Result<Option<ReaderMessage>, FrameError>),
    /// The sampler thread's latest samples, or why it could not take them.
    Sample(crate::flow::sampler::Batch),
    /// A writer set a marker (others may have too).
    Markers(Marker),
    /// Ends the session for the reason given.
    End(String),
}

impl Session<'_> {
    /// Collects every data connection, says `Ready`, and waits for the reader's start
    /// message: the daemon's clock then starts when the reader's does, however long the
    /// last of 1,000 connections took to come through the gate.
    async fn connect_flows(
        &mut self,
        mut data_rx: mpsc::Receiver<DataConn>,
    ) -> Result<Vec<Flow>, SessionError> {
        let n = self.hello.flows as usize;
        let group_by_flow = group_by_flow(&self.hello.groups());
        let mut slots: Vec<Option<Flow>> = (0..n).map(|_| None).collect();
        let mut connected = 0;
        let deadline = Instant::now() + self.config.handshake_timeout;
        let timed_out = |connected: usize| SessionError::SetupTimeout {
            after: self.config.handshake_timeout,
            connected,
            flows: n,
        };
        while connected < n || (self.hello.probe && !self.echo.is_open()) {
            let event = tokio::select! {
                m = self.conn.read::<ReaderMessage>() => SetupEvent::Control(m),
                Some(dc) = data_rx.recv() => SetupEvent::Data(dc),
                _ = sleep_until(deadline) => SetupEvent::Deadline,
                _ = self.stop.changed() => SetupEvent::Shutdown,
            };
            match event {
                SetupEvent::Control(m) => return Err(SessionError::Control(control_ending(m))),
                SetupEvent::Data(DataConn { flow, stream })
                    if flow == PROBE_FLOW && self.hello.probe =>
                {
                    if !self.echo.start(stream, self.config.max_session) {
                        eprintln!("oscil-daemon: the probe connected twice; closed the second");
                    }
                }
                SetupEvent::Data(DataConn { flow, stream }) => {
                    let slot = slots
                        .get_mut(flow as usize)
                        .ok_or(SessionError::NoSuchFlow { flow, flows: n })?;
                    if slot.is_some() {
                        // Only a holder of the data key gets here: close the second, keep
                        // the first.
                        eprintln!("oscil-daemon: flow {flow} connected twice; closed the second");
                        continue;
                    }
                    let group = group_by_flow[flow as usize];
                    sockopt::apply(&stream, &self.groups[group as usize].options)
                        .map_err(|source| SessionError::FlowOptions { flow, source })?;
                    let timestamps =
                        self.config.tx_timestamps && timestamping::enable(&stream).is_ok();
                    *slot = Some(Flow::new((flow, group), stream, timestamps));
                    connected += 1;
                }
                SetupEvent::Deadline => return Err(timed_out(connected)),
                SetupEvent::Shutdown => return Err(SessionError::ShuttingDown),
            }
        }
        send(self.conn, self.config, &DaemonMessage::Ready).await?;
        // The reader may measure the clocks (markers) before it starts: a fresh deadline,
        // as twelve exchanges take twelve round trips of the path.
        let deadline = Instant::now() + self.config.handshake_timeout;
        loop {
            let m = tokio::select! {
                m = self.conn.read::<ReaderMessage>() => m,
                _ = sleep_until(deadline) => return Err(timed_out(connected)),
                _ = self.stop.changed() => return Err(SessionError::ShuttingDown),
            };
            match m {
                Ok(Some(ReaderMessage::ClockProbe { t1_unix_ns })) => {
                    let t2_unix_ns = realtime_unix_ns();
                    let echo = DaemonMessage::ClockEcho {
                        t1_unix_ns,
                        t2_unix_ns,
                        t3_unix_ns: realtime_unix_ns(),
                    };
                    send(self.conn, self.config, &echo).await?;
                }
                Ok(Some(ReaderMessage::Start)) => return Ok(slots.into_iter().flatten().collect()),
                m => return Err(SessionError::Control(control_ending(m))),
            }
        }
    }

    /// One writer task per flow, its group's writer with its group's payload, each with its
    /// marker tap when the session asked for markers; the markers' channel closes when the
    /// last writer ends.
    fn spawn_writers(
        &self,
        flows: &[Flow],
        payloads: &[Payload],
        start_unix_ns: u64,
    ) -> (
        JoinSet<(u32, std::io::Error)>,
        mpsc::UnboundedReceiver<Marker>,
    ) {
        let (marker_tx, markers) = mpsc::unbounded_channel();
        let mut writers = JoinSet::new();
        for flow in flows {
            let tap = self.hello.marker_every_us.map(|us| MarkerTap {
                flow: flow.index,
                schedule: MarkerSchedule::new(start_unix_ns, us.saturating_mul(1000)),
                tx: marker_tx.clone(),
            });
            let group = &self.groups[flow.group as usize];
            let (payload, zerocopy, mode) = (
                payloads[flow.group as usize].clone(),
                group.options.zerocopy,
                group.write_mode,
            );
            let flow = flow.clone();
            writers.spawn(async move {
                (
                    flow.index,
                    write_forever(flow, payload, zerocopy, mode, tap).await,
                )
            });
        }
        (writers, markers)
    }

    /// Sends what the sampler still queues, each batch within the handshake timeout; stops
    /// at the first failure.
    async fn send_last_samples(
        &mut self,
        samples: &mut mpsc::Receiver<crate::flow::sampler::Batch>,
    ) {
        while let Ok(Some(sampled)) = timeout(self.config.handshake_timeout, samples.recv()).await {
            let Ok(batch) = sampled else { break };
            if send_batch(self.conn, self.config, &batch).await.is_err() {
                break;
            }
        }
    }

    /// Stops the trace and sends the rows it still holds; what it traced.
    async fn send_last_trace(&mut self, mut trace: SessionTrace) -> Option<TraceSideFacts> {
        trace.stop();
        while let Some(batch) = trace.remaining().await {
            if send_batch(self.conn, self.config, &batch).await.is_err() {
                break;
            }
        }
        trace.facts().await
    }

    /// Streams on every flow and samples them on absolute deadlines until the session ends.
    async fn stream(
        &mut self,
        flows: Vec<Flow>,
        payloads: &[Payload],
        proc: &Arc<ProcFiles>,
    ) -> Streamed {
        let start = Instant::now();
        let start_unix_ns = realtime_unix_ns();
        let tcpext_before = proc.tcpext().ok();
        let (mut writers, mut markers) = self.spawn_writers(&flows, payloads, start_unix_ns);
        let interval = Duration::from_micros(self.hello.interval_us);
        let length = (Duration::from_micros(self.hello.duration_us) + self.config.overrun_grace)
            .min(self.config.max_session);
        let end_at = start + length;
        let crate::flow::sampler::Spawned {
            stop: stop_sampling,
            mut samples,
            source: mut sampled_by,
        } = crate::flow::sampler::spawn(flows.clone(), proc.clone(), start.into_std(), interval);
        let mut trace = SessionTrace::start(self.hello.trace, self.trace, &flows, start.into_std());
        let mut reader_intervals = None;
        let reason = loop {
            let event = tokio::select! {
                m = self.conn.read::<ReaderMessage>() => RunEvent::Control(m),
                Some(sampled) = samples.recv() => RunEvent::Sample(sampled),
                Some(rows) = trace.recv() => RunEvent::Sample(Ok(rows)),
                Some(first) = markers.recv() => RunEvent::Markers(first),
                Some(done) = writers.join_next() => RunEvent::End(match done {
                    Ok((flow, e)) => format!("data connection of flow {flow} failed: {e}"),
                    Err(e) => format!("a writer task failed: {e}"),
                }),
                _ = sleep_until(end_at) => RunEvent::End(
                    format!("session length limit reached after {length:?} of streaming")
                ),
                _ = self.stop.changed() => RunEvent::End("daemon shutting down".into()),
            };
            match event {
                RunEvent::Sample(Ok(batch)) => {
                    if let Err(e) = send_batch(self.conn, self.config, &batch).await {
                        break e.to_string();
                    }
                }
                RunEvent::Sample(Err(e)) => break e.to_string(),
                RunEvent::Markers(first) => {
                    if let Err(e) = send_markers(self.conn, self.config, first, &mut markers).await
                    {
                        break e.to_string();
                    }
                }
                RunEvent::Control(m) => {
                    if let Ok(Some(ReaderMessage::Stop { intervals, .. })) = &m {
                        reader_intervals = *intervals;
                    }
                    break control_ending(m);
                }
                RunEvent::End(reason) => break reason,
            }
        };
        // The sampler takes a last sample, up to the interval the reader's samples ended in
        // when it said; what it has queued still goes to the reader before `Ended`, unless
        // the control connection is what failed.
        let _ = stop_sampling.send(reader_intervals);
        self.send_last_samples(&mut samples).await;
        let trace = self.send_last_trace(trace).await;
        // Dropping the receiver wakes a thread blocked on a full channel, so it lets go of
        // its handles on the sockets.
        drop(samples);
        writers.shutdown().await;
        if let Ok(first) = markers.try_recv() {
            let _ = send_markers(self.conn, self.config, first, &mut markers).await;
        }
        let (tcpext_delta, wakeups) = close_flows(flows, tcpext_before, proc);
        Streamed {
            reason,
            tcpext_delta,
            wakeups,
            trace,
            sampled_by: sampled_by.try_recv().ok(),
        }
    }
}

/// What a session's streaming leaves for its `Ended`: why it ended, the TcpExt counters
/// that moved meanwhile, each flow's wake-ups, what was traced (when the hello asked) and
/// how the sampler read the sockets.
#[derive(Default)]
struct Streamed {
    reason: String,
    tcpext_delta: std::collections::BTreeMap<String, u64>,
    wakeups: Vec<WakeupFigures>,
    trace: Option<TraceSideFacts>,
    sampled_by: Option<Source>,
}

/// Resets the session's flows once their writers have stopped; returns the TcpExt
/// counters that moved since `tcpext_before` and each flow's wake-ups.
fn close_flows(
    flows: Vec<Flow>,
    tcpext_before: Option<oscil_kernel::TcpExt>,
    proc: &ProcFiles,
) -> (std::collections::BTreeMap<String, u64>, Vec<WakeupFigures>) {
    let wakeups = flows
        .iter()
        .map(|f| f.probe.session_wakeups(f.index))
        .collect();
    for flow in flows {
        flow.reset();
    }
    let delta = match (tcpext_before, proc.tcpext()) {
        (Some(before), Ok(after)) => netstat::delta(&before, &after, netstat::WATCHED),
        _ => Default::default(),
    };
    (delta, wakeups)
}

/// Sends `first` and every other marker already set, in one message.
async fn send_markers(
    conn: &mut Control,
    config: &DaemonConfig,
    first: Marker,
    more: &mut mpsc::UnboundedReceiver<Marker>,
) -> Result<(), SessionError> {
    let mut markers = vec![first];
    while let Ok(marker) = more.try_recv() {
        markers.push(marker);
    }
    send(conn, config, &DaemonMessage::Markers { markers }).await
}

/// Why a session ends on what came (or did not come) over the control connection.
fn control_ending(message: Result<Option<ReaderMessage>, FrameError>) -> String {
    match message {
        Ok(Some(ReaderMessage::Stop { reason, .. })) => {
            format!("reader asked to stop: {}", escape_peer(&reason))
        }
        Ok(Some(other)) => format!(
            "protocol error: unexpected {}",
            escape_peer(&format!("{other:?}"))
        ),
        Ok(None) => "reader closed the control connection".into(),
        Err(e) => format!("protocol error: {}", escape_peer(&e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oscil_protocol::control::PROTOCOL_VERSION;
    use oscil_protocol::proof::HexBytes;

    fn hello() -> Hello {
        Hello {
            version: PROTOCOL_VERSION,
            software: "test".into(),
            nonce: HexBytes([0; 32]),
            flows: 4,
            options: SocketOptions::default(),
            interval_us: 100_000,
            duration_us: 60_000_000,
            write_size_bytes: None,
            write_mode: Default::default(),
            marker_every_us: None,
            probe: false,
            trace: false,
            groups: Vec::new(),
        }
    }

    #[test]
    fn asked_options_win_over_defaults_option_by_option() {
        let config = DaemonConfig {
            default_options: SocketOptions {
                notsent_lowat_bytes: Some(131072),
                congestion: Some("reno".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut h = hello();
        h.options.notsent_lowat_bytes = Some(16384);
        let merged = check_hello(&h, &config).unwrap().remove(0);
        assert_eq!(merged.notsent_lowat_bytes, Some(16384));
        assert_eq!(merged.congestion.as_deref(), Some("reno"));
        assert_eq!(merged.sndbuf_bytes, None);
    }

    #[test]
    fn max_rate_is_split_over_the_flows_and_caps_what_is_asked() {
        let config = DaemonConfig {
            max_rate_bps: Some(400_000_000),
            ..Default::default()
        };
        let mut h = hello();
        assert_eq!(
            check_hello(&h, &config).unwrap()[0].max_pacing_rate_bps,
            Some(100_000_000)
        );
        h.options.max_pacing_rate_bps = Some(10_000_000);
        assert_eq!(
            check_hello(&h, &config).unwrap()[0].max_pacing_rate_bps,
            Some(10_000_000)
        );
        h.options.max_pacing_rate_bps = Some(1_000_000_000);
        assert_eq!(
            check_hello(&h, &config).unwrap()[0].max_pacing_rate_bps,
            Some(100_000_000)
        );
        let unlimited = check_hello(&hello(), &DaemonConfig::default()).unwrap();
        assert_eq!(unlimited[0].max_pacing_rate_bps, None);
    }

    #[test]
    fn congestion_names_with_control_characters_are_refused() {
        let config = DaemonConfig::default();
        let mut h = hello();
        for bad in [
            "reno\0\noscil-daemon: forged",
            "",
            "a_name_far_too_long",
            "bbr ",
        ] {
            h.options.congestion = Some(bad.into());
            let reason = check_hello(&h, &config).unwrap_err().to_string();
            assert!(reason.contains("not a kernel module name"), "{reason}");
            assert!(!reason.contains('\n') && !reason.contains('\0'), "{reason}");
        }
        h.options.congestion = Some("cubic".into());
        assert!(check_hello(&h, &config).is_ok());
    }

    #[test]
    fn limits_refuse_with_the_flag_that_sets_them() {
        let config = DaemonConfig {
            max_flows: 2,
            ..Default::default()
        };
        let mut h = hello();
        assert!(check_hello(&h, &config)
            .unwrap_err()
            .to_string()
            .contains("--max-flows"));
        h.flows = 2;
        h.duration_us = 3_600_000_000;
        assert!(check_hello(&h, &config)
            .unwrap_err()
            .to_string()
            .contains("--max-session"));
        h.duration_us = 1_000_000;
        h.interval_us = 10;
        assert!(check_hello(&h, &config)
            .unwrap_err()
            .to_string()
            .contains("interval"));
        h.interval_us = u64::MAX;
        assert!(check_hello(&h, &config)
            .unwrap_err()
            .to_string()
            .contains("interval"));
        h.interval_us = 100_000;
        h.marker_every_us = Some(99_999);
        let reason = check_hello(&h, &config).unwrap_err().to_string();
        assert!(reason.contains("--marker-every"), "{reason}");
        h.marker_every_us = Some(100_000);
        assert!(check_hello(&h, &config).is_ok());
    }
}

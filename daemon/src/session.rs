//! One test session, from the reader's hello to the `Ended` message.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use oscil_kernel::{host, netstat, sockopt, sockstat, OptionsInForce, SocketOptions};
use oscil_protocol::control::{
    Connection, DaemonMessage, Ended, FrameError, Hello, ReaderMessage, Welcome,
    MAX_READER_FRAME_BYTES, PROTOCOL_VERSION,
};
use oscil_protocol::ticker::Ticker;
use oscil_protocol::{HostSample, Side};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::{sleep_until, timeout, Instant};

use crate::flow::{write_forever, Flow};
use crate::{new_session_id, DaemonConfig, DataConn, Shared};

type Control = Connection<TcpStream>;

/// Serves one control connection to its end; every way it ends is logged as one line.
pub(crate) async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) {
    let ipv6 = stream.local_addr().is_ok_and(|a| a.is_ipv6());
    let mut conn = Connection::new(stream).with_max_frame_bytes(MAX_READER_FRAME_BYTES);
    let config = &shared.config;
    let hello = match timeout(config.handshake_timeout, conn.read::<ReaderMessage>()).await {
        Ok(Ok(Some(ReaderMessage::Hello(hello)))) => hello,
        Ok(Ok(Some(other))) => {
            return refuse(
                &mut conn,
                peer,
                config,
                format!("expected a hello, got {other:?}"),
            )
            .await
        }
        Ok(Ok(None)) => return eprintln!("oscil-daemon: {peer} closed before its hello"),
        Ok(Err(e)) => return refuse(&mut conn, peer, config, e.to_string()).await,
        Err(_) => {
            let reason = format!("no hello within {:?}", config.handshake_timeout);
            return refuse(&mut conn, peer, config, reason).await;
        }
    };
    let options = match check_hello(&hello, config) {
        Ok(options) => options,
        Err(reason) => return refuse(&mut conn, peer, config, reason).await,
    };
    let Ok(permit) = shared.sessions.clone().try_acquire_owned() else {
        let reason = format!(
            "daemon busy: already serving {} sessions (--max-sessions)",
            config.max_sessions
        );
        return refuse(&mut conn, peer, config, reason).await;
    };
    let in_force = match validate_options(&options, ipv6) {
        Ok(in_force) => in_force,
        Err(reason) => {
            drop(permit);
            return refuse(&mut conn, peer, config, reason).await;
        }
    };

    let session_id = new_session_id();
    let (tx, data_rx) = mpsc::channel(hello.flows as usize);
    let route = Route::register(&shared, session_id, tx);
    let welcome = DaemonMessage::Welcome(Welcome {
        version: PROTOCOL_VERSION,
        software: software(),
        session_id,
        host: host::collect(),
        options_in_force: in_force.clone(),
    });
    if let Err(e) = send(&mut conn, config, &welcome).await {
        return eprintln!("oscil-daemon: session {session_id:016x} from {peer}: welcome: {e}");
    }
    eprintln!(
        "oscil-daemon: session {session_id:016x} from {peer} ({:?}): start, {} flows every {:?} for {:?}, options: {}{}",
        // The peer's own words: quoted and cut short, so they cannot forge log lines.
        hello.software.chars().take(80).collect::<String>(),
        hello.flows,
        Duration::from_micros(hello.interval_us),
        Duration::from_micros(hello.duration_us),
        options,
        if in_force.notes.is_empty() { String::new() } else { format!(" ({})", in_force.notes.join("; ")) },
    );

    let mut session = Session {
        conn: &mut conn,
        config,
        hello: &hello,
        options: &options,
        stop,
    };
    let started = Instant::now();
    let (reason, tcpext_delta) = match session.connect_flows(data_rx).await {
        Ok(flows) => {
            drop(route);
            session.stream(flows, &shared.payload).await
        }
        Err(reason) => (reason, Default::default()),
    };
    // Free the slot before saying so, so a reader that starts its next session at once is
    // not refused as busy.
    drop(permit);
    let ended = DaemonMessage::Ended(Ended {
        reason: reason.clone(),
        tcpext_delta,
    });
    let told = send(&mut conn, config, &ended).await;
    eprintln!(
        "oscil-daemon: session {session_id:016x} from {peer}: end after {:.1} s: {reason}{}",
        started.elapsed().as_secs_f64(),
        told.map_or_else(
            |e| format!(" (could not tell the reader: {e})"),
            |_| String::new()
        ),
    );
}

/// Checks a hello against this daemon's limits and merges its options over the defaults.
fn check_hello(hello: &Hello, config: &DaemonConfig) -> Result<SocketOptions, String> {
    if hello.version != PROTOCOL_VERSION {
        return Err(format!(
            "protocol version {} not supported: this daemon speaks version {PROTOCOL_VERSION}",
            hello.version
        ));
    }
    if let Some(key) = &config.key {
        if hello.token.as_deref().map(str::as_bytes) != Some(key.as_bytes()) {
            return Err("authentication failed: wrong or missing key".into());
        }
    }
    if hello.flows == 0 || hello.flows > config.max_flows {
        return Err(format!(
            "{} flows asked: this daemon serves 1 to {} flows per session (--max-flows)",
            hello.flows, config.max_flows
        ));
    }
    let interval = Duration::from_micros(hello.interval_us);
    if interval < config.min_interval {
        return Err(format!(
            "sampling interval {interval:?} is shorter than this daemon's minimum {:?}",
            config.min_interval
        ));
    }
    if interval > config.max_session {
        return Err(format!(
            "sampling interval {interval:?} is longer than this daemon's session limit {:?}",
            config.max_session
        ));
    }
    let duration = Duration::from_micros(hello.duration_us);
    if duration > config.max_session {
        return Err(format!(
            "session of {duration:?} asked: longer than this daemon's limit {:?} (--max-session)",
            config.max_session
        ));
    }
    let (asked, default) = (&hello.options, &config.default_options);
    Ok(SocketOptions {
        notsent_lowat_bytes: asked.notsent_lowat_bytes.or(default.notsent_lowat_bytes),
        sndbuf_bytes: asked.sndbuf_bytes.or(default.sndbuf_bytes),
        rcvbuf_bytes: asked.rcvbuf_bytes.or(default.rcvbuf_bytes),
        congestion: asked.congestion.clone().or(default.congestion.clone()),
        max_pacing_rate_bps: asked.max_pacing_rate_bps.or(default.max_pacing_rate_bps),
    })
}

/// Applies the options to a scratch socket, so a refused option refuses the session before
/// any data connection exists, and reports what the kernel made of them.
pub(crate) fn validate_options(
    options: &SocketOptions,
    ipv6: bool,
) -> Result<OptionsInForce, String> {
    let domain = if ipv6 {
        socket2::Domain::IPV6
    } else {
        socket2::Domain::IPV4
    };
    let scratch = socket2::Socket::new(domain, socket2::Type::STREAM, None)
        .map_err(|e| format!("cannot open a socket to check options on: {e}"))?;
    sockopt::apply(&scratch, options).map_err(|e| e.to_string())
}

async fn refuse(conn: &mut Control, peer: SocketAddr, config: &DaemonConfig, reason: String) {
    let told = send(
        conn,
        config,
        &DaemonMessage::Refused {
            reason: reason.clone(),
        },
    )
    .await;
    eprintln!(
        "oscil-daemon: session from {peer} refused: {reason}{}",
        told.map_or_else(
            |e| format!(" (could not tell the reader: {e})"),
            |_| String::new()
        ),
    );
}

/// Writes one message, giving up after the handshake timeout so a reader that stops
/// reading its control connection cannot hold the session forever.
async fn send(
    conn: &mut Control,
    config: &DaemonConfig,
    message: &DaemonMessage,
) -> Result<(), String> {
    match timeout(config.handshake_timeout, conn.write(message)).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(_) => Err(format!(
            "reader did not take a control message within {:?}",
            config.handshake_timeout
        )),
    }
}

fn software() -> String {
    format!("oscil-daemon {}", env!("CARGO_PKG_VERSION"))
}

/// The session's entry in the data-connection routing table, removed when dropped.
struct Route<'a> {
    shared: &'a Shared,
    session_id: u64,
}

impl<'a> Route<'a> {
    fn register(shared: &'a Shared, session_id: u64, tx: mpsc::Sender<DataConn>) -> Self {
        shared
            .routes
            .lock()
            .expect("routes lock")
            .insert(session_id, tx);
        Route { shared, session_id }
    }
}

impl Drop for Route<'_> {
    fn drop(&mut self) {
        if let Ok(mut routes) = self.shared.routes.lock() {
            routes.remove(&self.session_id);
        }
    }
}

struct Session<'a> {
    conn: &'a mut Control,
    config: &'a DaemonConfig,
    hello: &'a Hello,
    options: &'a SocketOptions,
    stop: watch::Receiver<bool>,
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
    Sample(Result<DaemonMessage, String>),
    /// Ends the session for the reason given.
    End(String),
}

impl Session<'_> {
    /// Collects every data connection and the reader's start message, in any order.
    async fn connect_flows(
        &mut self,
        mut data_rx: mpsc::Receiver<DataConn>,
    ) -> Result<Vec<Flow>, String> {
        let n = self.hello.flows as usize;
        let mut slots: Vec<Option<Flow>> = (0..n).map(|_| None).collect();
        let mut connected = 0;
        let mut started = false;
        let deadline = Instant::now() + self.config.handshake_timeout;
        while !(started && connected == n) {
            let event = tokio::select! {
                m = self.conn.read::<ReaderMessage>() => SetupEvent::Control(m),
                Some(dc) = data_rx.recv() => SetupEvent::Data(dc),
                _ = sleep_until(deadline) => SetupEvent::Deadline,
                _ = self.stop.changed() => SetupEvent::Shutdown,
            };
            match event {
                SetupEvent::Control(Ok(Some(ReaderMessage::Start))) if !started => started = true,
                SetupEvent::Control(m) => return Err(control_ending(m)),
                SetupEvent::Data(DataConn { flow, stream }) => {
                    let slot = slots.get_mut(flow as usize).ok_or_else(|| {
                        format!("data connection for flow {flow}, but the session has {n} flows")
                    })?;
                    if slot.is_some() {
                        return Err(format!("flow {flow} connected twice"));
                    }
                    sockopt::apply(&stream, self.options)
                        .map_err(|e| format!("flow {flow}: {e}"))?;
                    *slot = Some(Flow::new(flow, stream));
                    connected += 1;
                }
                SetupEvent::Deadline => {
                    return Err(format!(
                        "setup timed out after {:?}: {connected} of {n} data connections{}",
                        self.config.handshake_timeout,
                        if started { "" } else { ", no start message" }
                    ))
                }
                SetupEvent::Shutdown => return Err("daemon shutting down".into()),
            }
        }
        Ok(slots.into_iter().flatten().collect())
    }

    /// Streams on every flow and samples them on absolute deadlines until the session ends;
    /// returns why it ended and the TcpExt counters that moved meanwhile.
    async fn stream(
        &mut self,
        flows: Vec<Flow>,
        payload: &Arc<[u8]>,
    ) -> (String, std::collections::BTreeMap<String, u64>) {
        let start = Instant::now();
        let tcpext_before = netstat::read().ok();
        let mut writers = JoinSet::new();
        for flow in &flows {
            let (stream, written, payload) =
                (flow.stream.clone(), flow.written.clone(), payload.clone());
            let index = flow.index;
            writers.spawn(async move { (index, write_forever(stream, written, payload).await) });
        }
        let interval = Duration::from_micros(self.hello.interval_us);
        let length = (Duration::from_micros(self.hello.duration_us) + self.config.overrun_grace)
            .min(self.config.max_session);
        let end_at = start + length;
        let (stop_sampling, mut samples) = spawn_sampler(flows.clone(), start.into_std(), interval);
        let reason = loop {
            let event = tokio::select! {
                m = self.conn.read::<ReaderMessage>() => RunEvent::Control(m),
                Some(sampled) = samples.recv() => RunEvent::Sample(sampled),
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
                RunEvent::Sample(Ok(message)) => {
                    if let Err(e) = send(self.conn, self.config, &message).await {
                        break e;
                    }
                }
                RunEvent::Sample(Err(e)) => break e,
                RunEvent::Control(m) => break control_ending(m),
                RunEvent::End(reason) => break reason,
            }
        };
        // The sampler takes a last sample of the partial interval; what it has queued still
        // goes to the reader before `Ended`, unless the control connection is what failed.
        let _ = stop_sampling.send(());
        while let Ok(Some(sampled)) = timeout(self.config.handshake_timeout, samples.recv()).await {
            let Ok(message) = sampled else { break };
            if send(self.conn, self.config, &message).await.is_err() {
                break;
            }
        }
        // Dropping the receiver wakes a thread blocked on a full channel, so it lets go of
        // its handles on the sockets.
        drop(samples);
        writers.shutdown().await;
        for flow in flows {
            flow.reset();
        }
        let delta = match (tcpext_before, netstat::read()) {
            (Some(before), Ok(after)) => netstat::delta(&before, &after, netstat::WATCHED),
            _ => Default::default(),
        };
        (reason, delta)
    }
}

/// Samples every flow and the host at `t_s`.
fn sample(flows: &[Flow], t_s: f64) -> Result<DaemonMessage, String> {
    let host = sockstat::read().map_err(|e| e.to_string())?;
    Ok(DaemonMessage::Samples {
        host: HostSample::from_sockstat(t_s, Side::Sender, &host),
        flows: flows.iter().filter_map(|f| f.sample(t_s)).collect(),
    })
}

/// Samples on its own OS thread on the shared `Ticker` until the returned sender sends or
/// is dropped, then samples the partial interval once more. A tick that wakes late covers
/// every interval it slept through in one sample; a slow control connection holds the
/// thread back (the channel is small) rather than piling samples up in memory.
fn spawn_sampler(
    flows: Vec<Flow>,
    start: std::time::Instant,
    interval: Duration,
) -> (
    std::sync::mpsc::Sender<()>,
    mpsc::Receiver<Result<DaemonMessage, String>>,
) {
    let t_s_of = move |at: std::time::Instant| at.duration_since(start).as_secs_f64();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let (tx, rx) = mpsc::channel(4);
    let report = tx.clone();
    let spawned = std::thread::Builder::new()
        .name("sampler".into())
        .spawn(move || {
            let mut ticker = Ticker::new(start, interval);
            while let Some((_, now)) = ticker.wait(&stop_rx) {
                if tx.blocking_send(sample(&flows, t_s_of(now))).is_err() {
                    return;
                }
            }
            if let Some((_, now)) = ticker.partial() {
                let _ = tx.blocking_send(sample(&flows, t_s_of(now)));
            }
        });
    if let Err(e) = spawned {
        let _ = report.try_send(Err(format!("cannot start the sampler thread: {e}")));
    }
    (stop_tx, rx)
}

/// Why a session ends on what came (or did not come) over the control connection.
fn control_ending(message: Result<Option<ReaderMessage>, FrameError>) -> String {
    match message {
        Ok(Some(ReaderMessage::Stop { reason })) => format!("reader asked to stop: {reason}"),
        Ok(Some(other)) => format!("protocol error: unexpected {other:?}"),
        Ok(None) => "reader closed the control connection".into(),
        Err(e) => format!("protocol error: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            version: PROTOCOL_VERSION,
            software: "test".into(),
            token: None,
            flows: 4,
            options: SocketOptions::default(),
            interval_us: 100_000,
            duration_us: 60_000_000,
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
        let merged = check_hello(&h, &config).unwrap();
        assert_eq!(merged.notsent_lowat_bytes, Some(16384));
        assert_eq!(merged.congestion.as_deref(), Some("reno"));
        assert_eq!(merged.sndbuf_bytes, None);
    }

    #[test]
    fn limits_refuse_with_the_flag_that_sets_them() {
        let config = DaemonConfig {
            max_flows: 2,
            key: Some(oscil_protocol::key::Key::new("00112233445566778899aabbccddeeff").unwrap()),
            ..Default::default()
        };
        let mut h = hello();
        h.token = Some("00112233445566778899aabbccddeeff".into());
        assert!(check_hello(&h, &config)
            .unwrap_err()
            .contains("--max-flows"));
        h.flows = 2;
        h.duration_us = 3_600_000_000;
        assert!(check_hello(&h, &config)
            .unwrap_err()
            .contains("--max-session"));
        h.duration_us = 1_000_000;
        h.interval_us = 10;
        assert!(check_hello(&h, &config).unwrap_err().contains("interval"));
        h.interval_us = u64::MAX;
        assert!(check_hello(&h, &config).unwrap_err().contains("interval"));
        h.interval_us = 100_000;
        h.token = None;
        assert!(check_hello(&h, &config).unwrap_err().contains("key"));
        h.version = PROTOCOL_VERSION + 1;
        assert!(check_hello(&h, &config).unwrap_err().contains("version"));
    }
}

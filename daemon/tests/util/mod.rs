//! Helpers for driving a real daemon over loopback with a raw oscil-protocol client.
#![allow(dead_code)] // each test file uses a different part of this module

pub mod process;

use std::net::SocketAddr;
use std::time::Duration;

use oscil_daemon::DaemonConfig;
use oscil_model::files::rows::SenderSample;
use oscil_model::socket::SocketOptions;
use oscil_protocol::auth::ReaderHandshake;
use oscil_protocol::control::{
    open_data_connection, Connection, DaemonMessage, Hello, ReaderMessage, Welcome,
    PROTOCOL_VERSION,
};
use oscil_protocol::key::Key;
use oscil_protocol::proof::{DataKey, Nonce};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::timeout;

/// A daemon serving on an ephemeral loopback port; shut down on drop.
pub struct Daemon {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl Daemon {
    pub async fn start(config: DaemonConfig) -> Self {
        Self::start_on("127.0.0.1:0", config).await
    }

    pub async fn start_on(addr: &str, config: DaemonConfig) -> Self {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(oscil_daemon::run(listener, config, async move {
            let _ = rx.await;
        }));
        Daemon {
            addr,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// Stops the daemon and waits for it to finish.
    pub async fn shutdown(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

pub fn hello(flows: u32, options: SocketOptions, interval: Duration, duration: Duration) -> Hello {
    Hello {
        version: PROTOCOL_VERSION,
        software: "daemon-test".into(),
        nonce: Nonce::random().unwrap(),
        flows,
        options,
        interval_us: interval.as_micros() as u64,
        duration_us: duration.as_micros() as u64,
        write_size_bytes: None,
        write_mode: Default::default(),
        marker_every_us: None,
        probe: false,
        trace: false,
        groups: Vec::new(),
    }
}

/// The reader's end of a control connection.
pub struct Client {
    pub addr: SocketAddr,
    pub conn: Connection<TcpStream>,
    /// The key this client proves, if any.
    pub key: Option<Key>,
    /// Set by a handshake that got through the challenge.
    pub data_key: Option<DataKey>,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Self {
        Self::connect_with_key(addr, None).await
    }

    pub async fn connect_with_key(addr: SocketAddr, key: Option<Key>) -> Self {
        Client {
            addr,
            conn: Connection::new(TcpStream::connect(addr).await.unwrap()),
            key,
            data_key: None,
        }
    }

    pub async fn send(&mut self, message: &ReaderMessage) {
        self.conn.write(message).await.unwrap();
    }

    /// The next daemon message; panics if none comes within 5 s.
    pub async fn next(&mut self) -> Option<DaemonMessage> {
        timeout(Duration::from_secs(5), self.conn.read())
            .await
            .expect("daemon said nothing for 5 s")
            .unwrap()
    }

    /// Runs the handshake with `hello`: the daemon's answer to the proof (a welcome or a
    /// refusal), or its answer to the hello when that is not a challenge this client accepts.
    pub async fn hello(&mut self, hello: Hello) -> DaemonMessage {
        let (handshake, first) = ReaderHandshake::new(self.key.clone(), hello);
        self.send(&first).await;
        let challenge = self.next().await.expect("an answer to the hello");
        if !matches!(challenge, DaemonMessage::Challenge(_)) {
            return challenge;
        }
        let (proof, data_key) = handshake
            .on_challenge(challenge)
            .expect("the daemon proves the key");
        self.data_key = Some(data_key);
        self.send(&proof).await;
        self.next().await.expect("an answer to the proof")
    }

    /// Says hello, opens the data connections and starts; returns the welcome and the flows.
    pub async fn start_session(&mut self, hello: Hello) -> (Welcome, Vec<TcpStream>) {
        self.start_session_with(hello, |_| {}).await
    }

    /// As `start_session`, each data socket set up by `configure` before it connects.
    pub async fn start_session_with(
        &mut self,
        hello: Hello,
        configure: impl Fn(&tokio::net::TcpSocket),
    ) -> (Welcome, Vec<TcpStream>) {
        let opened = self.open_flows(hello, configure).await;
        self.send(&ReaderMessage::Start).await;
        opened
    }

    /// Says hello and opens the data connections, up to the daemon's `Ready`: the point at
    /// which a reader may exchange clock probes before it starts.
    pub async fn open_flows(
        &mut self,
        hello: Hello,
        configure: impl Fn(&tokio::net::TcpSocket),
    ) -> (Welcome, Vec<TcpStream>) {
        let flows = hello.flows;
        let welcome = match self.hello(hello).await {
            DaemonMessage::Welcome(w) => w,
            other => panic!("expected a welcome, got {other:?}"),
        };
        let mut streams = Vec::new();
        for flow in 0..flows {
            let socket = match self.addr {
                SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
                SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
            }
            .unwrap();
            configure(&socket);
            let mut s = socket.connect(self.addr).await.unwrap();
            let key = self.data_key.as_ref().unwrap();
            open_data_connection(&mut s, key, welcome.session_id, flow)
                .await
                .unwrap();
            streams.push(s);
        }
        match self.next().await {
            Some(DaemonMessage::Ready) => {}
            other => panic!("expected ready, got {other:?}"),
        }
        (welcome, streams)
    }

    /// Collects sample messages for `how_long`: (t_s, flows) per message.
    pub async fn samples_for(&mut self, how_long: Duration) -> Vec<(f64, Vec<SenderSample>)> {
        let mut got = Vec::new();
        let until = tokio::time::Instant::now() + how_long;
        while tokio::time::Instant::now() < until {
            match self.next().await {
                Some(DaemonMessage::Samples { host, flows }) => got.push((host.t_s, flows)),
                other => panic!("expected samples, got {other:?}"),
            }
        }
        got
    }

    /// Sends stop and returns the daemon's `Ended` reason and TcpExt delta, skipping samples
    /// and markers.
    pub async fn stop(&mut self) -> oscil_protocol::control::Ended {
        self.send(&ReaderMessage::Stop {
            reason: "test done".into(),
            intervals: None,
        })
        .await;
        loop {
            match self.next().await {
                Some(DaemonMessage::Samples { .. } | DaemonMessage::Markers { .. }) => continue,
                Some(DaemonMessage::Ended(e)) => return e,
                other => panic!("expected ended, got {other:?}"),
            }
        }
    }
}

/// What the daemon said it is busy with; panics on any other answer.
pub fn busy_detail(answer: DaemonMessage) -> String {
    match answer {
        DaemonMessage::Busy {
            detail: Some(detail),
        } => detail,
        other => panic!("expected busy, got {other:?}"),
    }
}

/// Captures a genuine handshake with `key`, then replays its hello and proof on a new
/// connection: returns what the daemon answers the replayed proof.
pub async fn replay_handshake(addr: SocketAddr, key: &Key, hello: Hello) -> DaemonMessage {
    let mut genuine = Client::connect(addr).await;
    let (handshake, captured_hello) = ReaderHandshake::new(Some(key.clone()), hello);
    genuine.send(&captured_hello).await;
    let challenge = genuine.next().await.expect("a challenge");
    let (captured_proof, _) = handshake
        .on_challenge(challenge)
        .expect("the daemon proves the key");
    genuine.send(&captured_proof).await;
    let welcome = genuine.next().await;
    assert!(
        matches!(welcome, Some(DaemonMessage::Welcome(_))),
        "{welcome:?}"
    );
    let mut replay = Client::connect(addr).await;
    replay.send(&captured_hello).await;
    let challenge = replay.next().await;
    assert!(
        matches!(challenge, Some(DaemonMessage::Challenge(_))),
        "{challenge:?}"
    );
    replay.send(&captured_proof).await;
    replay
        .next()
        .await
        .expect("an answer to the replayed proof")
}

/// A stranger's hello, then a proof it made up: the daemon's answer, and how long after the
/// proof it came.
pub async fn forged_proof(addr: SocketAddr, hello: Hello) -> (DaemonMessage, Duration) {
    let mut stranger = Client::connect(addr).await;
    stranger.send(&ReaderMessage::Hello(hello)).await;
    let challenge = stranger.next().await;
    assert!(
        matches!(challenge, Some(DaemonMessage::Challenge(_))),
        "{challenge:?}"
    );
    let forged = ReaderMessage::Proof {
        mac: Some(oscil_protocol::proof::HexBytes([7; 32])),
    };
    stranger.send(&forged).await;
    let sent = std::time::Instant::now();
    let answer = stranger
        .next()
        .await
        .expect("an answer to the forged proof");
    (answer, sent.elapsed())
}

/// Counts what a data connection receives into `total`, until it closes.
pub fn count_into(mut stream: TcpStream, total: std::sync::Arc<std::sync::atomic::AtomicU64>) {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 256 << 10];
        while let Ok(n @ 1..) = stream.read(&mut buf).await {
            total.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        }
    });
}

/// A connection to `addr` from the loopback address `source` (127.0.0.0/8 is all loopback),
/// so a test can be several peers at once.
pub async fn connect_from(
    source: std::net::Ipv4Addr,
    addr: SocketAddr,
) -> std::io::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((source, 0)))?;
    socket.connect(addr).await
}

/// Reads and discards everything from a data connection until it closes.
pub fn drain(mut stream: TcpStream) -> JoinHandle<u64> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 256 << 10];
        let mut total = 0u64;
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
            total += n as u64;
        }
        total
    })
}

//! The idle probe's connection against a real daemon on loopback: asked for in the hello,
//! it is awaited before `Ready`, echoes what it is sent and is no flow; not asked for, the
//! same connection ends the setup.

mod util;

use std::time::Duration;

use oscil_daemon::DaemonConfig;
use oscil_model::files::probe::PROBE_FLOW;
use oscil_model::socket::SocketOptions;
use oscil_protocol::control::{open_data_connection, DaemonMessage, ReaderMessage, Welcome};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;
use util::{drain, hello, Client, Daemon};

const INTERVAL: Duration = Duration::from_millis(50);
const LONG: Duration = Duration::from_secs(30);

/// A data connection of the client's session for `flow`, past the daemon's challenge.
async fn data_connection(client: &Client, session: &Welcome, flow: u32) -> TcpStream {
    let mut stream = TcpStream::connect(client.addr).await.unwrap();
    let key = client.data_key.as_ref().unwrap();
    open_data_connection(&mut stream, key, session.session_id, flow)
        .await
        .unwrap();
    stream
}

async fn welcome(client: &mut Client, probe: bool) -> Welcome {
    let mut asked = hello(1, SocketOptions::default(), INTERVAL, LONG);
    asked.probe = probe;
    let welcome = match client.hello(asked).await {
        DaemonMessage::Welcome(w) => w,
        other => panic!("expected a welcome, got {other:?}"),
    };
    // It says it echoes the probe only to a hello that asked.
    assert_eq!(welcome.probe, probe);
    welcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asked_probe_is_awaited_echoed_and_never_sampled() {
    let daemon = Daemon::start(DaemonConfig::default()).await;
    let mut client = Client::connect(daemon.addr).await;
    let session = welcome(&mut client, true).await;
    let flow = drain(data_connection(&client, &session, 0).await);
    // Every flow is in, but not the probe: no `Ready` yet.
    let early = timeout(
        Duration::from_millis(300),
        client.conn.read::<DaemonMessage>(),
    )
    .await;
    assert!(early.is_err(), "the daemon said {early:?} before the probe");
    let mut probe = data_connection(&client, &session, PROBE_FLOW).await;
    assert!(matches!(client.next().await, Some(DaemonMessage::Ready)));
    client.send(&ReaderMessage::Start).await;
    for seq in 0u64..5 {
        probe.write_all(&seq.to_be_bytes()).await.unwrap();
        let mut echo = [0u8; 8];
        timeout(Duration::from_secs(2), probe.read_exact(&mut echo))
            .await
            .expect("an echo within 2 s")
            .unwrap();
        assert_eq!(u64::from_be_bytes(echo), seq);
    }
    for (_, flows) in client.samples_for(Duration::from_millis(300)).await {
        let ids: Vec<u32> = flows.iter().map(|f| f.flow).collect();
        assert_eq!(ids, vec![0], "the probe is no flow");
    }
    let ended = client.stop().await;
    assert!(
        ended.reason.contains("reader asked to stop"),
        "{}",
        ended.reason
    );
    // The echo ends with the session: the daemon closes its end.
    let mut rest = Vec::new();
    let closed = timeout(Duration::from_secs(5), probe.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the probe connection stayed open");
    assert!(flow.await.unwrap() > 0);
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_the_hello_did_not_ask_for_ends_the_setup() {
    let daemon = Daemon::start(DaemonConfig::default()).await;
    let mut client = Client::connect(daemon.addr).await;
    let session = welcome(&mut client, false).await;
    let _probe = data_connection(&client, &session, PROBE_FLOW).await;
    match client.next().await {
        Some(DaemonMessage::Ended(ended)) => {
            assert!(ended.reason.contains("4294967295"), "{}", ended.reason)
        }
        other => panic!("expected the session's end, got {other:?}"),
    }
    daemon.shutdown().await;
}

//! Authentication and the limits around it, against a daemon with a key on loopback.

mod util;

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use oscil_daemon::{DaemonConfig, GENERIC_REFUSAL};
use oscil_model::socket::SocketOptions;
use oscil_protocol::control::{
    open_data_connection, Connection, DaemonMessage, DataChallenge, DataHello, ReaderMessage,
};
use oscil_protocol::key::{generate_key, Key};
use oscil_protocol::proof::HexBytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use util::{connect_from, hello, Client, Daemon};

const INTERVAL: Duration = Duration::from_millis(50);
const LONG: Duration = Duration::from_secs(30);

fn key() -> Key {
    Key::new(&generate_key().unwrap()).unwrap()
}

fn keyed(key: &Key) -> DaemonConfig {
    DaemonConfig {
        key: Some(key.clone()),
        ..Default::default()
    }
}

fn one_flow() -> oscil_protocol::control::Hello {
    hello(1, SocketOptions::default(), INTERVAL, LONG)
}

fn refusal(message: Option<DaemonMessage>) -> String {
    match message {
        Some(DaemonMessage::Refused { reason }) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_right_key_gets_a_session_and_host_facts() {
    let key = key();
    let daemon = Daemon::start(keyed(&key)).await;
    let mut client = Client::connect_with_key(daemon.addr, Some(key)).await;
    let (welcome, streams) = client.start_session(one_flow()).await;
    assert!(!welcome.host.kernel_release.is_empty());
    let _reader = streams.into_iter().map(util::drain).count();
    assert!(!client.samples_for(INTERVAL * 3).await.is_empty());
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_proof_is_refused_generically_and_ever_more_slowly() {
    let daemon = Daemon::start(keyed(&key())).await;
    let mut waits = Vec::new();
    for _ in 0..3 {
        let (answer, waited) = util::forged_proof(daemon.addr, one_flow()).await;
        assert_eq!(refusal(Some(answer)), GENERIC_REFUSAL);
        waits.push(waited);
    }
    // 200 ms after the first failure from this address, 400 after the second, 800 after the third.
    assert!(waits[0] >= Duration::from_millis(190), "{waits:?}");
    assert!(waits[2] >= Duration::from_millis(790), "{waits:?}");
    // A reader that skips the proof gets the same word, and no host facts.
    let mut rude = Client::connect(daemon.addr).await;
    rude.send(&ReaderMessage::Hello(one_flow())).await;
    let _challenge = rude.next().await;
    rude.send(&ReaderMessage::Start).await;
    assert_eq!(refusal(rude.next().await), GENERIC_REFUSAL);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_handshake_is_refused() {
    let key = key();
    let daemon = Daemon::start(keyed(&key)).await;
    let answer = util::replay_handshake(daemon.addr, &key, one_flow()).await;
    assert_eq!(refusal(Some(answer)), GENERIC_REFUSAL);
}

/// A data connection's opening done by hand, as an eavesdropper on the path sees it: the
/// hello sent, the daemon's challenge, the proof sent.
async fn open_by_hand(
    addr: std::net::SocketAddr,
    hello: &DataHello,
    proof_for: impl Fn(&DataChallenge) -> [u8; 32],
) -> (tokio::net::TcpStream, [u8; 32]) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(&hello.encode()).await.unwrap();
    let mut bytes = [0u8; DataChallenge::LEN];
    stream.read_exact(&mut bytes).await.unwrap();
    let challenge = DataChallenge::decode(&bytes).expect("a challenge");
    let proof = proof_for(&challenge);
    stream.write_all(&proof).await.unwrap();
    (stream, proof)
}

/// Everything a replayed connection receives until the daemon closes it.
async fn all_it_gets(mut stream: tokio::net::TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut got)).await;
    assert!(read.is_ok(), "the daemon closes a replayed data connection");
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_data_hello_neither_takes_a_flow_nor_ends_the_session() {
    let key = key();
    let daemon = Daemon::start(keyed(&key)).await;
    let mut client = Client::connect_with_key(daemon.addr, Some(key)).await;
    let two_flows = hello(2, SocketOptions::default(), INTERVAL, LONG);
    let DaemonMessage::Welcome(welcome) = client.hello(two_flows).await else {
        panic!("no welcome");
    };
    let data_key = client.data_key.clone().unwrap();
    let session = welcome.session_id;
    let signed = DataHello::signed(&data_key, session, 0);
    // A replay of flow 0's hello from the reader's own address before the reader's own
    // connection, answering its challenge with made-up bytes...
    let (early, _) = open_by_hand(daemon.addr, &signed, |_| [7; 32]).await;
    // ...then the reader's flow 0, seen on the path, hello and proof...
    let (flow0, seen_proof) = open_by_hand(daemon.addr, &signed, |c| {
        data_key.proof(&session, 0, &c.nonce).0
    })
    .await;
    // ...and both replayed on a new connection: the daemon's fresh challenge does not take
    // the proof it saw.
    let (late, _) = open_by_hand(daemon.addr, &signed, |_| seen_proof).await;
    let mut flow1 = tokio::net::TcpStream::connect(daemon.addr).await.unwrap();
    open_data_connection(&mut flow1, &data_key, session, 1)
        .await
        .unwrap();
    assert!(matches!(client.next().await, Some(DaemonMessage::Ready)));
    client.send(&ReaderMessage::Start).await;
    let readers = [util::drain(flow0), util::drain(flow1)];
    let samples = client.samples_for(Duration::from_millis(500)).await;
    assert!(samples.len() >= 5, "{} samples", samples.len());
    for replay in [early, late] {
        assert_eq!(
            all_it_gets(replay).await,
            b"",
            "the replayer gets no payload"
        );
    }
    let ended = client.stop().await;
    assert!(
        ended.reason.contains("reader asked to stop"),
        "{}",
        ended.reason
    );
    for reader in readers {
        assert!(reader.await.unwrap() > 0, "every genuine flow carried data");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_connections_need_the_session_address_and_tag() {
    let key = key();
    let daemon = Daemon::start(DaemonConfig {
        handshake_timeout: Duration::from_millis(800),
        ..keyed(&key)
    })
    .await;
    let mut client = Client::connect_with_key(daemon.addr, Some(key)).await;
    let DaemonMessage::Welcome(welcome) = client.hello(one_flow()).await else {
        panic!("no welcome");
    };
    let data_key = client.data_key.clone().unwrap();
    // Signed, but from another address; then from the right address with a wrong tag.
    let signed = DataHello::signed(&data_key, welcome.session_id, 0);
    let mut elsewhere = connect_from(Ipv4Addr::new(127, 0, 0, 2), daemon.addr)
        .await
        .unwrap();
    elsewhere.write_all(&signed.encode()).await.unwrap();
    let mut forged = tokio::net::TcpStream::connect(daemon.addr).await.unwrap();
    let unsigned = DataHello {
        mac: HexBytes([0; 32]),
        ..signed
    };
    forged.write_all(&unsigned.encode()).await.unwrap();
    // The daemon never says ready: setup times out.
    match client.next().await {
        Some(DaemonMessage::Ended(e)) => {
            assert!(e.reason.contains("0 of 1 data connections"), "{}", e.reason)
        }
        other => panic!("expected ended, got {other:?}"),
    }
    for mut refused in [elsewhere, forged] {
        let mut buf = [0u8; 1];
        assert!(matches!(refused.read(&mut buf).await, Ok(0) | Err(_)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_connections_are_capped_per_source() {
    let daemon = Daemon::start(DaemonConfig {
        max_startups_per_source: 4,
        ..keyed(&key())
    })
    .await;
    let crowd = Ipv4Addr::new(127, 0, 0, 3);
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(connect_from(crowd, daemon.addr).await.unwrap());
    }
    // Let the daemon accept the four before the fifth arrives.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut fifth = connect_from(crowd, daemon.addr).await.unwrap();
    let mut told = Vec::new();
    let closed =
        tokio::time::timeout(Duration::from_millis(500), fifth.read_to_end(&mut told)).await;
    assert!(closed.is_ok(), "the fifth is closed at once");
    assert_eq!(
        told, b"\0\0\0\x0f{\"type\":\"busy\"}",
        "and told busy, no more"
    );
    // Another address still gets a challenge.
    let other = connect_from(Ipv4Addr::new(127, 0, 0, 4), daemon.addr)
        .await
        .unwrap();
    let mut stranger = Client {
        addr: daemon.addr,
        conn: Connection::new(other),
        key: None,
        data_key: None,
    };
    stranger.send(&ReaderMessage::Hello(one_flow())).await;
    assert!(matches!(
        stranger.next().await,
        Some(DaemonMessage::Challenge(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_frame_over_four_kib_is_refused() {
    let daemon = Daemon::start(keyed(&key())).await;
    let mut big = one_flow();
    big.software = "x".repeat(5 << 10);
    let mut client = Client::connect(daemon.addr).await;
    client.send(&ReaderMessage::Hello(big)).await;
    assert_eq!(refusal(client.next().await), GENERIC_REFUSAL);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_are_capped_across_sessions() {
    let daemon = Daemon::start(DaemonConfig {
        max_total_flows: 4,
        ..Default::default()
    })
    .await;
    let mut first = Client::connect(daemon.addr).await;
    let (_, streams) = first
        .start_session(hello(3, SocketOptions::default(), INTERVAL, LONG))
        .await;
    let _readers = streams.into_iter().map(util::drain).count();
    let mut second = Client::connect(daemon.addr).await;
    let answer = second
        .hello(hello(2, SocketOptions::default(), INTERVAL, LONG))
        .await;
    let reason = util::busy_detail(answer);
    assert!(
        reason.contains("--max-total-flows") && reason.contains("1 of 4 free"),
        "{reason}"
    );
    // More flows than the daemon serves in all is no matter of waiting: refused.
    let mut third = Client::connect(daemon.addr).await;
    let answer = third
        .hello(hello(5, SocketOptions::default(), INTERVAL, LONG))
        .await;
    let reason = refusal(Some(answer));
    assert!(reason.contains("1 to 4 flows"), "{reason}");
    first.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_rate_paces_the_session_as_a_whole() {
    let rate_bps = 80_000_000u64;
    let daemon = Daemon::start(DaemonConfig {
        max_rate_bps: Some(rate_bps),
        ..Default::default()
    })
    .await;
    let mut client = Client::connect(daemon.addr).await;
    let (welcome, streams) = client
        .start_session(hello(2, SocketOptions::default(), INTERVAL, LONG))
        .await;
    assert_eq!(
        welcome.options_in_force.max_pacing_rate_bps,
        Some(rate_bps / 2)
    );
    let total = Arc::new(AtomicU64::new(0));
    for stream in streams {
        util::count_into(stream, total.clone());
    }
    let samples = tokio::spawn(async move {
        client.samples_for(Duration::from_millis(2500)).await;
        client
    });
    // After the first second (slow start, the queues filling), one second of delivery.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let before = total.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let delivered_bps = (total.load(Ordering::Relaxed) - before) * 8;
    assert!(
        delivered_bps <= rate_bps * 5 / 4 && delivered_bps >= rate_bps / 2,
        "{delivered_bps} bit/s delivered under --max-rate {rate_bps}"
    );
    samples.await.unwrap().stop().await;
}

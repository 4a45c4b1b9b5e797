//! Whole sessions against a real daemon on loopback, driven by a raw protocol client.

mod util;

use std::time::Duration;

use oscil_daemon::DaemonConfig;
use oscil_model::socket::SocketOptions;
use oscil_protocol::control::{DaemonMessage, ReaderMessage};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use util::{drain, hello, Client, Daemon};

const INTERVAL: Duration = Duration::from_millis(50);
const LONG: Duration = Duration::from_secs(30);

fn refusal(message: DaemonMessage) -> String {
    match message {
        DaemonMessage::Refused { reason } => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_congestion_control_is_refused_by_name() {
    let daemon = Daemon::start(DaemonConfig::default()).await;
    let mut client = Client::connect(daemon.addr).await;
    let options = SocketOptions {
        congestion: Some("nosuchcc".into()),
        ..Default::default()
    };
    let reason = refusal(client.hello(hello(1, options, INTERVAL, LONG)).await);
    assert!(reason.contains("\"nosuchcc\""), "{reason}");
    assert!(reason.contains("congestion control"), "{reason}");
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn welcome_reports_options_read_back_and_host_facts() {
    let daemon = Daemon::start(DaemonConfig {
        default_options: SocketOptions {
            congestion: Some("reno".into()),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let mut client = Client::connect(daemon.addr).await;
    let options = SocketOptions {
        notsent_lowat_bytes: Some(16384),
        ..Default::default()
    };
    let DaemonMessage::Welcome(w) = client.hello(hello(1, options, INTERVAL, LONG)).await else {
        panic!("no welcome");
    };
    assert_eq!(w.options_in_force.notsent_lowat_bytes, 16384);
    assert_eq!(
        w.options_in_force.congestion, "reno",
        "daemon default applies"
    );
    assert!(!w.host.kernel_release.is_empty());
    assert!(w.host.sysctls.contains_key("net.ipv4.tcp_wmem"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_arrive_on_the_interval_until_stop() {
    let daemon = Daemon::start(DaemonConfig::default()).await;
    let mut client = Client::connect(daemon.addr).await;
    let (_, streams) = client
        .start_session(hello(2, SocketOptions::default(), INTERVAL, LONG))
        .await;
    let readers: Vec<_> = streams.into_iter().map(drain).collect();
    let samples = client.samples_for(Duration::from_millis(700)).await;
    assert!(samples.len() >= 8, "{} samples in 700 ms", samples.len());
    let period = INTERVAL.as_secs_f64();
    for pair in samples.windows(2) {
        assert!(pair[1].0 > pair[0].0, "time goes forward");
    }
    // Absolute deadlines: samples sit just after multiples of the interval and do not
    // drift. A busy machine may wake one late, so hold most of them, not all, to 10 ms.
    let on_time = samples
        .iter()
        .filter(|(t_s, _)| (t_s - (t_s / period).round() * period).abs() < 0.01)
        .count();
    let times: Vec<f64> = samples.iter().map(|(t, _)| *t).collect();
    assert!(
        on_time * 5 >= samples.len() * 4,
        "off their deadlines: {times:?}"
    );
    for (_, flows) in &samples {
        let mut ids: Vec<u32> = flows.iter().map(|f| f.flow).collect();
        ids.sort();
        assert_eq!(ids, vec![0, 1]);
    }
    let sent: u64 = samples.iter().flat_map(|(_, f)| f).map(|f| f.bytes).sum();
    assert!(sent > 1 << 20, "only {sent} bytes sent to a reading client");
    let ended = client.stop().await;
    assert!(
        ended.reason.contains("reader asked to stop: test done"),
        "{}",
        ended.reason
    );
    for name in oscil_kernel::host::netstat::WATCHED {
        assert!(ended.tcpext_delta.contains_key(*name), "{name} missing");
    }
    for r in readers {
        assert!(r.await.unwrap() > 0);
    }
}

/// The largest `notsent_bytes` seen after the first samples, and the send MSS.
async fn notsent_of_a_stalled_reader(daemon: &Daemon, options: SocketOptions) -> (u32, u32) {
    let mut client = Client::connect(daemon.addr).await;
    let (_, _streams_never_read) = client
        .start_session(hello(1, options, INTERVAL, LONG))
        .await;
    let samples = client.samples_for(Duration::from_millis(600)).await;
    client.stop().await;
    let flows = samples.iter().flat_map(|(_, f)| f);
    let max = flows.clone().filter_map(|f| f.notsent_bytes).max().unwrap();
    let mss = flows.map(|f| f.snd_mss_bytes).max().unwrap();
    (max, mss)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notsent_lowat_bounds_the_unsent_queue_of_a_stalled_reader() {
    let daemon = Daemon::start(DaemonConfig::default()).await;
    let lowat = 16384;
    let options = SocketOptions {
        notsent_lowat_bytes: Some(lowat),
        ..Default::default()
    };
    let (with_lowat, mss) = notsent_of_a_stalled_reader(&daemon, options).await;
    // The kernel stops accepting writes once notsent reaches the threshold, but the write
    // that crosses it may add up to one segment (one MSS, ~47 KB on loopback here).
    assert!(
        with_lowat <= lowat + mss,
        "notsent {with_lowat} with lowat {lowat}, mss {mss}"
    );
    assert!(with_lowat > 0, "the queue should hold something");

    let sysctl = oscil_kernel::host::read_typed(oscil_model::sysctl::Sysctl::TcpNotsentLowat)
        .and_then(|v| v.integer())
        .unwrap_or(0);
    if sysctl < 4 << 20 {
        eprintln!("skipped the default half: net.ipv4.tcp_notsent_lowat is {sysctl} here");
        return;
    }
    let (default, _) = notsent_of_a_stalled_reader(&daemon, SocketOptions::default()).await;
    assert!(
        u64::from(default) > 4 * u64::from(lowat + mss),
        "notsent {default} without lowat should dwarf {with_lowat} with it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frame_ends_only_its_own_session() {
    let daemon = Daemon::start(DaemonConfig::default()).await;
    let mut good = Client::connect(daemon.addr).await;
    let (_, good_streams) = good
        .start_session(hello(1, SocketOptions::default(), INTERVAL, LONG))
        .await;
    let _reader = good_streams.into_iter().map(drain).count();
    let mut bad = Client::connect(daemon.addr).await;
    let (_, _bad_streams) = bad
        .start_session(hello(1, SocketOptions::default(), INTERVAL, LONG))
        .await;

    let mut garbage = 5u32.to_be_bytes().to_vec();
    garbage.extend_from_slice(b"{oops");
    bad.conn.get_ref().writable().await.unwrap();
    assert_eq!(
        bad.conn.get_ref().try_write(&garbage).unwrap(),
        garbage.len()
    );
    let reason = loop {
        match bad.next().await {
            Some(DaemonMessage::Samples { .. }) => continue,
            Some(DaemonMessage::Ended(e)) => break e.reason,
            other => panic!("expected ended, got {other:?}"),
        }
    };
    assert!(reason.contains("not a valid message"), "{reason}");

    // The other session still streams, and a new one is welcome.
    let later = good.samples_for(Duration::from_millis(200)).await;
    assert!(!later.is_empty());
    let mut next = Client::connect(daemon.addr).await;
    let answer = next
        .hello(hello(1, SocketOptions::default(), INTERVAL, LONG))
        .await;
    assert!(matches!(answer, DaemonMessage::Welcome(_)), "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_hello_is_refused_with_the_limit() {
    let daemon = Daemon::start(DaemonConfig::default()).await;
    let mut raw = TcpStream::connect(daemon.addr).await.unwrap();
    raw.write_all(&(256u32 << 20).to_be_bytes()).await.unwrap();
    let mut client = util::Client {
        addr: daemon.addr,
        conn: oscil_protocol::control::Connection::new(raw),
        key: None,
        data_key: None,
    };
    // Before authentication a peer learns nothing more than that.
    let reason = refusal(client.next().await.unwrap());
    assert_eq!(reason, oscil_daemon::GENERIC_REFUSAL);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guards_refuse_busy_and_too_many_flows_and_time_out_silence() {
    let daemon = Daemon::start(DaemonConfig {
        max_sessions: 1,
        max_flows: 4,
        handshake_timeout: Duration::from_millis(300),
        preauth_timeout: Duration::from_millis(300),
        ..Default::default()
    })
    .await;
    let mut too_many = Client::connect(daemon.addr).await;
    let reason = refusal(
        too_many
            .hello(hello(5, SocketOptions::default(), INTERVAL, LONG))
            .await,
    );
    assert!(reason.contains("--max-flows"), "{reason}");

    // Welcomed, but never opens its data connections: setup times out.
    let mut first = Client::connect(daemon.addr).await;
    let welcome = first
        .hello(hello(2, SocketOptions::default(), INTERVAL, LONG))
        .await;
    assert!(matches!(welcome, DaemonMessage::Welcome(_)));
    let mut second = Client::connect(daemon.addr).await;
    let answer = second
        .hello(hello(1, SocketOptions::default(), INTERVAL, LONG))
        .await;
    let reason = util::busy_detail(answer);
    assert!(reason.contains("--max-sessions"), "{reason}");
    match first.next().await {
        Some(DaemonMessage::Ended(e)) => {
            assert!(e.reason.contains("0 of 2 data connections"), "{}", e.reason)
        }
        other => panic!("expected ended, got {other:?}"),
    }

    // A connection that says nothing is closed after the pre-authentication deadline.
    let mut silent = TcpStream::connect(daemon.addr).await.unwrap();
    let mut buf = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(2), silent.read(&mut buf))
        .await
        .expect("closed within the timeout");
    assert!(matches!(n, Ok(0) | Err(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_length_limit_and_shutdown_end_sessions_with_a_reason() {
    let daemon = Daemon::start(DaemonConfig {
        max_session: Duration::from_millis(400),
        overrun_grace: Duration::ZERO,
        ..Default::default()
    })
    .await;
    let mut timed = Client::connect(daemon.addr).await;
    let (_, _streams) = timed
        .start_session(hello(
            1,
            SocketOptions::default(),
            INTERVAL,
            Duration::from_millis(300),
        ))
        .await;
    let reason = loop {
        match timed.next().await {
            Some(DaemonMessage::Samples { .. }) => continue,
            Some(DaemonMessage::Ended(e)) => break e.reason,
            other => panic!("expected ended, got {other:?}"),
        }
    };
    assert!(reason.contains("session length limit"), "{reason}");

    let mut running = Client::connect(daemon.addr).await;
    let (_, _streams) = running
        .start_session(hello(
            1,
            SocketOptions::default(),
            INTERVAL,
            Duration::from_millis(300),
        ))
        .await;
    running.samples_for(Duration::from_millis(100)).await;
    daemon.shutdown().await;
    let reason = loop {
        match running.next().await {
            Some(DaemonMessage::Samples { .. }) => continue,
            Some(DaemonMessage::Ended(e)) => break e.reason,
            other => panic!("expected ended, got {other:?}"),
        }
    };
    assert!(reason.contains("shutting down"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_ipv6() {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!("skipped: no IPv6 loopback here");
        return;
    }
    let daemon = Daemon::start_on("[::1]:0", DaemonConfig::default()).await;
    let mut client = Client::connect(daemon.addr).await;
    let (_, streams) = client
        .start_session(hello(1, SocketOptions::default(), INTERVAL, LONG))
        .await;
    let _reader = streams.into_iter().map(drain).count();
    assert!(!client.samples_for(INTERVAL * 3).await.is_empty());
    client.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_before_start_ends_setup() {
    let daemon = Daemon::start(DaemonConfig::default()).await;
    let mut client = Client::connect(daemon.addr).await;
    let _ = client
        .hello(hello(1, SocketOptions::default(), INTERVAL, LONG))
        .await;
    client
        .send(&ReaderMessage::Stop {
            reason: "changed my mind".into(),
            intervals: None,
        })
        .await;
    match client.next().await {
        Some(DaemonMessage::Ended(e)) => assert!(e.reason.contains("changed my mind")),
        other => panic!("expected ended, got {other:?}"),
    }
}

/// The zero-copy mode sends the same bytes as the copying one: the payload's pattern, from
/// its start, on every flow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zerocopy_sessions_stream_the_payload_pattern() {
    let daemon = Daemon::start(DaemonConfig::default()).await;
    let mut client = Client::connect(daemon.addr).await;
    let options = SocketOptions {
        zerocopy: true,
        ..Default::default()
    };
    let (_, mut streams) = client
        .start_session(hello(2, options, INTERVAL, LONG))
        .await;
    let pattern = b"oscil-daemon payload ";
    // Borrowed, not consumed: a stream dropped with unread data resets its connection, and
    // the daemon would end the session before the next flow is read.
    for stream in &mut streams {
        let mut first = vec![0u8; 3 * pattern.len()];
        stream.read_exact(&mut first).await.unwrap();
        assert_eq!(first, pattern.repeat(3));
    }
    client.stop().await;
    daemon.shutdown().await;
}

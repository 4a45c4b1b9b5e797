//! Groups of flows on the wire: a version 5 hello's groups each get their own options,
//! said per group in the welcome and per row in the samples; a version 4 hello (a reader
//! from before groups) is still served, in version 4's words.

mod util;

use std::time::Duration;

use oscil_daemon::DaemonConfig;
use oscil_model::files::rows::SenderSample;
use oscil_model::group::{FlowGroup, Reading};
use oscil_model::pattern::Fraction;
use oscil_model::socket::{SocketOptions, WriteMode};
use oscil_protocol::control::{OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION};
use util::{drain, hello, Client, Daemon};

const INTERVAL: Duration = Duration::from_millis(50);
const LONG: Duration = Duration::from_secs(30);

fn group(flows: u32, notsent_lowat_bytes: Option<u32>) -> FlowGroup {
    FlowGroup {
        flows,
        sender: SocketOptions {
            notsent_lowat_bytes,
            ..SocketOptions::default()
        },
        write_size_bytes: None,
        write_mode: WriteMode::default(),
        pattern: Reading::default(),
        fraction: Fraction::CLOUDFLARE,
        slow_rate_bps: None,
    }
}

/// Every row of the samples.
fn rows(samples: Vec<(f64, Vec<SenderSample>)>) -> Vec<SenderSample> {
    samples.into_iter().flat_map(|(_, rows)| rows).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_group_gets_its_own_options_said_per_group() {
    let daemon = Daemon::start(DaemonConfig::default()).await;
    let mut client = Client::connect(daemon.addr).await;
    let lowat = 16384;
    let mut asked = hello(4, SocketOptions::default(), INTERVAL, LONG);
    asked.groups = vec![group(1, Some(lowat)), group(3, None)];
    // No flow is read: every send queue fills as far as its options let it.
    let (welcome, _streams) = client.start_session(asked).await;
    assert_eq!(welcome.version, PROTOCOL_VERSION);
    let lowats: Vec<u32> = welcome
        .groups_in_force
        .iter()
        .map(|o| o.notsent_lowat_bytes)
        .collect();
    assert_eq!(lowats, [lowat, 0]);
    let rows = rows(client.samples_for(Duration::from_millis(600)).await);
    client.stop().await;
    for row in &rows {
        let want = if row.flow == 0 { 0 } else { 1 };
        assert_eq!(row.group, Some(want), "flow {}", row.flow);
    }
    let peak = |group| {
        rows.iter()
            .filter(|r| r.group == Some(group))
            .filter_map(|r| r.notsent_bytes)
            .max()
            .unwrap_or(0)
    };
    let mss = rows.iter().map(|r| r.snd_mss_bytes).max().unwrap();
    // The write that crosses the threshold may add one segment (session.rs says why).
    assert!(
        peak(0) > 0 && peak(0) <= lowat + mss,
        "lowat group: notsent {} (mss {mss})",
        peak(0)
    );
    assert!(
        peak(1) > 4 * (lowat + mss),
        "default group: notsent {} should dwarf the lowat group's {}",
        peak(1),
        peak(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_4_hello_is_still_served_as_one_group() {
    let daemon = Daemon::start(DaemonConfig::default()).await;
    let mut client = Client::connect(daemon.addr).await;
    let options = SocketOptions {
        notsent_lowat_bytes: Some(16384),
        ..SocketOptions::default()
    };
    let mut old = hello(2, options, INTERVAL, LONG);
    old.version = OLDEST_PROTOCOL_VERSION;
    let (welcome, streams) = client.start_session(old).await;
    assert_eq!(welcome.version, OLDEST_PROTOCOL_VERSION);
    assert_eq!(welcome.options_in_force.notsent_lowat_bytes, 16384);
    assert!(welcome.groups_in_force.is_empty(), "{welcome:?}");
    let readers: Vec<_> = streams.into_iter().map(drain).collect();
    let rows = rows(client.samples_for(Duration::from_millis(400)).await);
    client.stop().await;
    assert!(rows.iter().any(|r| r.flow == 1 && r.bytes > 0), "{rows:?}");
    assert!(rows.iter().all(|r| r.group == Some(0)));
    for r in readers {
        assert!(r.await.unwrap() > 0);
    }
}

//! Markers against a real daemon on loopback, where both ends share one clock: the clock
//! echo's stamps fall inside the probe's round trip, every marker is read after it was
//! written, and a marker waits for the bytes queued ahead of it, so a small lowat shortens
//! the wait.

mod util;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use oscil_daemon::DaemonConfig;
use oscil_model::files::markers::{FlowMarkers, Marker};
use oscil_model::run::clock::realtime_unix_ns;
use oscil_model::socket::SocketOptions;
use oscil_protocol::control::{DaemonMessage, Hello, ReaderMessage};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use util::{hello, Client, Daemon};

const INTERVAL: Duration = Duration::from_millis(50);
const MARKER_EVERY: Duration = Duration::from_millis(100);
const MSS: u32 = 1448;
/// 8 Mbit/s of pacing: the send queue drains at 1 byte per microsecond.
const RATE_BPS: u64 = 8_000_000;

/// Reads a flow to its end, noting every read in `book`.
fn read_into(mut stream: TcpStream, book: Arc<Mutex<FlowMarkers>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 << 10];
        while let Ok(n @ 1..) = stream.read(&mut buf).await {
            book.lock().unwrap().read(n as u64, realtime_unix_ns());
        }
    })
}

fn marked_hello(lowat: Option<u32>) -> Hello {
    let options = SocketOptions {
        notsent_lowat_bytes: lowat,
        max_pacing_rate_bps: Some(RATE_BPS),
        // Fixed, so the default lowat's queue is ~400 KB (0.4 s at this rate), not megabytes.
        sndbuf_bytes: Some(256 << 10),
        ..Default::default()
    };
    let mut h = hello(1, options, INTERVAL, Duration::from_secs(30));
    h.write_size_bytes = Some(16 << 10);
    h.marker_every_us = Some(MARKER_EVERY.as_micros() as u64);
    h
}

/// What one streamed session showed: each marker's latency in µs on the shared clock, in
/// order, and the kernel's not-sent bytes (`tcpi_notsent_bytes`) of every sample.
struct Streamed {
    latencies_us: Vec<i128>,
    notsent_bytes: Vec<i128>,
}

/// Checks one clock exchange, then streams for `how_long`.
async fn stream_with_markers(lowat: Option<u32>, how_long: Duration) -> Streamed {
    let daemon = Daemon::start(DaemonConfig::default()).await;
    let mut client = Client::connect(daemon.addr).await;
    let (_, mut flows) = client
        .start_session_with(marked_hello(lowat), |socket| {
            socket2::SockRef::from(socket).set_mss(MSS).unwrap();
        })
        .await;
    let book = Arc::new(Mutex::new(FlowMarkers::new(1 << 16, 1000)));
    let reader = read_into(flows.remove(0), book.clone());
    let mut markers: Vec<Marker> = Vec::new();
    let mut notsent_bytes = Vec::new();
    let until = tokio::time::Instant::now() + how_long;
    while tokio::time::Instant::now() < until {
        match client.next().await {
            Some(DaemonMessage::Markers { markers: m }) => markers.extend(m),
            Some(DaemonMessage::Samples { flows, .. }) => {
                notsent_bytes.extend(flows.iter().filter_map(|f| f.notsent_bytes.map(i128::from)));
            }
            other => panic!("expected samples or markers, got {other:?}"),
        }
    }
    client.stop().await;
    reader.abort();
    daemon.shutdown().await;

    let ks: Vec<u64> = markers.iter().map(|m| m.k).collect();
    assert!(ks.windows(2).all(|w| w[0] < w[1]), "{ks:?}");
    assert!(markers
        .windows(2)
        .all(|w| w[0].offset_bytes < w[1].offset_bytes));
    let mut book = book.lock().unwrap().clone();
    markers.iter().for_each(|m| book.announce(*m));
    let (resolved, _) = book.into_resolved();
    let latencies_us = resolved
        .iter()
        .filter_map(|r| {
            let read = i128::from(r.read_unix_ns?);
            Some((read - i128::from(r.marker.sent_unix_ns)) / 1000)
        })
        .collect();
    Streamed {
        latencies_us,
        notsent_bytes,
    }
}

fn median(mut values: Vec<i128>) -> i128 {
    values.sort_unstable();
    values[values.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clock_echo_is_stamped_inside_the_probe_s_round_trip() {
    let daemon = Daemon::start(DaemonConfig::default()).await;
    let mut client = Client::connect(daemon.addr).await;
    // Probes come after `Ready`, when every data connection is in.
    let (_welcome, _flows) = client.open_flows(marked_hello(None), |_| {}).await;
    for _ in 0..3 {
        let t1 = realtime_unix_ns();
        client
            .send(&ReaderMessage::ClockProbe { t1_unix_ns: t1 })
            .await;
        let echo = client.next().await;
        let t4 = realtime_unix_ns();
        let Some(DaemonMessage::ClockEcho {
            t1_unix_ns,
            t2_unix_ns,
            t3_unix_ns,
        }) = echo
        else {
            panic!("expected a clock echo, got {echo:?}");
        };
        assert_eq!(t1_unix_ns, t1);
        assert!(t1 <= t2_unix_ns && t2_unix_ns <= t3_unix_ns && t3_unix_ns <= t4);
    }
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marker_waits_behind_the_queue_and_a_small_lowat_shortens_it() {
    let default = stream_with_markers(None, Duration::from_millis(1500)).await;
    let small = stream_with_markers(Some(16384), Duration::from_millis(1500)).await;
    for run in [&default, &small] {
        let latencies = &run.latencies_us;
        // Markers come with the writer's wake-ups, which the kernel's pacing sets, not the
        // CPU: with the default lowat the writer wakes only once a third of the full buffer
        // has drained (~170 ms at 1 byte a microsecond), so 1.5 s hold about 8, of which
        // those older than the ~0.4 s queue are read.
        assert!(latencies.len() >= 4, "{latencies:?}");
        // One clock: a byte is read after it was written.
        assert!(latencies.iter().all(|&us| us >= 0), "{latencies:?}");
    }
    // Ahead of a marker sit the bytes the kernel holds: at most lowat/2 plus a write not
    // sent with the small lowat, up to what the 512 KiB send buffer holds with the default.
    // The kernel's own count of them says by how much; the markers' waits, which a loaded
    // machine lengthens for both, keep their order.
    let (default_notsent, small_notsent) = (
        median(default.notsent_bytes.clone()),
        median(small.notsent_bytes.clone()),
    );
    assert!(
        default_notsent > 3 * small_notsent,
        "not sent: default {default_notsent} bytes against 16384 {small_notsent} bytes"
    );
    let (default_us, small_us) = (
        median(default.latencies_us.clone()),
        median(small.latencies_us.clone()),
    );
    assert!(
        default_us > small_us,
        "default {default_us} us against 16384 {small_us} us: {:?} {:?}",
        default.latencies_us,
        small.latencies_us
    );
}

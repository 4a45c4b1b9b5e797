//! A new session during a sustained flood from many source addresses (a row of issue 23's
//! table), against the real binaries: strangers on 200 loopback addresses and 10 on the
//! reader's own address hold idle connections up to the daemon's caps and reconnect 100 ms
//! after the daemon closes one, a steady stream of new connections. A reader that keeps
//! trying gets in within its retry window; one that may not try again is told the daemon is
//! busy, not "connection reset". The figures printed are that row, re-measured
//! (`cargo test --release -p oscil-daemon --test flood -- --nocapture`).

mod util;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use oscil_protocol::control::busy_frame;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use util::connect_from;
use util::process::DaemonProcess;

const STRANGER_ADDRESSES: u8 = 200;
/// Idle connections held from the reader's own address: the per-source cap.
const OWN_ADDRESS_HOLDERS: usize = 10;
const RECONNECT_AFTER: Duration = Duration::from_millis(100);
/// The reader's retry window (its default).
const RETRY_WINDOW: Duration = Duration::from_secs(30);
/// Readers that may not retry, run one after another until one is turned away.
const MAX_ONE_SHOT_READERS: usize = 20;

/// What the strangers saw.
#[derive(Default)]
struct Tally {
    connects: AtomicU64,
    told_busy: AtomicU64,
    closed_silently: AtomicU64,
}

/// One stranger: connects from `source`, holds the connection idle until the daemon closes
/// it, and does it again, until told to stop.
async fn hold(
    source: Ipv4Addr,
    addr: SocketAddr,
    tally: Arc<Tally>,
    mut stop: watch::Receiver<bool>,
) {
    let busy = busy_frame();
    while !*stop.borrow() {
        if let Ok(Ok(mut stream)) =
            tokio::time::timeout(Duration::from_secs(2), connect_from(source, addr)).await
        {
            tally.connects.fetch_add(1, Ordering::Relaxed);
            let mut got = Vec::new();
            tokio::select! {
                _ = stream.read_to_end(&mut got) => {}
                _ = stop.changed() => return,
            }
            let seen = if got == busy {
                &tally.told_busy
            } else {
                &tally.closed_silently
            };
            seen.fetch_add(1, Ordering::Relaxed);
        }
        tokio::select! {
            () = tokio::time::sleep(RECONNECT_AFTER) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Starts the flood on its own runtime thread; it runs until `stop` says so.
fn flood(
    addr: SocketAddr,
    tally: Arc<Tally>,
    stop: watch::Receiver<bool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let strangers = (1..=STRANGER_ADDRESSES).map(|n| Ipv4Addr::new(127, 2, 0, n));
            let own = std::iter::repeat_n(Ipv4Addr::LOCALHOST, OWN_ADDRESS_HOLDERS);
            let holders: Vec<_> = strangers
                .chain(own)
                .map(|source| tokio::spawn(hold(source, addr, tally.clone(), stop.clone())))
                .collect();
            for holder in holders {
                let _ = holder.await;
            }
        });
    })
}

/// `oscil-reader` from 127.0.0.1 (where 10 strangers sit too): 2 flows, `-t 1s`.
fn run_reader(daemon: &DaemonProcess, out: &Path, busy_retry: &str) -> (Output, Duration) {
    let started = Instant::now();
    let output = Command::new(oscil_testkit::workspace_bin("oscil-reader"))
        .args([
            "--connect",
            &daemon.addr.to_string(),
            "--quiet",
            "-t",
            "1s",
            "-P",
            "2",
        ])
        .args(["--busy-retry", busy_retry, "--out"])
        .arg(out)
        .output()
        .expect("run oscil-reader");
    (output, started.elapsed())
}

#[test]
fn a_reader_gets_in_during_a_many_source_flood_and_is_told_busy_when_turned_away() {
    let _ = oscil_kernel::raise_nofile_limit();
    let daemon = DaemonProcess::start(1024, &[]);
    let tally = Arc::new(Tally::default());
    let (stop_tx, stop) = watch::channel(false);
    let flood_started = Instant::now();
    let flooding = flood(daemon.addr, tally.clone(), stop);
    // Let the strangers fill the caps before the reader comes.
    std::thread::sleep(Duration::from_secs(2));
    let held = daemon.open_fds();
    let dir = tempfile::tempdir().unwrap();

    let (patient, waited) = run_reader(&daemon, &dir.path().join("patient"), "30s");
    let patient_said = String::from_utf8_lossy(&patient.stderr).into_owned();

    let mut turned_away = None;
    let mut one_shots = 0;
    while turned_away.is_none() && one_shots < MAX_ONE_SHOT_READERS {
        let out = dir.path().join(format!("once{one_shots}"));
        let (output, _) = run_reader(&daemon, &out, "0");
        one_shots += 1;
        if !output.status.success() {
            turned_away = Some(String::from_utf8_lossy(&output.stderr).into_owned());
        }
    }
    let _ = stop_tx.send(true);
    let flood_time = flood_started.elapsed();
    flooding.join().unwrap();

    let connects = tally.connects.load(Ordering::Relaxed);
    println!(
        "flood: {connects} connections in {:.1} s ({:.0}/s) from {} addresses, daemon holding {held} descriptors; \
         {} told busy, {} closed without a word",
        flood_time.as_secs_f64(),
        connects as f64 / flood_time.as_secs_f64(),
        usize::from(STRANGER_ADDRESSES) + 1,
        tally.told_busy.load(Ordering::Relaxed),
        tally.closed_silently.load(Ordering::Relaxed),
    );
    println!(
        "patient reader: {} after {:.1} s{}",
        patient.status,
        waited.as_secs_f64(),
        patient_said
            .lines()
            .next()
            .map_or(String::new(), |l| format!(" ({l})"))
    );
    println!(
        "one-shot readers: {one_shots} run, {}",
        turned_away
            .as_deref()
            .map_or("none turned away".into(), |e| format!(
                "turned away with: {}",
                e.trim()
            ))
    );

    assert!(patient.status.success(), "{patient_said}");
    assert!(
        waited < RETRY_WINDOW + Duration::from_secs(10),
        "{waited:?}"
    );
    assert!(
        tally.told_busy.load(Ordering::Relaxed) > 0,
        "the flood met the caps: strangers were told busy"
    );
    let said = turned_away.expect("a one-shot reader turned away by the flood");
    assert!(said.contains("the daemon is busy"), "{said}");
}

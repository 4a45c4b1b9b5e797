//! The daemon's open-files budget against what it really holds, with the real binary under
//! `ulimit -n 1024`: each flow's and each session's descriptors measured, and four readers of
//! 256 flows each (a row of issue 23's table) served in turn, each either served or told
//! `busy` up front, never failing in `accept`. The figures printed are that row, re-measured
//! (`cargo test --release -p oscil-daemon --test budget -- --nocapture`).

mod util;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use oscil_daemon::budget::{FDS_PER_FLOW, FDS_PER_SESSION, SPARE_FDS};
use oscil_model::socket::SocketOptions;
use util::process::DaemonProcess;
use util::{drain, hello, Client};

const NOFILE: u64 = 1024;
const INTERVAL: Duration = Duration::from_millis(100);
const LONG: Duration = Duration::from_secs(30);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The number before `what` in the daemon's listening line ("... 12 open; ...").
fn figure_before(line: &str, what: &str) -> u64 {
    let before = &line[..line.find(what).expect(line)];
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Opens a session of `flows` flows with a write size of its own (so it holds its own
/// payload file) and starts it.
async fn session_of(client: &mut Client, flows: u32) -> Vec<tokio::task::JoinHandle<u64>> {
    let mut asked = hello(flows, SocketOptions::default(), INTERVAL, LONG);
    asked.write_size_bytes = Some(64 << 10);
    let (_, streams) = client.start_session(asked).await;
    streams.into_iter().map(drain).collect()
}

/// The daemon's open descriptors once the writers and the sampler have settled: the same
/// count twice, 300 ms apart (within 10 s).
async fn settled_fds(daemon: &DaemonProcess) -> u64 {
    let mut last = daemon.open_fds();
    for _ in 0..33 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = daemon.open_fds();
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("the daemon's descriptors never settled (last {last})");
}

#[test]
fn flows_and_sessions_hold_no_more_descriptors_than_the_budget_counts() {
    let daemon = DaemonProcess::start(NOFILE, &[]);
    let open_at_start = figure_before(&daemon.listening, " open;");
    runtime().block_on(async {
        let idle = settled_fds(&daemon).await;
        let mut one = Client::connect(daemon.addr).await;
        let _one = session_of(&mut one, 1).await;
        let with_one = settled_fds(&daemon).await;
        let mut nine = Client::connect(daemon.addr).await;
        let _nine = session_of(&mut nine, 9).await;
        let with_ten = settled_fds(&daemon).await;
        // One session of 1 flow, then one of 9: (S + F) and (S + 9 F).
        let first = with_one - idle;
        let second = with_ten - with_one;
        let per_flow = (second - first) / 8;
        let per_session = first - per_flow;
        println!(
            "descriptors: {idle} idle ({open_at_start} at start), {per_flow} per flow, \
             {per_session} per session besides its flows"
        );
        assert_eq!((second - first) % 8, 0, "{first} then {second}");
        assert!(per_flow <= FDS_PER_FLOW, "{per_flow} per flow");
        assert!(per_session <= FDS_PER_SESSION, "{per_session} per session");
        assert!(idle <= open_at_start + SPARE_FDS, "{idle} open when idle");
        one.stop().await;
        nine.stop().await;
    });
}

/// `oscil-reader` with `flows` flows for two seconds at full speed, its output captured.
fn reader(daemon: &DaemonProcess, out: &Path, flows: u32) -> Child {
    Command::new(oscil_testkit::workspace_bin("oscil-reader"))
        .args(["--connect", &daemon.addr.to_string(), "--quiet", "-t", "2s"])
        .args(["-P", &flows.to_string(), "--out"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start oscil-reader")
}

#[test]
fn four_readers_of_256_flows_are_served_in_turn_at_ulimit_1024() {
    // The readers inherit this process's limit: each holds 256 sockets and more.
    let (soft, _) = oscil_kernel::raise_nofile_limit().unwrap();
    if soft < 2048 {
        oscil_testkit::skip(&format!(
            "the readers need more than {soft} open files each"
        ));
        return;
    }
    // Paced, so four sessions of 256 flows do not take a shared machine's every core.
    let daemon = DaemonProcess::start(NOFILE, &["--max-rate".as_ref(), "400mbit".as_ref()]);
    println!("{}", daemon.listening);
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut children: Vec<Child> = (0..4)
        .map(|i| reader(&daemon, &dir.path().join(format!("big{i}")), 256))
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    children.push(reader(&daemon, &dir.path().join("small"), 1));
    let waiting: Vec<_> = children
        .into_iter()
        .map(|child| std::thread::spawn(move || (child.wait_with_output(), Instant::now())))
        .collect();
    let mut fds_peak = 0;
    while !waiting.iter().all(|w| w.is_finished()) {
        assert!(started.elapsed() < Duration::from_secs(120), "readers hang");
        fds_peak = fds_peak.max(daemon.open_fds());
        std::thread::sleep(Duration::from_millis(50));
    }
    let outputs: Vec<(Output, Instant)> = waiting
        .into_iter()
        .map(|w| {
            let (output, at) = w.join().unwrap();
            (output.unwrap(), at)
        })
        .collect();
    let log: Vec<String> = daemon.log.try_iter().collect();
    report(&outputs, started, fds_peak, &log);
    for (output, _) in &outputs {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "a reader failed: {stderr}");
        assert!(!stderr.contains("timed out"), "{stderr}");
    }
    let told_busy = outputs
        .iter()
        .filter(|(o, _)| String::from_utf8_lossy(&o.stderr).contains("is busy"))
        .count();
    assert!(
        told_busy >= 1,
        "1,024 flows do not fit in 1,024 descriptors"
    );
    assert!(fds_peak <= NOFILE, "{fds_peak} descriptors at the peak");
    assert!(!log.iter().any(|l| l.contains("accept failed")), "{log:#?}");
}

fn report(outputs: &[(Output, Instant)], started: Instant, fds_peak: u64, log: &[String]) {
    for (i, (output, at)) in outputs.iter().enumerate() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        println!(
            "reader {i}: {} after {:.1} s{}",
            output.status,
            at.duration_since(started).as_secs_f64(),
            stderr
                .lines()
                .next()
                .map_or(String::new(), |l| format!(": {l}"))
        );
    }
    let accept_failures = log.iter().filter(|l| l.contains("accept failed")).count();
    println!("daemon: {fds_peak} descriptors at the peak, {accept_failures} accept failures");
}

//! `--trace` over loopback: with tracefs pointed at an empty directory the run completes,
//! writes no trace file and says why in run.json; with the kernel's tracefs (root) both
//! files are written, the daemon's `snd_una` advances by the bytes the reader's TCP
//! received, and no event is lost.

mod util;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use oscil_testkit::{free_port, lacks_root, workspace_bin, Csv, TraceAgainstRecord};
use util::assert_success;

/// A daemon started with `env`, killed when dropped.
struct Daemon(std::process::Child, String);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn daemon(env: &[(&str, &Path)]) -> Daemon {
    let addr = format!("127.0.0.1:{}", free_port());
    let child = Command::new(workspace_bin("oscil-daemon"))
        .args(["--listen", &addr])
        .envs(env.iter().copied())
        .stderr(Stdio::null())
        .spawn()
        .expect("start oscil-daemon");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(Instant::now() < deadline, "oscil-daemon never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    Daemon(child, addr)
}

/// A traced run of `--fast 1s --slow 1s --cycles 1` at 200 Mbit/s: its run.json.
fn traced_run(out: &Path, env: &[(&str, &Path)]) -> serde_json::Value {
    let daemon = daemon(env);
    let output = Command::new(workspace_bin("oscil-reader"))
        .args(["--connect", &daemon.1, "--quiet", "--trace"])
        .args(["--fast", "1s", "--slow", "1s", "--cycles", "1"])
        .args(["--pacing-rate", "200mbit", "--out"])
        .arg(out)
        .envs(env.iter().copied())
        .output()
        .expect("run oscil-reader");
    assert_success(&output);
    let text = std::fs::read_to_string(out.join("run.json")).expect("run.json");
    serde_json::from_str(&text).expect("run.json parses")
}

#[test]
fn without_tracefs_the_run_completes_and_says_why_there_is_no_trace() {
    let scratch = tempfile::tempdir().unwrap();
    let empty = scratch.path().join("no-tracefs");
    std::fs::create_dir(&empty).unwrap();
    let out = scratch.path().join("run");
    let meta = traced_run(&out, &[("OSCIL_TRACEFS", &empty)]);
    assert_eq!(meta["ending"]["status"], "complete", "{}", meta["ending"]);
    for side in ["sender", "reader"] {
        let facts = &meta["trace"][side];
        let why = facts["absent"][0].as_str().unwrap_or_default();
        assert!(
            why.contains("no tracefs") && why.contains("no-tracefs"),
            "{side}: {facts}"
        );
        assert_eq!(facts["tracepoints"].as_array().map(Vec::len), Some(0));
        assert!(!out.join(format!("trace-{side}.csv")).exists(), "{side}");
    }
    // The run's own files are all there.
    assert!(Csv::read(&out.join("sender.csv")).rows.len() >= 15);
}

#[test]
fn a_traced_run_follows_every_acknowledged_byte_and_loses_no_event() {
    if lacks_root("tracefs") {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("run");
    let meta = traced_run(&out, &[]);
    assert_eq!(meta["ending"]["status"], "complete", "{}", meta["ending"]);
    for side in ["sender", "reader"] {
        let facts = &meta["trace"][side];
        assert_eq!(facts["lost_events"], 0, "{side}: {facts}");
        assert!(facts.get("absent").is_none(), "{side}: {facts}");
    }
    let traced = TraceAgainstRecord::of(&out);
    assert!(
        traced.within_one_window(),
        "snd_una advanced {} bytes, the reader's TCP received {}, window {}",
        traced.una_advance_bytes,
        traced.delivered_bytes,
        traced.window_bytes
    );
    assert_eq!(
        meta["trace"]["sender"]["events"]["probe"].as_u64(),
        Some(traced.acks as u64)
    );
    let sender = Csv::read(&out.join("trace-sender.csv"));
    // Times are on the run's clock and in order.
    let times = sender.column("t_s");
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    assert!(times[0] >= 0.0 && *times.last().unwrap() < 4.0, "{times:?}");
    let reader = Csv::read(&out.join("trace-reader.csv"));
    assert!(
        reader.rows.iter().any(|r| r["kind"] == "rcvbuf_grow"),
        "the receiver's autotuning grew its buffer at least once"
    );
}

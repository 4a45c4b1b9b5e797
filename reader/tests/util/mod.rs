//! The reader's own test helpers, over the workspace's shared ones.

#![allow(dead_code)] // each test file uses its own share of these

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use oscil_testkit::{workspace_bin, Daemon, Netns};

pub fn reader() -> Command {
    Command::new(workspace_bin("oscil-reader"))
}

/// Runs the reader to completion, quietly.
pub fn run_reader(daemon: &Daemon, out: &Path, extra_args: &[&str]) -> Output {
    reader()
        .arg("--connect")
        .arg(daemon.addr.to_string())
        .arg("--out")
        .arg(out)
        .arg("--quiet")
        .args(extra_args)
        .output()
        .expect("run oscil-reader")
}

pub fn assert_success(output: &Output) {
    assert!(
        output.status.success(),
        "oscil-reader failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// One successful run against a fresh daemon into a fresh directory: the directory (kept
/// while the guard lives), the run directory in it, and the reader's output.
pub fn fresh_run(extra_args: &[&str]) -> (tempfile::TempDir, std::path::PathBuf, Output) {
    let daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = run_reader(&daemon, &out, extra_args);
    assert_success(&output);
    (dir, out, output)
}

/// The phase of a sample of a run of `--fast 1s --slow 1s --cycles 1` sampled every 100 ms:
/// the one holding the middle of the sample's interval (fast 0-1 s, slow 1-2 s).
pub fn phase_of_1s_each(t_s: f64) -> Option<&'static str> {
    match t_s - 0.05 {
        m if (0.0..1.0).contains(&m) => Some("fast"),
        m if (1.0..2.0).contains(&m) => Some("slow"),
        _ => None,
    }
}

/// The `--json` output and `run.json` of a run.
pub fn json_and_meta(out: &Path, output: &Output) -> (serde_json::Value, serde_json::Value) {
    let summary = serde_json::from_slice(&output.stdout).expect("--json prints JSON");
    let text = std::fs::read_to_string(out.join("run.json")).expect("run.json");
    (
        summary,
        serde_json::from_str(&text).expect("run.json parses"),
    )
}

/// One reader run against a daemon, both in a fresh namespace named from `prefix` that
/// `prepare` sets up first (given its name): the scratch directory (kept while it lives),
/// the run directory and the reader's output. Needs root.
pub fn run_in_namespace(
    prefix: &str,
    prepare: impl FnOnce(&str),
    args: &[&str],
) -> (tempfile::TempDir, PathBuf, Output) {
    // Killed, with the daemon in it, however the test ends.
    let ns = Netns::new(prefix);
    prepare(&ns.0);
    let in_ns = |program: PathBuf| {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &ns.0]).arg(program);
        command
    };
    // `ip netns exec` execs the program in its own place: the child is the daemon.
    let mut daemon = in_ns(workspace_bin("oscil-daemon"))
        .args(["--listen", "127.0.0.1:5250"])
        .stderr(Stdio::null())
        .spawn()
        .expect("start oscil-daemon in the namespace");
    wait_for_daemon(&ns.0, Duration::from_secs(10));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = in_ns(workspace_bin("oscil-reader"))
        .args(["--connect", "127.0.0.1:5250", "--quiet", "--out"])
        .arg(&out)
        .args(args)
        .output()
        .expect("run oscil-reader in the namespace");
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert_success(&output);
    (dir, out, output)
}

/// Waits up to `within` for a daemon to listen on port 5250 in namespace `ns`.
pub fn wait_for_daemon(ns: &str, within: Duration) {
    let deadline = Instant::now() + within;
    let listening = || {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "ss", "-Hltn", "sport = :5250"])
            .output()
            .expect("run ss");
        !out.stdout.is_empty()
    };
    while !listening() {
        assert!(Instant::now() < deadline, "oscil-daemon never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

//! A run cut short still leaves a run directory that the report can read.

mod util;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use oscil_rundir::RunStatus;
use oscil_testkit::Daemon;
use util::reader;

/// Starts an 11 s run and returns 1.5 s into it, in the slow phase.
fn start_long_run(daemon: &Daemon, out: &Path) -> Child {
    let child = reader()
        .args(["--connect", &daemon.addr.to_string(), "--quiet"])
        .args(["--fast", "1s", "--slow", "10s", "--cycles", "1"])
        .arg("--out")
        .arg(out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    child
}

#[test]
fn a_killed_daemon_leaves_a_partial_readable_run() {
    let mut daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let child = start_long_run(&daemon, &out);
    daemon.kill();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "stderr: {stderr}");
    assert!(stderr.contains("cut short"), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");

    let run = oscil_rundir::load(&out).expect("the partial run directory loads");
    assert_eq!(run.meta.ending.status, RunStatus::Partial);
    assert!(
        run.meta.ending.reason.contains("daemon"),
        "reason: {}",
        run.meta.ending.reason
    );
    assert!((1.3..5.0).contains(&run.meta.ending.duration_s));
    let last_reader_s = run.reader.last().expect("reader rows").t_s;
    assert!(last_reader_s > 1.2, "reader rows stop at {last_reader_s} s");
    assert!(run.sender.len() >= 10, "{} sender rows", run.sender.len());
    let schedule_end = run.meta.schedule.last().unwrap().end_s;
    assert!(
        schedule_end < 5.0,
        "schedule not cut: ends at {schedule_end}"
    );
}

#[test]
fn ctrl_c_keeps_everything_recorded_so_far() {
    let daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let child = start_long_run(&daemon, &out);
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(3));

    let run = oscil_rundir::load(&out).expect("the interrupted run directory loads");
    assert_eq!(run.meta.ending.status, RunStatus::Partial);
    assert_eq!(run.meta.ending.reason, "interrupted by a signal");
    // The daemon was asked to stop, so its counters and last samples arrived.
    assert!(run.meta.tcpext_delta.contains_key("sender"));
    let last_sender_s = run.sender.last().expect("sender rows").t_s;
    assert!(last_sender_s > 1.3, "sender rows stop at {last_sender_s} s");
}

/// A daemon that stops answering without closing anything, like a path gone dark.
#[test]
fn a_silent_daemon_cuts_the_run_short() {
    let daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let child = start_long_run(&daemon, &out);
    let frozen = std::process::Command::new("kill")
        .args(["-STOP", &daemon.child.id().to_string()])
        .status()
        .unwrap();
    assert!(frozen.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(3));

    let run = oscil_rundir::load(&out).expect("the run directory loads");
    assert_eq!(run.meta.ending.status, RunStatus::Partial);
    assert!(
        run.meta.ending.reason.contains("no word from the daemon"),
        "reason: {}",
        run.meta.ending.reason
    );
    assert!(run.meta.ending.duration_s < 9.0);
}

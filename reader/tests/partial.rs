//! A run cut short still leaves a run directory that the report can read.

mod util;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use oscil_model::run::RunStatus;
use oscil_testkit::Daemon;
use util::reader;

/// The length of the run started: 1 s fast, then 10 s slow.
const PLANNED_S: f64 = 11.0;
/// Into the slow phase: where the runs are cut.
const CUT_AFTER_S: f64 = 1.2;

/// The latest `t_s` among the complete rows of a CSV being written (0 while none).
fn last_t_s(path: &Path) -> f64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.split_inclusive('\n')
        .skip(1)
        .filter(|line| line.ends_with('\n'))
        .filter_map(|line| line.split(',').next()?.parse::<f64>().ok())
        .fold(0.0, f64::max)
}

/// Starts an 11 s run and returns once both ends' rows on disk reach into the slow phase
/// (however long a loaded machine takes to get there), with the sender's latest time.
fn start_long_run(daemon: &Daemon, out: &Path) -> (Child, f64) {
    let mut child = reader()
        .args(["--connect", &daemon.addr.to_string(), "--quiet"])
        .args(["--fast", "1s", "--slow", "10s", "--cycles", "1"])
        .arg("--out")
        .arg(out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        let (reader_s, sender_s) = (
            last_t_s(&out.join("reader.csv")),
            last_t_s(&out.join("sender.csv")),
        );
        if reader_s >= CUT_AFTER_S && sender_s >= CUT_AFTER_S {
            return (child, sender_s);
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the reader ended ({status}) before {CUT_AFTER_S} s of rows");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_killed_daemon_leaves_a_partial_readable_run() {
    let mut daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (child, _) = start_long_run(&daemon, &out);
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
    // Cut short, after every row seen on disk before the cut, which all load.
    let duration_s = run.meta.ending.duration_s;
    assert!(
        (CUT_AFTER_S..PLANNED_S).contains(&duration_s),
        "{duration_s} s"
    );
    let last_reader_s = run.reader.last().expect("reader rows").t_s;
    assert!(
        last_reader_s >= CUT_AFTER_S,
        "reader rows stop at {last_reader_s} s"
    );
    let last_sender_s = run.sender.last().expect("sender rows").t_s;
    assert!(
        last_sender_s >= CUT_AFTER_S,
        "sender rows stop at {last_sender_s} s"
    );
    // The schedule says what ran: cut where the run ended, not the 11 s planned.
    let schedule_end = run.meta.schedule.last().unwrap().end_s;
    assert!(
        schedule_end < PLANNED_S && schedule_end <= duration_s + 0.1,
        "schedule not cut: ends at {schedule_end}, the run at {duration_s}"
    );
}

#[test]
fn ctrl_c_keeps_everything_recorded_so_far() {
    let daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (child, sender_seen_s) = start_long_run(&daemon, &out);
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
    assert!(
        last_sender_s >= sender_seen_s,
        "sender rows stop at {last_sender_s} s, before the {sender_seen_s} s seen"
    );
}

/// A daemon that stops answering without closing anything, like a path gone dark.
#[test]
fn a_silent_daemon_cuts_the_run_short() {
    let daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (child, _) = start_long_run(&daemon, &out);
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
    // Before the plan's end: the reason, not the clock, says it was the silence.
    assert!(run.meta.ending.duration_s < PLANNED_S);
}

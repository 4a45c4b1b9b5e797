//! Every bad input gets one clear line on stderr and a non-zero exit, never a panic.

mod util;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output};

use oscil_testkit::{free_port, Daemon};
use util::{reader, run_reader};

/// The error line(s) the reader printed, after checking it failed without a panic.
fn failure(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !output.status.success(),
        "expected a failure, stderr: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    assert!(
        !stderr.contains("RUST_BACKTRACE"),
        "backtrace hint: {stderr}"
    );
    stderr
}

fn only_line(stderr: &str) -> &str {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {stderr}");
    lines[0]
}

/// Runs `command` (the reader, or a shell that runs it) against a port where nothing
/// listens, with `extra` arguments: the address, the output, and the directory it had.
fn to_nowhere(mut command: Command, extra: &[&str]) -> (String, Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let output = command
        .args(["--connect", &addr, "--quiet"])
        .args(extra)
        .arg("--out")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    (addr, output, dir)
}

#[test]
fn unreachable_daemon() {
    let (addr, output, _dir) = to_nowhere(reader(), &[]);
    let stderr = failure(&output);
    let line = only_line(&stderr);
    assert!(
        line.starts_with("oscil-reader: cannot connect to the daemon at"),
        "{line}"
    );
    assert!(line.contains(&addr), "{line}");
}

#[test]
fn refused_congestion_control_is_named() {
    let daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let output = run_reader(
        &daemon,
        &dir.path().join("run"),
        &["--congestion", "nosuchcc"],
    );
    let stderr = failure(&output);
    let line = only_line(&stderr);
    assert!(line.contains("refused the session"), "{line}");
    assert!(line.contains("nosuchcc"), "{line}");
}

#[test]
fn unparsable_duration_and_size() {
    for (flag, value, expected) in [
        ("--fast", "5parsecs", "duration"),
        ("--notsent-lowat", "12q", "size"),
        ("--fraction", "2", "fraction"),
        ("--pacing-rate", "4bit", "below 8 bit/s"),
        // The pattern stores phase lengths in whole ms: 500us would silently become 0.
        ("--slow", "500us", "whole number of milliseconds"),
        ("--fast", "1500us", "whole number of milliseconds"),
        // The daemon refuses writes past 16 MiB: the reader says so before connecting.
        ("--write-size", "0", "1 to 16777216 bytes"),
        ("--write-size", "32m", "1 to 16777216 bytes"),
    ] {
        let output = reader()
            .args([
                "--connect",
                "127.0.0.1:1",
                "--out",
                "/nonexistent",
                flag,
                value,
            ])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{flag} {value}");
        let stderr = failure(&output);
        let first = stderr.lines().next().unwrap();
        assert!(first.starts_with("oscil-reader: invalid value"), "{first}");
        assert!(first.contains(value) && first.contains(expected), "{first}");
    }
}

#[test]
fn a_marker_interval_shorter_than_the_sampling_interval_is_refused() {
    for (args, expected) in [
        (
            &["--marker-every", "50ms"][..],
            "50ms is shorter than the sampling --interval 100ms",
        ),
        (
            &[
                "--interval",
                "1s",
                "--fast",
                "2s",
                "--marker-every",
                "999ms",
            ],
            "999ms is shorter than the sampling --interval 1s",
        ),
    ] {
        let output = reader()
            .args(["--connect", "127.0.0.1:1", "--out", "/nonexistent"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = failure(&output);
        let line = only_line(&stderr);
        assert!(line.starts_with("oscil-reader: --marker-every"), "{line}");
        assert!(line.contains(expected), "{line}");
    }
    let zero = reader()
        .args(["--connect", "127.0.0.1:1", "--out", "/nonexistent"])
        .args(["--marker-every", "0"])
        .output()
        .unwrap();
    assert_eq!(zero.status.code(), Some(2));
    assert!(failure(&zero).contains("above zero"));
}

#[test]
fn unusable_meta_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such.json");
    let output = reader()
        .args(["--connect", "127.0.0.1:1", "--meta"])
        .arg(&missing)
        .arg("--out")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = failure(&output);
    assert!(only_line(&stderr).contains("no-such.json"), "{stderr}");
}

/// A stand-in daemon that answers any hello with the challenge of a newer protocol version.
#[test]
fn protocol_version_mismatch() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut prefix = [0u8; 4];
        stream.read_exact(&mut prefix).unwrap();
        let mut hello = vec![0u8; u32::from_be_bytes(prefix) as usize];
        stream.read_exact(&mut hello).unwrap();
        let challenge = format!(
            r#"{{"type":"challenge","version":99,"nonce":"{}","mac":null}}"#,
            "0".repeat(64)
        );
        stream
            .write_all(&(challenge.len() as u32).to_be_bytes())
            .unwrap();
        stream.write_all(challenge.as_bytes()).unwrap();
    });
    let dir = tempfile::tempdir().unwrap();
    let output = reader()
        .args(["--connect", &addr.to_string(), "--quiet", "--out"])
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    server.join().unwrap();
    let stderr = failure(&output);
    let line = only_line(&stderr);
    assert!(line.contains("protocol version 99"), "{line}");
}

#[test]
fn output_directory_problems() {
    let daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();

    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("mine.txt"), "keep me").unwrap();
    let stderr = failure(&run_reader(&daemon, &full, &[]));
    assert!(only_line(&stderr).contains("--force"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(full.join("mine.txt")).unwrap(),
        "keep me"
    );

    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let stderr = failure(&run_reader(&daemon, &file.join("run"), &[]));
    assert!(only_line(&stderr).contains("a-file"), "{stderr}");
}

#[test]
fn flows_that_cannot_fit_the_open_files_limit_are_refused_before_connecting() {
    // A hard limit of 256 descriptors (lowering it needs no privilege), 1,000 flows asked;
    // nothing listens on the port: the refusal must come before any connection.
    let mut shell = Command::new("bash");
    shell
        .args(["-c", "ulimit -n 256 && exec \"$0\" \"$@\""])
        .arg(oscil_testkit::workspace_bin("oscil-reader"));
    let (_, output, dir) = to_nowhere(shell, &["--flows", "1000"]);
    let stderr = failure(&output);
    let line = only_line(&stderr);
    assert!(
        line.contains("--flows 1000 needs about 1064 open files") && line.contains("may open 256"),
        "{line}"
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(!dir.path().join("run").exists(), "nothing written");
}

#[test]
fn a_daemon_that_stays_busy_is_retried_for_the_window_then_named() {
    let daemon = Daemon::start(&["--max-sessions", "1"]);
    let dir = tempfile::tempdir().unwrap();
    // The one session slot, held for longer than the second reader will wait.
    let mut holder = reader()
        .args([
            "--connect",
            &daemon.addr.to_string(),
            "--quiet",
            "-t",
            "8s",
            "--out",
        ])
        .arg(dir.path().join("holder"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let started = std::time::Instant::now();
    let output = run_reader(
        &daemon,
        &dir.path().join("second"),
        &["-t", "1s", "--busy-retry", "2s"],
    );
    let waited = started.elapsed();
    // With no window at all: one try, and the word.
    let once = run_reader(
        &daemon,
        &dir.path().join("third"),
        &["-t", "1s", "--busy-retry", "0"],
    );
    let _ = holder.kill();
    let _ = holder.wait();
    let stderr = failure(&output);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].contains("is busy (already serving 1 sessions (--max-sessions))")
            && lines[0].contains("trying again for up to 2s (--busy-retry)"),
        "{stderr}"
    );
    assert!(lines[1].contains("the daemon stayed busy for"), "{stderr}");
    assert!(
        waited >= std::time::Duration::from_millis(1000)
            && waited < std::time::Duration::from_secs(6),
        "gave up after {waited:?}"
    );
    let line = failure(&once);
    assert!(
        only_line(&line).contains("the daemon is busy: already serving 1 sessions"),
        "{line}"
    );
}

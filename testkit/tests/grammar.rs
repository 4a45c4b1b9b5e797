//! One command-line grammar across oscil's binaries: every bad or habitual input an iperf3
//! user types gets the documented exit code (2 usage, 1 failed start) and one line that
//! says what is wrong. Runs the real binaries.

use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::process::{Command, Output};

use oscil_testkit::{free_port, workspace_bin, Daemon};

fn run(binary: &str, args: &[&str]) -> Output {
    Command::new(workspace_bin(binary))
        .args(args)
        .env_remove("OSCIL_KEY")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {binary}: {e}"))
}

/// Checks the exit code, that stderr is exactly one line, and what that line holds.
fn expect(binary: &str, args: &[&str], code: i32, holds: &str) {
    let output = run(binary, args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stderr.lines().next().unwrap_or("");
    assert_eq!(
        output.status.code(),
        Some(code),
        "{binary} {args:?}: exit code; stderr: {stderr}"
    );
    assert_eq!(
        stderr.lines().count(),
        1,
        "{binary} {args:?}: one line expected, got: {stderr}"
    );
    assert!(
        line.starts_with(&format!("{binary}: ")),
        "{binary} {args:?}: the line names the program: {line}"
    );
    assert!(
        line.contains(holds),
        "{binary} {args:?}: expected {holds:?} in: {line}"
    );
    assert!(
        !line.contains("os error"),
        "{binary} {args:?}: an OS error said twice: {line}"
    );
}

#[test]
fn daemon_usage_errors() {
    let table: &[(&[&str], &str)] = &[
        (&["--listen", "::1:5250"], "write [::1]:5250 for a port"),
        (&["--listen", "a b"], "not a name or an address"),
        (&["--max-flows", "0"], "invalid value '0' for '--max-flows"),
        (
            &["--max-sessions", "0"],
            "invalid value '0' for '--max-sessions",
        ),
        (
            &["--max-session", "5m"],
            "--max-session is now --max-session-time",
        ),
        (&["--notsent-lowat", "-5"], "invalid value '-5'"),
        (&["--listen", "5250"], "without a key"),
        (&["--fats"], "unexpected argument '--fats'"),
        (&["--congestion", "nosuchcc"], "nosuchcc"),
        (
            &["--max-rate", "4bit"],
            "oscil-daemon: invalid value '4bit' for '--max-rate <RATE>': pacing rate of 4 bit/s is below 8 bit/s",
        ),
    ];
    for (args, holds) in table {
        expect("oscil-daemon", args, 2, holds);
    }
}

#[test]
fn daemon_says_when_the_port_is_taken() {
    let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    expect(
        "oscil-daemon",
        &["--listen", &addr],
        1,
        &format!("cannot listen on {addr}: address in use"),
    );
}

#[test]
fn reader_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let table: &[(&[&str], &str)] = &[
        (
            &["-c", "::1:5250", "-o", out],
            "write [::1]:5250 for a port",
        ),
        (&["-c", "[::1", "-o", out], "without its ']'"),
        (&["-c", "h", "-o", out, "--fast", "5"], "5s? 5ms?"),
        (
            &["-c", "h", "-o", out, "--pacing-rate", "100M"],
            "100mbit (bits per second) or 800mbit (100 megabytes per second)",
        ),
        (&["-c", "h", "-o", out, "--pacing-rate", "100"], "100mbit?"),
        (
            &["-c", "h", "-o", out, "--pacing-rate", "10Mbps"],
            "invalid value '10Mbps' for '--pacing-rate <RATE>': rate \"10Mbps\" is not valid: expected an unambiguous unit: 10mbit (bits per second) or 80mbit (10 megabytes per second)",
        ),
        (
            &["-c", "h", "-o", out, "--pacing-rate", "1MBps"],
            "1mbit (bits per second) or 8mbit (1 megabytes per second)",
        ),
        (
            &["-c", "h", "-o", out, "--notsent-lowat", "-5"],
            "invalid value '-5'",
        ),
        (
            &[
                "-c",
                "h",
                "-o",
                out,
                "--fast",
                "1s",
                "--slow",
                "1s",
                "--interval",
                "5s",
            ],
            "longer than the shortest phase",
        ),
        (&["-c", "h", "-o", out, "-4", "-6"], "cannot be used with"),
        (&["-c", "h"], "--out"),
    ];
    for (args, holds) in table {
        expect("oscil-reader", args, 2, holds);
    }
    assert!(!Path::new(out).exists(), "a usage error left {out} behind");
}

#[test]
fn reader_failed_starts_leave_nothing_and_say_why_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let closed = format!("127.0.0.1:{}", free_port());
    expect(
        "oscil-reader",
        &["-c", &closed, "-o", out.to_str().unwrap()],
        1,
        &format!("cannot connect to the daemon at {closed}"),
    );
    assert!(
        !out.exists(),
        "a failed start left {} behind",
        out.display()
    );

    let file = dir.path().join("afile");
    std::fs::write(&file, "").unwrap();
    expect(
        "oscil-reader",
        &["-c", &closed, "-o", file.to_str().unwrap()],
        1,
        "cannot create",
    );

    // iperf3's -J: an error object on stdout as well.
    let output = run(
        "oscil-reader",
        &["-c", &closed, "-o", out.to_str().unwrap(), "-J"],
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    assert_eq!(json["status"], "error");
    assert_eq!(json["exit_code"], 1);
    assert!(json["error"].as_str().unwrap().contains("cannot connect"));
}

/// `-J` makes a usage error an error object on stdout too, with exit code 2 and the stderr
/// line without the program's name.
fn expect_json_usage(args: &[&str], holds: &str) {
    expect("oscil-reader", args, 2, holds);
    let output = run("oscil-reader", args);
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: JSON on stdout: {e}"));
    assert_eq!(json["status"], "error");
    assert_eq!(json["exit_code"], 2);
    let error = json["error"].as_str().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.trim_end(),
        format!("oscil-reader: {error}"),
        "{args:?}"
    );
}

#[test]
fn reader_json_usage_errors_are_objects() {
    expect_json_usage(
        &["-J", "-c", "h", "-o", "x", "-t", "5"],
        "invalid value '5' for '--time <DUR>': duration \"5\" is not valid: expected a unit: 5s? 5ms?",
    );
    expect_json_usage(&["-J", "-t", "5"], "5s? 5ms?");
    expect_json_usage(&["-qJ", "-i", "1"], "'-i'");
    // Without -J, stdout stays empty.
    let output = run("oscil-reader", &["-t", "5"]);
    assert!(output.stdout.is_empty());
}

#[test]
fn iperf3_flags_get_a_pointer() {
    let reader: &[(&[&str], &str)] = &[
        (&["-s"], "unexpected argument '-s': iperf3's -s: the server is oscil-daemon, run on the sending host (see oscil-reader --help)"),
        (&["-R"], "unexpected argument '-R': iperf3's -R: oscil always sends from oscil-daemon to oscil-reader: run the daemon on the sending host"),
        (&["-i", "1"], "unexpected argument '-i': iperf3's -i: --interval DUR sets how often both ends are sampled (the summary is per phase)"),
        (&["-w", "1M"], "unexpected argument '-w': iperf3's -w: --sndbuf BYTES sets the daemon's SO_SNDBUF; --rcvbuf BYTES sets the reader's SO_RCVBUF"),
        (&["-l", "128k"], "unexpected argument '-l': iperf3's -l: --write-size BYTES sets the bytes per write of the daemon"),
        (&["-C", "bbr"], "unexpected argument '-C': iperf3's -C: --congestion NAME"),
        (&["-b", "100M"], "unexpected argument '-b': iperf3's -b: --pacing-rate RATE sets SO_MAX_PACING_RATE (as tc writes rates: 100mbit)"),
        (&["-Z"], "unexpected argument '-Z': iperf3's -Z: --zerocopy makes the daemon send with sendfile"),
        (&["sender.example"], "unexpected argument 'sender.example': the daemon's address goes after -c: -c HOST"),
    ];
    for (args, holds) in reader {
        expect("oscil-reader", args, 2, holds);
    }
    let daemon: &[(&[&str], &str)] = &[
        (&["-s"], "unexpected argument '-s': iperf3's -s: oscil-daemon is the server already (--listen ADDR sets its address)"),
        (&["-w", "1M"], "unexpected argument '-w': iperf3's -w: --sndbuf BYTES sets the daemon's SO_SNDBUF (see oscil-daemon --help)"),
        (&["-b", "1gbit"], "unexpected argument '-b': iperf3's -b: --max-rate RATE caps every session's pacing rate"),
        (&["-Z"], "unexpected argument '-Z': iperf3's -Z: oscil-reader --zerocopy asks the daemon to send with sendfile"),
        (&["-C", "bbr"], "unexpected argument '-C': iperf3's -C: --congestion NAME"),
        (&["0.0.0.0"], "unexpected argument '0.0.0.0': the address to listen on goes after --listen: --listen ADDR"),
    ];
    for (args, holds) in daemon {
        expect("oscil-daemon", args, 2, holds);
    }
}

#[test]
fn negative_values_are_values_refused_as_negative() {
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "oscil-reader",
            &["-c", "h", "-o", "x", "--fast", "-5s"],
            "oscil-reader: invalid value '-5s' for '--fast <DUR>': duration \"-5s\" is not valid: expected no minus sign: a duration cannot be negative (see oscil-reader --help)",
        ),
        (
            "oscil-reader",
            &["-c", "h", "-o", "x", "-t", "-5s"],
            "invalid value '-5s' for '--time <DUR>': duration \"-5s\" is not valid: expected no minus sign",
        ),
        (
            "oscil-report",
            &["run", "--recommend", "--goodput-tolerance", "-5%"],
            "oscil-report: invalid value '-5%' for '--goodput-tolerance <PCT>': percentage \"-5%\" is not valid: expected no minus sign: a percentage cannot be negative (see oscil-report --help)",
        ),
        (
            "oscil-link",
            &["--rate", "-5mbit", "--delay", "1ms"],
            "rate \"-5mbit\" is not valid: expected no minus sign: a rate cannot be negative",
        ),
        (
            "oscil-lab",
            &["--rtt", "-5ms", "--dry-run"],
            "duration \"-5ms\" is not valid: expected no minus sign: a duration cannot be negative",
        ),
    ];
    for (binary, args, holds) in cases {
        expect(binary, args, 2, holds);
        let output = run(binary, args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("-- -5"), "{binary} {args:?}: {stderr}");
    }
}

#[test]
fn values_and_paths_that_cannot_work_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("afile");
    std::fs::write(&file, "").unwrap();
    let file = file.to_str().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let missing_key = dir.path().join("no-such-key");
    let missing_key = missing_key.to_str().unwrap();
    let closed = format!("127.0.0.1:{}", free_port());
    let cases: &[(&str, &[&str], i32, String)] = &[
        (
            "oscil-link",
            &["--rate", "0", "--delay", "1ms"],
            2,
            "rate \"0\" is not valid: expected a rate above zero (see oscil-link --help)".into(),
        ),
        (
            "oscil-reader",
            &["-c", "h", "-o", out, "--pacing-rate", "0mbit"],
            2,
            "rate \"0mbit\" is not valid: expected a rate above zero".into(),
        ),
        (
            "oscil-reader",
            &["-c", "127.0.0.1", "-B", "::1", "-o", out],
            2,
            "oscil-reader: -B ::1 and the daemon's address 127.0.0.1 are of different IP versions: connect from an address of the daemon's".into(),
        ),
        (
            "oscil-reader",
            &["-c", "127.0.0.1", "-B", "127.0.0.1:5999", "-o", out],
            2,
            "address \"127.0.0.1:5999\" is not valid: -B takes no port (the kernel picks the local one); write 127.0.0.1".into(),
        ),
        (
            "oscil-reader",
            &["-c", "127.0.0.1", "--key-file", missing_key, "-o", out],
            2,
            format!("oscil-reader: cannot read key file {missing_key}: no such file or directory"),
        ),
        (
            "oscil-daemon",
            &["--key-file", missing_key],
            2,
            format!("oscil-daemon: cannot read key file {missing_key}: no such file or directory"),
        ),
        (
            "oscil-reader",
            &["-c", &closed, "-o", "/proc/oscil"],
            1,
            "oscil-reader: cannot create /proc/oscil: no such file or directory".into(),
        ),
        (
            "oscil-reader",
            &["-c", &closed, "-o", file],
            1,
            format!("oscil-reader: cannot create {file}: a file is there, not a directory"),
        ),
        (
            "oscil-lab",
            &["--out", file, "--quick"],
            1,
            format!("oscil-lab: cannot create {file}: a file is there, not a directory"),
        ),
    ];
    for (binary, args, code, holds) in cases {
        expect(binary, args, *code, holds);
    }
    assert!(!Path::new(out).exists(), "a refused run left {out} behind");
}

/// `extra` flags given to a reader toward a closed port and to a daemon on a taken one: a
/// warning line from each, then its start fails (exit 1) as it would without them.
fn expect_warning_then_failure(extra: &[&str], warning: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let closed = format!("127.0.0.1:{}", free_port());
    let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    let reader = [&["-c", &closed, "-o", out.to_str().unwrap()][..], extra].concat();
    let daemon = [&["--listen", &taken][..], extra].concat();
    let cases = [
        (
            "oscil-reader",
            reader,
            format!("oscil-reader: cannot connect to the daemon at {closed}"),
        ),
        (
            "oscil-daemon",
            daemon,
            format!("oscil-daemon: cannot listen on {taken}: address in use"),
        ),
    ];
    for (binary, args, then) in cases {
        let output = run(binary, &args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(output.status.code(), Some(1), "{binary}: {stderr}");
        assert_eq!(lines.len(), 2, "{binary}: {stderr}");
        assert_eq!(lines[0], format!("{binary}: {warning}"));
        assert!(lines[1].starts_with(&then), "{binary}: {stderr}");
    }
}

#[test]
fn a_zero_lowat_is_warned_about() {
    expect_warning_then_failure(
        &["--notsent-lowat", "0"],
        "warning: --notsent-lowat 0 leaves the socket unset: the kernel then uses the net.ipv4.tcp_notsent_lowat sysctl",
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let closed = format!("127.0.0.1:{}", free_port());
    // Any other value, no warning.
    let output = run(
        "oscil-reader",
        &[
            "-c",
            &closed,
            "-o",
            out.to_str().unwrap(),
            "--notsent-lowat",
            "1",
        ],
    );
    assert!(!String::from_utf8_lossy(&output.stderr).contains("warning"));
}

#[test]
fn key_files_are_kept_from_others() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // `--gen-key > FILE`: the shell makes FILE 0644; the daemon makes it 0600.
    let key = dir.path().join("oscil.key");
    let file = std::fs::File::create(&key).unwrap();
    file.set_permissions(std::fs::Permissions::from_mode(0o644))
        .unwrap();
    let status = Command::new(workspace_bin("oscil-daemon"))
        .arg("--gen-key")
        .stdout(file)
        .status()
        .unwrap();
    assert!(status.success());
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "--gen-key > FILE left mode {mode:o}");
    assert_eq!(std::fs::read_to_string(&key).unwrap().trim().len(), 64);

    // A key file others can read is named, then the run goes on (here to fail to start).
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let key = key.to_str().unwrap();
    expect_warning_then_failure(
        &["--key-file", key],
        &format!("warning: key file {key} can be read by others (mode 0644): chmod 600 {key}"),
    );
}

#[test]
fn reader_takes_iperf3_habits() {
    let daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // -t for a full-speed run, -P for flows (the last one given wins), -J for JSON.
    let output = run(
        "oscil-reader",
        &[
            "-c",
            &daemon.addr.to_string(),
            "-o",
            out.to_str().unwrap(),
            "-t",
            "1s",
            "-P",
            "1",
            "-P",
            "2",
            "-J",
            "-q",
        ],
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    assert_eq!(json["status"], "complete");
    assert_eq!(json["config"]["flows"], 2);
    assert_eq!(json["config"]["pattern"]["full_speed"], true);
    assert_eq!(json["label"], "run");
    assert!(json["versions"]["daemon"]
        .as_str()
        .unwrap()
        .contains("oscil"));
    assert_eq!(json["cycles"][0]["cycle"], 1);
    assert_eq!(json["cycles"][0]["phase"], "fast");

    // Without -J, the summary fits an 80-column terminal; -q hides only the progress display.
    let output = run(
        "oscil-reader",
        &[
            "-c",
            &daemon.addr.to_string(),
            "-o",
            dir.path().join("plain").to_str().unwrap(),
            "--fast",
            "1s",
            "--slow",
            "1s",
            "--cycles",
            "1",
            "-q",
        ],
    );
    let summary = String::from_utf8_lossy(&output.stdout);
    assert!(summary.contains("slow"), "{summary}");
    assert!(
        summary.lines().all(|l| l.chars().count() <= 80),
        "{summary}"
    );
}

#[test]
fn link_usage_errors() {
    let table: &[(&[&str], &str)] = &[
        (
            &["--rate", "100M", "--delay", "10ms"],
            "100mbit (bits per second) or 800mbit (100 megabytes per second)",
        ),
        (&["--rate", "10mbit", "--delay", "10"], "10s? 10ms?"),
        (
            &[
                "--rate", "10mbit", "--delay", "10ms", "--a-dev", "x", "--b-dev", "x",
            ],
            "same device",
        ),
        (
            &["--rate", "10mbit", "--delay", "10ms", "--queue", "0"],
            "--queue",
        ),
    ];
    for (args, holds) in table {
        expect("oscil-link", args, 2, holds);
    }
}

#[test]
fn every_binary_prints_completions_and_a_man_page() {
    for binary in [
        "oscil-daemon",
        "oscil-reader",
        "oscil-link",
        "oscil-report",
        "oscil-lab",
    ] {
        let bash = run(binary, &["--completions", "bash"]);
        assert_eq!(bash.status.code(), Some(0), "{binary} --completions bash");
        assert!(String::from_utf8_lossy(&bash.stdout).contains("complete -F"));
        let man = run(binary, &["--man"]);
        assert_eq!(man.status.code(), Some(0), "{binary} --man");
        assert!(String::from_utf8_lossy(&man.stdout).contains(".TH"));
        let help = run(binary, &["--help"]);
        let help = String::from_utf8_lossy(&help.stdout);
        assert!(
            help.contains("--completions <SHELL>  ") || help.contains("--completions <SHELL>\n"),
            "{binary} --help: {help}"
        );
        assert!(
            help.contains(
                "Print a shell completion script (bash, zsh, fish, elvish, powershell) and exit"
            ),
            "{binary} --help: {help}"
        );
        assert!(
            help.contains("Print a man page and exit"),
            "{binary} --help: {help}"
        );
        expect(
            binary,
            &["--man", "--completions", "bash"],
            2,
            &format!("{binary}: the argument '--man' cannot be used with one or more of the other specified arguments"),
        );
    }
    let help = run("oscil-reader", &["--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains(
        "No progress display while the run goes on (the summary is still printed at the end)"
    ));
}

/// A one-connection server on loopback that answers `answer`, then holds the connection
/// until the reader closes it; runs `check` with its address, then the reader's
/// `-o` directory, which must not have been made.
fn against_a_peer_that_answers(answer: &'static [u8], check: impl FnOnce(&str, &str)) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        std::io::Write::write_all(&mut stream, answer).unwrap();
        let _ = std::io::Read::read_to_end(&mut stream, &mut Vec::new());
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    check(&addr, out.to_str().unwrap());
    assert!(!out.exists());
    server.join().unwrap();
}

#[test]
fn reader_names_a_peer_that_does_not_speak_oscil() {
    // A web server's answer: its first four bytes read as an absurd frame length.
    against_a_peer_that_answers(b"HTTP/1.1 400 Bad Request\r\n\r\n", |addr, out| {
        expect(
            "oscil-reader",
            &["-c", addr, "-o", out],
            1,
            &format!("{addr} does not speak the oscil protocol"),
        )
    });
}

#[test]
fn reader_names_a_silent_peer_within_2_s() {
    // iperf3's server: it accepts, answers one byte (its state) and waits for parameters.
    against_a_peer_that_answers(&[9], |addr, out| {
        let started = std::time::Instant::now();
        expect(
            "oscil-reader",
            &["-c", addr, "-o", out],
            1,
            &format!("oscil-reader: {addr} accepted the connection but said nothing oscil understands within 2 s: is it an oscil-daemon? (iperf3 listens on 5201, oscil-daemon on 5250)"),
        );
        let took = started.elapsed();
        assert!(
            took >= std::time::Duration::from_secs(2) && took < std::time::Duration::from_secs(4),
            "named after {took:?}, not after 2 s"
        );
    });
}

#[test]
fn report_refuses_a_used_out_and_a_missing_run() {
    let dir = tempfile::tempdir().unwrap();
    let used = dir.path().join("report");
    std::fs::create_dir(&used).unwrap();
    std::fs::write(used.join("notes.txt"), "mine").unwrap();
    let missing = dir.path().join("no-such-run");
    expect(
        "oscil-report",
        &[missing.to_str().unwrap(), "--out", used.to_str().unwrap()],
        1,
        "no-such-run",
    );
    let run_dir = dir.path().join("run");
    let daemon = Daemon::start(&[]);
    let reader = run(
        "oscil-reader",
        &[
            "-c",
            &daemon.addr.to_string(),
            "-o",
            run_dir.to_str().unwrap(),
            "-t",
            "1s",
            "-q",
        ],
    );
    assert!(reader.status.success());
    expect(
        "oscil-report",
        &[run_dir.to_str().unwrap(), "--out", used.to_str().unwrap()],
        2,
        "is not empty: pass --force",
    );
    // The reader says the same of a used -o, with the same exit code, before connecting.
    let closed = format!("127.0.0.1:{}", free_port());
    expect(
        "oscil-reader",
        &["-c", &closed, "-o", used.to_str().unwrap()],
        2,
        &format!(
            "oscil-reader: {}: the directory is not empty (pass --force to write into it)",
            used.display()
        ),
    );
    let forced = run(
        "oscil-report",
        &[
            run_dir.to_str().unwrap(),
            "--out",
            used.to_str().unwrap(),
            "--force",
        ],
    );
    assert!(
        forced.status.success(),
        "{}",
        String::from_utf8_lossy(&forced.stderr)
    );
    assert!(
        used.join("notes.txt").is_file(),
        "--force removed a file it did not write"
    );
    let file = dir.path().join("afile");
    std::fs::write(&file, "").unwrap();
    expect(
        "oscil-report",
        &[run_dir.to_str().unwrap(), "--out", file.to_str().unwrap()],
        1,
        &format!(
            "oscil-report: cannot create {}: a file is there, not a directory",
            file.display()
        ),
    );
    expect(
        "oscil-report",
        &[run_dir.to_str().unwrap(), "--out", "/proc/oscil"],
        1,
        "oscil-report: cannot create /proc/oscil: no such file or directory",
    );
    expect(
        "oscil-report",
        &["--fats"],
        2,
        "unexpected argument '--fats'",
    );
}

#[test]
fn lab_takes_the_same_values() {
    let table: &[(&[&str], &str)] = &[
        (
            &["--rate", "100M", "--dry-run"],
            "100mbit (bits per second) or 800mbit (100 megabytes per second)",
        ),
        (&["--rtt", "40", "--dry-run"], "40s? 40ms?"),
        (
            &["--rate", "0", "--dry-run"],
            "oscil-lab: --rate: rate \"0\" is not valid: expected a rate above zero",
        ),
        (&["--lowat", "-5", "--dry-run"], "-5"),
        (&["--fats"], "unexpected argument '--fats'"),
        // The reader's rules, before any run: write sizes, phases against the interval.
        (
            &["--write-size", "5G", "--dry-run"],
            "oscil-lab: --write-size: write size of 5368709120 bytes: 1 to 16777216 bytes at a time",
        ),
        (
            &["--fast", "1s", "--slow", "1s", "--interval", "5s", "--dry-run"],
            "oscil-lab: --interval 5000 ms is longer than the shortest phase (1000 ms): every phase needs at least one sample",
        ),
        (
            &["--pacing-rate", "4bit", "--dry-run"],
            "oscil-lab: --pacing-rate: pacing rate of 4 bit/s is below 8 bit/s",
        ),
        // The lab sets the sysctl, whose 0 is a limit no socket meets (the reader's
        // --notsent-lowat 0 leaves the socket to the sysctl, and is warned about).
        (
            &["--lowat", "default,0", "--dry-run"],
            "oscil-lab: --lowat: 0 would stall every write: a socket without its own TCP_NOTSENT_LOWAT may write only while its unsent bytes are below net.ipv4.tcp_notsent_lowat, and none are below 0 (`default` leaves the kernel's)",
        ),
    ];
    for (args, holds) in table {
        expect("oscil-lab", args, 2, holds);
    }
    // A congestion control this kernel lacks, named with the ones it has.
    let loaded =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap();
    let loaded: Vec<&str> = loaded.split_whitespace().collect();
    expect(
        "oscil-lab",
        &["--cc", "cubic,reno,foo", "--dry-run"],
        2,
        &format!(
            "oscil-lab: --cc: \"foo\" is not a congestion control this kernel has (it has: {}",
            loaded.join(" ")
        ),
    );
    // The reader's size spellings work in the lab too.
    let dry = run("oscil-lab", &["--lowat", "default,128k", "--dry-run"]);
    let stdout = String::from_utf8_lossy(&dry.stdout);
    assert_eq!(
        dry.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert!(stdout.contains("lowat-128k"), "{stdout}");
    // A header before the rows, one row a run, no JSON.
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("every run: 5s fast, 15s slow at 5% of the peak, 3 cycle(s)"),
        "{stdout}"
    );
    assert!(lines[1].contains("#  rep  configuration"), "{stdout}");
    assert!(lines.iter().all(|l| !l.contains('{')), "{stdout}");
    // restore of a directory that is not there: exit 1 and one line.
    expect(
        "oscil-lab",
        &["restore", "/no/such/dir"],
        1,
        "oscil-lab: /no/such/dir: no such directory",
    );
}

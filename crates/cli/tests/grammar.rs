//! One command-line grammar across oscil's binaries: every bad or habitual input an iperf3,
//! iperf2, netperf or flent user types gets the documented exit code (docs/cli.md's table:
//! 2 for what the command line cannot do, 1 for what failed beyond it) and one line that
//! says what is wrong; no binary panics on a standard output that closes or fills. Runs
//! the real binaries (about 15 s in all, most of it a few 1 s runs against a daemon on
//! loopback). It is the one runner of the command-line sweep (the Python copy,
//! scripts/cli-sweep, is retired): with `-- --nocapture` each case checked by `expect`
//! prints its class (clear, confusing, wrong, crash) and the counts so far.

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

/// `oscil-reader -c DAEMON -o OUT EXTRA...`.
fn read_from(daemon: &Daemon, out: &Path, extra: &[&str]) -> Output {
    let addr = daemon.addr.to_string();
    let args = [&["-c", &addr, "-o", out.to_str().unwrap()][..], extra].concat();
    run("oscil-reader", &args)
}

/// A parser's or the OS's raw words: a line holding one says what broke, not what to do.
const RAW_WORDS: [&str; 7] = [
    "invalid digit",
    "(os error",
    "internally tagged",
    "No such file or directory",
    "Is a directory",
    "Connection reset by peer",
    "expected a byte count such as",
];

/// How one case of the table came out: the sweep's classes (this test is the one runner;
/// `cargo test --release -p oscil-cli --test grammar -- --nocapture` prints every case and
/// the running counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Exit 0-3 as the table says, one line naming the program, with the words expected.
    Clear,
    /// The documented exit code, but not one clean line of the expected words.
    Confusing,
    /// Another exit code than docs/cli.md's table gives the case.
    Wrong,
    /// A panic, an abort or death by a signal.
    Crash,
}

/// Cases seen so far in this test binary, by [`Class`] (clear, confusing, wrong, crash).
static TALLY: [std::sync::atomic::AtomicUsize; 4] =
    [const { std::sync::atomic::AtomicUsize::new(0) }; 4];

/// The class of `output` for a case that should exit `code` with one line holding `holds`.
fn classify(binary: &str, output: &Output, code: i32, holds: &str) -> Class {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stderr.lines().next().unwrap_or("");
    match output.status.code() {
        None | Some(101) | Some(134) => Class::Crash,
        _ if stderr.contains("panicked") => Class::Crash,
        Some(found) if found != code => Class::Wrong,
        _ if stderr.lines().count() != 1
            || !line.starts_with(&format!("{binary}: "))
            || !line.contains(holds)
            || RAW_WORDS.iter().any(|raw| line.contains(raw)) =>
        {
            Class::Confusing
        }
        _ => Class::Clear,
    }
}

/// Counts and prints one case of the table (seen with `--nocapture`).
fn tally(binary: &str, args: &[&str], class: Class) {
    TALLY[class as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let [clear, confusing, wrong, crash] = TALLY
        .each_ref()
        .map(|n| n.load(std::sync::atomic::Ordering::Relaxed));
    println!(
        "{:<9} {binary} {}  [so far: {clear} clear, {confusing} confusing, {wrong} wrong, {crash} crash]",
        format!("{class:?}").to_lowercase(),
        args.join(" ")
    );
}

/// Checks the exit code, that stderr is exactly one line, and what that line holds.
fn expect(binary: &str, args: &[&str], code: i32, holds: &str) {
    let output = run(binary, args);
    tally(binary, args, classify(binary, &output, code, holds));
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
        2,
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
        (&["-R"], "unexpected argument '-R': iperf3's -R: oscil always sends one way, from oscil-daemon to oscil-reader: run the daemon on the sending host (a second pair the other way measures the reverse; oscil-lab --direction reverse or both runs it over the emulated link)"),
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
            2,
            "oscil-reader: cannot create /proc/oscil: no such file or directory".into(),
        ),
        (
            "oscil-reader",
            &["-c", &closed, "-o", file],
            2,
            format!("oscil-reader: cannot create {file}: a file is there, not a directory"),
        ),
        (
            "oscil-lab",
            &["--out", file, "--quick"],
            2,
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
    let output = read_from(
        &daemon,
        &out,
        &["-t", "1s", "-P", "1", "-P", "2", "-J", "-q"],
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
    let output = read_from(
        &daemon,
        &dir.path().join("plain"),
        &["--fast", "1s", "--slow", "1s", "--cycles", "1", "-q"],
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
        2,
        &format!("oscil-report: {}: no such directory", missing.display()),
    );
    let run_dir = dir.path().join("run");
    let daemon = Daemon::start(&[]);
    let reader = read_from(&daemon, &run_dir, &["-t", "1s", "-q"]);
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
        2,
        &format!(
            "oscil-report: cannot create {}: a file is there, not a directory",
            file.display()
        ),
    );
    expect(
        "oscil-report",
        &[run_dir.to_str().unwrap(), "--out", "/proc/oscil"],
        2,
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
            "oscil-lab: invalid value '0' for '--rate <LIST>': rate \"0\" is not valid: expected a rate above zero (see oscil-lab --help)",
        ),
        (&["--lowat", "-5", "--dry-run"], "-5"),
        (&["--fats"], "unexpected argument '--fats'"),
        // The reader's rules, before any run: write sizes, phases against the interval.
        (
            &["--write-size", "5G", "--dry-run"],
            "oscil-lab: invalid value '5G' for '--write-size <BYTES>': write size of 5368709120 bytes: 1 to 16777216 bytes at a time",
        ),
        (
            &["--fast", "1s", "--slow", "1s", "--interval", "5s", "--dry-run"],
            "oscil-lab: --interval 5000 ms is longer than the shortest phase (1000 ms): every phase needs at least one sample",
        ),
        (
            &["--pacing-rate", "4bit", "--dry-run"],
            "oscil-lab: invalid value '4bit' for '--pacing-rate <LIST>': pacing rate of 4 bit/s is below 8 bit/s",
        ),
        // The lab sets the sysctl, whose 0 is a limit no socket meets (the reader's
        // --notsent-lowat 0 leaves the socket to the sysctl, and is warned about).
        (
            &["--lowat", "default,0", "--dry-run"],
            "oscil-lab: invalid value 'default,0' for '--tcp-notsent-lowat <LIST>': 0 would stall every write: a socket without its own TCP_NOTSENT_LOWAT may write only while its unsent bytes are below net.ipv4.tcp_notsent_lowat, and none are below 0 (`default` leaves the kernel's)",
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
        lines[0].starts_with(
            "every run: 5s fast, 15s slow at 5% of the emulated path's rate, 3 cycle(s)"
        ),
        "{stdout}"
    );
    assert!(lines[1].contains("#  rep  configuration"), "{stdout}");
    assert!(lines.iter().all(|l| !l.contains('{')), "{stdout}");
    // restore of a directory that is not there: a bad value, exit 2, and one line.
    expect(
        "oscil-lab",
        &["restore", "/no/such/dir"],
        2,
        "oscil-lab: /no/such/dir: no such directory",
    );
}

/// Where a binary's standard output goes in [`to_stdout`]: a pipe whose reader has gone
/// (as after `| head -1`), or a full disk.
#[derive(Debug, Clone, Copy)]
enum Sink {
    ClosedPipe,
    Full,
}

/// Runs `binary args` with its standard output into `sink`; its exit code and stderr.
fn to_stdout(sink: Sink, binary: &str, args: &[&str]) -> (Option<i32>, String) {
    let stdout = match sink {
        Sink::ClosedPipe => {
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            std::process::Stdio::from(writer)
        }
        Sink::Full => std::process::Stdio::from(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        ),
    };
    let output = Command::new(workspace_bin(binary))
        .args(args)
        .env_remove("OSCIL_KEY")
        .env_remove("RUST_BACKTRACE")
        .stdout(stdout)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), stderr)
}

/// A closed pipe ends quietly with the work's own code; a full disk is one line and exit 1
/// (docs/cli.md). `code` is the work's.
fn expect_stdout_handled(binary: &str, args: &[&str], code: i32, stderr_before: &str) {
    let (closed, stderr) = to_stdout(Sink::ClosedPipe, binary, args);
    assert_eq!(closed, Some(code), "{binary} {args:?} | closed: {stderr}");
    assert_eq!(stderr, stderr_before, "{binary} {args:?} | closed");
    let (full, stderr) = to_stdout(Sink::Full, binary, args);
    let expected_code = if code == 0 { 1 } else { code };
    assert_eq!(
        full,
        Some(expected_code),
        "{binary} {args:?} > /dev/full: {stderr}"
    );
    assert_eq!(
        stderr,
        format!("{stderr_before}{binary}: cannot write to standard output: no space left on the device\n"),
        "{binary} {args:?} > /dev/full"
    );
}

const BINARIES: [&str; 5] = [
    "oscil-daemon",
    "oscil-reader",
    "oscil-report",
    "oscil-lab",
    "oscil-link",
];

#[test]
fn no_output_path_panics_on_a_closed_or_full_stdout() {
    for binary in BINARIES {
        for args in [
            &["--completions", "bash"][..],
            &["--man"],
            &["--help"],
            &["--version"],
        ] {
            expect_stdout_handled(binary, args, 0, "");
        }
    }
    expect_stdout_handled("oscil-daemon", &["--gen-key"], 0, "");
    expect_stdout_handled("oscil-lab", &["--dry-run"], 0, "");
    expect_stdout_handled(
        "oscil-lab",
        &["--dry-run", "--quick", "--lowat", "default,128k,256k"],
        0,
        "",
    );
    // -J: the error object of a usage error goes to stdout too.
    let usage = "oscil-reader: invalid value '5' for '--time <DUR>': duration \"5\" is not valid: expected a unit: 5s? 5ms? (see oscil-reader --help)\n";
    expect_stdout_handled("oscil-reader", &["-J", "-t", "5"], 2, usage);
}

#[test]
fn a_run_and_its_report_survive_a_closed_or_full_stdout() {
    let daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let addr = daemon.addr.to_string();
    let mut runs = 0;
    let mut next_out = || {
        runs += 1;
        dir.path().join(format!("run{runs}")).display().to_string()
    };
    // The summary, and -J's result, after a complete run: the run directory is whole
    // either way.
    for json in [false, true] {
        for sink in [Sink::ClosedPipe, Sink::Full] {
            let out = next_out();
            let mut args = vec!["-c", &addr, "-o", &out, "-t", "1s", "-q"];
            if json {
                args.push("-J");
            }
            let (code, stderr) = to_stdout(sink, "oscil-reader", &args);
            match sink {
                Sink::ClosedPipe => assert_eq!((code, stderr.as_str()), (Some(0), ""), "{args:?}"),
                Sink::Full => assert_eq!(
                    (code, stderr.as_str()),
                    (Some(1), "oscil-reader: cannot write to standard output: no space left on the device\n"),
                    "{args:?}"
                ),
            }
            let meta = std::fs::read_to_string(Path::new(&out).join("run.json")).unwrap();
            let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
            assert_eq!(meta["ending"]["status"], "complete", "{args:?}");
        }
    }
    // As the issue typed it: the reader's summary into `head -1`.
    let shell = format!(
        "{} -c {addr} -o {} -t 1s -q | head -1 >/dev/null; echo ${{PIPESTATUS[0]}}",
        workspace_bin("oscil-reader").display(),
        next_out()
    );
    let piped = Command::new("bash")
        .args(["-c", &shell])
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&piped.stdout).trim(), "0");
    assert!(
        piped.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
    // The report's list of the files it wrote.
    let run = dir.path().join("run1").display().to_string();
    let report = dir.path().join("report").display().to_string();
    let args = ["--force", "-o", &report, &run];
    expect_stdout_handled("oscil-report", &args, 0, "");
}

/// `output()` with a deadline: a binary that waits on a FIFO or reads `/dev/zero` without
/// bound must not hang the test.
fn output_within(binary: &str, args: &[&str], limit: std::time::Duration) -> Output {
    let child = Command::new(workspace_bin(binary))
        .args(args)
        .env_remove("OSCIL_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(limit);
        // Only the child started above, by its own id.
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
    });
    let output = child.wait_with_output().unwrap();
    assert!(
        !watchdog.is_finished(),
        "{binary} {args:?} ran past {limit:?}"
    );
    output
}

#[test]
fn key_files_that_are_not_regular_files_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let fifo = fifo.to_str().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let cases = [
        ("/dev/zero", "not a regular file (a character device)"),
        ("/proc", "it is a directory"),
        (fifo, "not a regular file (a FIFO)"),
    ];
    for (file, why) in cases {
        // --meta too: a regular file of bounded size, else refused at once.
        let meta = output_within(
            "oscil-reader",
            &["-c", "127.0.0.1", "-o", out, "--meta", file],
            std::time::Duration::from_secs(10),
        );
        assert_eq!(meta.status.code(), Some(2), "--meta {file}");
        let kind = why
            .strip_prefix("not a regular file (a ")
            .map_or("directory", |k| k.trim_end_matches(')'));
        assert_eq!(
            String::from_utf8_lossy(&meta.stderr),
            format!("oscil-reader: --meta file {file}: not a regular file but a {kind}; refused\n")
        );
        for (binary, args) in [
            ("oscil-daemon", vec!["--key-file", file]),
            (
                "oscil-reader",
                vec!["-c", "127.0.0.1", "-o", out, "--key-file", file],
            ),
        ] {
            // Within 10 s, though a read of /dev/zero never ends and a FIFO's open waits.
            let output = output_within(binary, &args, std::time::Duration::from_secs(10));
            assert_eq!(output.status.code(), Some(2), "{binary} {args:?}");
            assert_eq!(
                String::from_utf8_lossy(&output.stderr),
                format!("{binary}: cannot read key file {file}: {why}\n"),
                "{binary} {args:?}: no chmod advice for a file that is not one"
            );
        }
    }
}

#[test]
fn a_report_memory_limit_below_any_report_is_refused_at_once() {
    for limit in ["0", "1M"] {
        expect(
            "oscil-report",
            &["run", "-o", "x", "--max-memory", limit],
            2,
            &format!("oscil-report: invalid value '{limit}' for '--max-memory <BYTES>': {limit} is less than any report needs: give at least 128M"),
        );
    }
}

#[test]
fn the_other_binaries_spellings_are_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let closed = format!("127.0.0.1:{}", free_port());
    let out = dir.path().join("run");
    // The reader and the daemon take the lab's --cc and --lowat ...
    expect(
        "oscil-reader",
        &[
            "-c",
            &closed,
            "-o",
            out.to_str().unwrap(),
            "--cc",
            "cubic",
            "--lowat",
            "128k",
        ],
        1,
        &format!("oscil-reader: cannot connect to the daemon at {closed}"),
    );
    let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    expect(
        "oscil-daemon",
        &["--listen", &taken, "--cc", "cubic", "--lowat", "128k"],
        1,
        &format!("oscil-daemon: cannot listen on {taken}: address in use"),
    );
    // ... and the lab their --congestion, --notsent-lowat and -o.
    let campaign = dir.path().join("campaign");
    let dry = run(
        "oscil-lab",
        &[
            "--congestion",
            "cubic",
            "--notsent-lowat",
            "default,128k",
            "-o",
            campaign.to_str().unwrap(),
            "--dry-run",
        ],
    );
    assert_eq!(
        dry.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert!(String::from_utf8_lossy(&dry.stdout).contains("1gbit_466ms_cubic_lowat-128k"));
    assert!(!campaign.exists(), "--dry-run touches nothing");
}

#[test]
fn habits_of_other_tools_get_a_pointer_in_every_binary() {
    let table: &[(&str, &[&str], &str)] = &[
        ("oscil-reader", &["-u"], "unexpected argument '-u': iperf3's -u: oscil measures TCP only: what a TCP sender's buffers do when its reader reads unevenly (see oscil-reader --help)"),
        ("oscil-daemon", &["--udp"], "unexpected argument '--udp': iperf3's --udp: oscil measures TCP only"),
        ("oscil-lab", &["-u"], "unexpected argument '-u': iperf3's -u: oscil measures TCP only"),
        ("oscil-reader", &["--bidir"], "unexpected argument '--bidir': iperf3's --bidir: oscil always sends one way, from oscil-daemon to oscil-reader: run the daemon on the sending host (a second pair the other way measures the reverse; oscil-lab --direction reverse or both runs it over the emulated link)"),
        ("oscil-reader", &["-d"], "unexpected argument '-d': iperf2's -d: oscil always sends one way"),
        ("oscil-reader", &["--reverse"], "unexpected argument '--reverse': iperf3's --reverse: oscil always sends one way"),
        ("oscil-lab", &["-t", "10"], "unexpected argument '-t': iperf3's -t: every run follows the pattern: --fast, --slow and --cycles set its lengths (--quick: one short cycle), and --pattern full-speed reads at full speed as iperf3 does (see oscil-lab --help)"),
        ("oscil-lab", &["-P", "4"], "unexpected argument '-P': iperf3's -P: --flows N sets the data connections of every run (see oscil-lab --help)"),
        ("oscil-daemon", &["-P", "4"], "unexpected argument '-P': iperf3's -P: oscil-reader -P N (--flows) opens N data connections"),
        ("oscil-lab", &["-J"], "unexpected argument '-J': iperf3's -J: a campaign keeps campaign.json and report/report.json in its --out; oscil-reader -J prints one run as JSON"),
        ("oscil-report", &["-J", "run"], "unexpected argument '-J': iperf3's -J: the report writes report.json (every file, figure and warning) into its --out"),
        ("oscil-daemon", &["--json"], "unexpected argument '--json': iperf3's --json: the daemon prints no results: oscil-reader -J prints the run as JSON"),
        ("oscil-lab", &["-c", "host"], "unexpected argument '-c': iperf3's -c: --sender USER@HOST and --receiver local|USER@HOST run a campaign on real hosts"),
        ("oscil-daemon", &["-c", "host"], "unexpected argument '-c': iperf3's -c: oscil-daemon listens (--listen ADDR); oscil-reader -c HOST connects to it"),
        ("oscil-reader", &["-H", "host"], "unexpected argument '-H': netperf's and flent's -H: -c HOST names the daemon"),
        ("oscil-daemon", &["-B", "::1"], "unexpected argument '-B': iperf3's -B: --listen ADDR sets the address the daemon listens on"),
        ("oscil-reader", &["-O", "2"], "unexpected argument '-O': iperf3's -O: oscil-report judges cycles 2 and later by default, leaving out the first's slow start (--whole-run keeps it)"),
        ("oscil-lab", &["-C", "bbr"], "unexpected argument '-C': iperf3's -C: --congestion NAME"),
        ("oscil-lab", &["-w", "1M"], "unexpected argument '-w': iperf3's -w: --sndbuf BYTES sets the daemon's SO_SNDBUF; --rcvbuf BYTES sets the reader's SO_RCVBUF"),
        // Clap's nearest spelling would mislead: --restore is not --resume.
        ("oscil-lab", &["--restore", "dir"], "unexpected argument '--restore': restore is a command, not a flag: oscil-lab restore DIR puts back what a campaign changed (--resume DIR continues one) (see oscil-lab --help)"),
        ("oscil-lab", &["campaign-dir"], "unexpected argument 'campaign-dir': oscil-lab takes no directory alone: --out DIR starts a campaign there, --resume DIR continues one, restore DIR puts back its settings"),
    ];
    for (binary, args, holds) in table {
        expect(binary, args, 2, holds);
        let line = String::from_utf8_lossy(&run(binary, args).stderr).into_owned();
        assert!(
            !line.contains("similar argument"),
            "{binary} {args:?}: {line}"
        );
    }
}

#[test]
fn numbers_say_what_they_take_not_the_parsers_words() {
    let table: &[(&str, &[&str], &str)] = &[
        ("oscil-reader", &["-c", "h", "-o", "x", "-P", "2k"], "oscil-reader: invalid value '2k' for '--flows <N>': count \"2k\" is not valid: expected a whole number from 1 to 10000 (see oscil-reader --help)"),
        ("oscil-reader", &["-c", "h", "-o", "x", "--cycles", "1.5"], "invalid value '1.5' for '--cycles <N>': count \"1.5\" is not valid: expected a whole number from 1 to 10000"),
        ("oscil-daemon", &["--max-sessions", "2k"], "invalid value '2k' for '--max-sessions <N>': count \"2k\" is not valid: expected a whole number from 1 to 65535"),
        ("oscil-reader", &["-c", "h", "-o", "x", "-p", "abc"], "invalid value 'abc' for '--port <PORT>': port \"abc\" is not valid: expected a whole number from 1 to 65535"),
        ("oscil-daemon", &["-p", "70000"], "port \"70000\" is not valid: expected a whole number from 1 to 65535"),
        ("oscil-link", &["--rate", "1mbit", "--delay", "1ms", "--queue", "1e3"], "count \"1e3\" is not valid: expected a whole number from 1 to 4294967295"),
        ("oscil-lab", &["--flows", "2k", "--dry-run"], "oscil-lab: invalid value '2k' for '--flows <N>': count \"2k\" is not valid: expected a whole number from 1 to 10000 (see oscil-lab --help)"),
        ("oscil-reader", &["-c", "h", "-o", "x", "--sndbuf", "99999999999999999999999"], "size \"99999999999999999999999\" is not valid: expected a size below 4 GiB (a socket option is 32 bits)"),
        ("oscil-lab", &["--wmem", "4096:16384:99999999999999999999999", "--dry-run"], "size \"99999999999999999999999\" is not valid: expected a size below 16 EiB (2^64 bytes)"),
    ];
    for (binary, args, holds) in table {
        expect(binary, args, 2, holds);
        let line = String::from_utf8_lossy(&run(binary, args).stderr).into_owned();
        assert!(!line.contains("invalid digit"), "{binary} {args:?}: {line}");
    }
}

#[test]
fn what_is_adjusted_is_said_and_what_would_be_dropped_is_refused() {
    // -t replaces the pattern: beside the pattern's own flags it is refused, not dropped.
    for flag in [
        ["--fast", "2s"],
        ["--cycles", "2"],
        ["--slow-rate", "5mbit"],
    ] {
        let args = [&["-c", "h", "-o", "x", "-t", "5s"][..], &flag].concat();
        expect(
            "oscil-reader",
            &args,
            2,
            &format!(
                "oscil-reader: the argument '--time <DUR>' cannot be used with '{} <",
                flag[0]
            ),
        );
    }
    // The kernel's floor under SO_SNDBUF and the daemon's --max-rate, each one line.
    let daemon = Daemon::start(&["--max-rate", "100mbit"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = read_from(
        &daemon,
        &out,
        &["-t", "1s", "-q", "--sndbuf", "0", "--pacing-rate", "1gbit"],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0]
            .starts_with("oscil-reader: the daemon's sockets: SO_SNDBUF 0 requested, kernel set "),
        "{stderr}"
    );
    assert_eq!(
        lines[1],
        "oscil-reader: --pacing-rate 1gbit asked; the daemon paces each flow at 100mbit (its --max-rate caps a session)"
    );
    // The daemon says it of its own defaults, at start.
    let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    let output = run("oscil-daemon", &["--listen", &taken, "--sndbuf", "0"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        lines[0].starts_with(
            "oscil-daemon: default socket options: SO_SNDBUF 0 requested, kernel set "
        ),
        "{stderr}"
    );
    assert_eq!(
        lines[1],
        format!("oscil-daemon: cannot listen on {taken}: address in use")
    );
}

/// A server on loopback that accepts one connection and closes it at once, with a reset
/// when `reset`; runs `check` with its address.
fn against_a_peer_that_hangs_up(reset: bool, check: impl FnOnce(&str)) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        if reset {
            socket2::SockRef::from(&stream)
                .set_linger(Some(std::time::Duration::ZERO))
                .unwrap();
        }
    });
    check(&addr);
    server.join().unwrap();
}

#[test]
fn errors_blame_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    for (reset, how) in [(false, "closed"), (true, "reset")] {
        against_a_peer_that_hangs_up(reset, |addr| {
            expect(
                "oscil-reader",
                &["-c", addr, "-o", out],
                1,
                &format!("oscil-reader: {addr} {how} the connection before any answer: is it an oscil-daemon? (a daemon answers even when it refuses; iperf3 listens on 5201, oscil-daemon on 5250)"),
            )
        });
    }
    let not_a_campaign = tempfile::tempdir().unwrap();
    let not_a_campaign = not_a_campaign.path().to_str().unwrap();
    // A campaign.json the lab did not write: no word of how it ran.
    let foreign = tempfile::tempdir().unwrap();
    let campaign = serde_json::json!({
        "format_version": 1, "software": "elsewhere", "created_unix_ms": 0,
        "backend": "netns", "sender": "", "receiver": "", "order": "grouped",
        "seed": 0, "repeat": 1, "runs": []
    });
    std::fs::write(foreign.path().join("campaign.json"), campaign.to_string()).unwrap();
    let foreign = foreign.path().to_str().unwrap();
    let used = tempfile::tempdir().unwrap();
    std::fs::write(used.path().join("notes.txt"), "mine").unwrap();
    let used = used.path().to_str().unwrap();
    let table: &[(&str, &[&str], String)] = &[
        // A URL is a host and a port with a scheme around them.
        ("oscil-reader", &["-c", "http://sender.example:5250/", "-o", out], "address \"http://sender.example:5250/\" is not valid: a URL, but oscil speaks its own protocol, not http: give the host alone (sender.example:5250)".into()),
        // 127.1 is a name the resolver reads as 127.0.0.1, and only that: -B's version is at fault.
        ("oscil-reader", &["-c", "127.1", "-B", "::1", "-o", out], "oscil-reader: 127.1:5250 has no IPv6 address (-B ::1 is IPv6): connect from an IPv4 address of this host, or leave out -B".into()),
        ("oscil-reader", &["-c", "127.1", "-6", "-o", out], "oscil-reader: 127.1:5250 has no IPv6 address (-6 asks it): leave out -6".into()),
        ("oscil-daemon", &["--listen", "127.0.0.1", "-6"], "oscil-daemon: --listen 127.0.0.1:5250 has no IPv6 address (-6 asks it): leave out -6".into()),
        ("oscil-report", &["/no/such/run"], "oscil-report: /no/such/run: no such directory".into()),
        ("oscil-report", &[not_a_campaign], format!("oscil-report: {not_a_campaign}: not a run directory (no run.json)")),
        ("oscil-lab", &["--resume", "/no/such/campaign"], "oscil-lab: /no/such/campaign: no such directory".into()),
        ("oscil-lab", &["--resume", not_a_campaign], format!("oscil-lab: {not_a_campaign}: not a campaign directory (no campaign.json)")),
        ("oscil-lab", &["--resume", foreign], "oscil-lab: campaign.json does not say how it ran (no hosts.lab_backend): not a campaign this oscil-lab made, so it cannot be resumed".into()),
        ("oscil-report", &["run", "--zoom", "26s..20s"], "oscil-report: invalid value '26s..20s' for '--zoom <FROM..TO>': --zoom \"26s..20s\": FROM must come before TO (20s..26s?)".into()),
        ("oscil-report", &["run", "--goodput-tolerance", "2%"], "oscil-report: --goodput-tolerance sets how far below the best goodput --recommend may choose: add --recommend (see oscil-report --help)".into()),
        ("oscil-reader", &["-c", "h", "-o", out, "--label", ""], "oscil-reader: invalid value '' for '--label <NAME>': a label names the run on charts and in the report's file names: give one, or leave out --label for the directory's name".into()),
        // --dry-run checks --out as a campaign would, touching nothing.
        ("oscil-lab", &["--dry-run", "--out", "/etc/hostname"], "oscil-lab: cannot create /etc/hostname: a file is there, not a directory".into()),
        ("oscil-lab", &["--dry-run", "--out", used], format!("oscil-lab: {used} is not empty: --resume {used} continues its campaign, --force starts afresh there")),
    ];
    for (binary, args, holds) in table {
        expect(binary, args, 2, holds);
    }
    assert!(!Path::new(out).exists());
}

/// `binary args` with `$OSCIL_KEY` set to `key`.
fn run_with_key(binary: &str, args: &[&str], key: &str) -> Output {
    Command::new(workspace_bin(binary))
        .args(args)
        .env("OSCIL_KEY", key)
        .output()
        .unwrap()
}

#[test]
fn a_key_from_the_environment_is_named_as_such() {
    for (binary, args) in [
        ("oscil-daemon", &["--listen", "127.0.0.1:0"][..]),
        ("oscil-reader", &["-c", "127.0.0.1", "-o", "x"]),
    ] {
        let output = run_with_key(binary, args, "short");
        assert_eq!(output.status.code(), Some(2));
        assert_eq!(
            String::from_utf8_lossy(&output.stderr),
            format!("{binary}: $OSCIL_KEY has 5 characters; at least 32 are needed (oscil-daemon --gen-key makes one)\n")
        );
    }
    // A daemon with another key: the reader's line says where its own came from.
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("key");
    std::fs::write(&key_file, "0123456789abcdef0123456789abcdef\n").unwrap();
    let daemon = Daemon::start(&["--key-file", key_file.to_str().unwrap()]);
    let out = dir.path().join("run");
    let output = run_with_key(
        "oscil-reader",
        &[
            "-c",
            &daemon.addr.to_string(),
            "-o",
            out.to_str().unwrap(),
            "-t",
            "1s",
        ],
        "ffffffffffffffffffffffffffffffff",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr
            .trim_end()
            .ends_with("(this reader's key came from $OSCIL_KEY)"),
        "{stderr}"
    );
}

/// Binaries and their arguments that meet one case of the exit-code table.
type Runs<'a> = &'a [(&'a str, Vec<&'a str>)];

/// docs/cli.md's table, row by row, in each binary that has the case.
#[test]
fn one_exit_code_per_case_in_every_binary() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("afile");
    std::fs::write(&file, "").unwrap();
    let file = file.to_str().unwrap();
    let used = dir.path().join("used");
    std::fs::create_dir(&used).unwrap();
    std::fs::write(used.join("notes.txt"), "mine").unwrap();
    let used = used.to_str().unwrap();
    let missing = dir.path().join("missing");
    let missing = missing.to_str().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let closed = format!("127.0.0.1:{}", free_port());
    // A run to report on, for the report's --out cases.
    let daemon = Daemon::start(&[]);
    let daemon_addr = daemon.addr.to_string();
    let made = read_from(&daemon, Path::new(out), &["-t", "1s", "-q"]);
    assert!(made.status.success());
    let cases: &[(&str, Runs, i32)] = &[
        // Address family or resolution.
        (
            "has no IPv6 address",
            &[
                ("oscil-reader", vec!["-c", "127.0.0.1", "-6", "-o", missing]),
                ("oscil-daemon", vec!["--listen", "127.0.0.1", "-6"]),
            ],
            2,
        ),
        // A missing input file or directory, whatever the flag.
        (
            missing,
            &[
                (
                    "oscil-reader",
                    vec!["-c", &closed, "-o", out, "--key-file", missing],
                ),
                (
                    "oscil-reader",
                    vec!["-c", &closed, "-o", out, "--meta", missing],
                ),
                ("oscil-daemon", vec!["--key-file", missing]),
                ("oscil-report", vec![missing]),
                ("oscil-lab", vec!["--resume", missing]),
                ("oscil-lab", vec!["restore", missing]),
            ],
            2,
        ),
        // An --out that is a file.
        (
            "a file is there, not a directory",
            &[
                ("oscil-reader", vec!["-c", &closed, "-o", file]),
                ("oscil-report", vec![out, "-o", file]),
                ("oscil-lab", vec!["--quick", "-o", file]),
            ],
            2,
        ),
        // An --out that is used.
        (
            "not empty",
            &[
                ("oscil-reader", vec!["-c", &closed, "-o", used]),
                ("oscil-report", vec![out, "-o", used]),
                ("oscil-lab", vec!["--quick", "-o", used]),
            ],
            2,
        ),
        // What fails beyond the command line: nothing listens, the address is taken.
        (
            "cannot",
            &[
                ("oscil-reader", vec!["-c", &closed, "-o", missing]),
                ("oscil-daemon", vec!["--listen", &daemon_addr]),
            ],
            1,
        ),
    ];
    for (holds, runs, code) in cases {
        for (binary, args) in runs.iter() {
            expect(binary, args, *code, holds);
        }
    }
}

/// A list names each value once, whatever its spelling: two spellings of one value would
/// run one configuration twice under two labels (the `contracts` branch's block).
#[test]
fn lab_lists_hold_each_value_once() {
    let table: &[(&[&str], &str)] = &[
        (
            &["--lowat", "128k,128KiB,131072", "--dry-run"],
            "oscil-lab: invalid value '128k,128KiB,131072' for '--tcp-notsent-lowat <LIST>': \"128k\" and \"128KiB\" are one value: list it once",
        ),
        (
            &["--rtt", "100ms,0.1s", "--dry-run"],
            "oscil-lab: invalid value '100ms,0.1s' for '--rtt <LIST>': \"100ms\" and \"0.1s\" are one value: list it once",
        ),
        (
            &["--rate", "1gbit,1000mbit", "--dry-run"],
            "oscil-lab: invalid value '1gbit,1000mbit' for '--rate <LIST>': \"1gbit\" and \"1000mbit\" are one value: list it once",
        ),
        (
            &["--wmem", "4096:16384:4M,4k:16k:4194304", "--dry-run"],
            "are one value",
        ),
        (
            &["--lowat", "8G", "--dry-run"],
            "oscil-lab: invalid value '8G' for '--tcp-notsent-lowat <LIST>': \"8G\" is not a whole number from 1 to 4294967295",
        ),
    ];
    for (args, holds) in table {
        expect("oscil-lab", args, 2, holds);
    }
}

/// The lab's `--tcp-notsent-lowat` is the namespace's sysctl, the reader's and the daemon's
/// `--notsent-lowat` the socket option: each help says which in its first line, and the
/// lab's old spellings still work as aliases of the sysctl's own name.
#[test]
fn the_sysctl_and_the_socket_option_say_which_they_are() {
    let help_of = |binary: &str, flag: &str| -> String {
        let help = String::from_utf8_lossy(&run(binary, &["--help"]).stdout).into_owned();
        let at = help
            .find(&format!("--{flag} <"))
            .unwrap_or_else(|| panic!("{binary} --help has no --{flag}: {help}"));
        let from_flag = help[at..].lines().skip_while(|l| l.starts_with("--"));
        let after = help[at..].lines().next().unwrap_or("").to_owned();
        // Clap puts the help beside the flag, or on the next line when it is long.
        match after.split_once("> ").map(|(_, h)| h.trim().to_owned()) {
            Some(h) if !h.is_empty() => h,
            _ => from_flag.map(str::trim).next().unwrap_or("").to_owned(),
        }
    };
    let lab = help_of("oscil-lab", "tcp-notsent-lowat");
    assert!(
        lab.starts_with("The sysctl net.ipv4.tcp_notsent_lowat "),
        "{lab}"
    );
    for binary in ["oscil-reader", "oscil-daemon"] {
        let line = help_of(binary, "notsent-lowat");
        assert!(
            line.starts_with("The socket option TCP_NOTSENT_LOWAT "),
            "{binary}: {line}"
        );
    }
    for spelling in ["--tcp-notsent-lowat", "--lowat", "--notsent-lowat"] {
        let dry = run("oscil-lab", &[spelling, "default,64k", "--dry-run"]);
        let stdout = String::from_utf8_lossy(&dry.stdout);
        assert_eq!(dry.status.code(), Some(0), "{spelling}: {stdout}");
        assert!(
            stdout.contains("1gbit_466ms_cubic_lowat-64k"),
            "{spelling}: {stdout}"
        );
    }
}

/// `--listen` on the reader and `--connect` on the daemon (a sender behind NAT): each end
/// either dials or waits, never both, and neither waits nor dials a public address unkeyed.
#[test]
fn listen_and_connect_go_one_way_and_keyed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let out = out.to_str().unwrap();
    let reader: &[(&[&str], &str)] = &[
        (
            &["--listen", "5250", "-c", "h", "-o", out],
            "cannot be used with",
        ),
        (
            &["--listen", "5250", "-B", "127.0.0.1", "-o", out],
            "cannot be used with",
        ),
        (
            &["--listen", "5250", "--busy-retry", "1s", "-o", out],
            "cannot be used with",
        ),
        (&["--listen", "5250", "-o", out], "--listen needs a key"),
        (&["-o", out], "--connect"),
    ];
    for (args, holds) in reader {
        expect("oscil-reader", args, 2, holds);
    }
    assert!(!Path::new(out).exists(), "a usage error left {out} behind");
    let port_file = dir.path().join("port");
    let port_file = port_file.to_str().unwrap();
    let daemon: &[(&[&str], &str)] = &[
        (
            &["--connect", "h", "--listen", "5250"],
            "cannot be used with",
        ),
        (
            &["--connect", "h", "--port-file", port_file],
            "cannot be used with",
        ),
        (
            &["--connect", "h", "--max-sessions", "2"],
            "cannot be used with",
        ),
        (
            &["--connect", "10.1.2.3"],
            "refusing to connect to 10.1.2.3:5250 without a key",
        ),
        (&["--connect", "::1:5250"], "write [::1]:5250 for a port"),
    ];
    for (args, holds) in daemon {
        expect("oscil-daemon", args, 2, holds);
    }
}

/// Round 4 of the sweep's inputs: a directory holding what the cases name (a file, an empty
/// directory, a run's, a campaign whose campaign.json is cut) and a closed port.
struct Sweep {
    _dir: tempfile::TempDir,
    out: String,
    file: String,
    empty: String,
    run_like: String,
    cut: String,
    closed: String,
}

impl Sweep {
    fn new() -> Sweep {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name).display().to_string();
        let (out, file, empty, run_like, cut) =
            (at("run"), at("afile"), at("empty"), at("a-run"), at("cut"));
        std::fs::write(&file, "").unwrap();
        for made in [&empty, &run_like, &cut] {
            std::fs::create_dir(made).unwrap();
        }
        std::fs::write(Path::new(&run_like).join("run.json"), "{}").unwrap();
        let cut_json = "{\"format_version\": 1,\n\"runs\": [";
        std::fs::write(Path::new(&cut).join("campaign.json"), cut_json).unwrap();
        let closed = format!("127.0.0.1:{}", free_port());
        Sweep {
            _dir: dir,
            out,
            file,
            empty,
            run_like,
            cut,
            closed,
        }
    }

    /// The reader toward the closed port: a value refused only after connecting would
    /// show as exit 1.
    fn reader(&self, extra: &[&str]) -> Vec<String> {
        let head = ["-c", self.closed.as_str(), "-o", self.out.as_str()];
        head.iter().chain(extra).map(|a| a.to_string()).collect()
    }

    fn link(&self, extra: &[&str]) -> Vec<String> {
        let head = ["--rate", "10mbit", "--delay", "5ms"];
        head.iter().chain(extra).map(|a| a.to_string()).collect()
    }

    /// Runs each case, then checks that nothing was left behind.
    fn check(&self, cases: &[(&str, Vec<String>, i32, &str)]) {
        for (binary, args, code, holds) in cases {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            expect(binary, &args, *code, holds);
        }
        assert!(
            !Path::new(&self.out).exists(),
            "a refused run left {} behind",
            self.out
        );
        let left = std::fs::read_dir(&self.empty).unwrap().count();
        assert_eq!(left, 0, "a check left a file behind");
    }
}

fn plain(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// Round 4 of the sweep, values: for each class of input the issue found wrong or
/// confusing, a few of this table's own (not the examples), each with docs/cli.md's
/// exit code and a phrase of its one line.
#[test]
fn round_4_sweep_values_in_every_binary() {
    let sweep = Sweep::new();
    let (reader, link) = (|e: &[&str]| sweep.reader(e), |e: &[&str]| sweep.link(e));
    sweep.check(&[
        // Durations that overflow or are absurd: refused before connecting.
        (
            "oscil-reader",
            reader(&["--slow", "30d"]),
            2,
            "expected at most 7d (a week)",
        ),
        (
            "oscil-reader",
            reader(&["--marker-every", "1000000000000s"]),
            2,
            "expected at most 7d",
        ),
        (
            "oscil-reader",
            reader(&["--fast", "5d", "--slow", "2d", "--cycles", "2"]),
            2,
            "at most a week per session",
        ),
        (
            "oscil-lab",
            plain(&["--fast", "3d", "--slow", "3d", "--cycles", "2", "--dry-run"]),
            2,
            "at most a week per session",
        ),
        (
            "oscil-report",
            plain(&["run", "--max-time", "400000000000000000000ms"]),
            2,
            "expected at most 7d",
        ),
        (
            "oscil-link",
            link(&["--reverse-delay", "6s"]),
            2,
            "expected at most 5s: no real path is longer",
        ),
        // Sizes with a small b: bits or bytes?
        (
            "oscil-reader",
            reader(&["--sndbuf", "4mb"]),
            2,
            "did you mean 4M (bytes) or a rate 4mbit?",
        ),
        (
            "oscil-daemon",
            plain(&["--trace-budget", "64Mb"]),
            2,
            "did you mean 64M (bytes) or a rate 64mbit?",
        ),
        (
            "oscil-lab",
            plain(&["--write-size", "64kb", "--dry-run"]),
            2,
            "did you mean 64K (bytes)",
        ),
        (
            "oscil-report",
            plain(&["run", "--max-memory", "2Gb"]),
            2,
            "did you mean 2G (bytes)",
        ),
    ]);
}

/// Round 4 of the sweep: daemon values that would fail every later session, as above.
#[test]
fn round_4_sweep_daemon_values() {
    Sweep::new().check(&[
        // Daemon values that would fail every later session.
        (
            "oscil-daemon",
            plain(&["--handshake-timeout", "20ms"]),
            2,
            "a handshake takes a few round trips",
        ),
        (
            "oscil-daemon",
            plain(&["--max-session-time", "200ms"]),
            2,
            "a shorter limit would refuse every run",
        ),
        (
            "oscil-daemon",
            plain(&["--min-interval", "50s", "--max-session-time", "30s"]),
            2,
            "is not below --max-session-time",
        ),
        (
            "oscil-daemon",
            plain(&["--max-startups", "0:60:40"]),
            2,
            "START 0 refuses connections",
        ),
    ]);
}

/// Round 4 of the sweep, paths, addresses and other tools' habits, as above.
#[test]
fn round_4_sweep_paths_addresses_and_habits_in_every_binary() {
    let sweep = Sweep::new();
    let (reader, link) = (|e: &[&str]| sweep.reader(e), |e: &[&str]| sweep.link(e));
    let (out, file, empty, closed) = (&sweep.out, &sweep.file, &sweep.empty, &sweep.closed);
    let (run_like, cut) = (&sweep.run_like, &sweep.cut);
    let in_file = format!("{file}/m");
    let no_dir_port = format!("{empty}/no/port");
    sweep.check(&[
        // Files a flag writes, checked before the work.
        ("oscil-daemon", plain(&["--port-file", &no_dir_port]), 2, "no directory"),
        ("oscil-daemon", plain(&["--port-file", empty]), 2, "a directory is there, not a file"),
        ("oscil-link", link(&["--stats", empty]), 2, "--stats"),
        ("oscil-report", plain(&["/no/such/run", "--metrics", &in_file]), 2, "a file is there, not a directory"),
        ("oscil-report", plain(&["/no/such/run", "--metrics", "/proc/sys/oscil-metrics"]), 2, "--metrics /proc/sys/oscil-metrics: cannot write in /proc/sys"),
        // Directories of the wrong kind, and a cut campaign.json.
        ("oscil-lab", plain(&["--resume", run_like]), 2, "a run directory (run.json, oscil-reader's), not a campaign directory"),
        ("oscil-lab", plain(&["restore", run_like]), 2, "not a campaign directory"),
        ("oscil-lab", plain(&["restore", empty]), 2, "not a campaign directory (no campaign.json)"),
        ("oscil-lab", plain(&["restore", file]), 2, "a file, not a campaign directory"),
        ("oscil-lab", plain(&["--resume", cut]), 2, "it is cut short (it ends at line 2 inside the JSON)"),
        ("oscil-report", plain(&[cut]), 2, "it is cut short"),
        ("oscil-report", plain(&[file]), 2, "a file, not a run directory"),
        // Plans that cannot work.
        ("oscil-lab", plain(&["--loss", "75", "--dry-run"]), 2, "at most 50%"),
        ("oscil-link", link(&["--loss", "51%"]), 2, "at most 50%"),
        ("oscil-lab", plain(&["--rtt", "100ms,1h", "--dry-run"]), 2, "at most 10s: no real path is longer"),
        ("oscil-link", plain(&["--rate", "1mbit", "--delay", "90m"]), 2, "at most 5s"),
        // A network namespace that is not there.
        ("oscil-link", link(&["--b-netns", "oscil-no-such-ns"]), 2, "--b-netns oscil-no-such-ns: no such network namespace (/run/netns/oscil-no-such-ns is missing; ip netns add oscil-no-such-ns makes one)"),
        ("oscil-link", link(&["--a-netns", &in_file]), 2, "no such network namespace"),
        // Link-local addresses with a scope: taken, or refused for the right reason.
        ("oscil-reader", plain(&["-c", "fe80::1%oscilnoif0", "-o", out]), 2, "no interface \"oscilnoif0\" on this host"),
        ("oscil-reader", plain(&["-c", "[fe80::1%lo]:1", "-o", out]), 1, "cannot connect to the daemon at [fe80::1%"),
        ("oscil-reader", reader(&["-B", "fe80::2%lo"]), 2, "-B takes no %SCOPE"),
        ("oscil-daemon", plain(&["--listen", "[fe80::1%oscilnoif0]:0"]), 2, "no interface \"oscilnoif0\""),
        // ~ in paths: another user's home is refused with a hint.
        ("oscil-reader", plain(&["-c", closed, "-o", "~oscil/run"]), 2, "~USER is not expanded here"),
        ("oscil-daemon", plain(&["--key-file", "~oscil/key"]), 2, "~USER is not expanded here"),
        ("oscil-lab", plain(&["--out", "~oscil/lab", "--dry-run"]), 2, "~USER is not expanded here"),
        // Habits of other tools, and no far clap suggestion.
        ("oscil-reader", reader(&["--window", "4M"]), 2, "iperf3's --window: --sndbuf BYTES sets the daemon's SO_SNDBUF; --rcvbuf BYTES"),
        ("oscil-daemon", plain(&["--fq-rate", "1gbit"]), 2, "iperf3's --fq-rate: --max-rate RATE caps every session's pacing rate"),
        ("oscil-lab", plain(&["--bitrate", "10mbit"]), 2, "iperf3's --bitrate: --pacing-rate RATE"),
        ("oscil-lab", plain(&["--tcp-write-prefetch", "64k"]), 2, "iperf2's --tcp-write-prefetch (TCP_NOTSENT_LOWAT): --tcp-notsent-lowat LIST sets the sysctl"),
        ("oscil-daemon", plain(&["--tcp-write-prefetch", "64k"]), 2, "--notsent-lowat BYTES (e.g. 128k) sets the socket option"),
        ("oscil-report", plain(&["run", "--tcp-write-prefetch", "64k"]), 2, "oscil-reader --notsent-lowat BYTES"),
        ("oscil-link", link(&["--mss", "1400"]), 2, "iperf2's --mss: oscil sets no MSS"),
        ("oscil-reader", reader(&["--nodelay"]), 2, "iperf2's --nodelay: oscil sets no TCP_NODELAY"),
        ("oscil-lab", plain(&["--parallel", "4"]), 2, "iperf3's --parallel: --flows N"),
        ("oscil-reader", reader(&["--bytes", "1G"]), 2, "a run lasts a time, not a byte count"),
        ("oscil-daemon", plain(&["-D"]), 2, "oscil-daemon stays in the foreground"),
        ("oscil-reader", reader(&["--title", "x"]), 2, "unexpected argument '--title' found (see oscil-reader --help)"),
        ("oscil-reader", reader(&["--cyles", "2"]), 2, "a similar argument exists: '--cycles'"),
    ]);
}

/// `~/` is `$HOME`, as a shell would have read it.
#[test]
fn a_tilde_is_home() {
    let home = tempfile::tempdir().unwrap();
    let output = Command::new(workspace_bin("oscil-report"))
        .args(["~/no-run-here"])
        .env("HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        format!(
            "oscil-report: {}/no-run-here: no such directory\n",
            home.path().display()
        )
    );
}

/// `binary args` on a pseudo-terminal (util-linux's `script`) with `TERM=term`: its
/// exit code and all it wrote; `None` where there is no `script`.
fn on_a_terminal(term: &str, binary: &str, args: &[&str]) -> Option<(Option<i32>, String)> {
    let line = std::iter::once(workspace_bin(binary).display().to_string())
        .chain(args.iter().map(|a| a.to_string()))
        .collect::<Vec<_>>()
        .join(" ");
    let output = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("TERM", term)
        .env_remove("OSCIL_KEY")
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    Some((
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    ))
}

#[test]
fn a_terminal_is_never_waited_on_in_silence_and_a_dumb_one_sees_progress() {
    let Some((code, text)) =
        on_a_terminal("xterm", "oscil-lab", &["--inventory", "-", "--dry-run"])
    else {
        eprintln!("no `script` here: the terminal cases are skipped");
        return;
    };
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("--inventory -: standard input is a terminal, not an inventory"),
        "{text}"
    );
    // TERM=dumb: plain lines, one a phase at least, and no escape code.
    let daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run").display().to_string();
    let addr = daemon.addr.to_string();
    let args = [
        "-c", &addr, "-o", &out, "--fast", "1s", "--slow", "1s", "--cycles", "1",
    ];
    let (code, text) = on_a_terminal("dumb", "oscil-reader", &args).unwrap();
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("oscil-reader: 0 s: cycle 1/1 fast"), "{text}");
    assert!(text.contains(": cycle 1/1 slow"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "an escape code on a dumb terminal: {text:?}"
    );
}

/// A directory the OS will not open to this user: its words ("permission denied"), exit 2,
/// never "not a run directory". Root reads everything, so the binaries run as nobody
/// (util-linux's setpriv); skipped where that cannot be done.
#[test]
fn permission_denied_is_said_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let inside = dir.path().join("sub");
    std::fs::create_dir(&inside).unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let inside = inside.display().to_string();
    let as_nobody = |binary: &str, args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(workspace_bin(binary))
            .args(args)
            .env_remove("OSCIL_KEY")
            .output()
            .ok()
    };
    let runs = as_nobody("oscil-report", &["--version"]).is_some_and(|o| o.status.success());
    if !runs {
        eprintln!("cannot run the binaries as nobody here: skipped");
        return;
    }
    for (binary, args, file) in [
        (
            "oscil-report",
            vec![inside.as_str(), "-o", "/nonexistent/report"],
            "run.json",
        ),
        (
            "oscil-lab",
            vec!["--resume", inside.as_str()],
            "campaign.json",
        ),
    ] {
        let output = as_nobody(binary, &args).unwrap();
        assert_eq!(output.status.code(), Some(2), "{binary} {args:?}");
        assert_eq!(
            String::from_utf8_lossy(&output.stderr),
            format!("{binary}: {inside}/{file}: permission denied\n"),
            "{binary} {args:?}"
        );
    }
}

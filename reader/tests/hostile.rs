//! The reader trusts nothing a daemon sends: a stand-in daemon on loopback sends what a
//! hostile one would, and the reader refuses it, says why, and prints nothing raw.

mod util;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;

use oscil_model::files::rows::{HostSample, SenderSample, Side};
use oscil_model::files::trace::{SenderTrace, TraceKind, TraceRow, TraceSideFacts};
use oscil_model::socket::WriteMode;
use oscil_protocol::auth::DaemonHandshake;

use oscil_protocol::control::{
    decode_frame, encode_frame, DaemonMessage, DataChallenge, DataHello, Ended, ReaderMessage,
    Welcome, MAX_FRAME_BYTES, PROTOCOL_VERSION,
};
use oscil_protocol::key::{generate_key, Key};
use oscil_protocol::proof::{Nonce, SessionId};
use serde::de::DeserializeOwned;
use util::reader;

/// The daemon's end of a control connection, over a blocking socket.
struct Fake {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Fake {
    /// The next message, or `None` once the reader has closed.
    fn read<M: DeserializeOwned>(&mut self) -> Option<M> {
        loop {
            if let Some((message, used)) = decode_frame(&self.buf, MAX_FRAME_BYTES).unwrap() {
                self.buf.drain(..used);
                return Some(message);
            }
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    fn send(&mut self, message: &DaemonMessage) {
        self.stream.write_all(&encode_frame(message)).unwrap();
    }
}

/// A stand-in daemon running `script` on the first connection.
fn stand_in(
    script: impl FnOnce(&TcpListener, Fake) + Send + 'static,
) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let thread = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        script(
            &listener,
            Fake {
                stream,
                buf: Vec::new(),
            },
        );
    });
    (addr, thread)
}

fn run_against(addr: SocketAddr, out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    run_for(addr, out, "1s", extra)
}

/// The reader against `addr` for one cycle of `phase` fast and `phase` slow.
fn run_for(
    addr: SocketAddr,
    out: &std::path::Path,
    phase: &str,
    extra: &[&str],
) -> std::process::Output {
    reader()
        .args(["--connect", &addr.to_string(), "--quiet"])
        .args(["--fast", phase, "--slow", phase, "--cycles", "1"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn sender_row(t_s: f64, flow: u32) -> SenderSample {
    serde_json::from_value(serde_json::json!({
        "t_s": t_s, "flow": flow, "bytes": 1000, "cwnd": 10, "unacked": 0, "notsent_bytes": 0,
        "snd_wnd": null, "rtt_us": 50, "delivery_rate_bps": 0, "pacing_rate_bps": 0,
        "wmem_queued": 0, "sndbuf": 0, "snd_mss_bytes": 0, "inflight_bytes": 0,
        "total_retrans": 0
    }))
    .unwrap()
}

fn samples(t_s: f64, flows: Vec<SenderSample>) -> DaemonMessage {
    let host: HostSample = serde_json::from_value(serde_json::json!({
        "t_s": t_s, "side": "sender", "tcp_inuse": 1, "tcp_orphan": 0, "tcp_tw": 0,
        "tcp_alloc": 1, "tcp_mem_pages": 1
    }))
    .unwrap();
    assert_eq!(host.side, Side::Sender);
    DaemonMessage::Samples { host, flows }
}

#[test]
fn escapes_in_a_refusal_are_not_printed_raw() {
    let (addr, daemon) = stand_in(|_, mut fake| {
        let _hello: ReaderMessage = fake.read().unwrap();
        fake.send(&DaemonMessage::Refused {
            reason: "\u{1b}[2J\u{1b}[31mpwned\noscil-reader: forged line".into(),
        });
    });
    let dir = tempfile::tempdir().unwrap();
    let output = run_against(addr, &dir.path().join("run"), &[]);
    daemon.join().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "raw escape printed: {stderr:?}");
    assert!(
        stderr.contains("\\u{1b}[31mpwned\\noscil-reader: forged line"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn a_reader_with_a_key_sends_no_proof_to_a_daemon_that_cannot_prove_it() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("key");
    std::fs::write(&key_file, generate_key().unwrap()).unwrap();
    let (addr, daemon) = stand_in(|_, mut fake| {
        let other_key = Key::new(&generate_key().unwrap()).unwrap();
        let hello = fake.read().unwrap();
        let (_, challenge) = DaemonHandshake::new(Some(other_key), Nonce::random().unwrap())
            .on_hello(hello)
            .unwrap();
        fake.send(&challenge);
        // The reader hangs up without a word more.
        assert!(fake.read::<ReaderMessage>().is_none());
        assert!(
            fake.buf.is_empty(),
            "{} bytes after the challenge",
            fake.buf.len()
        );
    });
    let key_arg = key_file.to_str().unwrap();
    let output = run_against(addr, &dir.path().join("run"), &["--key-file", key_arg]);
    daemon.join().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("did not prove it holds the key"),
        "{stderr}"
    );
}

/// Accepts a data connection and takes it through its opening: hello, challenge, proof.
fn take_data_connection(listener: &TcpListener) -> TcpStream {
    let mut stream = listener.accept().unwrap().0;
    let mut hello = [0u8; DataHello::LEN];
    stream.read_exact(&mut hello).unwrap();
    let challenge = DataChallenge {
        nonce: Nonce::random().unwrap(),
    };
    stream.write_all(&challenge.encode()).unwrap();
    let mut proof = [0u8; 32];
    stream.read_exact(&mut proof).unwrap();
    stream
}

/// Plays a keyless daemon up to the reader's start, echoing clock probes on one clock;
/// returns the data connections.
fn welcome_and_start(listener: &TcpListener, fake: &mut Fake) -> Vec<TcpStream> {
    welcome_as_and_start(listener, fake, |_| {})
}

/// [`welcome_and_start`] with a welcome `shape` has changed.
fn welcome_as_and_start(
    listener: &TcpListener,
    fake: &mut Fake,
    shape: impl FnOnce(&mut Welcome),
) -> Vec<TcpStream> {
    let hello = fake.read().unwrap();
    let (awaiting, challenge) = DaemonHandshake::new(None, Nonce::random().unwrap())
        .on_hello(hello)
        .unwrap();
    fake.send(&challenge);
    let auth = awaiting.on_proof(fake.read().unwrap()).unwrap();
    let mut welcome = Welcome {
        version: PROTOCOL_VERSION,
        software: "stand-in".into(),
        session_id: SessionId::random().unwrap(),
        host: oscil_kernel::host::collect(),
        options_in_force: Default::default(),
        probe: false,
        write_mode: Default::default(),
        groups_in_force: Vec::new(),
    };
    shape(&mut welcome);
    fake.send(&DaemonMessage::Welcome(welcome));
    let flows = (0..auth.hello.flows)
        .map(|_| take_data_connection(listener))
        .collect();
    fake.send(&DaemonMessage::Ready);
    loop {
        match fake.read() {
            Some(ReaderMessage::ClockProbe { t1_unix_ns }) => {
                let now = oscil_model::run::clock::realtime_unix_ns();
                fake.send(&DaemonMessage::ClockEcho {
                    t1_unix_ns,
                    t2_unix_ns: now,
                    t3_unix_ns: now,
                });
            }
            Some(ReaderMessage::Start) => return flows,
            other => panic!("expected a clock probe or start, got {other:?}"),
        }
    }
}

#[test]
fn absurd_samples_end_the_run_partial_and_are_not_written() {
    let (addr, daemon) = stand_in(|listener, mut fake| {
        let _flows = welcome_and_start(listener, &mut fake);
        fake.send(&samples(0.1, vec![sender_row(0.1, 0)]));
        fake.send(&samples(0.2, vec![sender_row(0.2, 4_294_967_295)]));
        while fake.read::<ReaderMessage>().is_some() {}
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = run_against(addr, &out, &[]);
    daemon.join().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["ending"]["status"], "partial");
    let reason = run["ending"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("impossible sample") && reason.contains("4294967295"),
        "{reason}"
    );
    let sender = std::fs::read_to_string(out.join("sender.csv")).unwrap();
    assert_eq!(
        sender.lines().count(),
        2,
        "header and the one good row: {sender}"
    );
    assert!(!sender.contains("4294967295"), "{sender}");
    // A daemon whose welcome does not say it echoes the probe gets no probe connection
    // (it would take it for a flow), and run.json says why.
    assert_eq!(run["probe"]["on"], false, "{}", run["probe"]);
    let note = run["probe"]["note"].as_str().unwrap();
    assert!(note.contains("older daemon"), "{note}");
}

#[test]
fn a_marker_for_a_flow_the_session_lacks_ends_the_run_partial() {
    let (addr, daemon) = stand_in(|listener, mut fake| {
        let _flows = welcome_and_start(listener, &mut fake);
        fake.send(&DaemonMessage::Markers {
            markers: vec![oscil_model::files::markers::Marker {
                flow: 7,
                k: 1,
                offset_bytes: 0,
                sent_unix_ns: 0,
            }],
        });
        while fake.read::<ReaderMessage>().is_some() {}
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = run_against(addr, &out, &["--marker-every", "100ms"]);
    daemon.join().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    let reason = run["ending"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("marker for flow 7 of a session of 1 flows"),
        "{reason}"
    );
    // The stand-in shares the reader's clock.
    let clock = &run["clock"];
    let offset_us = clock["offset_us"].as_f64().unwrap();
    assert!(
        offset_us.abs() <= clock["uncertainty_us"].as_f64().unwrap(),
        "{clock}"
    );
}

/// A daemon from before `--write-mode` ignores the hello's field and writes until EAGAIN;
/// its welcome does not say per-wake, so the reader stops before any data flows rather
/// than record the other writer's run as this one.
#[test]
fn a_daemon_that_does_not_say_it_writes_per_wake_is_refused() {
    let (addr, daemon) = stand_in(|_, mut fake| {
        let hello = fake.read().unwrap();
        let ReaderMessage::Hello(asked) = &hello else {
            panic!("not a hello: {hello:?}")
        };
        assert_eq!(asked.write_mode, WriteMode::PerWake);
        let (awaiting, challenge) = DaemonHandshake::new(None, Nonce::random().unwrap())
            .on_hello(hello)
            .unwrap();
        fake.send(&challenge);
        awaiting.on_proof(fake.read().unwrap()).unwrap();
        // As an older daemon words it: no write_mode at all.
        let welcome = serde_json::json!({
            "type": "welcome", "version": PROTOCOL_VERSION, "software": "oscil-daemon 0.0.9",
            "session_id": SessionId::random().unwrap(), "host": oscil_kernel::host::collect(),
            "options_in_force": oscil_model::socket::OptionsInForce::default(),
        });
        fake.stream.write_all(&encode_frame(&welcome)).unwrap();
        assert!(fake.read::<ReaderMessage>().is_none(), "no data, no start");
    });
    let dir = tempfile::tempdir().unwrap();
    let output = run_against(addr, &dir.path().join("run"), &["--write-mode", "per-wake"]);
    daemon.join().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--write-mode per-wake: the daemon writes until-eagain"),
        "{stderr}"
    );
}

/// An end of session as a daemon words it, for `reason`.
fn ended(reason: &str) -> Ended {
    Ended {
        reason: reason.into(),
        tcpext_delta: Default::default(),
        wakeups: Vec::new(),
        cost: None,
        trace: None,
        sampled_by: None,
    }
}

/// Sends a sample every 100 ms for `intervals` intervals, with rows for `flows`, each on
/// time as the reader's clock sees it (it allows a second of drift).
fn sample_on_time(fake: &mut Fake, intervals: u32, flows: &[u32]) {
    let start = std::time::Instant::now();
    for k in 1..=intervals {
        let t_s = f64::from(k) * 0.1;
        let due = std::time::Duration::from_secs_f64(t_s);
        std::thread::sleep(due.saturating_sub(start.elapsed()));
        let rows = flows
            .iter()
            .map(|&flow| SenderSample {
                span_s: 0.1,
                ..sender_row(t_s, flow)
            })
            .collect();
        fake.send(&samples(t_s, rows));
    }
}

/// Waits for the reader's stop, then ends the session with `end`.
fn end_on_stop(fake: &mut Fake, end: Ended) {
    loop {
        match fake.read::<ReaderMessage>() {
            Some(ReaderMessage::Stop { .. }) => break,
            Some(_) => {}
            None => panic!("the reader closed before its stop"),
        }
    }
    fake.send(&DaemonMessage::Ended(end));
    while fake.read::<ReaderMessage>().is_some() {}
}

fn run_json(out: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap()
}

/// A daemon that sends samples for 5 of the session's 40 intervals and ends properly: the
/// reader counts the 35 it never had and says the run has holes, whatever the daemon says.
#[test]
fn a_daemon_that_sends_5_of_40_intervals_leaves_a_run_with_holes() {
    let (addr, daemon) = stand_in(|listener, mut fake| {
        let _flows = welcome_and_start(listener, &mut fake);
        for k in 1..=5 {
            let t_s = f64::from(k) * 0.1;
            let row = SenderSample {
                span_s: 0.1,
                ..sender_row(t_s, 0)
            };
            fake.send(&samples(t_s, vec![row]));
        }
        end_on_stop(&mut fake, ended("reader asked to stop: pattern complete"));
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = run_for(addr, &out, "2s", &[]);
    daemon.join().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let run = run_json(&out);
    assert_eq!(run["ending"]["status"], "holes", "{}", run["ending"]);
    // 4 s at 100 ms: 40 intervals (41 if the reader stopped a tenth into the next).
    let missing = run["sampling"]["sender"]["missing_intervals"]
        .as_u64()
        .unwrap();
    assert!((35..=36).contains(&missing), "{}", run["sampling"]);
    assert_eq!(run["sampling"]["reader"]["missing_intervals"], 0);
    let reason = run["ending"]["reason"].as_str().unwrap();
    let said = format!("the sender's record has no sample for {missing} of the intervals");
    assert!(reason.contains(&said), "{reason}");
    assert!(
        stderr.contains("run has holes") && stderr.contains(&said),
        "{stderr}"
    );
    let sender = std::fs::read_to_string(out.join("sender.csv")).unwrap();
    assert_eq!(sender.lines().count(), 6, "header and five rows: {sender}");
}

/// A daemon that never sends a row for one of the session's two flows.
#[test]
fn a_flow_missing_from_the_daemons_rows_is_a_hole_named_by_flow() {
    let (addr, daemon) = stand_in(|listener, mut fake| {
        let _flows = welcome_and_start(listener, &mut fake);
        sample_on_time(&mut fake, 20, &[0]);
        end_on_stop(&mut fake, ended("reader asked to stop: pattern complete"));
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = run_against(addr, &out, &["--flows", "2"]);
    daemon.join().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let run = run_json(&out);
    assert_eq!(run["ending"]["status"], "holes", "{}", run["ending"]);
    let sender = &run["sampling"]["sender"];
    assert_eq!(
        sender["flows_without_rows"],
        serde_json::json!([1]),
        "{sender}"
    );
    assert!(run["sampling"]["reader"]
        .get("flows_without_rows")
        .is_none());
    let reason = run["ending"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("the sender's record has no row at all for flow 1"),
        "{reason}"
    );
}

/// Escape codes, a forged line and 100 KB in the welcome's notes, software and host name,
/// and in the end's reason: each printed and recorded escaped, on one line of bounded
/// length, with how much was left out.
#[test]
fn a_daemons_escapes_forged_lines_and_100_kb_are_printed_escaped_and_bounded() {
    let hostile = |what: &str| {
        format!("{what}\u{1b}[2J\u{1b}[31m\noscil-reader: forged line\n").repeat(2_600)
    };
    let (note, software, host, reason) = (
        hostile("note"),
        hostile("soft"),
        hostile("host"),
        hostile("end"),
    );
    assert!(note.len() > 100_000, "{}", note.len());
    let shown = (note.clone(), reason.clone());
    let (addr, daemon) = stand_in(move |listener, mut fake| {
        let _flows = welcome_as_and_start(listener, &mut fake, |welcome| {
            welcome.software = software;
            welcome.host.hostname = host;
            welcome.options_in_force.notes = vec![note; 3];
        });
        fake.send(&DaemonMessage::Ended(ended(&reason)));
        while fake.read::<ReaderMessage>().is_some() {}
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = run_against(addr, &out, &[]);
    daemon.join().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "raw escape printed: {stderr:?}");
    assert!(!stderr.contains("\noscil-reader: forged line"), "{stderr}");
    // Three notes and the end, each on a line of its own, none long.
    assert_eq!(stderr.lines().count(), 4, "{stderr}");
    for line in stderr.lines() {
        assert!(line.chars().count() < 500, "{} characters", line.len());
    }
    let (note, reason) = shown;
    let note_line = stderr.lines().next().unwrap();
    assert!(
        note_line.starts_with("oscil-reader: the daemon's sockets: note\\u{1b}[2J\\u{1b}[31m\\n"),
        "{note_line}"
    );
    assert!(note_line.ends_with(" bytes more)"), "{note_line}");
    // How much was left out: the note's bytes less those shown (each escape shown as the
    // six characters of one byte, a newline as two).
    let shown_bytes = note_line
        .trim_start_matches("oscil-reader: the daemon's sockets: ")
        .split('…')
        .next()
        .unwrap()
        .replace("\\u{1b}", "\u{1b}")
        .replace("\\n", "\n")
        .len();
    assert!(
        note_line.ends_with(&format!("… ({} bytes more)", note.len() - shown_bytes)),
        "{note_line}"
    );
    assert!(
        stderr.contains("the daemon ended the session: end\\u{1b}"),
        "{stderr}"
    );
    assert!(!stderr.contains(&reason[..200]), "{stderr}");
    let run = std::fs::read_to_string(out.join("run.json")).unwrap();
    assert!(run.len() < 50_000, "run.json holds {} bytes", run.len());
    assert!(!run.contains("\\u001b"), "run.json keeps an escape raw");
    let meta: serde_json::Value = serde_json::from_str(&run).unwrap();
    for text in [&meta["daemon_software"], &meta["sender_host"]["hostname"]] {
        let text = text.as_str().unwrap();
        assert!(text.ends_with(" bytes more)") && text.len() < 500, "{text}");
    }
}

/// An end whose wake-ups name a flow the session lacks: the run is cut short, and says
/// what the daemon sent that made no sense rather than only that it did not confirm.
#[test]
fn an_impossible_end_is_named_not_only_unconfirmed() {
    let (addr, daemon) = stand_in(|listener, mut fake| {
        let _flows = welcome_and_start(listener, &mut fake);
        let mut end = ended("reader asked to stop: pattern complete");
        end.wakeups = vec![serde_json::from_value(serde_json::json!({
            "flow": 7, "wakeups": 1, "notsent_p50_bytes": 0, "notsent_max_bytes": 0,
        }))
        .unwrap()];
        end_on_stop(&mut fake, end);
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = run_against(addr, &out, &[]);
    daemon.join().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    let run = run_json(&out);
    assert_eq!(run["ending"]["status"], "partial");
    let reason = run["ending"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("the daemon did not confirm the end of the session: ")
            && reason.contains("an impossible end: wake-ups of flow 7"),
        "{reason}"
    );
}

/// A daemon whose trace rows stop after 5 of the 50 its own end counts: the run has holes,
/// and `run.json` says how many rows never arrived.
#[test]
fn a_trace_whose_rows_stop_early_leaves_a_run_with_holes() {
    let (addr, daemon) = stand_in(|listener, mut fake| {
        let _flows = welcome_and_start(listener, &mut fake);
        let rows = (1..=5)
            .map(|k| TraceRow::<SenderTrace>::new(f64::from(k) * 0.01, TraceKind::Probe, 0))
            .collect();
        fake.send(&DaemonMessage::Trace { rows });
        sample_on_time(&mut fake, 20, &[0]);
        let mut end = ended("reader asked to stop: pattern complete");
        end.trace = Some(TraceSideFacts {
            events: [("probe".to_string(), 50)].into(),
            ..Default::default()
        });
        end_on_stop(&mut fake, end);
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // The reader's own trace finds no tracefs here, and says so; it is not a hole.
    let no_tracefs = tempfile::tempdir().unwrap();
    let output = reader()
        .env("OSCIL_TRACEFS", no_tracefs.path())
        .args(["--connect", &addr.to_string(), "--quiet", "--trace"])
        .args(["--fast", "1s", "--slow", "1s", "--cycles", "1", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    daemon.join().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let run = run_json(&out);
    assert_eq!(run["ending"]["status"], "holes", "{}", run["ending"]);
    assert_eq!(
        run["trace"]["sender"]["rows_missing"], 45,
        "{}",
        run["trace"]
    );
    let reason = run["ending"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("the sender's trace stopped early: 45 of the 50 rows"),
        "{reason}"
    );
    assert!(!reason.contains("record"), "only the trace: {reason}");
    let trace = std::fs::read_to_string(out.join("trace-sender.csv")).unwrap();
    assert_eq!(trace.lines().count(), 6, "header and five rows: {trace}");
}

//! A reader's words reach the daemon's log escaped and bounded: escape codes, forged lines
//! and a 60 KB stop reason from a hostile reader, read back from the real binary's stderr.

mod util;

use std::time::Duration;

use oscil_model::socket::SocketOptions;
use oscil_protocol::control::ReaderMessage;
use util::process::DaemonProcess;
use util::{hello, Client};

/// Every line the daemon logged until it logged one containing `until`.
fn lines_until(daemon: &DaemonProcess, until: &str) -> Vec<String> {
    let mut lines = Vec::new();
    loop {
        let line = daemon
            .log
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("no line with {until:?} in 10 s: {lines:#?}"));
        let done = line.contains(until);
        lines.push(line);
        if done {
            return lines;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readers_escapes_forged_lines_and_60_kb_are_logged_escaped_and_bounded() {
    let daemon = DaemonProcess::start(1024, &[]);
    let forged = "\u{1b}[2J\u{1b}[31m\noscil-daemon: forged line\n";
    let mut asked = hello(
        1,
        SocketOptions::default(),
        Duration::from_millis(100),
        Duration::from_secs(10),
    );
    // The first frame holds at most 4 KiB.
    asked.software = format!("soft{}", forged.repeat(40));
    let mut client = Client::connect(daemon.addr).await;
    let (_welcome, _flows) = client.start_session(asked).await;
    // Escapes, then plain bytes: the frame (in JSON, an escape takes six bytes) must stay
    // within the 64 KiB an authenticated reader may send.
    let reason = format!("stop{}{}", forged.repeat(100), "x".repeat(57_000));
    assert!(reason.len() > 60_000, "{}", reason.len());
    client
        .send(&ReaderMessage::Stop {
            reason: reason.clone(),
            intervals: None,
        })
        .await;
    let lines = lines_until(&daemon, ": end after ");
    for line in &lines {
        assert!(!line.contains('\u{1b}'), "raw escape logged: {line:?}");
        assert!(
            line.starts_with("oscil-daemon: "),
            "a forged line: {line:?}"
        );
        assert!(line.chars().count() < 1_000, "{} characters", line.len());
    }
    let start = lines.iter().find(|l| l.contains(": start, ")).unwrap();
    assert!(
        start.contains("\"soft\\\\u{1b}[2J\\\\u{1b}[31m\\\\noscil-daemon: forged line"),
        "{start}"
    );
    let end = lines.last().unwrap();
    let said = end.split("reader asked to stop: ").nth(1).unwrap();
    assert!(
        said.starts_with("stop\\u{1b}[2J\\u{1b}[31m\\noscil-daemon: forged line"),
        "{end}"
    );
    // How much was left out: the reason's bytes less those shown (each escape shown as the
    // six characters of one byte, a newline as two).
    let (shown, mark) = said.split_once('…').unwrap();
    let shown_bytes = shown
        .replace("\\u{1b}", "\u{1b}")
        .replace("\\n", "\n")
        .len();
    assert_eq!(
        mark,
        format!(" ({} bytes more)", reason.len() - shown_bytes),
        "{end}"
    );
}

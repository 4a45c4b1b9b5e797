//! `--json-stream` on loopback: every line of a real stream valid against
//! docs/json-stream.schema.json (checked by the `jsonschema` crate, not by the writer's own
//! types), one interval line per sampling interval of reader.csv, and a stream whose reader
//! leaves after three lines (`| head -3`) ending the run quietly.

mod util;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use oscil_testkit::{Csv, Daemon};
use serde_json::Value;
use util::{assert_success, reader, run_reader};

fn schema() -> jsonschema::Validator {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/json-stream.schema.json"
    );
    let text = std::fs::read_to_string(path).expect("docs/json-stream.schema.json");
    let schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
    jsonschema::validator_for(&schema).expect("the schema is a valid JSON Schema")
}

fn assert_valid(validator: &jsonschema::Validator, line: &Value) {
    let errors: Vec<String> = validator
        .iter_errors(line)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\nin {line}");
}

#[test]
fn every_line_is_valid_and_there_is_one_interval_line_per_sampling_interval() {
    let daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let args = [
        "--json-stream",
        "--group",
        "flows=1",
        "--group",
        "flows=2,notsent-lowat=128k",
        "--fast",
        "1s",
        "--slow",
        "1s",
        "--cycles",
        "1",
    ];
    let output = run_reader(&daemon, &out, &args);
    assert_success(&output);
    let text = String::from_utf8(output.stdout).expect("the stream is UTF-8");
    let validator = schema();
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    for line in &lines {
        assert_valid(&validator, line);
    }
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"start"));
    assert_eq!(types.last(), Some(&"end"));
    assert_eq!(lines.last().unwrap()["status"], "complete");
    let intervals: Vec<&Value> = lines[1..lines.len() - 1].iter().collect();
    assert!(
        intervals.iter().all(|l| l["type"] == "interval"),
        "{types:?}"
    );

    // One line per sampling interval the reader recorded: reader.csv's distinct times.
    let reader_csv = Csv::read(&out.join("reader.csv"));
    let times: BTreeSet<&str> = reader_csv.rows.iter().map(|r| r["t_s"].as_str()).collect();
    let with_reader = intervals.iter().filter(|l| !l["reader"].is_null()).count();
    assert_eq!(
        with_reader,
        times.len(),
        "interval lines with the reader's side"
    );
    let numbers: Vec<u64> = intervals
        .iter()
        .map(|l| l["interval"].as_u64().unwrap())
        .collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
    // A sampler that woke late covers two intervals with one sample (run.json counts them
    // as merged): the other side's sample of the first then has a line of its own.
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    let merged = |side: &str| meta["sampling"][side]["merged_intervals"].as_u64().unwrap();
    if merged("reader") == 0 && merged("sender") == 0 {
        assert_eq!(intervals.len(), times.len(), "interval lines");
    } else {
        assert!(intervals.len() >= times.len());
        assert!(intervals.len() as u64 <= *numbers.last().unwrap());
    }
    // Each side's figures add up to its file; each group's to the session's.
    let read: f64 = reader_csv.column("bytes").iter().sum();
    let streamed: f64 = intervals
        .iter()
        .map(|l| l["reader"]["bytes"].as_f64().unwrap_or(0.0))
        .sum();
    assert_eq!(read, streamed);
    let sender_csv = Csv::read(&out.join("sender.csv"));
    let accepted: f64 = sender_csv.column("bytes").iter().sum();
    let streamed: f64 = intervals
        .iter()
        .map(|l| l["sender"]["bytes"].as_f64().unwrap_or(0.0))
        .sum();
    assert_eq!(accepted, streamed);
    let with_sender = intervals.iter().filter(|l| !l["sender"].is_null()).count();
    let sender_times: BTreeSet<&str> = sender_csv.rows.iter().map(|r| r["t_s"].as_str()).collect();
    assert_eq!(
        with_sender,
        sender_times.len(),
        "interval lines with the daemon's side"
    );
    for line in &intervals {
        let groups = line["groups"].as_array().unwrap();
        assert_eq!(groups.len(), 2);
        if !line["reader"].is_null() {
            let by_group: f64 = groups
                .iter()
                .map(|g| g["reader"]["bytes"].as_f64().unwrap())
                .sum();
            assert_eq!(by_group, line["reader"]["bytes"].as_f64().unwrap());
            assert_eq!(groups[1]["reader"]["flows"], 2);
        }
    }
    // The phase is the timetable's: fast for the first second, slow for the next.
    for line in &intervals {
        let (t_s, phase) = (line["t_s"].as_f64().unwrap(), &line["phase"]);
        let expected = if t_s - 0.05 < 1.0 { "fast" } else { "slow" };
        assert_eq!(phase, expected, "at {t_s}");
    }
    let flows: BTreeSet<&str> = reader_csv.rows.iter().map(|r| r["flow"].as_str()).collect();
    assert_eq!(lines[0]["config"]["flows"], flows.len());
}

#[test]
fn a_reader_of_three_lines_that_leaves_ends_the_run_quietly() {
    let daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // A pattern far longer than the test waits: only the closed pipe can end it early.
    let mut child = reader()
        .arg("--connect")
        .arg(daemon.addr.to_string())
        .arg("--out")
        .arg(&out)
        .args([
            "--json-stream",
            "--fast",
            "30s",
            "--slow",
            "30s",
            "--cycles",
            "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start oscil-reader");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for _ in 0..3 {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the stream ended early"
        );
    }
    // `head -3` has its lines and leaves.
    drop(stdout);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        // Generous: the stop, the daemon's last samples and run.json take well under a
        // second; a loaded machine may be slow, but never the pattern's minute.
        if started.elapsed() > Duration::from_secs(40) {
            let _ = child.kill();
            panic!("oscil-reader went on after its stdout closed");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    assert!(!stderr.contains("panic"), "{stderr}");
    assert!(!stderr.to_lowercase().contains("broken pipe"), "{stderr}");
    assert!(
        !stderr.contains("cut short"),
        "nothing said of it: {stderr}"
    );
    // docs/cli.md: a run cut short, its directory complete up to then, exits 3.
    assert_eq!(status.code(), Some(3), "{stderr}");
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["ending"]["status"], "partial");
    let reason = meta["ending"]["reason"].as_str().unwrap();
    assert!(reason.contains("standard output was closed"), "{reason}");
    assert!(meta["ending"]["duration_s"].as_f64().unwrap() < 30.0);
    assert!(!Csv::read(&out.join("reader.csv")).rows.is_empty());
    assert!(!Csv::read(&out.join("sender.csv")).rows.is_empty());
}

#[test]
fn a_run_that_cannot_start_streams_its_error_as_the_end_line() {
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on: the connection is refused at once.
    let nobody = format!("127.0.0.1:{}", oscil_testkit::free_port());
    let output = reader()
        .args([
            "--connect",
            &nobody,
            "--json-stream",
            "--busy-retry",
            "0",
            "--out",
        ])
        .arg(dir.path().join("run"))
        .output()
        .expect("run oscil-reader");
    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert_valid(&schema(), &lines[0]);
    assert_eq!(lines[0]["type"], "end");
    assert_eq!(lines[0]["status"], "error");
    assert_eq!(lines[0]["exit_code"], 1);
}

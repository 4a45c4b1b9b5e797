//! The README's loopback quick start teaches the right lesson (issue 37 item 3): its
//! commands, read out of README.md itself with the short pattern its prose suggests, give
//! two runs of one workload and an answer in which lowat 128 KiB lowers the sender's queue
//! and its not-sent bytes, with no warning, five times in a row. The only changes to the
//! commands: the daemon listens on a port of its own choosing (tests run side by side),
//! which the readers are given, and the readers are quiet (no terminal).

use std::path::Path;
use std::process::Command;

use oscil_testkit::{report_figure, workspace_bin, Csv, Daemon};

const README: &str = include_str!("../../README.md");

/// The quick start's shell lines (comments cut) and the short pattern its prose suggests.
fn quick_start() -> (Vec<Vec<String>>, Vec<String>) {
    let section = README
        .split("## Quick start on one machine")
        .nth(1)
        .expect("README has a quick start on one machine");
    let section = section.split("\n## ").next().unwrap();
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a sh block in the quick start");
    let commands = block
        .lines()
        .map(|line| line.split('#').next().unwrap().split_whitespace())
        .map(|words| words.map(str::to_owned).collect::<Vec<_>>())
        .filter(|words| !words.is_empty())
        .collect();
    let prose = section.split_whitespace().collect::<Vec<_>>().join(" ");
    let pattern = prose
        .split("short pattern: `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .expect("the quick start suggests a short pattern");
    let pattern = pattern.split_whitespace().map(str::to_owned).collect();
    (commands, pattern)
}

/// The binary a README line runs (`target/release/NAME`) and its arguments.
fn program(words: &[String]) -> (&str, &[String]) {
    let name = words[0]
        .strip_prefix("target/release/")
        .unwrap_or_else(|| panic!("a README command not of target/release: {words:?}"));
    (name, &words[1..])
}

/// Runs the quick start once in `cwd`; the report's directory.
fn run_quick_start(cwd: &Path) -> std::path::PathBuf {
    let (commands, pattern) = quick_start();
    let mut daemon = None;
    let mut report_out = None;
    for words in &commands {
        let (name, args) = program(words);
        match name {
            "oscil-daemon" => {
                assert_eq!(
                    args,
                    ["&"],
                    "the test starts the README's daemon as written"
                );
                daemon = Some(Daemon::start(&[]));
            }
            "oscil-reader" => {
                let port = daemon.as_ref().expect("the daemon first").addr.port();
                let out = Command::new(workspace_bin("oscil-reader"))
                    .current_dir(cwd)
                    .args(args)
                    .args(["--port", &port.to_string(), "--quiet"])
                    .args(&pattern)
                    .output()
                    .expect("run oscil-reader");
                assert!(out.status.success(), "{words:?}: {out:?}");
            }
            "oscil-report" => {
                let out = Command::new(env!("CARGO_BIN_EXE_oscil-report"))
                    .current_dir(cwd)
                    .args(args)
                    .output()
                    .expect("run oscil-report");
                assert!(out.status.success(), "{words:?}: {out:?}");
                let at = args.iter().position(|a| a == "--out").expect("--out");
                report_out = Some(cwd.join(&args[at + 1]));
            }
            other => panic!("a README command this test does not know: {other}"),
        }
    }
    report_out.expect("the quick start ends with a report")
}

/// A change in percent said after `words` in `sentence` (`words -72% ...`).
fn change_after(sentence: &str, words: &str) -> f64 {
    let rest = sentence
        .split(words)
        .nth(1)
        .unwrap_or_else(|| panic!("no {words:?} in {sentence:?}"));
    let figure = rest.split_whitespace().next().unwrap();
    let figure = figure.trim_end_matches([',', '%']).replace('−', "-");
    figure
        .parse()
        .unwrap_or_else(|_| panic!("no change after {words:?} in {sentence:?}"))
}

/// What one quick start's report answers, checked: one workload, no warning, and lowat
/// lowering the sender's queue and not-sent bytes. The answer's two changes, for the message.
fn check_answer(report: &Path) -> (f64, f64) {
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["warnings"], serde_json::json!([]), "no warning");
    let headline = report_figure(report, "headline");
    let texts: Vec<&str> = headline["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["text"].as_str().unwrap())
        .collect();
    let answer = texts.join(" ");
    assert!(!answer.contains("WARNING"), "{answer}");
    assert!(!answer.contains("not one workload"), "{answer}");
    let summary = std::fs::read_to_string(report.join("summary.md")).unwrap();
    assert!(!summary.contains("not one workload"), "{summary}");
    let sentence = answer
        .split("lowat-128k against default:")
        .nth(1)
        .unwrap_or_else(|| panic!("no answer for lowat-128k: {answer}"));
    let queue = change_after(sentence, "the sender's slow-phase queue");
    let notsent = change_after(sentence, "its not-sent bytes");
    assert!(queue < 0.0 && notsent < 0.0, "{sentence}");
    assert!(
        answer.contains("the memory in this answer is the sender's own sockets"),
        "{answer}"
    );
    // The same from the numbers: one slow rate read, the queue lower with lowat.
    let csv = Csv::read(&report.join("configurations.csv"));
    let row = |name: &str| {
        let row = csv.rows.iter().find(|r| r["configuration"] == name);
        row.unwrap_or_else(|| panic!("no {name} in configurations.csv"))
    };
    let figure = |name: &str, column: &str| oscil_testkit::number(row(name), column);
    let rates = ["default", "lowat-128k"].map(|n| figure(n, "slow_rate_mbps"));
    assert_eq!(rates[0], rates[1], "one slow rate");
    let queued = ["default", "lowat-128k"].map(|n| figure(n, "slow_queued_mean_mib"));
    assert!(queued[1] < queued[0], "queued mean {queued:?}");
    (queue, notsent)
}

#[test]
fn the_readme_quick_start_answers_that_lowat_lowers_the_senders_queue_five_times() {
    let mut answers = Vec::new();
    for _ in 0..5 {
        let scratch = tempfile::tempdir().unwrap();
        let report = run_quick_start(scratch.path());
        answers.push(check_answer(&report));
    }
    println!("queue and not-sent changes, five tries: {answers:?}");
}

//! Reports over run directories that a crash, a remote host or another user shaped: a CSV
//! cut mid-row, a CSV that is a link to /dev/zero or a FIFO, a cell that is not a finite
//! time, labels of 300 characters, a megabyte, and terminal escapes. One real run over
//! loopback is made, then copied and damaged by hand.

mod util;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use oscil_testkit::{Csv, Daemon};
use serde_json::Value;
use util::{reader_run, report};

/// One short real run, made once.
fn good_run() -> &'static (tempfile::TempDir, PathBuf) {
    static RUN: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    RUN.get_or_init(|| {
        let daemon = Daemon::start(&[]);
        let scratch = tempfile::tempdir().expect("scratch dir");
        let dir = scratch.path().join("good");
        let args = ["--fast", "1s", "--slow", "1s", "--cycles", "1"];
        reader_run(&daemon, &dir, "good", &args);
        (scratch, dir)
    })
}

/// A copy of the good run under `parent/name`.
fn copy_run(parent: &Path, name: &str) -> PathBuf {
    let (_, good) = good_run();
    let dir = parent.join(name);
    fs::create_dir(&dir).unwrap();
    for entry in fs::read_dir(good).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    dir
}

fn set_label(dir: &Path, label: &str) {
    let path = dir.join("run.json");
    let mut meta: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    meta["label"] = Value::String(label.into());
    fs::write(&path, serde_json::to_vec(&meta).unwrap()).unwrap();
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_csv_cut_mid_row_is_used_and_reported_as_cut() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = copy_run(scratch.path(), "cut");
    let reader = dir.join("reader.csv");
    let text = fs::read_to_string(&reader).unwrap();
    let complete_rows = text.lines().count() - 2;
    let cut_at = text.len() - 7;
    let dropped = cut_at - text[..cut_at].rfind('\n').unwrap() - 1;
    fs::write(&reader, &text[..cut_at]).unwrap();
    let out = scratch.path().join("report");
    let result = report(&[&dir], &out, &[]);
    assert!(result.status.success(), "{}", stderr(&result));
    let rows = Csv::read(&out.join("summary.csv")).rows;
    assert_eq!(rows[0]["status"], "partial");
    assert_eq!(
        rows[0]["partial_reason"],
        format!("reader.csv was cut mid-row: 1 incomplete row ({dropped} bytes) dropped")
    );
    assert!(complete_rows > 10, "the complete rows remain to be used");
}

#[test]
fn links_fifos_and_bad_cells_leave_the_run_out_and_say_so_without_hanging() {
    let scratch = tempfile::tempdir().unwrap();
    let good = copy_run(scratch.path(), "good");
    let zero = copy_run(scratch.path(), "zero");
    fs::remove_file(zero.join("sender.csv")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero.join("sender.csv")).unwrap();
    let fifo = copy_run(scratch.path(), "fifo");
    fs::remove_file(fifo.join("reader.csv")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(fifo.join("reader.csv"))
        .status()
        .unwrap();
    assert!(made.success());
    let mut bad_cells = Vec::new();
    for cell in ["inf", "NaN", "-1", "1e308"] {
        let dir = copy_run(scratch.path(), &format!("cell-{cell}"));
        let path = dir.join("host.csv");
        let text = fs::read_to_string(&path).unwrap();
        let second_row = text.match_indices('\n').nth(1).unwrap().0 + 1;
        let comma = second_row + text[second_row..].find(',').unwrap();
        let damaged = format!("{}{cell}{}", &text[..second_row], &text[comma..]);
        fs::write(&path, damaged).unwrap();
        bad_cells.push(dir);
    }
    let out = scratch.path().join("report");
    let mut inputs: Vec<&Path> = vec![&good, &zero, &fifo];
    inputs.extend(bad_cells.iter().map(PathBuf::as_path));
    let started = Instant::now();
    let result = report(&inputs, &out, &[]);
    let took = started.elapsed();
    let stderr = stderr(&result);
    assert!(result.status.success(), "{stderr}");
    assert!(took < Duration::from_secs(60), "{took:?}");
    assert!(
        stderr.contains("zero/sender.csv: not a regular file but a symbolic link; refused"),
        "{stderr}"
    );
    assert!(
        stderr.contains("fifo/reader.csv: not a regular file but a FIFO; refused"),
        "{stderr}"
    );
    for (cell, shown) in [
        ("inf", "inf"),
        ("NaN", "NaN"),
        ("-1", "-1.0"),
        ("1e308", "1e308"),
    ] {
        let line = format!("cell-{cell}/host.csv: damaged: row 2: t_s {shown} is not within");
        assert!(stderr.contains(&line), "{line}\n{stderr}");
    }
    assert_eq!(Csv::read(&out.join("summary.csv")).rows.len(), 1);
    let html = fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("damaged, left out"), "the page says so too");
}

#[test]
fn long_and_escape_laden_labels_are_escaped_bounded_and_quick() {
    let scratch = tempfile::tempdir().unwrap();
    let long = copy_run(scratch.path(), "long");
    set_label(&long, &format!("\u{1b}[31m{}", "l".repeat(300)));
    let huge = copy_run(scratch.path(), "huge");
    set_label(&huge, &"\u{1b}[2J\u{7}h".repeat(200_000));
    let out = scratch.path().join("report");
    let started = Instant::now();
    let result = report(&[&long, &huge], &out, &[]);
    let took = started.elapsed();
    assert!(result.status.success(), "{}", stderr(&result));
    assert!(took < Duration::from_secs(30), "{took:?}");
    let stdout = String::from_utf8_lossy(&result.stdout).into_owned();
    assert!(!stdout.contains('\u{1b}'));
    for name in ["summary.md", "summary.csv", "index.html"] {
        let text = fs::read_to_string(out.join(name)).unwrap();
        assert!(!text.contains('\u{1b}'), "{name} holds a raw escape");
        assert!(!text.contains('\u{7}'), "{name} holds a raw bell");
        assert!(text.len() < 500_000, "{name}: {} bytes", text.len());
    }
    let summary = fs::read_to_string(out.join("summary.csv")).unwrap();
    assert!(
        summary.contains(&format!("\\u{{1b}}[31m{}", "l".repeat(300))),
        "the whole 300-character label, escaped"
    );
    for entry in fs::read_dir(&out).unwrap() {
        let name = entry.unwrap().file_name();
        assert!(name.len() <= 120, "{name:?}");
    }
}

#[test]
fn the_report_stops_at_its_time_and_memory_bounds() {
    let (_, good) = good_run();
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("report");
    let started = Instant::now();
    let result = report(&[good], &out, &["--max-time", "1ms", "--force"]);
    assert_eq!(result.status.code(), Some(1));
    assert_eq!(
        stderr(&result),
        "oscil-report: stopped after 1ms, its time limit (--max-time)\n"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    // 8 MiB of address space: not enough to draw a run, so it fails, and soon.
    let result = report(&[good], &out, &["--max-memory", "8M", "--force"]);
    assert!(!result.status.success(), "{}", stderr(&result));
    assert!(started.elapsed() < Duration::from_secs(20));
}

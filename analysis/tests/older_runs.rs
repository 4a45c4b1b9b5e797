//! The report over run directories written before the lab's record was typed (the
//! fixtures of `crates/rundir/tests/fixtures`, written by main at a445635): the lab's run
//! reads its path and settings from the record, and a person's `--meta` of then is not
//! read as a path, though it names an `rtt` (the report used to guess one from it).
//! Well under a second.

mod util;

use std::path::{Path, PathBuf};

use oscil_testkit::{number, Csv};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crates/rundir/tests/fixtures")
        .join(name)
}

#[test]
fn older_run_directories_report_from_their_typed_record() {
    let out = tempfile::tempdir().unwrap();
    let (lab, bare) = (fixture("lab-run"), fixture("reader-run-with-meta"));
    let result = util::report(&[&lab, &bare], out.path(), &[]);
    assert!(result.status.success(), "{result:?}");
    let summary = Csv::read(&out.path().join("summary.csv"));
    let row = |label: &str| {
        let found = summary.rows.iter().find(|r| r["label"] == label);
        found.unwrap_or_else(|| panic!("no row {label}"))
    };
    let lab_row = row("100mbit_20ms_cubic_lowat-128k");
    assert_eq!(number(lab_row, "path_rtt_ms"), 20.0);
    assert_eq!(number(lab_row, "path_rate_mbps"), 100.0);
    assert_eq!(lab_row["lowat"], "lowat 128 KiB (sysctl)");
    let bare_row = row("reader-run-with-meta");
    assert_eq!(
        bare_row["path_rtt_ms"], "",
        "the person's \"rtt\" is not a path"
    );
}

/// `--end-table`, which the lab runs as a bounded child: a run directory's line of figures,
/// and nothing written.
#[test]
fn the_labs_line_of_a_run_comes_from_the_report() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oscil-report"))
        .arg("--end-table")
        .arg(fixture("lab-run"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(
        line.starts_with("network goodput fast ") && line.contains(", slow-phase queued mean "),
        "{line}"
    );
    assert_eq!(line.lines().count(), 1, "{line}");
}

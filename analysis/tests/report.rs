//! Reports from real run directories: a daemon and a reader over loopback make the runs,
//! the report binary reads them, and the summary's figures are checked against figures
//! computed here straight from the CSV text.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use oscil_testkit::{number, workspace_bin, Csv, Daemon};
use serde_json::Value;

/// Two real runs over loopback, made once for all tests: the kernel's default lowat and
/// lowat 16 KiB.
fn runs() -> &'static (tempfile::TempDir, Vec<PathBuf>) {
    static RUNS: OnceLock<(tempfile::TempDir, Vec<PathBuf>)> = OnceLock::new();
    RUNS.get_or_init(|| {
        let daemon = Daemon::start(&[]);
        let scratch = tempfile::tempdir().expect("scratch dir");
        let mut dirs = Vec::new();
        for (label, extra) in [
            ("default", &[][..]),
            ("lowat16k", &["--notsent-lowat", "16384"][..]),
        ] {
            let dir = scratch.path().join(label);
            let out = Command::new(workspace_bin("oscil-reader"))
                .args(["--connect", &daemon.addr.to_string(), "--out"])
                .arg(&dir)
                .args(["--fast", "1s", "--slow", "2s", "--cycles", "1", "--quiet"])
                .args(["--label", label])
                .args(extra)
                .output()
                .expect("run oscil-reader");
            assert!(out.status.success(), "oscil-reader {label}: {out:?}");
            dirs.push(dir);
        }
        (scratch, dirs)
    })
}

fn report(args: &[&Path], out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_oscil-report"))
        .args(args)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .expect("run oscil-report")
}

/// Width and height from a PNG's signature and IHDR chunk.
fn png_size(path: &Path) -> (u32, u32) {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is not a PNG",
        path.display()
    );
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

/// 1600 pixels wide: a header of at least two 30-pixel lines (name and settings, figures)
/// over five 380-pixel panels. Returns the height.
fn assert_tall_run_picture(path: &Path) -> u32 {
    let (width, height) = png_size(path);
    assert_eq!(width, 1600, "{}", path.display());
    let header = height.checked_sub(5 * 380 + 20).expect("five panels");
    assert!(
        header >= 60 && header % 30 == 0,
        "{}: {height} pixels tall",
        path.display()
    );
    height
}

/// The figures of the summary, computed from a run directory's text. Definitions: goodput
/// of a phase = 8 x the bytes read in rows of that phase / the phase's length in the
/// schedule; queued = wmem_queued summed over flows per sampling tick, the tick in the
/// phase holding the middle of its interval; RTT over sender rows with an estimate.
struct Expected {
    goodput_fast_mbps: f64,
    goodput_slow_mbps: f64,
    slow_queued_peak_mib: f64,
    slow_queued_mean_mib: f64,
    tcp_mem_peak_sender_mib: f64,
    rtt_slow_mean_ms: f64,
    rtt_min_ms: f64,
}

fn expected(dir: &Path) -> Expected {
    let meta: Value =
        serde_json::from_str(&fs::read_to_string(dir.join("run.json")).unwrap()).expect("run.json");
    let interval_s = meta["config"]["interval_us"].as_f64().unwrap() / 1e6;
    let spans: Vec<(String, f64, f64)> = meta["schedule"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["phase"].as_str().unwrap().to_string(),
                s["start_s"].as_f64().unwrap(),
                s["end_s"].as_f64().unwrap(),
            )
        })
        .collect();
    let phase_of = |t_s: f64| {
        let middle = t_s - interval_s / 2.0;
        spans
            .iter()
            .find(|(_, start, end)| *start <= middle && middle < *end)
            .map(|(phase, _, _)| phase.as_str())
    };
    let length_of = |phase: &str| -> f64 {
        spans
            .iter()
            .filter(|(p, _, _)| p == phase)
            .map(|(_, start, end)| end - start)
            .sum()
    };

    let reader = Csv::read(&dir.join("reader.csv")).rows;
    let read_bytes = |phase: &str| -> f64 {
        reader
            .iter()
            .filter(|r| r["phase"] == phase)
            .map(|r| number(r, "bytes"))
            .sum()
    };

    let sender = Csv::read(&dir.join("sender.csv")).rows;
    let mut queued_by_tick: BTreeMap<i64, (f64, f64)> = BTreeMap::new();
    for row in &sender {
        let t_s = number(row, "t_s");
        let tick = (t_s / interval_s).round() as i64;
        let entry = queued_by_tick
            .entry(tick)
            .or_insert((tick as f64 * interval_s, 0.0));
        entry.1 += number(row, "wmem_queued");
    }
    let slow_queued: Vec<f64> = queued_by_tick
        .values()
        .filter(|(t_s, _)| phase_of(*t_s) == Some("slow"))
        .map(|(_, sum)| *sum)
        .collect();
    assert!(
        !slow_queued.is_empty(),
        "{}: no slow-phase samples",
        dir.display()
    );
    let rtts_ms = |slow_only: bool| -> Vec<f64> {
        sender
            .iter()
            .filter(|r| number(r, "rtt_us") > 0.0)
            .filter(|r| !slow_only || phase_of(number(r, "t_s")) == Some("slow"))
            .map(|r| number(r, "rtt_us") / 1000.0)
            .collect()
    };
    let slow_rtts = rtts_ms(true);

    let page_bytes = meta["sender_host"]["page_size_bytes"].as_f64().unwrap();
    let peak_pages = Csv::read(&dir.join("host.csv"))
        .rows
        .iter()
        .filter(|r| r["side"] == "sender")
        .map(|r| number(r, "tcp_mem_pages"))
        .fold(0.0, f64::max);

    const MIB: f64 = 1024.0 * 1024.0;
    Expected {
        goodput_fast_mbps: read_bytes("fast") * 8.0 / length_of("fast") / 1e6,
        goodput_slow_mbps: read_bytes("slow") * 8.0 / length_of("slow") / 1e6,
        slow_queued_peak_mib: slow_queued.iter().copied().fold(0.0, f64::max) / MIB,
        slow_queued_mean_mib: slow_queued.iter().sum::<f64>() / slow_queued.len() as f64 / MIB,
        tcp_mem_peak_sender_mib: peak_pages * page_bytes / MIB,
        rtt_slow_mean_ms: slow_rtts.iter().sum::<f64>() / slow_rtts.len() as f64,
        rtt_min_ms: rtts_ms(false).into_iter().fold(f64::INFINITY, f64::min),
    }
}

/// Equal to the precision the table prints (`decimals` places).
fn assert_close(label: &str, column: &str, found: f64, want: f64, decimals: i32) {
    let tolerance = 0.51 * 10f64.powi(-decimals) + want.abs() * 1e-9;
    assert!(
        (found - want).abs() <= tolerance,
        "{label}: {column} is {found} in summary.csv, computed {want} from the CSVs"
    );
}

#[test]
fn reports_real_runs_with_figures_matching_the_csvs() {
    let (_scratch, dirs) = runs();
    let out = tempfile::tempdir().unwrap();
    let paths: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    let result = report(&paths, out.path(), &[]);
    assert!(result.status.success(), "{result:?}");

    for name in ["run-default.png", "run-lowat16k.png"] {
        assert_tall_run_picture(&out.path().join(name));
    }
    let (width, height) = png_size(&out.path().join("comparison.png"));
    assert_eq!(width, 1600);
    assert!(height > 400, "comparison.png is {height} pixels tall");
    assert!(
        !out.path().join("path.png").exists(),
        "both runs share one path: no chart against RTT"
    );

    let rows = Csv::read(&out.path().join("summary.csv")).rows;
    assert_eq!(rows.len(), 2);
    for (row, dir) in rows.iter().zip(dirs) {
        let label = &row["label"];
        let want = expected(dir);
        assert_eq!(row["status"], "complete", "{label}");
        for (column, value, decimals) in [
            ("goodput_fast_mbps", want.goodput_fast_mbps, 3),
            ("goodput_slow_mbps", want.goodput_slow_mbps, 3),
            ("slow_queued_peak_mib", want.slow_queued_peak_mib, 4),
            ("slow_queued_mean_mib", want.slow_queued_mean_mib, 4),
            ("tcp_mem_peak_sender_mib", want.tcp_mem_peak_sender_mib, 4),
            ("rtt_slow_mean_ms", want.rtt_slow_mean_ms, 3),
            ("rtt_min_ms", want.rtt_min_ms, 3),
        ] {
            assert_close(label, column, number(row, column), value, decimals);
        }
    }
    // The run without --notsent-lowat has the kernel's default only where the host's
    // sysctl sets no threshold; then it is every run's baseline.
    let sysctl = fs::read_to_string("/proc/sys/net/ipv4/tcp_notsent_lowat").unwrap_or_default();
    if sysctl.trim() == "4294967295" {
        assert_eq!(rows[0]["lowat"], "lowat default");
        assert!(rows.iter().all(|r| r["baseline"] == "default"), "{rows:?}");
    } else {
        eprintln!("net.ipv4.tcp_notsent_lowat is {sysctl:?} here: default-lowat checks skipped");
    }
    assert_eq!(rows[1]["lowat"], "lowat 16 KiB");
    assert_eq!(rows[1]["lowat_bytes"], "16384");

    let md = fs::read_to_string(out.path().join("summary.md")).unwrap();
    assert!(md.contains("| default | complete |"), "{md}");
    assert!(md.contains("| lowat16k | complete | lowat 16 KiB"), "{md}");
}

#[test]
fn a_partial_run_still_reports_and_says_so() {
    let (_scratch, dirs) = runs();
    let copy = tempfile::tempdir().unwrap();
    for file in ["run.json", "reader.csv", "sender.csv", "host.csv"] {
        fs::copy(dirs[0].join(file), copy.path().join(file)).unwrap();
    }
    let meta_path = copy.path().join("run.json");
    let mut meta: Value = serde_json::from_str(&fs::read_to_string(&meta_path).unwrap()).unwrap();
    meta["ending"]["status"] = "partial".into();
    meta["ending"]["reason"] = "interrupted (Ctrl-C)".into();
    meta["label"] = "cut-short".into();
    fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();

    let out = tempfile::tempdir().unwrap();
    let result = report(&[copy.path(), &dirs[0]], out.path(), &[]);
    assert!(result.status.success(), "{result:?}");
    // One more header line than the same run complete, in red: "PARTIAL RUN: <reason>".
    let complete = assert_tall_run_picture(&out.path().join("run-default.png"));
    let partial = assert_tall_run_picture(&out.path().join("run-cut-short.png"));
    assert_eq!(partial, complete + 30);
    let rows = Csv::read(&out.path().join("summary.csv")).rows;
    assert_eq!(rows[0]["status"], "partial");
    assert_eq!(rows[0]["partial_reason"], "interrupted (Ctrl-C)");
    let md = fs::read_to_string(out.path().join("summary.md")).unwrap();
    assert!(
        md.contains("**cut-short** is partial: interrupted (Ctrl-C)"),
        "{md}"
    );
}

/// The error is one line on stderr, and the exit status says it failed.
fn one_line_error(result: &Output) -> String {
    assert!(!result.status.success(), "{result:?}");
    let stderr = String::from_utf8_lossy(&result.stderr).into_owned();
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    stderr
}

#[test]
fn a_directory_that_is_not_a_run_is_one_clear_line() {
    let empty = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let stderr = one_line_error(&report(&[empty.path()], out.path(), &[]));
    assert!(stderr.contains("not a run directory"), "{stderr}");
    assert!(
        stderr.contains(&empty.path().display().to_string()),
        "{stderr}"
    );
}

#[test]
fn a_csv_missing_a_column_names_file_and_column() {
    let (_scratch, dirs) = runs();
    let copy = tempfile::tempdir().unwrap();
    for file in ["run.json", "reader.csv", "host.csv"] {
        fs::copy(dirs[0].join(file), copy.path().join(file)).unwrap();
    }
    let sender = fs::read_to_string(dirs[0].join("sender.csv")).unwrap();
    fs::write(
        copy.path().join("sender.csv"),
        sender.replacen("notsent_bytes", "notsent", 1),
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let stderr = one_line_error(&report(&[copy.path()], out.path(), &[]));
    assert!(
        stderr.contains("sender.csv: missing column \"notsent_bytes\""),
        "{stderr}"
    );
}

#[test]
fn an_unknown_baseline_lists_the_labels() {
    let (_scratch, dirs) = runs();
    let out = tempfile::tempdir().unwrap();
    let stderr = one_line_error(&report(
        &[&dirs[0], &dirs[1]],
        out.path(),
        &["--baseline", "nope"],
    ));
    assert!(stderr.contains("\"nope\""), "{stderr}");
    assert!(stderr.contains("default, lowat16k"), "{stderr}");
}

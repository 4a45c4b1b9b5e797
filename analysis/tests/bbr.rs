//! A run whose sender recorded BBR's own state (`--congestion bbr`) gets a picture of BBR's
//! bandwidth estimate against the rate it delivered, listed in report.json; a cubic run,
//! which records none, gets no such picture. Real runs over loopback.

mod util;

use std::path::Path;

use serde_json::Value;
use util::{png_size, real_runs, report};

/// The sender.csv column `name` of the run in `dir`, as text, row by row.
fn column(dir: &Path, name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("sender.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = header.iter().position(|h| *h == name).expect(name);
    lines
        .map(|l| l.split(',').nth(at).unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_bbr_run_draws_its_estimate_against_the_delivered_rate_and_a_cubic_run_does_not() {
    let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    if !available.split_whitespace().any(|cc| cc == "bbr") {
        oscil_testkit::skip("needs tcp_bbr loaded (modprobe tcp_bbr)");
        return;
    }
    let short = ["--fast", "1s", "--slow", "1s", "--cycles", "1"];
    let runs = [
        (
            "bbr".to_string(),
            [&short[..], &["--congestion", "bbr"]].concat(),
        ),
        (
            "cubic".to_string(),
            [&short[..], &["--congestion", "cubic"]].concat(),
        ),
    ];
    let (_scratch, dirs) = real_runs(&runs, str::to_string);
    // The kernel gave BBR's state to the bbr run only (the columns are empty, never 0,
    // where it is absent).
    let estimates = column(&dirs[0], "bbr_bw_bps");
    assert!(
        estimates
            .iter()
            .any(|v| v.parse::<u64>().is_ok_and(|bps| bps > 0)),
        "{estimates:?}"
    );
    assert!(column(&dirs[1], "bbr_bw_bps").iter().all(String::is_empty));

    let out = tempfile::tempdir().unwrap();
    let paths: Vec<&Path> = dirs.iter().map(|d| d.as_path()).collect();
    let result = report(&paths, out.path(), &[]);
    assert!(result.status.success(), "{result:?}");
    let (width, height) = png_size(&out.path().join("run-bbr-bbr.png"));
    assert!(width >= 800 && height >= 300, "{width} x {height}");
    assert!(!out.path().join("run-cubic-bbr.png").exists());

    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("report.json")).unwrap())
            .unwrap();
    let bbr: Vec<&Value> = manifest["figures"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "bbr")
        .collect();
    assert_eq!(bbr.len(), 1, "one BBR picture: {bbr:?}");
    assert_eq!(bbr[0]["file"], "run-bbr-bbr.png");
    let panel = &bbr[0]["panels"][0];
    assert_eq!(panel["key"], "bbr", "{panel}");
    let keys = panel["keys"].to_string();
    assert!(
        keys.contains("bbr_bw_bps") && keys.contains("delivery rate"),
        "{keys}"
    );
    let files = manifest["files"].as_array().unwrap();
    assert!(
        files.iter().any(|f| f == "run-bbr-bbr.png"),
        "listed among the report's files: {files:?}"
    );
}

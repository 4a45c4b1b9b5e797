//! Issue 37 item 4 end to end: in report.json of the main job (`--quick`) and of a
//! `--quick --rtt 100ms --rate 100mbit` campaign, every panel's y axis keeps the rules. A
//! rate axis ends near the path's rate (within 0.8x to 1.25x), a log axis at most a decade
//! above its largest value drawn, a wait axis within the session, a share axis at 100%.
//! The session's length is read from the runs' CSV files here, not from oscil's code.
//! Needs root (namespaces, TUN); about a minute per campaign.

mod util;

use std::path::Path;

use oscil_testkit::{number, Csv};

/// The last sample of any run of the campaign, in ms: no wait can be longer.
fn session_ms(campaign: &Path) -> f64 {
    let mut last_s: f64 = 0.0;
    for run in std::fs::read_dir(campaign.join("runs")).unwrap() {
        for rep in std::fs::read_dir(run.unwrap().path()).unwrap() {
            let rep = rep.unwrap().path();
            for file in ["reader.csv", "sender.csv"] {
                let csv = Csv::read(&rep.join(file));
                for row in &csv.rows {
                    last_s = last_s.max(number(row, "t_s"));
                }
            }
        }
    }
    assert!(last_s > 0.0, "no samples in {}", campaign.display());
    last_s * 1000.0
}

/// Checks every time-series panel's axis of `campaign`'s report against the rules;
/// `rate_mbps` is the path's rate the lab set.
fn check_axes(campaign: &Path, rate_mbps: f64) {
    let session = session_ms(campaign);
    let path = campaign.join("report/report.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut checked = 0;
    for figure in report["figures"].as_array().unwrap() {
        for panel in figure["panels"].as_array().unwrap() {
            let axis = &panel["y_axis"];
            if axis.is_null() {
                continue;
            }
            let at = format!("{} {}: {axis}", figure["file"], panel["key"]);
            let label = axis["label"].as_str().unwrap();
            let (from, to) = (axis["from"].as_f64().unwrap(), axis["to"].as_f64().unwrap());
            let largest = panel["largest_drawn"].as_f64().unwrap();
            assert!(from < to, "{at}");
            if label.contains("Mbit/s") {
                assert!((0.8 * rate_mbps..=1.25 * rate_mbps).contains(&to), "{at}");
            }
            if label.contains("Gbit/s") {
                let rate_gbps = rate_mbps / 1000.0;
                assert!((0.8 * rate_gbps..=1.25 * rate_gbps).contains(&to), "{at}");
            }
            if label.contains("log scale") {
                assert!(to <= 10.0 * largest, "{at}");
            }
            if label.starts_with("time (ms") || label.starts_with("wait (ms") {
                assert!(to <= session, "{at}: session {session} ms");
            }
            if label.contains("(%)") {
                assert!(to <= 100.0, "{at}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} axes in {}", path.display());
}

#[test]
fn the_main_jobs_axes_keep_the_rules() {
    let Some(campaign) = util::run_lab("oscil-scales-", &["--quick"]) else {
        return;
    };
    check_axes(&campaign.0, 1000.0);
}

#[test]
fn a_100mbit_paths_axes_keep_the_rules() {
    let args = ["--quick", "--rtt", "100ms", "--rate", "100mbit"];
    let Some(campaign) = util::run_lab("oscil-scales-100m-", &args) else {
        return;
    };
    check_axes(&campaign.0, 100.0);
}

//! `--direction both` (issue 40 item 4): a forward pair and a reverse pair over one emulated
//! link at the same time. Both run directories end complete with rows, data flowed each
//! way, and the campaign's report counts each pair as its own configuration. One short
//! run on a small path. Needs root (namespaces, TUN).

mod util;

use std::path::Path;

use oscil_testkit::{number, Csv};

/// Bytes TCP delivered to `run`'s reader over its rows.
fn delivered_bytes(run: &Path) -> f64 {
    let rows = Csv::read(&run.join("reader.csv")).rows;
    assert!(!rows.is_empty(), "no reader rows in {}", run.display());
    rows.iter().map(|r| number(r, "delivered_bytes")).sum()
}

fn run_json(run: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(run.join("run.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn both_directions_run_at_once_and_the_report_names_each() {
    let args = [
        "--direction",
        "both",
        "--rate",
        "50mbit",
        "--rtt",
        "20ms",
        "--fast",
        "1s",
        "--slow",
        "1s",
        "--cycles",
        "1",
        "--tcp-notsent-lowat",
        "default",
        "--marker-every",
        "off",
        "--reverse-group",
        "flows=2",
    ];
    let Some(campaign) = util::run_lab("oscil-direction-", &args) else {
        return;
    };
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(campaign.0.join("campaign.json")).unwrap())
            .unwrap();
    let run = &plan["runs"][0];
    assert_eq!(run["status"], "complete", "{run}");
    let forward = campaign.0.join(run["dir"].as_str().unwrap());
    let reverse = forward.join("reverse");
    for (dir, flows, direction) in [(&forward, 1, "both"), (&reverse, 2, "reverse")] {
        let meta = run_json(dir);
        assert_eq!(meta["ending"]["status"], "complete", "{}", dir.display());
        let lab = &meta["lab"];
        assert_eq!(lab["settings"]["direction"], direction, "{lab}");
        assert_eq!(lab["settings"]["flows"], flows, "{lab}");
        let sender = Csv::read(&dir.join("sender.csv")).rows;
        assert!(!sender.is_empty(), "no sender rows in {}", dir.display());
        assert!(delivered_bytes(dir) > 0.0, "no data in {}", dir.display());
    }
    // The reverse pair's daemon ran in the receiving namespace, its reader in the sending one.
    let namespaces = |dir: &Path| run_json(dir)["lab"]["namespaces"].clone();
    let (f, r) = (namespaces(&forward), namespaces(&reverse));
    assert_eq!(
        (f["sender"].clone(), f["receiver"].clone()),
        (r["receiver"].clone(), r["sender"].clone())
    );
    // Each pair is a configuration of its own (in the verdicts, or named as left out of
    // them when the loaded machine's emulator fell behind), and has its own chart.
    let report = std::fs::read_to_string(campaign.0.join("report/report.json")).unwrap();
    for label in ["both_forward", "both_reverse"] {
        assert!(report.contains(label), "{label}: {report}");
        let charts = std::fs::read_dir(campaign.0.join("report")).unwrap();
        let chart = charts
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .find(|name| name.starts_with("run-") && name.ends_with(&format!("{label}.png")));
        assert!(chart.is_some(), "no chart of {label}");
    }
}

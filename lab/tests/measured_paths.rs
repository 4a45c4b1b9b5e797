//! Paths told apart by what runs measured (issue 37 item 1): two lab runs of each of two
//! RTTs (20 ms and 80 ms), between the same two namespaces, with the lab's record of the
//! link removed (`link.json`, and `run.json`'s `lab`, so nothing the lab set is left) are
//! two paths: each its own configuration of two runs, its own baseline and its own answer.
//! Needs root (namespaces, TUN); about a minute.

mod util;

use std::path::{Path, PathBuf};

use oscil_testkit::{report_figure, Csv};

/// Copies of every run of `campaign` (the kept attempts left out) into `scratch`, each
/// without `link.json` and without `run.json`'s `lab`.
fn bare_copies(campaign: &Path, scratch: &Path) -> Vec<PathBuf> {
    let mut copies = Vec::new();
    for label in std::fs::read_dir(campaign.join("runs")).unwrap() {
        let label = label.unwrap().path();
        for rep in std::fs::read_dir(&label).unwrap() {
            let rep = rep.unwrap().path();
            let name = rep.file_name().unwrap().to_str().unwrap().to_owned();
            if name.contains(".attempt-") {
                continue;
            }
            let label_name = label.file_name().unwrap().to_str().unwrap();
            let copy = scratch.join(format!("{label_name}-{name}"));
            let cp = std::process::Command::new("cp")
                .arg("-a")
                .arg(&rep)
                .arg(&copy)
                .status();
            assert!(cp.unwrap().success());
            let _ = std::fs::remove_file(copy.join("link.json"));
            let meta_path = copy.join("run.json");
            let mut meta: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
            meta.as_object_mut().unwrap().remove("lab");
            std::fs::write(&meta_path, meta.to_string()).unwrap();
            copies.push(copy);
        }
    }
    copies
}

/// The lowest RTT a path's words name (`lowest RTT 20.4 ms`), in ms.
fn named_rtt_ms(path: &str) -> f64 {
    let rest = path
        .split("lowest RTT ")
        .nth(1)
        .unwrap_or_else(|| panic!("no RTT named: {path}"));
    rest.split(" ms").next().unwrap().parse().unwrap()
}

#[test]
fn two_rtts_without_the_labs_record_are_two_paths() {
    let args = [
        "--quick",
        "--rtt",
        "20ms,80ms",
        "--rate",
        "100mbit",
        "--tcp-notsent-lowat",
        "default",
        "--marker-every",
        "off",
        "--repeat",
        "2",
    ];
    let Some(campaign) = util::run_lab("oscil-measured-", &args) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let copies = bare_copies(&campaign.0, scratch.path());
    assert_eq!(copies.len(), 4, "{copies:?}");
    let out = scratch.path().join("report");
    let done = std::process::Command::new(oscil_testkit::workspace_bin("oscil-report"))
        .args(&copies)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(done.status.success(), "{done:?}");
    let csv = Csv::read(&out.join("configurations.csv"));
    let rows: Vec<(String, String, String)> = csv
        .rows
        .iter()
        .map(|r| {
            let cell = |name: &str| r[name].clone();
            (cell("configuration"), cell("runs"), cell("baseline"))
        })
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for (name, runs, baseline) in &rows {
        assert_eq!(runs, "2", "{rows:?}");
        assert_eq!(name, baseline, "each its own path's baseline: {rows:?}");
    }
    // Each path its own answer, named by the RTT it measured.
    let headline = report_figure(&out, "headline");
    let mut rtts: Vec<f64> = headline["texts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["text"].as_str().unwrap().strip_prefix("Path: "))
        .map(named_rtt_ms)
        .collect();
    rtts.sort_by(f64::total_cmp);
    assert_eq!(rtts.len(), 2, "{headline}");
    assert!((20.0..30.0).contains(&rtts[0]), "{rtts:?}");
    assert!((80.0..95.0).contains(&rtts[1]), "{rtts:?}");
}

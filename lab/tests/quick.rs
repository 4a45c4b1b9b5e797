//! `--quick` on the default path says what it cannot show (issue 37 item 3): on 466 ms at
//! 1 Gbit/s a 2 s fast phase is four round trips, the path never leaves slow start, and the
//! lab's end table on the terminal, `report.json` and `summary.md` say so and what to run
//! instead; on 100 ms at 100 Mbit/s the same pattern fills the path and nothing is said.
//! One configuration each, markers off, to keep it short. Needs root (namespaces, TUN).

mod util;

use std::path::Path;

use oscil_testkit::{bin_dir, lacks_root, number, report_figure, Csv};

const TOO_SHORT: &str = "too short for the path to leave slow start";

/// Whether the answer of `campaign`'s report (its text in `report.json`) warns that the
/// fast phases were too short, checked to say the same in `summary.md`.
fn report_says_too_short(campaign: &Path) -> bool {
    let headline = report_figure(&campaign.join("report"), "headline");
    let texts = headline["texts"].as_array().unwrap();
    let answer: Vec<&str> = texts.iter().map(|t| t["text"].as_str().unwrap()).collect();
    let in_answer = answer.join(" ").contains(TOO_SHORT);
    let summary = std::fs::read_to_string(campaign.join("report/summary.md")).unwrap();
    assert_eq!(in_answer, summary.contains(TOO_SHORT), "{summary}");
    in_answer
}

/// The fast phases' network goodput of the campaign's one run, in Mbit/s, from its CSV
/// files: the bytes TCP delivered in fast rows over the fast phases' length.
fn fast_goodput_mbps(campaign: &Path) -> f64 {
    let label = std::fs::read_dir(campaign.join("runs")).unwrap().next();
    let rep = label
        .expect("one configuration")
        .unwrap()
        .path()
        .join("rep-1");
    let rows = Csv::read(&rep.join("reader.csv")).rows;
    let fast = rows.iter().filter(|r| r["phase"] == "fast");
    let bytes: f64 = fast.map(|r| number(r, "delivered_bytes")).sum();
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(rep.join("run.json")).unwrap()).unwrap();
    let fast_s: f64 = meta["schedule"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["phase"] == "fast")
        .map(|s| s["end_s"].as_f64().unwrap() - s["start_s"].as_f64().unwrap())
        .sum();
    bytes * 8.0 / fast_s / 1e6
}

const ONE: [&str; 5] = [
    "--quick",
    "--tcp-notsent-lowat",
    "default",
    "--marker-every",
    "off",
];

/// One `--quick` campaign with `extra` arguments: the campaign and its terminal output.
fn quick_campaign(prefix: &str, extra: &[&str]) -> Option<(util::Campaign, String)> {
    if lacks_root("network namespaces, TUN devices") {
        return None;
    }
    let args: Vec<&str> = ONE.iter().chain(extra).copied().collect();
    Some(util::run_lab_with(prefix, &args, &bin_dir()))
}

#[test]
fn quick_on_the_default_path_says_it_never_left_slow_start() {
    let Some((campaign, stdout)) = quick_campaign("oscil-quick-", &[]) else {
        return;
    };
    let goodput = fast_goodput_mbps(&campaign.0);
    assert!(
        goodput < 250.0,
        "a quarter of the path filled: {goodput} Mbit/s"
    );
    let said = stdout.lines().find(|l| l.contains(TOO_SHORT));
    let said = said.unwrap_or_else(|| panic!("the end table says nothing: {stdout}"));
    assert!(
        said.contains("--rtt 100ms --rate 100mbit --quick"),
        "{said}"
    );
    assert!(report_says_too_short(&campaign.0));
}

#[test]
fn quick_on_a_100mbit_100ms_path_fills_it_and_says_nothing() {
    let path = ["--rtt", "100ms", "--rate", "100mbit"];
    let Some((campaign, stdout)) = quick_campaign("oscil-quick-100m-", &path) else {
        return;
    };
    let goodput = fast_goodput_mbps(&campaign.0);
    assert!(
        goodput >= 25.0,
        "a quarter of the path not filled: {goodput} Mbit/s"
    );
    assert!(!stdout.contains(TOO_SHORT), "{stdout}");
    assert!(!report_says_too_short(&campaign.0));
    // One group (no --group): the report has no groups section and no groups.csv.
    let report = campaign.0.join("report");
    assert!(!report.join("groups.csv").exists());
    let summary = std::fs::read_to_string(report.join("summary.md")).unwrap();
    assert!(!summary.contains("Groups of flows"), "{summary}");
}

//! Issue 19 end to end on an emulated 100 Mbit/s x 100 ms path, default lowat against
//! 131072: both configurations read their slow phases at one rate, network goodput stays
//! within the path's rate, the default's latency shows (censored where it must be), and
//! the lab's end table says what the report's configurations.csv says. Figures are
//! computed here from the files' text, not by oscil's code.

use std::path::Path;
use std::process::Command;

use oscil_testkit::{lacks_root, number, workspace_bin, Csv};

const RATE_MBPS: f64 = 100.0;
const ISSUE_CAMPAIGN: &str =
    "--rate 100mbit --rtt 100ms --lowat default,131072 --fast 2s --slow 4s --cycles 2 --order grouped";

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("JSON")
}

/// The run's slow rate: the mean of what run.json recorded per cycle, bytes/s.
fn slow_rate(run: &Path) -> f64 {
    let meta = json(&run.join("run.json"));
    let rate = &meta["config"]["slow_rate"];
    assert_eq!(rate["chosen_by"]["by"], "peak_delivered", "{rate}");
    let cycles: Vec<f64> = rate["cycles"]
        .as_array()
        .expect("cycles")
        .iter()
        .map(|c| c["bytes_per_s"].as_f64().unwrap())
        .collect();
    assert_eq!(cycles.len(), 2, "{rate}");
    cycles.iter().sum::<f64>() / 2.0
}

/// The end table's row for `label`: its cells after the label.
fn table_row<'a>(stdout: &'a str, label: &str) -> Vec<&'a str> {
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(label))
        .unwrap_or_else(|| panic!("no row {label} in the end table:\n{stdout}"));
    line.split_whitespace().skip(1).collect()
}

#[test]
fn one_workload_network_goodput_and_censored_latency_on_a_long_path() {
    if lacks_root("network namespaces, TUN devices") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c");
    let bin = workspace_bin("oscil-lab");
    let output = Command::new(&bin)
        // The issue's path and settings, its pattern shortened to keep the test short.
        .args(ISSUE_CAMPAIGN.split(' '))
        .arg("--out")
        .arg(&out)
        .env("OSCIL_BIN_DIR", bin.parent().unwrap())
        .output()
        .expect("run oscil-lab");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let labels = [
        "100mbit_100ms_cubic_lowat-default",
        "100mbit_100ms_cubic_lowat-131072",
    ];
    let runs: Vec<_> = labels
        .iter()
        .map(|l| out.join(format!("runs/{l}/rep-1")))
        .collect();

    // One workload: the slow rates agree within 15%, whatever the setting queued.
    let rates: Vec<f64> = runs.iter().map(|r| slow_rate(r)).collect();
    let (lo, hi) = (rates[0].min(rates[1]), rates[0].max(rates[1]));
    assert!(hi <= 1.15 * lo, "slow rates {rates:?} bytes/s");
    // About 5% of the path (the peak second TCP delivered; never a receive-buffer drain).
    assert!(
        lo * 8.0 / 1e6 > 0.03 * RATE_MBPS && hi * 8.0 / 1e6 < 0.06 * RATE_MBPS,
        "slow rates {rates:?} bytes/s"
    );

    // Network goodput within the path's rate, phase by phase, as the report has it.
    let report = out.join("report");
    let configs = Csv::read(&report.join("configurations.csv")).rows;
    for row in &configs {
        for column in ["net_goodput_fast_mbps", "net_goodput_slow_mbps"] {
            let mbps = number(row, column);
            assert!(mbps > 0.0 && mbps <= RATE_MBPS, "{column} {mbps}: {row:?}");
        }
    }
    let summary = std::fs::read_to_string(report.join("summary.md")).unwrap();
    assert!(!summary.contains("WARNING"), "{summary}");

    // The default's writes wait in a queue that drains at 5%: its latency shows, several
    // hundred ms or more, censored where the wait outlived the run.
    let default = &runs[0];
    let markers = Csv::read(&default.join("markers.csv")).rows;
    let longest_ms = markers
        .iter()
        .filter(|r| !r["latency_us"].is_empty())
        .map(|r| number(r, "latency_us") / 1000.0)
        .fold(0.0, f64::max);
    assert!(longest_ms >= 300.0, "longest marker wait {longest_ms} ms");
    let censored = markers.iter().filter(|r| r["censored"] == "true").count();
    let meta = json(&default.join("run.json"));
    assert_eq!(meta["markers"]["unread"].as_u64(), Some(censored as u64));
    let sender = Csv::read(&default.join("sender.csv")).rows;
    let waited_ms = sender
        .iter()
        .flat_map(|r| ["residence_us", "pending_write_age_us"].map(|c| (r, c)))
        .filter(|(r, c)| !r[*c].is_empty())
        .map(|(r, c)| number(r, c) / 1000.0)
        .fold(0.0, f64::max);
    assert!(waited_ms >= 300.0, "longest send-queue wait {waited_ms} ms");

    // The lab's end table and configurations.csv: the same figures, to the table's digits.
    for row in &configs {
        let cells = table_row(&stdout, &row["configuration"]);
        // The table rounds the figure, configurations.csv writes it to its own digits: the
        // two agree within half a unit of each one's last digit (rounding a rounded number
        // again could differ by one in the table's last digit).
        let agrees = |cell: &str, column: &str| {
            let written = &row[column];
            let digits = |text: &str| text.split_once('.').map_or(0, |(_, f)| f.len()) as i32;
            let half_units = 0.5 * 10f64.powi(-digits(cell)) + 0.5 * 10f64.powi(-digits(written));
            let gap = (cell.parse::<f64>().unwrap() - number(row, column)).abs();
            assert!(
                gap <= half_units + 1e-9,
                "{column}: table {cell}, configurations.csv {written}\n{stdout}"
            );
        };
        assert_eq!(cells[0], "1/1", "{cells:?}");
        agrees(cells[1], "net_goodput_fast_mbps");
        agrees(cells[3], "slow_queued_mean_mib");
        for (cell, column) in [
            (cells[2], "net_goodput_fast_mbps"),
            (cells[4], "slow_queued_mean_mib"),
        ] {
            let change = &row[format!("{column}_change_pct").as_str()];
            if change.is_empty() {
                assert_eq!(cell, "base", "{stdout}");
            } else {
                let pct: f64 = cell.trim_end_matches('%').replace('±', "").parse().unwrap();
                assert!(
                    (pct - change.parse::<f64>().unwrap()).abs() <= 0.5,
                    "{column}: table {cell}, configurations.csv {change}"
                );
            }
        }
    }
}

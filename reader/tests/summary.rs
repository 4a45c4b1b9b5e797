//! The end-of-run summary (`--json`) of a real run over loopback, checked against figures
//! computed here from the run directory's CSV text (the definitions the report uses too).

mod util;

use std::collections::BTreeMap;

use oscil_testkit::{number, Csv};
use util::{fresh_run, json_and_meta, phase_of_1s_each};

#[test]
fn json_summary_matches_the_run_directory() {
    let (_dir, out, output) =
        fresh_run(&["--fast", "1s", "--slow", "1s", "--cycles", "1", "--json"]);
    let (summary, meta) = json_and_meta(&out, &output);
    let end_s = meta["ending"]["duration_s"].as_f64().unwrap();
    // Fast is 0-1 s, slow 1-2 s (cut at the run's end).
    let phase_of = phase_of_1s_each;
    let reader = Csv::read(&out.join("reader.csv")).rows;
    let slow_bytes: f64 = reader
        .iter()
        .filter(|r| r["phase"] == "slow")
        .map(|r| number(r, "bytes"))
        .sum();
    let slow = &summary["phases"]["slow"];
    let seconds = end_s.min(2.0) - 1.0;
    assert_eq!(slow["bytes_read"].as_f64().unwrap(), slow_bytes);
    let read = slow["read_bps"].as_f64().unwrap();
    assert!((read - slow_bytes * 8.0 / seconds).abs() < 1e-6 * read.max(1.0));
    let slow_delivered: f64 = reader
        .iter()
        .filter(|r| r["phase"] == "slow")
        .map(|r| number(r, "delivered_bytes"))
        .sum();
    let net = slow["net_goodput_bps"].as_f64().unwrap();
    assert!((net - slow_delivered * 8.0 / seconds).abs() < 1e-6 * net.max(1.0));

    // A pass is the rows of one daemon message, which share their t_s exactly: the last,
    // partial sample of a run can come 10 to 50 ms after the last tick, in the same
    // rounded interval, and is a pass of its own.
    let mut notsent_by_tick: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    let mut rtts = Vec::new();
    for row in Csv::read(&out.join("sender.csv")).rows {
        let t_s = number(&row, "t_s");
        let entry = notsent_by_tick.entry(t_s.to_bits()).or_insert((t_s, 0.0));
        entry.1 += number(&row, "notsent_bytes");
        if phase_of(t_s) == Some("slow") && number(&row, "rtt_us") > 0.0 {
            rtts.push(number(&row, "rtt_us"));
        }
    }
    let slow_notsent: Vec<f64> = notsent_by_tick
        .values()
        .filter(|(t, _)| phase_of(*t) == Some("slow"))
        .map(|(_, sum)| *sum)
        .collect();
    let peak = slow_notsent.iter().copied().fold(0.0, f64::max);
    assert_eq!(slow["notsent_peak_bytes"].as_f64().unwrap(), peak);
    // RTT over rows with an estimate only (0 means none).
    let rtt_mean = rtts.iter().sum::<f64>() / rtts.len() as f64;
    let found = slow["sender_rtt_mean_us"].as_f64().unwrap();
    assert!(
        (found - rtt_mean).abs() < 1e-6 * rtt_mean,
        "{found} vs {rtt_mean}"
    );
    // Each row's span: one interval, except the last, partial one.
    let spans: Vec<f64> = reader.iter().map(|r| number(r, "span_s")).collect();
    assert!(spans.iter().all(|&s| s > 0.0 && s <= 1.0), "{spans:?}");
    let total: f64 = spans.iter().sum();
    assert!(
        (total - end_s).abs() < 0.15,
        "spans sum to {total}, the run lasted {end_s}"
    );
}

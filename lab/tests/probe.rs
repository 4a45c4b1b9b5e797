//! The host's queue apart from the path's: on a 100 Mbit/s x 100 ms path with the default
//! lowat, the idle probe's round trip (probe.csv) stays near the path's while the markers
//! (markers.csv), which wait behind the sender's queue, take seconds. Needs root
//! (namespaces, TUN); skips, saying so, without it.

mod util;

use oscil_testkit::{number, Csv};
use util::run_lab;

fn median(mut values: Vec<f64>) -> f64 {
    assert!(!values.is_empty());
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Column `name` of the rows where it is not empty, in ms (the file holds µs).
fn column_ms(csv: &Csv, name: &str) -> Vec<f64> {
    csv.rows
        .iter()
        .filter(|row| !row[name].is_empty())
        .map(|row| number(row, name) / 1000.0)
        .collect()
}

#[test]
fn the_probe_sees_the_path_while_the_markers_see_the_sender_queue() {
    let Some(campaign) = run_lab(
        "oscil-probe-",
        &[
            "--rate", "100mbit", "--rtt", "100ms", "--lowat", "default", "--fast", "4s", "--slow",
            "8s", "--cycles", "1",
        ],
    ) else {
        return;
    };
    let out = &campaign.0;
    let run = out.join("runs/100mbit_100ms_cubic_lowat-default/rep-1");
    // A run the lab refused measured the host, not the path: nothing is read from it.
    if util::left_out(&run).is_some() {
        return;
    }
    let probe = Csv::read(&run.join("probe.csv"));
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["probe"]["on"], true, "{}", meta["probe"]);
    // Every probe sent is in the file, one every 100 ms at most over the run (a late tick
    // is skipped, never made up: the first at the start, perhaps one as it stops). A
    // loaded machine may skip some; for a median, a tenth of them is plenty.
    let sent = meta["probe"]["sent"].as_u64().unwrap();
    assert_eq!(probe.rows.len() as u64, sent, "{}", meta["probe"]);
    let run_s = meta["ending"]["duration_s"].as_f64().unwrap();
    assert!(
        sent as f64 <= run_s / 0.1 + 2.0,
        "{sent} probes in {run_s} s"
    );
    let probe_rtts = column_ms(&probe, "rtt_us");
    assert!(
        probe_rtts.len() >= 10,
        "{} probes answered",
        probe_rtts.len()
    );
    let probe_ms = median(probe_rtts);
    let markers = column_ms(&Csv::read(&run.join("markers.csv")), "latency_us");
    let marker_ms = median(markers.clone());
    let marker_max_ms = markers.iter().copied().fold(0.0, f64::max);
    eprintln!(
        "round trip: probe median {probe_ms:.1} ms; markers median {marker_ms:.1} ms, max {marker_max_ms:.1} ms"
    );
    // Never under the path's 100 ms: the emulator holds each packet that long.
    assert!(probe_ms >= 100.0, "probe median {probe_ms} ms");
    // A marker written in the slow phase waits behind the send queue the default lowat let
    // grow in the fast phase, drained at 5% of the rate: seconds (a median of 3-4.7 s in
    // most runs), which a loaded machine only lengthens. The median itself is not asserted:
    // a marker goes out with the daemon's next write, and how many writes the slow phase
    // allows varies, so the median can fall among the fast phase's short waits (0.52 s in
    // one run on main). The longest wait is the queue's. The probe waits behind none of it: what a
    // loaded machine adds to its round trip (scheduling of two ends and the emulator, tens
    // of ms) stays far below, so a fifth is room to spare.
    assert!(
        marker_max_ms >= 1000.0,
        "longest marker wait {marker_max_ms} ms"
    );
    assert!(
        probe_ms * 5.0 <= marker_max_ms,
        "probe median {probe_ms} ms beside the markers' longest wait {marker_max_ms} ms"
    );
    // The probe is no flow: one flow's rows per interval only.
    let flows: Vec<f64> = Csv::read(&run.join("sender.csv")).column("flow");
    assert!(flows.iter().all(|&f| f == 0.0));
    // The report's figure is the same median (its histogram keeps 3 digits), shown beside
    // the markers'.
    let summary = Csv::read(&out.join("report/summary.csv"));
    let reported = number(&summary.rows[0], "probe_rtt_p50_ms");
    assert!(
        (reported - probe_ms).abs() <= probe_ms * 0.01 + 0.1,
        "report {reported} ms, probe.csv {probe_ms} ms"
    );
    // Beside it the markers' climb: the report counts only markers sent inside the pattern's
    // phases, and a dozen markers' median can fall either side of the fast phase's short
    // waits, so the climb is asserted on the 99th percentile (seconds in every run seen).
    let (p50, p99) = (
        number(&summary.rows[0], "marker_p50_ms"),
        number(&summary.rows[0], "marker_p99_ms"),
    );
    eprintln!("report: marker p50 {p50} ms, p99 {p99} ms");
    assert!(p99 >= 1000.0, "report's marker p99 {p99} ms");
}

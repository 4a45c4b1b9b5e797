//! The idle probe over loopback: one probe every 100 ms on its own connection, echoed by
//! the daemon, in probe.csv and the summary but in no flow's rows; `--no-probe` leaves it
//! out and says so. And the per-phase limited-by shares in `-J`.

mod util;

use oscil_testkit::{number, Csv};
use util::{fresh_run, json_and_meta};

#[test]
fn the_probe_is_echoed_every_100_ms_and_is_no_flow() {
    let args = ["--fast", "1s", "--slow", "1s", "--cycles", "1", "--json"];
    let (_dir, out, output) = fresh_run(&args);
    let (json, meta) = json_and_meta(&out, &output);
    let rows = Csv::read(&out.join("probe.csv")).rows;
    // From the start message to the pattern's end, 2 s: about 20 (the first at 0 s).
    assert!((18..=22).contains(&rows.len()), "{} probes", rows.len());
    let mut last_t_s = -1.0;
    for row in &rows {
        let t_s = number(row, "t_s");
        assert!(t_s > last_t_s && t_s < 2.2, "{row:?}");
        last_t_s = t_s;
    }
    let answered: Vec<f64> = rows
        .iter()
        .filter(|r| r["lost"] == "false")
        .map(|r| number(r, "rtt_us"))
        .collect();
    // Over loopback an echo takes microseconds to a few milliseconds, even beside a flow
    // at full speed: at most the last one is still on its way at the end.
    assert!(answered.len() + 1 >= rows.len(), "{rows:?}");
    assert!(answered.iter().all(|&us| us < 200_000.0), "{answered:?}");
    let probe = &meta["probe"];
    assert_eq!(probe["on"], true, "{probe}");
    assert_eq!(probe["sent"].as_u64(), Some(rows.len() as u64), "{probe}");
    assert_eq!(probe["answered"].as_u64(), Some(answered.len() as u64));
    assert_eq!(json["probe"], *probe);
    assert!(json["phases"]["fast"]["probe_rtt_ms"][0].as_f64().unwrap() < 200.0);
    // One flow: flow 0's rows only, on both sides.
    for file in ["reader.csv", "sender.csv"] {
        let flows = Csv::read(&out.join(file)).column("flow");
        assert!(flows.iter().all(|&f| f == 0.0), "{file}");
    }
    // The shares of the flows' time add up to 100 in each phase.
    for phase in ["fast", "slow"] {
        let shares = &json["phases"][phase]["limited_by_pct"];
        let sum: f64 = ["rwnd", "sndbuf", "network", "app"]
            .iter()
            .map(|k| shares[k].as_f64().unwrap())
            .sum();
        assert!((sum - 100.0).abs() < 0.01, "{phase}: {shares}");
    }
}

#[test]
fn no_probe_leaves_no_probe_csv_and_says_it_was_off() {
    let args = [
        "--fast",
        "500ms",
        "--slow",
        "0s",
        "--cycles",
        "1",
        "--no-probe",
        "--json",
    ];
    let (_dir, out, output) = fresh_run(&args);
    let (json, meta) = json_and_meta(&out, &output);
    assert!(!out.join("probe.csv").exists());
    assert_eq!(meta["probe"]["on"], false, "{}", meta["probe"]);
    assert!(json["phases"]["fast"]["probe_rtt_ms"].is_null());
}

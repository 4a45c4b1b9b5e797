//! Many flows over loopback: both sides sample every flow through sock_diag, and run.json's
//! `sampling` accounts for what the CSV files hold, so a sampler that fell behind is never
//! silent (on a loaded machine it may; the counts must then say so).

mod util;

use std::collections::{BTreeMap, HashMap};

use oscil_testkit::{number, Csv, Daemon};
use serde_json::Value;
use util::run_reader;

const FLOWS: usize = 300;

/// Ticks (distinct t_s) and rows in a side's CSV, and the intervals they cover beyond one
/// per tick, from `span_s`.
fn tally(rows: &[HashMap<String, String>]) -> (usize, usize, f64) {
    let mut ticks: BTreeMap<u64, f64> = BTreeMap::new();
    for row in rows {
        ticks.insert(number(row, "t_s").to_bits(), number(row, "span_s"));
    }
    let merged = ticks
        .values()
        .map(|span| ((span / 0.1).round() - 1.0).max(0.0))
        .sum();
    (ticks.len(), rows.len(), merged)
}

#[test]
fn many_flows_are_sampled_on_both_sides_and_the_counts_match_the_files() {
    let flows = FLOWS.to_string();
    let daemon = Daemon::start(&["--max-flows", &flows]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = run_reader(
        &daemon,
        &out,
        &[
            "--flows", &flows, "--fast", "1s", "--slow", "1s", "--cycles", "1",
        ],
    );
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let sampling = &meta["sampling"];
    let mut holes = false;
    for (side, file) in [("reader", "reader.csv"), ("sender", "sender.csv")] {
        let (ticks, rows, merged) = tally(&Csv::read(&out.join(file)).rows);
        let counted = &sampling[side];
        assert_eq!(
            counted["ticks"].as_u64(),
            Some(ticks as u64),
            "{side}: {counted}"
        );
        assert!(ticks >= 19, "{side}: {ticks} ticks in 2 s at 100 ms");
        let missing = counted["missing_rows"].as_u64().unwrap();
        assert_eq!(rows as u64 + missing, (ticks * FLOWS) as u64, "{side}");
        assert_eq!(counted["merged_intervals"].as_f64(), Some(merged), "{side}");
        let p99 = counted["lateness_p99_ms"].as_f64().unwrap();
        assert!((0.0..1000.0).contains(&p99), "{side}: {counted}");
        holes |= merged > 0.0 || missing > 0;
    }
    // A run with holes says so in its status and on stderr, naming the side; it lost no
    // bytes, so it exits 0 like a complete run.
    let status = meta["ending"]["status"].as_str().unwrap();
    assert_eq!(status, if holes { "holes" } else { "complete" }, "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    if holes {
        assert!(stderr.contains("sampler fell behind"), "{stderr}");
    }
    // Each side's namespace memory is recorded on the first tick at least; on loopback both
    // share one namespace, which holds every flow's sockets.
    let host = Csv::read(&out.join("host.csv")).rows;
    for side in ["reader", "sender"] {
        let own: Vec<f64> = host
            .iter()
            .filter(|r| r["side"] == side && !r["tcp_mem_ns_bytes"].is_empty())
            .map(|r| number(r, "tcp_mem_ns_bytes"))
            .collect();
        assert!(own.len() >= 10, "{side}: namespace memory every 100 ms");
        assert!(own.iter().any(|&b| b > 0.0), "{side}: {own:?}");
    }
}

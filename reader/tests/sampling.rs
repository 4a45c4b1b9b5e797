//! Many flows over loopback: both sides sample every flow through sock_diag, over the same
//! intervals, and run.json's `sampling` accounts for what the CSV files hold, so a sampler
//! that fell behind is never silent (on a loaded machine it may; the counts must then say so).

mod util;

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use oscil_testkit::{number, Csv, Daemon};
use serde_json::Value;
use util::run_reader;

const FLOWS: usize = 300;

/// Ticks (distinct t_s) and rows in a side's CSV, the intervals they cover beyond one per
/// tick (from `span_s`), and the intervals each tick covers, in order.
fn tally(rows: &[HashMap<String, String>]) -> (usize, usize, f64, Vec<Range<u64>>) {
    let mut ticks: BTreeMap<u64, f64> = BTreeMap::new();
    for row in rows {
        // t_s is positive, so its bits sort as the numbers do.
        ticks.insert(number(row, "t_s").to_bits(), number(row, "span_s"));
    }
    let merged = ticks
        .values()
        .map(|span| ((span / 0.1).round() - 1.0).max(0.0))
        .sum();
    // A tick on time or late covers whole intervals, up to the last that had ended when it
    // woke (its span a whole number of intervals); the last, partial one covers from its
    // first interval's start up to when it was taken.
    let covered = ticks
        .iter()
        .map(|(bits, span)| {
            let (t_s, intervals) = (f64::from_bits(*bits), span / 0.1);
            if (intervals - intervals.round()).abs() < 1e-6 {
                let end = (t_s / 0.1).floor() as u64;
                end - intervals.round() as u64..end
            } else {
                let first = ((t_s - span) / 0.1).round() as u64;
                first..first + intervals.ceil() as u64
            }
        })
        .collect();
    (ticks.len(), rows.len(), merged, covered)
}

#[test]
fn many_flows_are_sampled_on_both_sides_and_the_counts_match_the_files() {
    let flows = FLOWS.to_string();
    let daemon = Daemon::start(&["--max-flows", &flows]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let tcpext_before = tcpext();
    let output = run_reader(
        &daemon,
        &out,
        &[
            "--flows", &flows, "--fast", "1s", "--slow", "1s", "--cycles", "1",
        ],
    );
    let tcpext_after = tcpext();
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let sampling = &meta["sampling"];
    let mut holes = false;
    let mut intervals = Vec::new();
    for (side, file) in [("reader", "reader.csv"), ("sender", "sender.csv")] {
        let (ticks, rows, merged, ends) = tally(&Csv::read(&out.join(file)).rows);
        intervals.push(ends);
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
    // Both sides cover the same intervals, one after the other, to the last (partial) one:
    // the daemon's clock starts when all 300 connections are in and the reader's with it,
    // and its last sample ends on the interval the reader's did. Tick for tick, unless a
    // sampler fell behind and merged intervals into a late tick. The daemon streams, and
    // samples, until the reader's stop reaches it: on a busy machine that can take a few
    // intervals, which the sender's record then holds beyond the reader's (never fewer).
    let flat = |ticks: &[Range<u64>]| ticks.iter().flat_map(Clone::clone).collect::<Vec<_>>();
    let (reader, sender) = (&intervals[0], &intervals[1]);
    let (reader_flat, sender_flat) = (flat(reader), flat(sender));
    assert_eq!(
        reader_flat,
        (0..reader_flat.len() as u64).collect::<Vec<_>>()
    );
    assert!(
        sender_flat.starts_with(&reader_flat),
        "reader {reader:?}, sender {sender:?}"
    );
    if sender_flat.len() > reader_flat.len() {
        eprintln!("the stop reached the daemon late: sender {sender:?}");
    }
    if !holes {
        assert_eq!(reader[..], sender[..reader.len()]);
    }
    // A run with holes says so in its status and on stderr, naming the side; it lost no
    // bytes, so it exits 0 like a complete run.
    let status = meta["ending"]["status"].as_str().unwrap();
    assert_eq!(status, if holes { "holes" } else { "complete" }, "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    if holes {
        assert!(stderr.contains("sampler fell behind"), "{stderr}");
    }
    // Each side's namespace memory is recorded on the first tick and again as the walk's
    // cost allows (every 100-520 ms here, where the namespace walks the host's table); on
    // loopback both share one namespace, which holds every flow's sockets.
    let host = Csv::read(&out.join("host.csv")).rows;
    for side in ["reader", "sender"] {
        let own: Vec<f64> = host
            .iter()
            .filter(|r| r["side"] == side && !r["tcp_mem_ns_bytes"].is_empty())
            .map(|r| number(r, "tcp_mem_ns_bytes"))
            .collect();
        assert!(
            own.len() >= 2,
            "{side}: namespace memory summed once: {own:?}"
        );
        assert!(own.iter().any(|&b| b > 0.0), "{side}: {own:?}");
    }
    // Every row carries the namespace's receive-queue events over its interval: together
    // never more than the kernel's counters grew over the whole test (the daemon's first
    // reading comes after the test's, its last before).
    for (column, counter) in QUEUE_EVENTS {
        let rows: Vec<f64> = host
            .iter()
            .filter(|r| r["side"] == "reader")
            .map(|r| number(r, column))
            .collect();
        let grew = tcpext_after[counter] - tcpext_before[counter];
        assert!(
            rows.iter().sum::<f64>() <= grew as f64,
            "{column}: rows {rows:?}, the kernel's {counter} grew {grew}"
        );
    }
}

/// host.csv's receive-queue columns and the `TcpExt` counter each comes from.
const QUEUE_EVENTS: [(&str, &str); 6] = [
    ("tcp_collapsed", "TCPRcvCollapsed"),
    ("tcp_prune_called", "PruneCalled"),
    ("tcp_rcv_pruned", "RcvPruned"),
    ("tcp_ofo_pruned", "OfoPruned"),
    ("tcp_rcvq_drop", "TCPRcvQDrop"),
    ("tcp_backlog_drop", "TCPBacklogDrop"),
];

/// `/proc/net/netstat`'s `TcpExt` counters, read here as plain text.
fn tcpext() -> HashMap<String, u64> {
    let text = std::fs::read_to_string("/proc/net/netstat").unwrap();
    let mut lines = text.lines().filter_map(|l| l.strip_prefix("TcpExt:"));
    let (names, values) = (lines.next().unwrap(), lines.next().unwrap());
    names
        .split_whitespace()
        .map(str::to_string)
        .zip(values.split_whitespace().map(|v| v.parse().unwrap()))
        .collect()
}

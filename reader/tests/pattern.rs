//! The reading pattern and the sender's queue, end to end over loopback with the real
//! daemon. Figures are computed here from the CSV text, not by oscil's own code.

mod util;

use std::collections::BTreeMap;

use oscil_testkit::Csv;
use util::fresh_run;

const INTERVAL_S: f64 = 0.1;

/// Bytes read per one-second window of the session, keyed by window; a sample covers the
/// interval before it, so it belongs to the window holding that interval's middle.
fn bytes_per_second(reader: &Csv) -> BTreeMap<u64, f64> {
    let mut seconds = BTreeMap::new();
    for (t_s, bytes) in reader.column("t_s").into_iter().zip(reader.column("bytes")) {
        *seconds
            .entry((t_s - INTERVAL_S / 2.0).floor() as u64)
            .or_insert(0.0) += bytes;
    }
    seconds
}

#[test]
fn slow_seconds_read_exactly_the_fraction_of_the_fast_peak() {
    // 2 s fast (seconds 0-1), 4 s slow (seconds 2-5), 10%.
    let (_dir, out, _) = fresh_run(&[
        "--fast",
        "2s",
        "--slow",
        "4s",
        "--cycles",
        "1",
        "--fraction",
        "0.1",
    ]);

    let reader = Csv::read(&out.join("reader.csv"));
    let seconds = bytes_per_second(&reader);
    let peak = seconds[&0].max(seconds[&1]);
    let budget = 0.1 * peak;
    let recorded_budget = reader
        .column("budget_bytes")
        .into_iter()
        .fold(0.0, f64::max);
    assert!(
        (recorded_budget - budget).abs() <= 0.01 * budget,
        "budget {recorded_budget} is not 10% of the peak second {peak}"
    );
    // The sample taken at the fast/slow boundary belongs to the fast side, and carries
    // whatever the slow phase read before the sampler woke: the first slow second may
    // show a little less than its budget, never more.
    let first = seconds[&2];
    assert!(
        first <= 1.01 * budget && first >= 0.9 * budget,
        "first slow second read {first}, budget {budget}"
    );
    for second in 3..=5 {
        let read = seconds[&second];
        assert!(
            (read - budget).abs() <= 0.01 * budget,
            "slow second {second} read {read} bytes, budget {budget}"
        );
    }
}

/// Largest notsent_bytes in the slow phase, with the MSS the daemon's rows report.
fn slow_notsent(extra_args: &[&str]) -> (f64, f64) {
    let mut args = vec!["--fast", "1s", "--slow", "2s", "--cycles", "1"];
    args.extend_from_slice(extra_args);
    let (_dir, out, _) = fresh_run(&args);
    let sender = Csv::read(&out.join("sender.csv"));
    let slow: Vec<usize> = sender
        .column("t_s")
        .iter()
        .enumerate()
        .filter(|(_, &t)| t > 1.2)
        .map(|(i, _)| i)
        .collect();
    assert!(
        slow.len() >= 10,
        "only {} slow-phase sender rows",
        slow.len()
    );
    let notsent = sender.column("notsent_bytes");
    let mss = sender.column("snd_mss_bytes");
    let peak = slow.iter().map(|&i| notsent[i]).fold(0.0, f64::max);
    (peak, mss[slow[0]])
}

#[test]
fn notsent_lowat_holds_the_unsent_queue_near_its_threshold() {
    let (with_lowat, mss) = slow_notsent(&["--notsent-lowat", "16384"]);
    let (default, _) = slow_notsent(&[]);
    // sendmsg checks the threshold only when it opens a new segment, so one write may
    // overshoot it by up to one segment (an MSS, ~64 KB on loopback).
    assert!(
        with_lowat <= 16384.0 + mss,
        "notsent reached {with_lowat} bytes with lowat 16384 (MSS {mss})"
    );
    assert!(
        default >= 1_048_576.0 && default >= 10.0 * with_lowat,
        "default notsent peak {default} is not far beyond the lowat run's {with_lowat}"
    );
}

#[test]
fn network_goodput_columns_count_what_tcp_delivered_not_what_was_read() {
    let (_dir, out, _) = fresh_run(&["--fast", "1s", "--slow", "2s", "--cycles", "1"]);
    let reader = Csv::read(&out.join("reader.csv"));
    let sender = Csv::read(&out.join("sender.csv"));
    let sum = |v: Vec<f64>| v.into_iter().sum::<f64>();
    let read = sum(reader.column("bytes"));
    let delivered = sum(reader.column("delivered_bytes"));
    let acked = sum(sender.column("acked_bytes"));
    // TCP delivered everything read, and what still sat in the receive queue at the end
    // (at most the receive buffer); the sender saw it acknowledged (the SYN counts 1).
    let rcvbuf = reader.column("rcvbuf").into_iter().fold(0.0, f64::max);
    assert!(read > 1e6, "read only {read} bytes");
    assert!(
        delivered >= read && delivered <= read + rcvbuf,
        "delivered {delivered}, read {read}, rcvbuf {rcvbuf}"
    );
    assert!(
        (acked - delivered).abs() <= 0.02 * delivered + 1.0,
        "acked {acked}, delivered {delivered}"
    );
    // In the slow phase the receive queue fills first: some row's network delivered more
    // than the application read.
    let (t, bytes) = (reader.column("t_s"), reader.column("bytes"));
    let more = reader
        .column("delivered_bytes")
        .iter()
        .zip(&bytes)
        .zip(&t)
        .any(|((&d, &b), &t)| t > 1.2 && d > b + 65_536.0);
    assert!(
        more,
        "no slow row delivered more than it read: the column is the read count"
    );
}

//! The hosts' own load in `host.csv` over a real path: the daemon and the reader in two
//! namespaces joined by a veth pair, the daemon's end behind a tbf qdisc too small for
//! what TCP sends it. The sender's rows show the qdisc's backlog and drops, as the kernel
//! counts them; every row its CPUs' busy shares; and the report names the run limited by
//! its host.

mod util;

use std::process::{Command, Stdio};
use std::time::Duration;

use oscil_testkit::{assert_host_load_filled, ip, lacks_root, number, workspace_bin, Csv, Netns};
use util::{assert_success, wait_for_daemon};

const DAEMON_ADDR: &str = "10.77.0.1";
const READER_ADDR: &str = "10.77.0.2";

fn tc(ns: &str, args: &[&str]) {
    let status = Command::new("tc")
        .args(["-n", ns])
        .args(args)
        .status()
        .expect("run tc");
    assert!(status.success(), "tc {args:?} failed");
}

#[test]
fn a_tbf_too_small_for_the_sender_shows_its_backlog_and_drops_in_host_csv() {
    if lacks_root("network namespaces and a qdisc") {
        return;
    }
    let (sender, receiver) = (Netns::new("oscil-hq-s-"), Netns::new("oscil-hq-r-"));
    ip(&[
        "-n",
        &sender.0,
        "link",
        "add",
        "vs",
        "type",
        "veth",
        "peer",
        "name",
        "vr",
        "netns",
        &receiver.0,
    ]);
    for (ns, dev, addr) in [(&sender, "vs", DAEMON_ADDR), (&receiver, "vr", READER_ADDR)] {
        ip(&[
            "-n",
            &ns.0,
            "addr",
            "add",
            &format!("{addr}/24"),
            "dev",
            dev,
        ]);
        ip(&["-n", &ns.0, "link", "set", dev, "up"]);
    }
    // 20 Mbit/s with room for 30 KB: TCP's small-queue limit lets each socket queue far
    // more than that, so the tbf holds a backlog and drops.
    tc(
        &sender.0,
        &[
            "qdisc", "add", "dev", "vs", "root", "tbf", "rate", "20mbit", "burst", "16kb", "limit",
            "30kb",
        ],
    );
    let mut daemon = Command::new("ip")
        .args(["netns", "exec", &sender.0])
        .arg(workspace_bin("oscil-daemon"))
        // Two namespaces of the test's own: no key to share.
        .args([
            "--listen",
            &format!("{DAEMON_ADDR}:5250"),
            "--insecure-no-auth",
        ])
        .stderr(Stdio::null())
        .spawn()
        .expect("start oscil-daemon");
    wait_for_daemon(&sender.0, Duration::from_secs(20));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = Command::new("ip")
        .args(["netns", "exec", &receiver.0])
        .arg(workspace_bin("oscil-reader"))
        .args(["--connect", &format!("{DAEMON_ADDR}:5250"), "--quiet"])
        .args([
            "--fast", "1s", "--slow", "1s", "--cycles", "1", "--flows", "4", "--out",
        ])
        .arg(&out)
        .output()
        .expect("run oscil-reader");
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert_success(&output);

    let rows = Csv::read(&out.join("host.csv")).rows;
    let side = |name: &str| -> Vec<_> { rows.iter().filter(|r| r["side"] == name).collect() };
    let (sent, read) = (side("sender"), side("reader"));
    assert!(
        sent.len() >= 10 && read.len() >= 10,
        "{} and {} rows",
        sent.len(),
        read.len()
    );
    let sum = |rows: &[&std::collections::HashMap<String, String>], column: &str| -> f64 {
        rows.iter().map(|r| number(r, column)).sum()
    };
    assert!(sum(&sent, "qdisc_drops") > 0.0, "the tbf dropped nothing");
    let backlog_max = sent
        .iter()
        .map(|r| number(r, "qdisc_backlog_bytes"))
        .fold(0.0, f64::max);
    // A backlog, never beyond the tbf's limit (and a packet).
    assert!(
        backlog_max > 0.0 && backlog_max <= 32_000.0,
        "{backlog_max}"
    );
    assert!(sent
        .iter()
        .any(|r| number(r, "qdisc_backlog_packets") > 0.0));
    // The reader's veth has no queue (noqueue): its figures are there, and nothing.
    assert_eq!(
        sum(&read, "qdisc_drops") + sum(&read, "qdisc_backlog_bytes"),
        0.0
    );
    assert_host_load_filled(&out);
    // The sender dropped packets below TCP: the run is named limited by its host.
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    let dropped = meta["sampling"]["sender"]["host_dropped_packets"]
        .as_u64()
        .unwrap();
    assert!(dropped >= sum(&sent, "qdisc_drops") as u64, "{dropped}");
    let report = dir.path().join("report");
    let reported = Command::new(workspace_bin("oscil-report"))
        .arg(&out)
        .arg("--out")
        .arg(&report)
        .output()
        .expect("run oscil-report");
    assert!(
        reported.status.success(),
        "{}",
        String::from_utf8_lossy(&reported.stderr)
    );
    let summary = Csv::read(&report.join("summary.csv")).rows;
    let limited = &summary[0]["host_limited"];
    assert!(
        limited.contains("the sender's host dropped")
            && limited.ends_with("limited by the host, not by the setting"),
        "{limited:?}"
    );
    assert!(
        !meta["absent"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|a| a["columns"].to_string().contains("host.csv qdisc_")),
        "{}",
        meta["absent"]
    );
}

//! What the report may compare (issue 37): a copied run counts once, and runs of two
//! paths (loopback, and two network namespaces joined by a veth pair) are two paths, each
//! with its own configurations, never one compared with the other.

mod util;

use std::path::Path;
use std::process::{Command, Stdio};

use oscil_testkit::{ip, lacks_root, workspace_bin, Csv, Daemon, Netns};
use util::{reader_run, report};

const SHORT: [&str; 6] = ["--fast", "1s", "--slow", "1s", "--cycles", "1"];

/// `configurations.csv`'s `(configuration, runs, baseline)` rows.
fn configurations(out: &Path) -> Vec<(String, String, String)> {
    let csv = Csv::read(&out.join("configurations.csv"));
    csv.rows
        .iter()
        .map(|row| {
            let cell = |name: &str| row[name].clone();
            (cell("configuration"), cell("runs"), cell("baseline"))
        })
        .collect()
}

#[test]
fn a_copied_run_directory_counts_once() {
    let daemon = Daemon::start(&[]);
    let scratch = tempfile::tempdir().unwrap();
    let run = scratch.path().join("run");
    reader_run(&daemon, &run, "run", &SHORT);
    let copy = scratch.path().join("run-copy");
    let cp = Command::new("cp").arg("-a").arg(&run).arg(&copy).status();
    assert!(cp.unwrap().success());
    let out = scratch.path().join("report");
    let done = report(&[&run, &copy], &out, &[]);
    assert!(done.status.success(), "{done:?}");
    let rows = configurations(&out);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].1, "1", "{rows:?}");
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(stderr.contains("counted once"), "{stderr}");
}

/// Two namespaces (sender, receiver) joined by a veth pair, 10.237.0.1 to .2; each is
/// deleted with what runs in it when dropped.
fn two_namespaces() -> [Netns; 2] {
    let ends = [Netns::new("oscil-t37s-"), Netns::new("oscil-t37r-")];
    let id = std::process::id() % 100_000;
    let (a, b) = (format!("t37a{id}"), format!("t37b{id}"));
    ip(&[
        "link", "add", &a, "netns", &ends[0].0, "type", "veth", "peer", "name", &b, "netns",
        &ends[1].0,
    ]);
    for (ns, dev, addr) in [
        (&ends[0], &a, "10.237.0.1/24"),
        (&ends[1], &b, "10.237.0.2/24"),
    ] {
        ip(&["-n", &ns.0, "addr", "add", addr, "dev", dev]);
        ip(&["-n", &ns.0, "link", "set", dev, "up"]);
    }
    ends
}

#[test]
fn a_loopback_run_and_a_run_between_two_namespaces_are_two_paths() {
    if lacks_root("network namespaces") {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let loopback = scratch.path().join("loopback");
    reader_run(&Daemon::start(&[]), &loopback, "loopback", &SHORT);
    let key = scratch.path().join("key");
    let gen = Command::new(workspace_bin("oscil-daemon"))
        .arg("--gen-key")
        .output()
        .unwrap();
    std::fs::write(&key, &gen.stdout).unwrap();
    let ns = two_namespaces();
    let mut daemon = Command::new("ip")
        .args(["netns", "exec", &ns[0].0])
        .arg(workspace_bin("oscil-daemon"))
        .args(["--listen", "10.237.0.1:5250", "--key-file"])
        .arg(&key)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The daemon binds at once; a loaded machine may take a moment to start it.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let veth = scratch.path().join("veth");
    let reader = Command::new("ip")
        .args(["netns", "exec", &ns[1].0])
        .arg(workspace_bin("oscil-reader"))
        .args(["--connect", "10.237.0.1:5250", "--quiet", "--key-file"])
        .arg(&key)
        .args(["--out"])
        .arg(&veth)
        .args(SHORT)
        .output()
        .unwrap();
    let _ = daemon.kill();
    let _ = daemon.wait();
    drop(ns);
    assert!(reader.status.success(), "{reader:?}");
    let out = scratch.path().join("report");
    let done = report(&[&loopback, &veth], &out, &[]);
    assert!(done.status.success(), "{done:?}");
    let rows = configurations(&out);
    assert_eq!(rows.len(), 2, "{rows:?}");
    // Each is its own path's baseline: neither is compared with the other.
    for (name, _, baseline) in &rows {
        assert_eq!(name, baseline, "{rows:?}");
    }
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    for pair in ["veth against loopback", "loopback against veth"] {
        assert!(!html.contains(pair), "a comparison across paths: {pair}");
    }
}

//! A host whose sock_diag refuses (no `tcp_diag`, a container, seccomp): both ends sample
//! their sockets with getsockopt, the session completes, and the terminal summary, `-J`
//! and `run.json` say so once per side. `OSCIL_SAMPLE_BY=getsockopt` takes that path on
//! this kernel, which has sock_diag (the kernel matrix takes it on kernels without
//! `tcp_diag`). Two 2-second sessions.

mod util;

use oscil_kernel::socket::diag::SAMPLE_BY_ENV;
use oscil_testkit::{Csv, Daemon};
use util::{assert_success, json_and_meta, run_reader};

const PATTERN: &[&str] = &["--fast", "1s", "--slow", "1s", "--cycles", "1"];

#[test]
fn without_sock_diag_both_sides_sample_by_getsockopt_and_say_so_once() {
    // The only test of this file: the daemon and both readers inherit it.
    std::env::set_var(SAMPLE_BY_ENV, "getsockopt");
    let daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();

    let out = dir.path().join("json");
    let output = run_reader(&daemon, &out, &[&["--json"], PATTERN].concat());
    assert_success(&output);
    let (summary, meta) = json_and_meta(&out, &output);
    // Holes (a sampler woke late on this shared machine) lose no bytes: the session went on.
    assert!(
        ["complete", "holes"].contains(&summary["status"].as_str().unwrap()),
        "{summary}"
    );
    let by_getsockopt = |absent: &serde_json::Value| -> Vec<String> {
        let mut sides: Vec<String> = absent
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["what"] == "sock_diag")
            .map(|a| a["side"].as_str().unwrap().to_string())
            .collect();
        sides.sort();
        sides
    };
    assert_eq!(
        by_getsockopt(&meta["absent"]),
        ["reader", "sender"],
        "{meta}"
    );
    assert_eq!(
        summary["absent"], meta["absent"],
        "-J says what run.json says"
    );
    let sock_diag = meta["absent"].as_array().unwrap().iter();
    let note = sock_diag
        .filter(|a| a["what"] == "sock_diag")
        .map(|a| a["note"].as_str().unwrap())
        .next()
        .unwrap();
    assert!(note.contains(SAMPLE_BY_ENV), "the reason is given: {note}");

    // Every flow sampled on both sides, every tick, as sock_diag would have: the kernel's
    // fields come from the same tcp_info.
    let ticks = |csv: &Csv| {
        let mut t: Vec<String> = csv.rows.iter().map(|r| r["t_s"].clone()).collect();
        t.dedup();
        t.len()
    };
    let reader = Csv::read(&out.join("reader.csv"));
    let sender = Csv::read(&out.join("sender.csv"));
    // 20 ticks in 2 s at 100 ms, fewer where late ticks merged intervals; never a handful.
    assert!(
        ticks(&reader) >= 10,
        "{} reader ticks in 2 s",
        ticks(&reader)
    );
    assert_eq!(
        meta["sampling"]["sender"]["missing_rows"], 0,
        "{}",
        meta["sampling"]
    );
    assert!(reader.rows.iter().all(|r| !r["rcv_wnd"].is_empty()));
    assert!(sender.rows.iter().all(|r| !r["snd_wnd"].is_empty()));
    // The namespace's sum, narrowed to the session's sockets: still summed, never 0 while
    // data sits in the reader's receive queue.
    let host = Csv::read(&out.join("host.csv"));
    let sums: Vec<f64> = host
        .rows
        .iter()
        .filter(|r| !r["tcp_mem_ns_bytes"].is_empty())
        .map(|r| r["tcp_mem_ns_bytes"].parse().unwrap())
        .collect();
    assert!(
        !sums.is_empty() && sums.iter().any(|&b| b > 0.0),
        "{sums:?}"
    );

    // The terminal summary says each once.
    let out = dir.path().join("text");
    let output = run_reader(&daemon, &out, PATTERN);
    assert_success(&output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let said: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("not given:") && l.contains("getsockopt"))
        .collect();
    assert_eq!(said.len(), 2, "once per side:\n{stdout}");
    assert!(said.iter().any(|l| l.contains("the reader sampled")));
    assert!(said.iter().any(|l| l.contains("the sender sampled")));
}

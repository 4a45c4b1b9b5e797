//! The congestion control's own state in `sender.csv`: a bbr session records BBR's
//! bandwidth estimate and min RTT, checked against the min RTT TCP_INFO gives of the same
//! socket in the same row; a session on another congestion control leaves them empty (never
//! 0) and `run.json`'s `absent` names them. ECN: asked for on both ends of a namespace of
//! the test's own, every flow negotiates it and counts its CE-marked segments (0 is a count
//! then); not asked, the count is empty. Two 2-second sessions on loopback and two in
//! namespaces (root).

mod util;

use std::collections::HashMap;

use oscil_testkit::{is_root, lacks_root, number, Csv, Daemon};
use util::{assert_success, json_and_meta, run_in_namespace, run_reader};

const PATTERN: &[&str] = &["--fast", "1s", "--slow", "1s", "--cycles", "1", "--json"];

const BBR_COLUMNS: [&str; 4] = [
    "bbr_bw_bps",
    "bbr_min_rtt_us",
    "bbr_pacing_gain",
    "bbr_cwnd_gain",
];

/// A field that may be empty, as a number.
fn maybe(row: &HashMap<String, String>, name: &str) -> Option<f64> {
    (!row[name].is_empty()).then(|| number(row, name))
}

/// A two-flow loopback session with `congestion`: its sender.csv rows and run.json.
fn session(congestion: &str) -> (Vec<HashMap<String, String>>, serde_json::Value) {
    let daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let args = [PATTERN, &["--flows", "2", "--congestion", congestion]].concat();
    let output = run_reader(&daemon, &out, &args);
    assert_success(&output);
    let (_, meta) = json_and_meta(&out, &output);
    (Csv::read(&out.join("sender.csv")).rows, meta)
}

/// The columns `run.json`'s `absent` names.
fn absent_columns(meta: &serde_json::Value) -> Vec<String> {
    // run.json leaves `absent` out when nothing is.
    let absent = meta["absent"].as_array().into_iter().flatten();
    let columns = absent.flat_map(|a| a["columns"].as_array().cloned().unwrap_or_default());
    columns.map(|c| c.as_str().unwrap().to_string()).collect()
}

#[test]
fn a_bbr_session_records_bbrs_estimate_and_another_leaves_it_empty() {
    let (rows, meta) = session("bbr");
    assert!(rows.len() >= 20, "two flows over 2 s: {}", rows.len());
    let estimated = rows
        .iter()
        .filter(|r| maybe(r, "bbr_bw_bps") > Some(0.0) && maybe(r, "bbr_min_rtt_us") > Some(0.0))
        .count();
    // The first row of a flow may come before BBR's first estimate.
    assert!(
        estimated * 10 >= rows.len() * 8,
        "{estimated} of {}",
        rows.len()
    );
    let mut same_min_rtt = 0;
    for row in &rows {
        // TCP's min RTT over 5 minutes (tcpi_min_rtt) and BBR's over 10 s hold the same
        // samples in a 2 s session: BBR's is never below TCP's, and mostly the same.
        if let (Some(bbr), Some(tcp)) = (maybe(row, "bbr_min_rtt_us"), maybe(row, "min_rtt_us")) {
            assert!(bbr >= tcp, "BBR's min RTT below TCP's: {row:?}");
            same_min_rtt += usize::from(bbr == tcp);
        }
        // Startup's 2.89, probe-bw's 1.25, 0.75, 1, drain's 0.35, probe-rtt's 1.
        let pacing_gain = number(row, "bbr_pacing_gain");
        assert!((0.3..=3.0).contains(&pacing_gain), "{row:?}");
        assert!(number(row, "bbr_cwnd_gain") >= 1.0, "{row:?}");
    }
    assert!(
        same_min_rtt * 2 >= rows.len(),
        "{same_min_rtt} of {}",
        rows.len()
    );
    assert!(
        !absent_columns(&meta).iter().any(|c| c.contains("bbr_")),
        "{meta}"
    );

    // Cubic must be set per socket, which needs root here (tcp_allowed_congestion_control);
    // reno is allowed to anyone, and gives no state of its own either.
    let other = if is_root() { "cubic" } else { "reno" };
    let (rows, meta) = session(other);
    assert!(!rows.is_empty());
    for row in &rows {
        for column in BBR_COLUMNS {
            assert_eq!(row[column], "", "{column} on {other}: {row:?}");
        }
    }
    let absent = absent_columns(&meta);
    for column in BBR_COLUMNS {
        assert!(absent.contains(&format!("sender.csv {column}")), "{meta}");
    }
}

/// A session in a namespace whose `net.ipv4.tcp_ecn` is `ecn` on both ends: its sender.csv
/// rows.
fn ecn_session(ecn: &str) -> Vec<HashMap<String, String>> {
    let set_ecn = |ns: &str| {
        let setting = format!("net.ipv4.tcp_ecn={ecn}");
        let status = std::process::Command::new("ip")
            .args(["netns", "exec", ns, "sysctl", "-qw", &setting])
            .status()
            .expect("run sysctl");
        assert!(status.success(), "{setting}");
    };
    let args = [PATTERN, &["--congestion", "cubic"]].concat();
    let (_dir, out, _) = run_in_namespace("oscil-ecn", set_ecn, &args);
    Csv::read(&out.join("sender.csv")).rows
}

#[test]
fn with_ecn_asked_every_flow_negotiates_it_and_counts_ce_marks() {
    if lacks_root("a network namespace") {
        return;
    }
    let rows = ecn_session("1");
    assert!(!rows.is_empty());
    for row in &rows {
        assert_eq!(row["ecn_negotiated"], "true", "{row:?}");
        // Nothing on loopback marks CE; 0 is a count here, since ECN was negotiated.
        let marked = maybe(row, "delivered_ce_segs");
        assert!(marked.is_some_and(|n| n >= 0.0), "{row:?}");
    }
    // Neither end asks: the flows carry no ECN, and the count is empty, not 0.
    for row in &ecn_session("0") {
        assert_eq!(row["ecn_negotiated"], "false", "{row:?}");
        assert_eq!(row["delivered_ce_segs"], "", "{row:?}");
    }
}

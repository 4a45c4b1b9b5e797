//! Groups of flows (`--group`) end to end over loopback with the real daemon: each group's
//! options on its own sockets as the kernel reports them, each row's group, each group's
//! reading pattern; and the SPEC grammar's refusals. Figures are computed here from the
//! files' text.

mod util;

use std::collections::HashMap;

use oscil_testkit::{number, Csv, Daemon};
use util::{fresh_run, reader};

/// Each row's flow and group: every flow in one group, the flows numbered in group order.
fn groups_by_flow(csv: &Csv) -> HashMap<u64, Vec<String>> {
    let mut by_flow: HashMap<u64, Vec<String>> = HashMap::new();
    for row in &csv.rows {
        let group = row.get("group").expect("a group column").clone();
        by_flow
            .entry(number(row, "flow") as u64)
            .or_default()
            .push(group);
    }
    by_flow
}

fn assert_groups(csv: &Csv, expected: &[&str]) {
    let by_flow = groups_by_flow(csv);
    assert_eq!(by_flow.len(), expected.len(), "flows {:?}", by_flow.keys());
    for (flow, groups) in by_flow {
        let want = expected[flow as usize];
        assert!(
            groups.iter().all(|g| g == want),
            "flow {flow}: groups {groups:?}, not all {want}"
        );
    }
}

#[test]
fn each_group_has_its_own_lowat_on_the_daemons_sockets() {
    let (_dir, out, _) = fresh_run(&[
        "--fast",
        "1s",
        "--slow",
        "2s",
        "--cycles",
        "1",
        "--group",
        "flows=2,notsent-lowat=128k",
        "--group",
        "flows=2",
    ]);
    let reader = Csv::read(&out.join("reader.csv"));
    let sender = Csv::read(&out.join("sender.csv"));
    assert_groups(&reader, &["0", "0", "1", "1"]);
    assert_groups(&sender, &["0", "0", "1", "1"]);

    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    let groups = &meta["config"]["groups"];
    assert_eq!(groups[0]["flows"], 2);
    assert_eq!(groups[0]["sender"]["notsent_lowat_bytes"], 131072);
    assert_eq!(
        groups[1]["sender"]["notsent_lowat_bytes"],
        serde_json::Value::Null
    );
    let in_force = &meta["sender_options_by_group"];
    assert_eq!(in_force[0]["notsent_lowat_bytes"], 131072);
    assert_eq!(
        in_force[1]["notsent_lowat_bytes"], 0,
        "the kernel's default"
    );

    // In the slow phase the reader holds back, and the daemon's queue fills up to what its
    // sockets allow: the kernel reports the unsent bytes of every data socket.
    let mut peak = [0.0f64; 2];
    let mut mss = 0.0f64;
    for row in sender.rows.iter().filter(|r| number(r, "t_s") > 1.3) {
        let group = number(row, "group") as usize;
        peak[group] = peak[group].max(number(row, "notsent_bytes"));
        mss = mss.max(number(row, "snd_mss_bytes"));
    }
    // sendmsg checks the threshold as it opens a segment: one write may overshoot it by an
    // MSS (as in pattern.rs).
    assert!(
        peak[0] > 0.0 && peak[0] <= 131072.0 + mss,
        "lowat group's unsent peak {} (MSS {mss})",
        peak[0]
    );
    let sysctl = oscil_kernel::host::read_typed(oscil_model::sysctl::Sysctl::TcpNotsentLowat)
        .and_then(|v| v.integer())
        .unwrap_or(0);
    if sysctl >= 4 << 20 {
        assert!(
            peak[1] >= 4.0 * (131072.0 + mss),
            "default group's unsent peak {} is not far beyond the lowat group's {}",
            peak[1],
            peak[0]
        );
    }
}

#[test]
fn a_full_speed_group_reads_through_the_slow_phase_beside_an_oscillating_one() {
    let (_dir, out, _) = fresh_run(&[
        "--fast",
        "1s",
        "--slow",
        "2s",
        "--cycles",
        "1",
        "--group",
        "flows=1,pattern=full-speed",
        "--group",
        "flows=1,pattern=oscillating,fraction=5%",
    ]);
    let reader = Csv::read(&out.join("reader.csv"));
    assert_groups(&reader, &["0", "1"]);
    // What each flow read in the middle of the slow phase (1.5 s to 3 s) and the budget its
    // pacer set.
    let mut read = [0.0f64; 2];
    let mut budget = [0.0f64; 2];
    for row in reader.rows.iter().filter(|r| number(r, "t_s") > 1.5) {
        let flow = number(row, "flow") as usize;
        read[flow] += number(row, "bytes");
        budget[flow] = budget[flow].max(number(row, "budget_bytes"));
    }
    assert_eq!(budget[0], 0.0, "a full-speed flow has no slow budget");
    assert!(budget[1] > 0.0, "the oscillating flow read no budget");
    // 5% of its peak against all the full-speed flow can take: a wide margin on a busy
    // machine, where the full-speed flow still reads the 95% the other leaves.
    assert!(
        read[0] > 4.0 * read[1] && read[1] > 0.0,
        "slow phase: full-speed group read {} bytes, oscillating group {}",
        read[0],
        read[1]
    );
}

/// The reader's stderr and exit code with `args` (before any connection).
fn refused(args: &[&str]) -> (String, Option<i32>) {
    let output = reader()
        .args(["--connect", "127.0.0.1:9", "--out", "/nonexistent/never"])
        .args(args)
        .output()
        .expect("run oscil-reader");
    (
        String::from_utf8_lossy(&output.stderr).into_owned(),
        output.status.code(),
    )
}

#[test]
fn a_bad_spec_is_refused_in_one_line_naming_the_key() {
    for (args, named) in [
        (&["--group", "flows=2,lowat=128k"][..], "\"lowat\""),
        (&["--group", "flows=2,notsent-lowat=lots"], "notsent-lowat="),
        (&["--group", "flows=1,pattern=slow"], "pattern="),
        (&["--group", "flows=0"], "flows="),
        (&["--group", "sndbuf=1m"], "flows=N"),
        (
            &["--group", "flows=6000", "--group", "flows=6000"],
            "12000 flows in all",
        ),
        (&["--group", "flows=1", "--flows", "2"], "--flows"),
    ] {
        let (stderr, code) = refused(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        // The first line says it all (clap may add a hint for --help after it).
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.contains(named), "{args:?}: {stderr}");
    }
    // The daemon is never reached: a valid SPEC goes as far as connecting.
    let daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let output = util::run_reader(
        &daemon,
        &dir.path().join("run"),
        &[
            "-t",
            "300ms",
            "--group",
            "flows=1,congestion=reno,sndbuf=256k",
        ],
    );
    util::assert_success(&output);
}

//! oscil-lab as a user meets it: bad input is one line and touches nothing; a signal to the
//! lab's own process leaves campaign.json true, and --resume finishes the campaign.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use oscil_testkit::{lacks_root, workspace_bin};

fn lab(args: &[&str]) -> Output {
    Command::new(workspace_bin("oscil-lab"))
        .args(args)
        .env(
            "OSCIL_BIN_DIR",
            workspace_bin("oscil-lab").parent().unwrap(),
        )
        .output()
        .expect("run oscil-lab")
}

/// Exit code and the single line of stderr.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let output = lab(args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "one line for {args:?}: {stderr}"
    );
    (output.status.code(), stderr)
}

fn campaign(out: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join("campaign.json")).expect("campaign.json");
    serde_json::from_str(&text).expect("campaign.json is JSON")
}

fn statuses(out: &Path) -> Vec<String> {
    campaign(out)["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["status"].as_str().expect("status").to_owned())
        .collect()
}

#[test]
fn bad_input_is_one_line_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c");
    let out_arg = out.to_str().unwrap();
    let (code, line) = refused(&["--cycles", "0", "--out", out_arg]);
    assert_eq!(code, Some(2));
    assert!(
        line.starts_with("oscil-lab: invalid value '0' for '--cycles <N>': "),
        "{line}"
    );
    let (code, line) = refused(&["--fast", "2", "--out", out_arg]);
    assert_eq!(
        (
            code,
            line.starts_with("oscil-lab: invalid value '2' for '--fast <DUR>': ")
        ),
        (Some(2), true),
        "{line}"
    );
    let (code, _) = refused(&["--frobnicate"]);
    assert_eq!(code, Some(2));
    let (code, line) = refused(&[
        "--sender",
        "root@127.0.0.1",
        "--receiver",
        "local",
        "--rtt",
        "40ms",
    ]);
    assert_eq!(code, Some(2));
    assert!(line.contains("do not apply to real hosts"), "{line}");
    assert!(!out.exists(), "nothing made for bad flags");

    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let (code, line) = refused(&["--out", out_arg]);
    assert_eq!(
        code,
        Some(2),
        "a used --out is a bad value, as in the reader and the report"
    );
    assert!(line.contains("is not empty"), "{line}");
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        1,
        "the directory is untouched"
    );

    // Nothing listens on port 1 of loopback: the host is unreachable.
    let fresh = dir.path().join("hosts");
    let (code, line) = refused(&[
        "--sender",
        "root@127.0.0.1",
        "--receiver",
        "local",
        "--ssh-option",
        "Port=1",
        "--ssh-option",
        "ConnectTimeout=3",
        "--out",
        fresh.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1));
    assert!(line.contains("cannot reach root@127.0.0.1"), "{line}");
    assert!(!fresh.exists(), "a failed start left an empty --out");
}

#[test]
fn dry_run_prints_every_run_and_the_total() {
    const ARGS: [&str; 11] = [
        "--dry-run",
        "--rate",
        "10mbit",
        "--sndbuf",
        "16k,64k",
        "--lowat",
        "default",
        "--repeat",
        "3",
        "--seed",
        "9",
    ];
    let output = lab(&ARGS);
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let runs = stdout
        .matches("10mbit_466ms_cubic_lowat-default_sndbuf-")
        .count();
    assert_eq!(runs, 6, "{stdout}");
    // 6 runs of the 60 s pattern plus 2 s each, and 17 round trips of 466 ms (the
    // session's 5, the markers' 12 clock exchanges): 6 x 69.92 s = 6m59s.
    let total = "6 run(s), shuffled order (seed 9), about 6m59s";
    assert!(stdout.contains(total), "{stdout}");
    assert_eq!(lab(&ARGS).stdout, output.stdout, "the seed fixes the order");
}

#[test]
fn a_signal_to_the_lab_leaves_campaign_json_true_and_resume_finishes() {
    if lacks_root("network namespaces, TUN devices") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c");
    let mut child = Command::new(workspace_bin("oscil-lab"))
        .args([
            "--rate",
            "50mbit",
            "--rtt",
            "20ms",
            "--lowat",
            "default,131072",
            "--order",
            "grouped",
        ])
        .args(["--fast", "3s", "--slow", "1s", "--cycles", "1", "--out"])
        .arg(&out)
        .spawn()
        .expect("start oscil-lab");
    let first = out.join("runs/50mbit_20ms_cubic_lowat-default/rep-1");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !first.join("reader.csv").exists() {
        assert!(Instant::now() < deadline, "the first run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1000));
    // As a supervisor or `timeout` would: to the lab's PID alone.
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let code = child.wait().unwrap().code();
    assert_eq!(code, Some(3), "cut short, as every oscil binary says it");
    assert_eq!(statuses(&out), ["partial", "pending"]);
    let reason = campaign(&out)["runs"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(reason.contains("asked to stop"), "{reason}");
    let namespaces = String::from_utf8_lossy(
        &Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    assert!(lab_namespaces(child.id()).is_empty(), "{namespaces}");

    // Resumed on a shared host's terms: 4 GiB of address space, below the 8 GiB the lab
    // gives its report, which takes the lower and says so.
    let output = Command::new("sh")
        .args(["-c", "ulimit -v 4194304 && exec \"$0\" \"$@\""])
        .arg(workspace_bin("oscil-lab"))
        .args(["--resume", out.to_str().unwrap()])
        .output()
        .expect("run oscil-lab under ulimit -v");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("oscil-lab: the report's memory bound 4.0 GiB, the address space limit it was started with (below the lab's 8.0 GiB)"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("memory bound").count(),
        1,
        "said once: {stderr}"
    );
    assert!(out.join("report/index.html").is_file(), "{stderr}");
    assert_eq!(statuses(&out), ["complete", "complete"]);
    assert!(
        first
            .with_file_name("rep-1.attempt-1")
            .join("run.json")
            .is_file(),
        "the partial attempt is kept"
    );
    let table = String::from_utf8_lossy(&output.stdout);
    // The baseline's figures, unless its run's emulated link fell behind on this shared
    // machine: then the report leaves it out (link_health) and the table counts it 0/1.
    let baseline_counted = table.contains("base");
    assert!(
        table.contains("50mbit_20ms_cubic_lowat-131072")
            && (baseline_counted || table.contains("lowat-default   0/1")),
        "{table}"
    );
    metrics_agree_with_the_report(&out);
}

/// The campaign's figures for Prometheus pass promtool, one file per run and one for the
/// campaign, and say what configurations.csv says (MiB there, bytes here).
fn metrics_agree_with_the_report(out: &Path) {
    let Some(files) = oscil_testkit::promtool_checked(&out.join("metrics")) else {
        return;
    };
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "oscil-campaign.prom",
            "oscil-run-50mbit_20ms_cubic_lowat-131072.prom",
            "oscil-run-50mbit_20ms_cubic_lowat-default.prom"
        ]
    );
    let csv = oscil_testkit::Csv::read(&out.join("report/configurations.csv"));
    for row in &csv.rows {
        let config = &row["configuration"];
        let mib = oscil_testkit::number(row, "slow_queued_peak_mib");
        let bytes = oscil_testkit::openmetrics_value(
            &files[0].1,
            "oscil_campaign_slow_queued_peak_bytes",
            &[&format!("configuration=\"{config}\""), "path_rtt_ms=\"20\""],
        )
        .unwrap_or_else(|| panic!("no {config} in {}", files[0].1));
        // configurations.csv rounds to 4 decimals of MiB: 105 bytes.
        assert!(
            (bytes - mib * 1048576.0).abs() < 110.0,
            "{config}: {bytes} vs {mib} MiB"
        );
    }
}

/// The namespaces lab `pid` made (`oscil_lab_<pidns>_<pid>_<start>_snd` and `_rcv`).
fn lab_namespaces(pid: u32) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with("oscil_lab_") && n.contains(&format!("_{pid}_")))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// PIDs of processes inside namespace `name`, or whose command line names it.
fn users_of(name: &str) -> Vec<u32> {
    let inside = Command::new("ip")
        .args(["netns", "pids", name])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut pids: Vec<u32> = inside
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    for entry in std::fs::read_dir("/proc").unwrap() {
        let Some(pid) = entry
            .ok()
            .and_then(|e| e.file_name().to_str()?.parse::<u32>().ok())
        else {
            continue;
        };
        let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if argv.split(|&b| b == 0).any(|arg| arg == name.as_bytes()) {
            pids.push(pid);
        }
    }
    pids
}

/// Issue 38, hole 7: a lab killed by SIGKILL mid-run takes its link, daemon and reader
/// with it at once; the next `--resume` removes its namespaces and its key directory, and
/// finishes the campaign.
#[test]
fn a_lab_killed_mid_run_takes_its_processes_and_resume_removes_its_world() {
    if lacks_root("network namespaces, TUN devices") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c");
    let mut child = Command::new(workspace_bin("oscil-lab"))
        .args([
            "--rate",
            "50mbit",
            "--rtt",
            "20ms",
            "--lowat",
            "default,131072",
        ])
        .args([
            "--order", "grouped", "--fast", "3s", "--slow", "1s", "--cycles", "1",
        ])
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start oscil-lab");
    let first = out.join("runs/50mbit_20ms_cubic_lowat-default/rep-1");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !first.join("reader.csv").exists() {
        assert!(Instant::now() < deadline, "the first run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let namespaces = lab_namespaces(child.id());
    assert_eq!(namespaces.len(), 2, "{namespaces:?}");
    let tag = namespaces[0].rsplit_once('_').unwrap().0.to_owned();
    let key_dirs = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{tag}_key_")))
            })
            .collect()
    };
    assert_eq!(key_dirs().len(), 1, "the lab's key directory, {tag}_key_*");
    let users: Vec<u32> = namespaces.iter().flat_map(|n| users_of(n)).collect();
    assert!(users.len() >= 3, "link, daemon and reader: {users:?}");
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = Instant::now();
    while namespaces.iter().any(|n| !users_of(n).is_empty()) {
        assert!(
            killed.elapsed() < Duration::from_secs(3),
            "still running 3 s after the lab's SIGKILL: {:?}",
            namespaces.iter().map(|n| users_of(n)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "the lab's processes were gone {:?} after its SIGKILL",
        killed.elapsed()
    );
    assert_eq!(
        lab_namespaces(child.id()),
        namespaces,
        "nothing removed them yet"
    );

    let output = lab(&["--resume", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "oscil-lab: removed what a lab no longer running left: 2 namespace(s) ({}, {})",
            namespaces[0], namespaces[1]
        )) && stderr.contains("1 private directory(ies) with its key"),
        "{stderr}"
    );
    assert!(lab_namespaces(child.id()).is_empty());
    assert!(key_dirs().is_empty(), "{:?}", key_dirs());
    assert_eq!(statuses(&out), ["complete", "complete"]);
}

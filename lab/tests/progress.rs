//! `--progress json`: a short campaign (one `--quick` run on namespaces) whose stderr holds
//! only JSON lines, one event each: the run started with its settings, finished complete,
//! and the end, last, with the exit code. Needs root (namespaces, TUN).

mod util;

use std::path::Path;
use std::process::{Command, Stdio};

use oscil_testkit::{bin_dir, lacks_root, unique};
use serde_json::Value;

#[test]
fn json_progress_is_one_event_a_line_ending_with_the_end() {
    if lacks_root("network namespaces, TUN devices") {
        return;
    }
    let out = util::Campaign(std::env::temp_dir().join(unique("oscil-progress-")));
    let lab = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/lab");
    let output = Command::new(&lab)
        .args(["--quick", "--rtt", "100ms", "--rate", "100mbit"])
        .args(["--tcp-notsent-lowat", "default", "--marker-every", "off"])
        .args(["--progress", "json", "--out"])
        .arg(&out.0)
        .env("OSCIL_BIN_DIR", bin_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run scripts/lab");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{}\n{stderr}", output.status);
    let events: Vec<Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}")))
        .collect();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().expect("every line names its event"))
        .collect();
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
    assert_eq!(events.last().unwrap()["exit_code"], 0);
    let started = events.iter().find(|e| e["event"] == "run_started");
    let started = started.unwrap_or_else(|| panic!("no run started: {names:?}"));
    assert_eq!(started["repetition"], 1);
    assert!(started["settings"].is_object(), "{started}");
    assert!(started["eta_s"].is_u64(), "{started}");
    // A run the busy machine spoiled runs again once: a redo between two attempts.
    let count = |name: &str| names.iter().filter(|n| **n == name).count();
    let redos = count("redo");
    assert!(redos <= 1, "{names:?}");
    assert_eq!(count("run_started"), 1 + redos, "{names:?}");
    assert_eq!(count("run_finished"), 1 + redos, "{names:?}");
    for pair in names.windows(2).filter(|w| w[0] == "run_started") {
        assert_eq!(pair[1], "run_finished", "{names:?}");
    }
    let finished = events
        .iter()
        .rfind(|e| e["event"] == "run_finished")
        .unwrap();
    assert_eq!(finished["status"], "complete", "{finished}");
    assert_eq!(finished["label"], started["label"]);
    assert!(finished["pair"].is_null() && finished["round"].is_null());
}

//! What the report says about groups of flows (issue 40 item 3), end to end: one lab run
//! on an emulated 100 Mbit/s x 100 ms path with `--group flows=4,notsent-lowat=128k
//! --group flows=4` and the short pattern, then `oscil-report` on it. `groups.csv` has a
//! row per group, the shares add up to what TCP delivered as `reader.csv` has it, Jain's
//! indices are in (0, 1], and the default group holds clearly more bytes not yet sent in
//! the slow phase than the lowat group (lowat caps each socket's). Needs root
//! (namespaces, TUN); about 20 s.

mod util;

use std::path::{Path, PathBuf};
use std::process::Command;

use oscil_testkit::{number, report_figure, workspace_bin, Csv};

/// The campaign's one run (its last attempt), copied into `scratch` without the lab's
/// record of the link (`link.json`, `run.json`'s `lab`): on a loaded machine the emulator
/// may fall behind and the lab then keeps the run out of its verdicts, but the groups'
/// queues are what this test looks at, and they do not need a punctual link.
fn bare_run(campaign: &Path, scratch: &Path) -> PathBuf {
    let label = std::fs::read_dir(campaign.join("runs"))
        .unwrap()
        .next()
        .expect("one configuration")
        .unwrap()
        .path();
    let copy = scratch.join("run");
    let cp = Command::new("cp")
        .arg("-a")
        .arg(label.join("rep-1"))
        .arg(&copy)
        .status();
    assert!(cp.unwrap().success());
    let _ = std::fs::remove_file(copy.join("link.json"));
    let meta_path = copy.join("run.json");
    let mut meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    meta.as_object_mut().unwrap().remove("lab");
    std::fs::write(&meta_path, meta.to_string()).unwrap();
    copy
}

#[test]
fn groups_csv_shares_fairness_and_the_lowat_groups_smaller_queue() {
    let args = [
        "--quick",
        "--rtt",
        "100ms",
        "--rate",
        "100mbit",
        "--tcp-notsent-lowat",
        "default",
        "--group",
        "flows=4,notsent-lowat=128k",
        "--group",
        "flows=4",
    ];
    let Some(campaign) = util::run_lab("oscil-groups-", &args) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let run = bare_run(&campaign.0, scratch.path());
    let out = scratch.path().join("report");
    let done = Command::new(workspace_bin("oscil-report"))
        .arg(&run)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );

    let rows = Csv::read(&out.join("groups.csv")).rows;
    assert_eq!(rows.len(), 2, "one row per group: {rows:?}");
    let (lowat, default) = (&rows[0], &rows[1]);
    assert_eq!((&lowat["group"][..], &default["group"][..]), ("0", "1"));
    assert_eq!(lowat["group_settings"], "lowat 128 KiB", "{lowat:?}");
    assert_eq!(default["group_settings"], "lowat default", "{default:?}");
    for row in &rows {
        assert_eq!(number(row, "flows"), 4.0);
        for column in ["jain_groups", "jain_flows"] {
            let jain = number(row, column);
            assert!(jain > 0.0 && jain <= 1.0, "{column} {jain}");
        }
    }

    // What TCP delivered, from reader.csv: in all, and per group by its `group` column.
    let reader = Csv::read(&run.join("reader.csv")).rows;
    let delivered = |group: Option<&str>| -> f64 {
        let rows = reader
            .iter()
            .filter(|r| group.is_none_or(|g| r["group"] == g));
        rows.map(|r| number(r, "delivered_bytes")).sum()
    };
    let total = delivered(None);
    assert!(total > 0.0);
    let shares: f64 = rows.iter().map(|r| number(r, "delivered_share_pct")).sum();
    assert!((shares - 100.0).abs() <= 0.05, "shares add to {shares}%");
    let summed: f64 = rows.iter().map(|r| number(r, "delivered_bytes")).sum();
    assert!(
        (summed - total).abs() <= 0.01 * total,
        "groups {summed} bytes, reader.csv {total}"
    );
    for row in &rows {
        assert_eq!(number(row, "config_delivered_bytes"), summed);
        let own = delivered(Some(&row["group"]));
        let bytes = number(row, "delivered_bytes");
        assert!(
            (bytes - own).abs() <= 0.01 * own,
            "group {}: {bytes} bytes, reader.csv {own}",
            row["group"]
        );
        let share = number(row, "delivered_share_pct");
        assert!((share - 100.0 * own / total).abs() <= 1.0, "{row:?}");
    }

    // lowat caps each socket's bytes not yet sent; the default group's sit in its send
    // buffers while the slow phase drains them at 5% of the path.
    let notsent =
        |row: &std::collections::HashMap<String, String>| number(row, "slow_notsent_mean_bytes");
    assert!(
        notsent(default) > 2.0 * notsent(lowat),
        "slow-phase not sent: default {}, lowat {}",
        notsent(default),
        notsent(lowat)
    );
    assert!(number(default, "slow_queued_mean_bytes") > number(lowat, "slow_queued_mean_bytes"));

    // The picture and the words.
    let figure = report_figure(&out, "groups");
    assert_eq!(figure["file"], "groups.png", "{figure}");
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("## Groups of flows"), "{summary}");
    assert!(
        summary.contains("less queued in the slow phases"),
        "{summary}"
    );
}

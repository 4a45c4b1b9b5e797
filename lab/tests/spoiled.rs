//! Issue 32: a run whose link the emulator could not hold is flagged and left out of the
//! verdicts. The emulator runs starved of CPU: a wrapper puts `oscil-link` in a cpu cgroup
//! of this test's own with a quota of 3 ms per 100 ms (and without its real-time priority,
//! which a quota does not bound), so it stops for most of every period and delivers late
//! by tens of milliseconds. The rule (`oscil_model::run::link_health`) is not restated here:
//! the test reads the emulator's own `link.json` and expects the flag wherever more than
//! 0.1% of the packets (both directions) were over 1 ms late. The lab runs a spoiled run
//! once more (`execute::SPOILED_REDOS`), keeping the first attempt beside it; starved both
//! times, each run stays flagged. Root only (namespaces, TUN, cgroups); two 4 s runs, each
//! twice, about 45 s.

// Only `run_lab_with`: this test brings binaries of its own.
mod util;

use std::path::{Path, PathBuf};

use oscil_testkit::{bin_dir, lacks_root, skip, unique};

/// The emulator's share of one CPU: 3 ms in every 100 ms.
const QUOTA_US: u64 = 3_000;
const PERIOD_US: u64 = 100_000;

/// A cpu cgroup of the test's own, with the quota set; removed when dropped (the emulator
/// in it has exited by then).
struct Starved(PathBuf);

impl Starved {
    /// cgroup v2 where its root offers the cpu controller, else v1's cpu hierarchy.
    fn make() -> Option<Starved> {
        let name = unique("oscil-starved-");
        let v2 = Path::new("/sys/fs/cgroup");
        let has_v2_cpu = std::fs::read_to_string(v2.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|c| c == "cpu"));
        let (dir, files) = if has_v2_cpu {
            let max = format!("{QUOTA_US} {PERIOD_US}");
            (v2.join(name), vec![("cpu.max", max)])
        } else if Path::new("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").is_file() {
            let dir = Path::new("/sys/fs/cgroup/cpu").join(name);
            let files = vec![
                ("cpu.cfs_period_us", PERIOD_US.to_string()),
                ("cpu.cfs_quota_us", QUOTA_US.to_string()),
            ];
            (dir, files)
        } else {
            return None;
        };
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let cgroup = Starved(dir);
        for (file, value) in files {
            std::fs::write(cgroup.0.join(file), value).unwrap();
        }
        Some(cgroup)
    }
}

impl Drop for Starved {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// This build's binaries, but `oscil-link` enters `cgroup` first and runs without
/// real-time priority.
fn starved_bin_dir(dir: &Path, cgroup: &Starved) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let real = bin_dir();
    for name in ["oscil-daemon", "oscil-reader", "oscil-report", "oscil-lab"] {
        std::os::unix::fs::symlink(real.join(name), bin.join(name)).unwrap();
    }
    let wrapper = format!(
        "#!/bin/sh\necho $$ > {}/cgroup.procs || exit 1\nexec {} --no-realtime \"$@\"\n",
        cgroup.0.display(),
        real.join("oscil-link").display()
    );
    let link = bin.join("oscil-link");
    std::fs::write(&link, wrapper).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&link, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("JSON")
}

/// The share of packets, both directions, over 1 ms late, as the emulator counted them.
fn late_share(link: &serde_json::Value) -> f64 {
    let sum = |field: &dyn Fn(&serde_json::Value) -> &serde_json::Value| {
        ["a_to_b", "b_to_a"]
            .iter()
            .map(|d| field(&link[d]).as_f64().unwrap())
            .sum::<f64>()
    };
    let late = sum(&|d| &d["emulator"]["packets_late_over_1ms"]);
    late / sum(&|d| &d["link"]["packets_in"]).max(1.0)
}

#[test]
fn a_campaign_whose_link_was_starved_of_cpu_is_left_out_of_the_verdicts() {
    if lacks_root("network namespaces, TUN devices, cgroups") {
        return;
    }
    let Some(cgroup) = Starved::make() else {
        return skip("no cpu cgroup controller (cgroup v2 cpu.max or v1 cpu.cfs_quota_us)");
    };
    let scratch = tempfile::tempdir().unwrap();
    let bin = starved_bin_dir(scratch.path(), &cgroup);
    let args = "--rate 10mbit --rtt 20ms --lowat default,131072 --fast 2s --slow 2s --cycles 1 --order grouped";
    let args: Vec<&str> = args.split(' ').collect();
    let (campaign, stdout) = util::run_lab_with("oscil-spoiled", &args, &bin);
    let dir = &campaign.0;

    let plan = json(&dir.join("campaign.json"));
    let runs = plan["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{plan}");
    for run in runs {
        assert_eq!(run["status"], "complete", "{run}");
        let run_dir = dir.join(run["dir"].as_str().unwrap());
        let first = run_dir.with_file_name(format!(
            "{}.attempt-1",
            run_dir.file_name().unwrap().to_string_lossy()
        ));
        // Run again once, the first attempt kept: both starved, both late.
        for attempt in [&first, &run_dir] {
            let link = json(&attempt.join("link.json"));
            let share = late_share(&link);
            assert!(
                share > 0.001,
                "the starved emulator kept time ({share}) in {}: {link}",
                attempt.display()
            );
        }
        let second = first.with_extension("attempt-2");
        assert!(!second.exists(), "run a third time: {}", second.display());
        let logs = dir.join("logs").join(format!(
            "{:03}_{}_rep-1.attempt-1",
            run["position"].as_u64().unwrap(),
            run["label"].as_str().unwrap()
        ));
        assert!(logs.join("reader.log").is_file(), "{}", logs.display());
        let why = run["link_spoiled"]
            .as_str()
            .unwrap_or_else(|| panic!("not flagged: {run}"));
        assert!(why.contains("more than 1 ms late"), "{why}");
        // The end table counts no run and says why each is left out.
        let label = run["label"].as_str().unwrap();
        let row = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(label))
            .unwrap_or_else(|| panic!("no row {label}:\n{stdout}"));
        assert!(row.contains(" 0/1 "), "{row}");
        let said =
            format!("{label} rep 1: left out of the verdicts: the link emulator fell behind");
        assert!(stdout.contains(&said), "{stdout}");
    }
    // The report keeps the runs' pictures and rows, but no configuration, verdict or
    // recommendation rests on them.
    let report = dir.join("report");
    let configurations = std::fs::read_to_string(report.join("configurations.csv")).unwrap();
    assert_eq!(
        configurations.lines().count(),
        1,
        "only the header: {configurations}"
    );
    let page = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(page.contains("2 runs in 0 configurations"), "{page}");
    assert_eq!(
        page.matches("left out of the verdicts: the link emulator fell behind")
            .count(),
        2
    );
    assert_eq!(
        page.matches("link spoiled: ").count(),
        2,
        "the runs table marks both"
    );
    let manifest = json(&report.join("report.json"));
    let warnings = manifest["warnings"].to_string();
    assert!(warnings.contains("left out of the verdicts"), "{warnings}");
}

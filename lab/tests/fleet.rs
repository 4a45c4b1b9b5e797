//! Many hosts for real: four network namespaces, each a "host" with its own sshd, joined
//! through a hub namespace by an oscil-link per host (20 Mbit/s; 6, 14, 46 and 104 ms of
//! round trip to the hub, so the pairs' paths take 20, 52, 60, 110, 118 and 150 ms).
//! oscil-lab runs in the hub and reaches every host over ssh through its link, from an
//! Ansible inventory. A mesh of every ordered pair (12) x lowat default/131072 is killed
//! in the middle, restored and resumed; then a host that refuses ssh fails only its pairs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use oscil_testkit::sshd::{
    kill_with_children, lab_sysctls, lacks_sshd, make_keys, remove_namespaces, run, set_sysctls,
    ssh_options, start_sshd, wait_for,
};
use oscil_testkit::{bin_dir, unique, workspace_bin};

/// Each host's round trip to the hub, ms: a pair's path is the sum of its two.
const SPOKE_RTT_MS: [u64; 4] = [6, 14, 46, 104];
const HOSTS: usize = SPOKE_RTT_MS.len();

/// The hub, the hosts, their links and sshds; everything goes on drop.
struct Fleet {
    hub: String,
    ns: Vec<String>,
    children: Vec<Child>,
    dir: tempfile::TempDir,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        remove_namespaces(self.ns.iter().chain([&self.hub]));
    }
}

fn addr(i: usize) -> String {
    format!("10.253.{i}.2")
}

impl Fleet {
    fn start() -> Fleet {
        let id = unique("");
        let mut fleet = Fleet {
            hub: format!("oflH{id}"),
            ns: (0..HOSTS).map(|i| format!("ofl{i}{id}")).collect(),
            children: Vec::new(),
            dir: tempfile::tempdir().expect("temp dir"),
        };
        run("ip", &["netns", "add", &fleet.hub]);
        run("ip", &["-n", &fleet.hub, "link", "set", "lo", "up"]);
        let hub = fleet.hub.clone();
        run(
            "ip",
            &[
                "netns",
                "exec",
                &hub,
                "sysctl",
                "-qw",
                "net.ipv4.ip_forward=1",
            ],
        );
        for (i, spoke_rtt_ms) in SPOKE_RTT_MS.iter().enumerate() {
            let ns = fleet.ns[i].clone();
            run("ip", &["netns", "add", &ns]);
            run("ip", &["-n", &ns, "link", "set", "lo", "up"]);
            let hub_dev = format!("hub{i}");
            tun(&hub, &hub_dev, &format!("10.253.{i}.1/24"));
            tun(&ns, "osl0", &format!("{}/24", addr(i)));
            run(
                "ip",
                &[
                    "-n",
                    &ns,
                    "route",
                    "add",
                    "default",
                    "via",
                    &format!("10.253.{i}.1"),
                ],
            );
            let delay = format!("{}us", spoke_rtt_ms * 500);
            let link = Command::new(workspace_bin("oscil-link"))
                .args(["--a-netns", &hub, "--a-dev", &hub_dev, "--b-netns", &ns])
                .args(["--b-dev", "osl0", "--rate", "20mbit", "--delay", &delay])
                .stdin(Stdio::null())
                .spawn()
                .expect("start oscil-link");
            fleet.children.push(link);
        }
        make_keys(fleet.dir.path());
        for i in 0..HOSTS {
            let sshd = start_sshd(&fleet.ns[i], &addr(i), fleet.dir.path());
            fleet.children.push(sshd);
        }
        fleet
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// oscil-lab in the hub with `args`.
    fn lab(&self, args: &[&str]) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.hub])
            .arg(workspace_bin("oscil-lab"))
            .args(args)
            .env("OSCIL_BIN_DIR", bin_dir());
        command
    }

    /// A new campaign from `inventory` into `out`.
    fn campaign(&self, inventory: &Path, pairs: &str, out: &Path, extra: &[&str]) -> Command {
        let mut command = self.lab(&["--inventory", inventory.to_str().unwrap(), "--pairs", pairs]);
        for option in ssh_options(self.dir.path()) {
            command.arg("--ssh-option").arg(option);
        }
        command.args([
            "--fast",
            "1s",
            "--slow",
            "1s",
            "--cycles",
            "1",
            "--marker-every",
            "off",
        ]);
        command.arg("--out").arg(out).args(extra);
        command
    }

    fn sysctls(&self) -> Vec<BTreeMap<String, String>> {
        self.ns.iter().map(|ns| lab_sysctls(ns)).collect()
    }

    /// Values no kernel has by default, so a restore to them is told from a fresh namespace.
    fn set_unusual_sysctls(&self) {
        // lowat stays the kernel's (no threshold), so each path's baseline is the kernel's
        // default and the recommendation has something to measure against.
        for ns in &self.ns {
            set_sysctls(
                ns,
                &[
                    "net.ipv4.tcp_wmem=4096 20000 3000000",
                    "net.ipv4.tcp_rmem=4096 90000 5000000",
                ],
            );
        }
    }
}

/// A TUN device `dev` with `cidr` in namespace `ns`, up.
fn tun(ns: &str, dev: &str, cidr: &str) {
    run(
        "ip",
        &[
            "-n", ns, "tuntap", "add", "dev", dev, "mode", "tun", "vnet_hdr",
        ],
    );
    run("ip", &["-n", ns, "addr", "add", cidr, "dev", dev]);
    run("ip", &["-n", ns, "link", "set", dev, "up"]);
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .expect("JSON")
}

fn status_of(command: &mut Command) -> ExitStatus {
    command.status().expect("run oscil-lab")
}

#[test]
fn a_mesh_of_four_hosts_runs_in_rounds_survives_a_kill_and_fails_only_a_refusing_hosts_pairs() {
    if lacks_sshd() {
        return;
    }
    let started = Instant::now();
    let fleet = Fleet::start();
    fleet.set_unusual_sysctls();
    let before = fleet.sysctls();
    let inventory = fleet.path("inventory.yml");
    let mut text = String::from("all:\n  vars:\n    ansible_user: root\n  hosts:\n");
    for i in 0..HOSTS {
        text += &format!(
            "    h{i}:\n      ansible_host: {}\n      oscil_bin: {}\n",
            addr(i),
            bin_dir().display()
        );
    }
    std::fs::write(&inventory, text).unwrap();
    let out = fleet.path("mesh");

    let mut lab = fleet
        .campaign(
            &inventory,
            "all",
            &out,
            &["--lowat", "default,131072", "--seed", "5"],
        )
        .spawn()
        .expect("start oscil-lab");
    // Mid-campaign: some runs done, a daemon running for some pair.
    wait_for("a third of the runs", Duration::from_secs(240), || {
        assert!(lab.try_wait().unwrap().is_none(), "oscil-lab ended early");
        let done = std::fs::read_to_string(out.join("campaign.json"))
            .unwrap_or_default()
            .matches("\"complete\"")
            .count();
        done >= 8
            && restore_files(&out).iter().any(|f| {
                std::fs::read_to_string(f)
                    .unwrap_or_default()
                    .contains("\"pid\"")
            })
    });
    kill_with_children(&mut lab);
    eprintln!("killed after {:.1} s", started.elapsed().as_secs_f64());
    assert!(
        !restore_files(&out).is_empty(),
        "the pairs' restore files are left"
    );

    assert!(status_of(&mut fleet.lab(&["restore", out.to_str().unwrap()])).success());
    assert_eq!(fleet.sysctls(), before, "restore put every host back");
    assert!(restore_files(&out).is_empty());

    let resumed = status_of(&mut fleet.lab(&["--resume", out.to_str().unwrap()]));
    eprintln!(
        "resumed and done after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(resumed.success(), "oscil-lab --resume: {resumed}");
    assert_eq!(fleet.sysctls(), before, "every sysctl back on every host");
    assert!(restore_files(&out).is_empty());
    check_mesh(&out);

    refusing_host(&fleet, &before);
    eprintln!("fleet test took {:.1} s", started.elapsed().as_secs_f64());
}

/// Every run complete, no host in two runs at once, each pair's measured path what the
/// links make it, one report with a recommendation per path.
fn check_mesh(out: &Path) {
    let campaign = json(&out.join("campaign.json"));
    let runs = campaign["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 12 * 2, "12 pairs x 2 settings");
    // Each host's busy spans, from the runs' own start and end times.
    let mut busy: BTreeMap<String, Vec<(u64, u64, String)>> = BTreeMap::new();
    for run in runs {
        assert_eq!(run["status"], "complete", "{run}");
        let dir = out.join(run["dir"].as_str().unwrap());
        let pair = run["pair"].as_str().unwrap();
        assert!(dir.starts_with(out.join("runs").join(pair)));
        let meta = json(&dir.join("run.json"));
        let span = (
            meta["started_unix_ms"].as_u64().expect("started"),
            meta["ending"]["ended_unix_ms"]
                .as_u64()
                .or(meta["ended_unix_ms"].as_u64())
                .expect("ended"),
        );
        assert!(span.0 < span.1);
        let (sender, receiver) = pair.split_once("-to-").unwrap();
        for host in [sender, receiver] {
            busy.entry(host.into())
                .or_default()
                .push((span.0, span.1, pair.into()));
        }
    }
    for (host, mut spans) in busy {
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "{host} in two runs at once: {w:?}");
        }
    }
    // The paths: a pair's minimum RTT is its two links' round trips (plus a little).
    for (s, s_rtt_ms) in SPOKE_RTT_MS.iter().enumerate() {
        for (r, r_rtt_ms) in SPOKE_RTT_MS.iter().enumerate().filter(|&(r, _)| r != s) {
            let path = json(&out.join(format!("pairs/h{s}-to-h{r}/path.json")));
            let rtt_ms = path["measured_min_rtt_us"].as_u64().expect("min RTT") as f64 / 1000.0;
            let expected = (s_rtt_ms + r_rtt_ms) as f64;
            assert!(
                (expected..expected + 15.0).contains(&rtt_ms),
                "h{s}>h{r}: {rtt_ms} ms on a {expected} ms path"
            );
            assert!(
                path["ping"].as_str().is_some_and(|p| p.contains("rtt")),
                "{path}"
            );
        }
    }
    let recommendation =
        std::fs::read_to_string(out.join("report/recommendation.md")).expect("recommendation.md");
    for s in 0..HOSTS {
        for r in (0..HOSTS).filter(|&r| r != s) {
            assert!(
                recommendation.contains(&format!("h{s}-to-h{r}")),
                "no word on h{s}>h{r}:\n{recommendation}"
            );
        }
    }
    let mesh = std::fs::read_to_string(out.join("report/mesh.csv")).expect("mesh.csv");
    assert_eq!(mesh.lines().count(), 1 + 12, "a line per path:\n{mesh}");
    assert!(out.join("report/mesh.png").is_file(), "the mesh picture");
}

/// A host whose ssh port refuses fails its own pairs; the other pair completes and every
/// host is put back.
fn refusing_host(fleet: &Fleet, before: &[BTreeMap<String, String>]) {
    let inventory = fleet.path("inventory.ini");
    let bin = bin_dir();
    let text = format!(
        "[lab]\nh0 ansible_host={} oscil_bin={}\nh1 ansible_host={} oscil_bin={}\n\
         down ansible_host={} ansible_port=2222\n[lab:vars]\nansible_user=root\n",
        addr(0),
        bin.display(),
        addr(1),
        bin.display(),
        addr(2)
    );
    std::fs::write(&inventory, text).unwrap();
    let out = fleet.path("refused");
    let status = status_of(&mut fleet.campaign(
        &inventory,
        "h0>h1,h0>down,down>h1",
        &out,
        &["--lowat", "131072"],
    ));
    assert_eq!(status.code(), Some(1), "some runs failed");
    let campaign = json(&out.join("campaign.json"));
    for run in campaign["runs"].as_array().unwrap() {
        let pair = run["pair"].as_str().unwrap();
        if pair.contains("down") {
            assert_eq!(run["status"], "failed", "{run}");
            assert!(
                run["reason"].as_str().unwrap().contains("host down"),
                "{run}"
            );
        } else {
            assert_eq!(run["status"], "complete", "{run}");
        }
    }
    assert_eq!(fleet.sysctls(), before);
}

/// The pairs' restore files present in the campaign `out`.
fn restore_files(out: &Path) -> Vec<PathBuf> {
    let Ok(dirs) = std::fs::read_dir(out.join("pairs")) else {
        return Vec::new();
    };
    dirs.filter_map(Result::ok)
        .map(|d| d.path().join("restore.json"))
        .filter(|f| f.exists())
        .collect()
}

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

use oscil_testkit::{bin_dir, lacks_root, unique, workspace_bin};

const SSHD: &str = "/usr/sbin/sshd";
const KEYS: [&str; 4] = [
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_notsent_lowat",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_adv_win_scale",
];
/// Each host's round trip to the hub, ms: a pair's path is the sum of its two.
const SPOKE_RTT_MS: [u64; 4] = [6, 14, 46, 104];
const HOSTS: usize = SPOKE_RTT_MS.len();

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().expect("run");
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

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
        for ns in self.ns.iter().chain([&self.hub]) {
            let pids = Command::new("ip").args(["netns", "pids", ns]).output();
            for pid in pids
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
                .split_whitespace()
            {
                let _ = Command::new("kill").args(["-KILL", pid]).status();
            }
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
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
        fleet.keys();
        for i in 0..HOSTS {
            fleet.sshd(i);
        }
        fleet
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn keys(&self) {
        for name in ["host_key", "user_key"] {
            let file = self.path(name);
            run(
                "ssh-keygen",
                &[
                    "-q",
                    "-t",
                    "ed25519",
                    "-N",
                    "",
                    "-f",
                    file.to_str().unwrap(),
                ],
            );
        }
        std::fs::copy(self.path("user_key.pub"), self.path("authorized_keys")).unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap();
    }

    fn sshd(&mut self, i: usize) {
        let config = self.path(&format!("sshd_{i}.conf"));
        let text = format!(
            "ListenAddress {}\nHostKey {}\nAuthorizedKeysFile {}\nPidFile none\nUsePAM no\nStrictModes no\n\
             PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n",
            addr(i),
            self.path("host_key").display(),
            self.path("authorized_keys").display()
        );
        std::fs::write(&config, text).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns[i], SSHD, "-D", "-e", "-f"])
            .arg(&config)
            .stderr(Stdio::null())
            .spawn()
            .expect("start sshd");
        self.children.push(child);
        let ns = &self.ns[i];
        wait_for("sshd to listen", Duration::from_secs(10), || {
            !run("ip", &["netns", "exec", ns, "ss", "-Hltn", "sport = :22"]).is_empty()
        });
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
        for option in [
            format!("IdentityFile={}", self.path("user_key").display()),
            "StrictHostKeyChecking=no".into(),
            "UserKnownHostsFile=/dev/null".into(),
            "LogLevel=ERROR".into(),
        ] {
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
        self.ns
            .iter()
            .map(|ns| {
                KEYS.iter()
                    .map(|k| {
                        let v = run("ip", &["netns", "exec", ns, "sysctl", "-n", k]);
                        (
                            k.to_string(),
                            v.split_whitespace().collect::<Vec<_>>().join(" "),
                        )
                    })
                    .collect()
            })
            .collect()
    }

    /// Values no kernel has by default, so a restore to them is told from a fresh namespace.
    fn set_unusual_sysctls(&self) {
        for ns in &self.ns {
            let mut args = vec!["netns", "exec", ns, "sysctl", "-qw"];
            // lowat stays the kernel's (no threshold), so each path's baseline is the
            // kernel's default and the recommendation has something to measure against.
            args.extend([
                "net.ipv4.tcp_wmem=4096 20000 3000000",
                "net.ipv4.tcp_rmem=4096 90000 5000000",
            ]);
            run("ip", &args);
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

fn skip() -> bool {
    if lacks_root("network namespaces, sshd") {
        return true;
    }
    if !Path::new(SSHD).exists() {
        oscil_testkit::skip(&format!("no {SSHD} (apt-get install openssh-server)"));
        return true;
    }
    false
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
    if skip() {
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

/// Polls `done` until it holds, failing the test after `limit`.
fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGKILL to oscil-lab and its children (its ssh clients), so nothing of it can clean up.
fn kill_with_children(child: &mut Child) {
    // `ip netns exec` execs oscil-lab: the child is oscil-lab itself.
    let mut pids = vec![child.id().to_string()];
    let mut i = 0;
    while i < pids.len() {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", pids[i]))
            .map(|d| d.filter_map(Result::ok).collect::<Vec<_>>())
            .unwrap_or_default();
        for task in tasks {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            pids.extend(children.split_whitespace().map(str::to_owned));
        }
        i += 1;
    }
    for pid in pids.iter().skip(1) {
        let _ = Command::new("kill").args(["-KILL", pid]).status();
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

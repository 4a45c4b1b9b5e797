//! Many hosts for real: four network namespaces, each a "host" with its own sshd, joined
//! through a hub namespace by an oscil-link per host (20 Mbit/s; 6, 14, 46 and 104 ms of
//! round trip to the hub, so the pairs' paths take 20, 52, 60, 110, 118 and 150 ms).
//! oscil-lab runs in the hub and reaches every host over ssh through its link, from an
//! Ansible inventory. A mesh of six ordered pairs (three rounds of two, each host in every
//! round) x lowat default/131072 is killed in the middle, restored and resumed; then a host
//! that refuses ssh fails only its pairs, and campaigns on overlapping hosts wait for each
//! other. Apart, on a fleet of its own (the two tests run side by side): deploy/ansible
//! installs the binaries, and a campaign runs on them.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use oscil_testkit::sshd::{
    kill_with_children, lab_lock_file, lab_lock_held, lab_sysctls, lacks_sshd, make_keys,
    recap_changed, remove_namespaces, run, set_sysctls, ssh_options, start_sshd, wait_for,
};
use oscil_testkit::{bin_dir, unique, workspace_bin};

/// Each host's round trip to the hub, ms: a pair's path is the sum of its two.
const SPOKE_RTT_MS: [u64; 4] = [6, 14, 46, 104];
const HOSTS: usize = SPOKE_RTT_MS.len();

/// The mesh's pairs (sender, receiver): every host in each of three rounds, both
/// directions of two paths and one direction of two more. Every ordered pair would be 12
/// rounds' worth of runs for the same checks (11 minutes of CI on a loaded machine).
const MESH: [(usize, usize); 6] = [(0, 1), (2, 3), (1, 0), (3, 2), (0, 2), (3, 1)];

/// `--pairs` for [`MESH`].
fn mesh_pairs() -> String {
    let pairs: Vec<String> = MESH.iter().map(|(s, r)| format!("h{s}>h{r}")).collect();
    pairs.join(",")
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
            let sshd = start_sshd(&fleet.ns[i], &addr(i), fleet.dir.path(), None);
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
    let pairs = mesh_pairs();

    let mut lab = fleet
        .campaign(
            &inventory,
            &pairs,
            &out,
            // A given slow rate: no pair spends a calibration run (the refusing-host
            // campaign below has one).
            &[
                "--lowat",
                "default,131072",
                "--seed",
                "5",
                "--slow-rate",
                "2mbit",
            ],
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
        done >= 4
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
    eprintln!(
        "refusing host done after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    overlapping_campaigns(&fleet, &inventory, &before);
    eprintln!("mesh test took {:.1} s", started.elapsed().as_secs_f64());
}

#[test]
fn deploy_ansible_installs_the_binaries_once_and_a_campaign_runs_on_them() {
    if lacks_sshd() {
        return;
    }
    let started = Instant::now();
    let fleet = Fleet::start();
    let before = fleet.sysctls();
    deploy_then_campaign(&fleet, &before);
    eprintln!("deploy test took {:.1} s", started.elapsed().as_secs_f64());
}

/// Every run complete, no host in two runs at once, each pair's measured path what the
/// links make it, one report with a recommendation per path.
fn check_mesh(out: &Path) {
    let campaign = json(&out.join("campaign.json"));
    let runs = campaign["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), MESH.len() * 2, "6 pairs x 2 settings");
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
    for &(s, r) in &MESH {
        let (s_rtt_ms, r_rtt_ms) = (SPOKE_RTT_MS[s], SPOKE_RTT_MS[r]);
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
    let recommendation =
        std::fs::read_to_string(out.join("report/recommendation.md")).expect("recommendation.md");
    for &(s, r) in &MESH {
        assert!(
            recommendation.contains(&format!("h{s}-to-h{r}")),
            "no word on h{s}>h{r}:\n{recommendation}"
        );
    }
    // The figures for Prometheus: promtool takes them, a series per pair.
    if let Some(files) = oscil_testkit::promtool_checked(&out.join("metrics")) {
        assert_eq!(
            files.len(),
            1 + MESH.len() * 2,
            "the campaign's file and one per run"
        );
        let campaign = &files[0].1;
        for pair in ["h0-to-h1", "h3-to-h2"] {
            let bytes = oscil_testkit::openmetrics_value(
                campaign,
                "oscil_campaign_slow_queued_peak_bytes",
                &[&format!("pair=\"{pair}\""), "lowat=\"131072\""],
            );
            assert!(bytes.is_some_and(|b| b > 0.0), "{pair}:\n{campaign}");
        }
    }
    let mesh = std::fs::read_to_string(out.join("report/mesh.csv")).expect("mesh.csv");
    assert_eq!(
        mesh.lines().count(),
        1 + MESH.len(),
        "a line per path:\n{mesh}"
    );
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
    // The pair that ran was calibrated first, and its run read at 5% of that peak; the
    // pairs that could not start have none.
    let calibrations = campaign["calibrations"].as_array().expect("calibrations");
    assert_eq!(calibrations.len(), 1, "{calibrations:?}");
    assert_eq!(calibrations[0]["pair"], "h0-to-h1");
    assert_eq!(calibrations[0]["dir"], "calibration/h0-to-h1");
    assert!(out.join("calibration/h0-to-h1/run.json").is_file());
    let slow_bps = (calibrations[0]["peak_bps"].as_f64().unwrap() * 0.05).round();
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
            assert_eq!(run["settings"]["slow_rate_bps"].as_f64(), Some(slow_bps));
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

/// The path of host `i`'s campaign lock.
fn lock_file(fleet: &Fleet, i: usize) -> PathBuf {
    lab_lock_file(&fleet.ns[i])
}

fn held(fleet: &Fleet, i: usize) -> bool {
    lab_lock_held(&fleet.ns[i])
}

fn stderr_of(command: &mut Command) -> (Option<i32>, String) {
    let out = command.output().expect("run oscil-lab");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Two campaigns on overlapping hosts (h0>h1, then h1>h2) never run at once: the second
/// is refused while the first holds h1, naming it, and so is a restore of the first; once
/// the first is done the second runs. A lab killed outright lets its hosts go by itself.
/// Three one-run campaigns: 71 s here with other branches building.
fn overlapping_campaigns(fleet: &Fleet, inventory: &Path, before: &[BTreeMap<String, String>]) {
    let first = fleet.path("first");
    let mut a = fleet
        .campaign(inventory, "h0>h1", &first, &["--lowat", "131072"])
        .spawn()
        .expect("start oscil-lab");
    wait_for(
        "the first campaign to hold h0 and h1",
        Duration::from_secs(60),
        || {
            assert!(a.try_wait().unwrap().is_none(), "oscil-lab ended early");
            held(fleet, 0) && held(fleet, 1) && !restore_files(&first).is_empty()
        },
    );
    let holder = std::fs::read_to_string(lock_file(fleet, 1)).unwrap();
    assert!(holder.contains(first.to_str().unwrap()), "{holder}");

    let second = fleet.path("second");
    let (code, stderr) =
        stderr_of(&mut fleet.campaign(inventory, "h1>h2", &second, &["--lowat", "131072"]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("is in use by another campaign: campaign ")
            && stderr.contains(first.to_str().unwrap()),
        "{stderr}"
    );
    assert!(
        restore_files(&second).is_empty(),
        "the refused campaign changed nothing"
    );
    let (code, stderr) = stderr_of(&mut fleet.lab(&["restore", first.to_str().unwrap()]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(first.to_str().unwrap()), "{stderr}");

    assert!(a.wait().unwrap().success(), "the first campaign completes");
    assert!(!held(fleet, 0) && !held(fleet, 1), "its hosts are let go");
    assert!(status_of(&mut fleet.lab(&["--resume", second.to_str().unwrap()])).success());
    let span = |out: &Path| {
        let campaign = json(&out.join("campaign.json"));
        let meta = json(
            &out.join(campaign["runs"][0]["dir"].as_str().unwrap())
                .join("run.json"),
        );
        (
            meta["started_unix_ms"].as_u64().unwrap(),
            meta["ending"]["ended_unix_ms"].as_u64().unwrap_or(0),
        )
    };
    let (a_span, b_span) = (span(&first), span(&second));
    assert!(
        a_span.1 <= b_span.0,
        "h1 in two campaigns at once: {a_span:?} {b_span:?}"
    );

    // Killed outright (its ssh clients live on): the locks end with it.
    let crashed = fleet.path("crashed");
    let mut c = fleet
        .campaign(inventory, "h0>h1", &crashed, &["--lowat", "131072"])
        .spawn()
        .expect("start oscil-lab");
    wait_for(
        "the third campaign to hold h0 and h1",
        Duration::from_secs(60),
        || held(fleet, 0) && held(fleet, 1),
    );
    run("kill", &["-KILL", &c.id().to_string()]);
    let _ = c.wait();
    wait_for(
        "the killed campaign's locks to go",
        Duration::from_secs(15),
        || !held(fleet, 0) && !held(fleet, 1),
    );
    assert!(status_of(&mut fleet.lab(&["restore", crashed.to_str().unwrap()])).success());
    assert_eq!(fleet.sysctls(), before);
}

/// deploy/ansible with Debian's ansible-playbook on h2 and h3 (the inventory a range, with
/// group_vars and host_vars, which the lab reads through ansible-inventory as the
/// explicit inventory's plan): twice, the second changing nothing, then a campaign on
/// the binaries it installed. 294 s here with other branches building, most of it
/// Ansible's (its Python start-up per task and host).
fn deploy_then_campaign(fleet: &Fleet, before: &[BTreeMap<String, String>]) {
    if Command::new("ansible-playbook")
        .arg("--version")
        .output()
        .is_err()
    {
        oscil_testkit::skip("no ansible-playbook (apt-get install ansible-core)");
        return;
    }
    let dir = fleet.path("deploy");
    for sub in ["group_vars", "host_vars"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::write(dir.join("hosts.ini"), "[lab]\nh[2:3]\n").unwrap();
    std::fs::write(
        dir.join("group_vars/all.yml"),
        "ansible_user: root\nansible_python_interpreter: /usr/bin/python3\n\
         ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null\n",
    )
    .unwrap();
    let mut explicit = String::new();
    for i in [2, 3] {
        let root = dir.join(format!("h{i}"));
        let vars = format!(
            "ansible_host: {}\noscil_bin: {}\noscil_etc_dir: {}\noscil_unit_dir: {}\n",
            addr(i),
            root.join("bin").display(),
            root.join("etc").display(),
            root.join("systemd").display()
        );
        std::fs::write(dir.join(format!("host_vars/h{i}.yml")), vars).unwrap();
        explicit += &format!(
            "h{i} ansible_host={} ansible_user=root oscil_bin={}\n",
            addr(i),
            root.join("bin").display()
        );
    }
    std::fs::write(fleet.path("explicit.ini"), explicit).unwrap();
    let hosts = dir.join("hosts.ini");
    let out = fleet.path("deployed");
    let plan = |inventory: &Path| {
        let output = fleet
            .campaign(inventory, "all", &out, &["--dry-run", "--seed", "7"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let planned = plan(&hosts);
    assert!(
        planned.contains(&format!("h3    {}  root", addr(3))),
        "{planned}"
    );
    assert_eq!(planned, plan(&fleet.path("explicit.ini")));
    // ansible-inventory's JSON on standard input: the same plan again.
    let listed = run(
        "ansible-inventory",
        &["-i", hosts.to_str().unwrap(), "--list"],
    );
    let mut piped = fleet
        .campaign(Path::new("-"), "all", &out, &["--dry-run", "--seed", "7"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    piped
        .stdin
        .take()
        .unwrap()
        .write_all(listed.as_bytes())
        .unwrap();
    let output = piped.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), planned);

    let playbook = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/ansible/oscil.yml");
    let deploy = || {
        let output = Command::new("ip")
            .args(["netns", "exec", &fleet.hub, "ansible-playbook", "-i"])
            .arg(&hosts)
            .arg(&playbook)
            .arg("-e")
            .arg(format!("oscil_build_dir={}", bin_dir().display()))
            .arg("--private-key")
            .arg(fleet.path("user_key"))
            .env("ANSIBLE_NOCOLOR", "1")
            // One ssh command per task rather than three (no temporary module file): as
            // operators run it, and minutes less of this test.
            .env("ANSIBLE_PIPELINING", "1")
            .output()
            .expect("run ansible-playbook");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        recap_changed(&text)
    };
    let first = deploy();
    assert!(
        first.len() == 2 && first.iter().all(|&n| n > 0),
        "{first:?}"
    );
    assert_eq!(deploy(), [0, 0], "the second run changes nothing");
    for i in [2, 3] {
        let key = dir.join(format!("h{i}/etc/oscil.key"));
        let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", key.display());
        assert!(dir
            .join(format!("h{i}/systemd/oscil-daemon.service"))
            .is_file());
        // Off by default: no schedule unless oscil_schedule says when (tests/schedule.rs).
        assert!(!dir
            .join(format!("h{i}/systemd/oscil-schedule.timer"))
            .exists());
    }
    let status = status_of(&mut fleet.campaign(&hosts, "h2>h3", &out, &["--lowat", "131072"]));
    assert!(status.success(), "a campaign on the deployed binaries");
    assert_eq!(
        json(&out.join("campaign.json"))["runs"][0]["status"],
        "complete"
    );
    assert_eq!(fleet.sysctls(), before);
}

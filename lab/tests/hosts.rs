//! The hosts backend for real: two network namespaces made here, each a "host" with its own
//! sshd (Debian openssh-server, keys made here) on the namespace's address, joined by
//! oscil-link at 50 Mbit/s, 40 ms. oscil-lab runs inside the receiver's namespace and
//! reaches both over ssh, so every sysctl it sets lands in a namespace.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use oscil_testkit::sshd::{
    kill_with_children, lab_sysctls, lacks_sshd, make_keys, path_without, remove_namespaces, run,
    set_sysctls, ssh_options, start_sshd, wait_for,
};
use oscil_testkit::{assert_host_load_filled, bin_dir, unique, workspace_bin};

/// Two namespaces, the link and an sshd in each; everything goes on drop.
struct Hosts {
    ns: [String; 2],
    addr: [String; 2],
    children: Vec<Child>,
    dir: tempfile::TempDir,
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        remove_namespaces(&self.ns);
    }
}

impl Hosts {
    /// `sender_lacks`: a program the sender's ssh sessions do not find on their PATH.
    fn start(sender_lacks: Option<&str>) -> Hosts {
        let id = unique("");
        let subnet = 100 + std::process::id() % 150;
        let mut hosts = Hosts {
            ns: [format!("olhS{id}"), format!("olhR{id}")],
            addr: [format!("10.252.{subnet}.1"), format!("10.252.{subnet}.2")],
            children: Vec::new(),
            dir: tempfile::tempdir().expect("temp dir"),
        };
        for (ns, addr) in hosts.ns.iter().zip(&hosts.addr) {
            run("ip", &["netns", "add", ns]);
            run("ip", &["-n", ns, "link", "set", "lo", "up"]);
            run(
                "ip",
                &[
                    "-n", ns, "tuntap", "add", "dev", "osl0", "mode", "tun", "vnet_hdr",
                ],
            );
            run(
                "ip",
                &[
                    "-n",
                    ns,
                    "addr",
                    "add",
                    &format!("{addr}/24"),
                    "dev",
                    "osl0",
                ],
            );
            run("ip", &["-n", ns, "link", "set", "osl0", "up"]);
        }
        let link = Command::new(workspace_bin("oscil-link"))
            .args([
                "--a-netns",
                &hosts.ns[0],
                "--b-netns",
                &hosts.ns[1],
                "--a-dev",
                "osl0",
                "--b-dev",
                "osl0",
                "--rate",
                "50mbit",
                "--delay",
                "20ms",
            ])
            .stdin(Stdio::null())
            .spawn()
            .expect("start oscil-link");
        hosts.children.push(link);
        make_keys(hosts.dir.path());
        let sender_path = sender_lacks.map(|name| path_without(hosts.dir.path(), name));
        for i in 0..2 {
            let session_path = sender_path.as_deref().filter(|_| i == 0);
            let sshd = start_sshd(&hosts.ns[i], &hosts.addr[i], hosts.dir.path(), session_path);
            hosts.children.push(sshd);
        }
        hosts
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `oscil-lab --resume out` in the receiver's namespace: nothing else given.
    fn resume(&self, out: &Path) -> std::process::ExitStatus {
        Command::new("ip")
            .args(["netns", "exec", &self.ns[1]])
            .arg(workspace_bin("oscil-lab"))
            .arg("--resume")
            .arg(out)
            .env("OSCIL_BIN_DIR", bin_dir())
            .status()
            .expect("run oscil-lab --resume")
    }

    fn sysctls(&self) -> [BTreeMap<String, String>; 2] {
        self.ns.clone().map(|ns| lab_sysctls(&ns))
    }

    /// Values no kernel has by default, so a restore to them is told from a fresh namespace.
    fn set_unusual_sysctls(&self) {
        for ns in &self.ns {
            set_sysctls(
                ns,
                &[
                    "net.ipv4.tcp_notsent_lowat=777777",
                    "net.ipv4.tcp_wmem=4096 20000 3000000",
                    "net.ipv4.tcp_rmem=4096 90000 5000000",
                ],
            );
        }
    }

    /// oscil-lab in the receiver's namespace; `receiver` is `Remote` (both "hosts" over
    /// ssh, binaries found with --remote-bin) or `Local` (the receiver is the lab's own
    /// namespace; the daemon is copied to the sender with --install).
    fn lab(&self, out: &Path, receiver: Receiver, extra: &[&str]) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.ns[1]])
            .arg(workspace_bin("oscil-lab"));
        command.args(["--sender", &format!("root@{}", self.addr[0])]);
        match receiver {
            Receiver::Remote => {
                command.args(["--receiver", &format!("root@{}", self.addr[1])]);
                command.args(["--remote-bin", bin_dir().to_str().unwrap()]);
            }
            Receiver::Local => {
                command.args(["--receiver", "local", "--install"]);
            }
        }
        for option in ssh_options(self.dir.path()) {
            command.arg("--ssh-option").arg(option);
        }
        command.arg("--out").arg(out).args(extra);
        command.env("OSCIL_BIN_DIR", bin_dir());
        command
    }
}

#[derive(Clone, Copy)]
enum Receiver {
    Remote,
    Local,
}

/// Two hosts whose sysctls are set to unusual values, and those values; `None` (after saying
/// why) where the test cannot run.
fn prepared(sender_lacks: Option<&str>) -> Option<(Hosts, [BTreeMap<String, String>; 2])> {
    if lacks_sshd() {
        return None;
    }
    let hosts = Hosts::start(sender_lacks);
    hosts.set_unusual_sysctls();
    let before = hosts.sysctls();
    Some((hosts, before))
}

fn campaign(out: &Path) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(out.join("campaign.json")).expect("campaign.json"),
    )
    .expect("JSON")
}

/// A run's `--pcap` capture from the sender: tshark reads it, and it holds the run's TCP
/// on one port (the daemon's, the filter's), data among it, and nothing else (no ssh).
fn check_capture(file: &Path) {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args([
            "-T",
            "fields",
            "-e",
            "tcp.srcport",
            "-e",
            "tcp.dstport",
            "-e",
            "tcp.len",
        ])
        .output()
        .expect("run tshark (apt-get install tshark)");
    assert!(
        out.status.success(),
        "tshark -r {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Vec<u64>> = String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .map(|l| {
            l.split('\t')
                .map(|f| f.parse().expect("a number"))
                .collect()
        })
        .collect();
    assert!(
        rows.len() > 100,
        "{} packets in {}",
        rows.len(),
        file.display()
    );
    let on_every = |port: u64| rows.iter().all(|r| r[0] == port || r[1] == port);
    let port = [rows[0][0], rows[0][1]]
        .into_iter()
        .find(|&p| on_every(p))
        .expect("every packet on one port, the filter's");
    assert_ne!(port, 22, "the data port, not ssh's");
    let data_bytes: u64 = rows.iter().filter(|r| r[0] == port).map(|r| r[2]).sum();
    eprintln!(
        "{}: {} packets on port {port}, {data_bytes} bytes of data sent",
        file.display(),
        rows.len()
    );
    assert!(data_bytes > 100_000, "{data_bytes} bytes of data sent");
}

#[test]
fn a_campaign_over_ssh_completes_and_puts_every_sysctl_back() {
    let Some((hosts, before)) = prepared(None) else {
        return;
    };
    let out = hosts.path("campaign");
    let started = Instant::now();
    let status = hosts
        .lab(
            &out,
            Receiver::Remote,
            &["--lowat", "default,131072", "--repeat", "2", "--pcap"],
        )
        .args(["--fast", "1s", "--slow", "1s", "--cycles", "1"])
        .status()
        .expect("run oscil-lab");
    eprintln!(
        "hosts campaign took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(status.success(), "oscil-lab failed: {status}");
    assert_eq!(
        hosts.sysctls(),
        before,
        "every sysctl back to its recorded value"
    );
    assert!(
        !out.join("restore.json").exists(),
        "nothing left to restore"
    );

    let campaign = campaign(&out);
    let runs = campaign["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 4, "2 settings x 2 repetitions");
    // One calibration of the path, at full speed for the runs' one 1 s fast phase: at most
    // the link's 50 Mbit/s (5% more for a window's edges), and 5% of it the slow rate of
    // every run, as each run's reader was asked.
    let calibration = &campaign["calibrations"][0];
    assert_eq!(campaign["calibrations"].as_array().map(Vec::len), Some(1));
    assert_eq!(calibration["dir"], "calibration");
    assert_eq!(calibration["full_speed_ms"], 1000);
    let peak_bps = calibration["peak_bps"].as_f64().expect("peak");
    assert!((5e6..52.5e6).contains(&peak_bps), "{calibration}");
    assert!(out.join("calibration/reader.csv").is_file());
    let slow_bps = (peak_bps * 0.05).round();
    for run in runs {
        assert_eq!(
            run["settings"]["slow_rate_bps"].as_f64(),
            Some(slow_bps),
            "{run}"
        );
        assert_eq!(run["settings"]["slow_rate_basis"]["peak_bps"], peak_bps);
    }
    for run in runs {
        assert_eq!(run["status"], "complete", "{run}");
        let dir = out.join(run["dir"].as_str().unwrap());
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
        assert_eq!(meta["lab"]["configuration"], run["label"]);
        assert_eq!(meta["lab"]["repetition"], run["repetition"]);
        // The sysctls in force during the run, read on each side's own host.
        let lowat = &meta["lab"]["sysctls"]["sender"]["net.ipv4.tcp_notsent_lowat"];
        let expected = if run["settings"]["lowat_bytes"].is_null() {
            "777777"
        } else {
            "131072"
        };
        assert_eq!(lowat, expected, "{}", run["label"]);
        assert!(Path::new(&dir).join("reader.csv").is_file());
        check_capture(&dir.join("sender.pcap"));
        // Each host's own queues and CPUs, the sender's read on its host over ssh.
        assert_host_load_filled(&dir);
        let asked = &meta["config"]["slow_rate"]["chosen_by"];
        assert_eq!(asked["by"], "absolute");
        assert_eq!(
            asked["bytes_per_s"].as_f64(),
            Some((slow_bps / 8.0).floor())
        );
    }
    assert!(
        campaign["hosts"]["capture"]["tool"]
            .as_str()
            .is_some_and(|t| t.ends_with("/tcpdump")),
        "{}",
        campaign["hosts"]
    );
    // The reader crossed the emulated 40 ms path.
    let min_rtt_us = campaign["hosts"]["measured_min_rtt_us"]
        .as_u64()
        .expect("measured min RTT");
    assert!(
        (40_000..60_000).contains(&min_rtt_us),
        "min RTT {min_rtt_us} us on a 40 ms path"
    );
}

/// Also the other way to run: the receiver is the lab's own machine (`--receiver local`)
/// and the daemon is copied to the sender (`--install`); and `--pcap` with a sender whose
/// PATH has no tcpdump (said in one line; the runs go on).
#[test]
fn restore_repairs_a_campaign_whose_ssh_was_killed() {
    let Some((hosts, before)) = prepared(Some("tcpdump")) else {
        return;
    };
    let out = hosts.path("killed");
    let said = hosts.path("lab.stderr");
    let mut lab = hosts
        .lab(
            &out,
            Receiver::Local,
            &[
                "--lowat", "131072", "--fast", "4s", "--slow", "1s", "--cycles", "1", "--pcap",
            ],
        )
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&said).unwrap())
        .spawn()
        .expect("start oscil-lab");
    // Mid-run: the daemon is recorded (so it listens), the sender's lowat is changed and
    // the reader (here, on the lab's own machine) is writing.
    wait_for("the run to start", Duration::from_secs(60), || {
        assert!(lab.try_wait().unwrap().is_none(), "oscil-lab ended early");
        let text = std::fs::read_to_string(out.join("restore.json")).unwrap_or_default();
        let reading = out
            .join("runs/cubic_lowat-131072/rep-1/reader.csv")
            .exists();
        text.contains("\"pid\"") && reading
    });
    kill_with_children(&mut lab);
    let said = std::fs::read_to_string(&said).unwrap();
    let absent: Vec<&str> = said.lines().filter(|l| l.contains("tcpdump")).collect();
    assert_eq!(absent.len(), 1, "{said}");
    assert!(absent[0].contains("no tcpdump"), "{said}");
    assert!(
        campaign(&out)["hosts"]["capture"]["absent"].is_string(),
        "the campaign records the capture as absent"
    );
    // Its ssh control sockets (it had no chance to remove them).
    let _ = std::fs::remove_dir_all(std::env::temp_dir().join(format!("oscil-ssh-{}", lab.id())));
    let sender_lowat = run(
        "ip",
        &[
            "netns",
            "exec",
            &hosts.ns[0],
            "sysctl",
            "-n",
            "net.ipv4.tcp_notsent_lowat",
        ],
    );
    assert_eq!(sender_lowat, "131072", "the run's setting was left behind");

    // The campaign's temporary directories on the hosts (they hold its key); the "hosts"
    // share this machine's /tmp.
    let restore_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("restore.json")).unwrap()).unwrap();
    let temp_dirs: Vec<PathBuf> = restore_json["temp_dirs"]
        .as_array()
        .expect("temp_dirs")
        .iter()
        .map(|d| PathBuf::from(d["path"].as_str().unwrap()))
        .collect();
    assert_eq!(temp_dirs.len(), 2);
    assert!(temp_dirs.iter().all(|d| d.join("key").is_file()));
    let restore = Command::new("ip")
        .args(["netns", "exec", &hosts.ns[1]])
        .arg(workspace_bin("oscil-lab"))
        .arg("restore")
        .arg(&out)
        .status()
        .unwrap();
    assert!(restore.success());
    assert_eq!(
        hosts.sysctls(),
        before,
        "every sysctl back to its recorded value"
    );
    assert!(!out.join("restore.json").exists());
    assert!(
        !temp_dirs.iter().any(|d| d.exists()),
        "the key is gone from the hosts"
    );
    wait_for(
        "the campaign's daemon to be gone",
        Duration::from_secs(5),
        || daemons_in(&hosts.ns[0]) == 0,
    );

    // --resume (ssh options and all from campaign.json) reruns the killed run, keeping
    // what it left beside the new one, and puts every value back again; it reuses the
    // path's calibration, made before the killed run.
    let calibrations = campaign(&out)["calibrations"].clone();
    assert_eq!(
        calibrations.as_array().map(Vec::len),
        Some(1),
        "{calibrations}"
    );
    let resumed = hosts.resume(&out);
    assert!(resumed.success());
    assert_eq!(campaign(&out)["runs"][0]["status"], "complete");
    assert_eq!(campaign(&out)["calibrations"], calibrations);
    assert!(
        !out.join("calibration.attempt-1").exists(),
        "calibrated once"
    );
    let run_dir = out.join("runs/cubic_lowat-131072");
    assert!(
        run_dir.join("rep-1.attempt-1/run.json").is_file(),
        "the killed run's files"
    );
    assert!(run_dir.join("rep-1/reader.csv").is_file());
    assert_eq!(
        hosts.sysctls(),
        before,
        "back again after the resumed campaign"
    );
}

/// oscil-daemon processes in namespace `ns`.
fn daemons_in(ns: &str) -> usize {
    run("ip", &["netns", "pids", ns])
        .split_whitespace()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "oscil-daemon")
        })
        .count()
}

/// A header of `kind` declaring 64 GiB, as a hostile receiver would answer the lab's
/// `tar -cf - .` (the wrapper `ssh` below streams zeros after it, without end).
fn hostile_header(name: &str, kind: tar::EntryType) -> Vec<u8> {
    let mut header = tar::Header::new_gnu();
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.set_entry_type(kind);
    header.set_mode(0o644);
    header.set_size(64 << 30);
    header.set_cksum();
    header.as_bytes().to_vec()
}

/// A directory `wrapper/` holding an `ssh` that passes everything to the real one but the
/// lab's copy of a run directory (`tar -C DIR -cf - .`), which it answers with
/// `attack-<n>` (`n` counting the copies) and then zeros without end.
fn hostile_ssh(wrapper: &Path, attacks: &[Vec<u8>]) {
    std::fs::create_dir(wrapper).unwrap();
    for (n, attack) in attacks.iter().enumerate() {
        std::fs::write(wrapper.join(format!("attack-{n}")), attack).unwrap();
    }
    let dir = wrapper.display();
    let script = format!(
        "#!/bin/sh\nfor last; do :; done\ncase \"$last\" in\n*'tar -C '*' -cf - .')\n  \
         n=$(cat {dir}/count 2>/dev/null || echo 0); echo $((n + 1)) > {dir}/count\n  \
         cat {dir}/attack-$n; exec cat /dev/zero ;;\nesac\nexec /usr/bin/ssh \"$@\"\n"
    );
    let ssh = wrapper.join("ssh");
    std::fs::write(&ssh, script).unwrap();
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The most resident memory `pid` has had (`VmHWM`, kB), polled until it ends.
fn peak_rss_kb_until_exit(child: &mut Child) -> u64 {
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()));
        if let Some(kb) = status.ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        }) {
            peak = peak.max(kb);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    peak
}

/// `argv` as the unprivileged user `nobody`.
fn as_nobody(argv: &[&str]) {
    let mut args = vec!["--reuid=65534", "--regid=65534", "--clear-groups", "--"];
    args.extend(argv);
    run("setpriv", &args);
}

/// A local user (nobody) who may write `--remote-bin DIR` plants `oscil-daemon -> FILE`,
/// FILE root's: the lab refuses DIR, as it refuses a DIR that user owns (before, root's
/// `cat >` followed the link and FILE became the daemon's ELF). In a directory only root
/// may write, a link planted there is replaced by the binary, never followed. Root, sshd;
/// about 20 s (the daemon's 25 MB cross the 50 Mbit/s link).
#[test]
fn binaries_are_installed_only_where_no_one_else_writes_and_never_through_a_link() {
    let Some((hosts, before)) = prepared(None) else {
        return;
    };
    let place = tempfile::tempdir().unwrap();
    std::fs::set_permissions(place.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let precious = place.path().join("precious");
    std::fs::write(&precious, "root's own\n").unwrap();
    let open = place.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let planted = open.join("oscil-daemon");
    as_nobody(&[
        "ln",
        "-s",
        precious.to_str().unwrap(),
        planted.to_str().unwrap(),
    ]);
    let theirs = place.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    for (dir, why) in [
        (
            &open,
            format!(
                "{} is writable by group or others (mode 777); refused",
                open.display()
            ),
        ),
        (
            &theirs,
            format!(
                "{} is owned by uid 65534, neither root nor the ssh user; refused",
                theirs.display()
            ),
        ),
    ] {
        let name = dir.file_name().unwrap().to_string_lossy();
        let out = hosts.path(&format!("refused-{name}"));
        let output = hosts
            .lab(
                &out,
                Receiver::Local,
                &["--remote-bin", dir.to_str().unwrap()],
            )
            .output()
            .expect("run oscil-lab");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{stderr}");
        assert!(stderr.contains(&why), "{why}\n{stderr}");
    }
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "root's own\n");
    assert_eq!(
        std::fs::read_link(&planted).unwrap(),
        precious,
        "left as it was"
    );
    assert_eq!(hosts.sysctls(), before, "nothing changed on the hosts");

    let ours = place.path().join("ours");
    std::fs::create_dir(&ours).unwrap();
    std::os::unix::fs::symlink(&precious, ours.join("oscil-daemon")).unwrap();
    let out = hosts.path("installed");
    let status = hosts
        .lab(
            &out,
            Receiver::Local,
            &["--remote-bin", ours.to_str().unwrap()],
        )
        .args(["--lowat", "default", "--pattern", "full-speed"])
        .args(["--fast", "1s", "--slow", "0", "--cycles", "1"])
        .status()
        .expect("run oscil-lab");
    assert!(status.success(), "{status}");
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "root's own\n");
    let installed = std::fs::symlink_metadata(ours.join("oscil-daemon")).unwrap();
    assert!(installed.is_file(), "{installed:?}");
    assert_eq!(installed.permissions().mode() & 0o7777, 0o755);
    let leftovers: Vec<_> = std::fs::read_dir(&ours)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    assert_eq!(leftovers, ["oscil-daemon"], "no temporary file left");
    assert_eq!(hosts.sysctls(), before, "every sysctl back");
}

/// The receiver answers each copy of a run with a header declaring 64 GiB (a GNU long
/// name, a PAX header, a directory) and then zeros without end, through a wrapper `ssh`
/// on the lab's PATH: each run fails with one line and keeps nothing, and the lab's
/// memory stays a few MB (before: one byte per byte received, 3.13 GB after 3 GiB).
/// Root, sshd; about 20 s.
#[test]
fn a_hostile_copy_of_a_run_is_bytes_under_a_bound() {
    let Some((hosts, before)) = prepared(None) else {
        return;
    };
    let place = tempfile::tempdir().unwrap();
    let wrapper = place.path().join("wrapper");
    let kinds = [
        ("././@LongLink", tar::EntryType::GNULongName),
        ("./PaxHeaders/run", tar::EntryType::XHeader),
        ("./big/", tar::EntryType::Directory),
    ];
    let attacks: Vec<Vec<u8>> = kinds.iter().map(|(n, k)| hostile_header(n, *k)).collect();
    hostile_ssh(&wrapper, &attacks);
    let out = hosts.path("hostile");
    let path = format!(
        "{}:{}",
        wrapper.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = Instant::now();
    let mut lab = hosts
        .lab(
            &out,
            Receiver::Remote,
            &["--lowat", "default", "--repeat", "3", "--order", "grouped"],
        )
        .args(["--pattern", "full-speed"])
        .args(["--fast", "1s", "--slow", "0", "--cycles", "1"])
        .env("PATH", path)
        .stdout(Stdio::null())
        .spawn()
        .expect("start oscil-lab");
    let peak_kb = peak_rss_kb_until_exit(&mut lab);
    eprintln!(
        "3 hostile copies: the lab's peak RSS {peak_kb} kB, {:.1} s in all",
        started.elapsed().as_secs_f64()
    );
    // The lab's own memory, a few MB; a copy read whole would be gigabytes.
    assert!(peak_kb < 64 * 1024, "peak RSS {peak_kb} kB");
    let runs = campaign(&out)["runs"].as_array().expect("runs").clone();
    let whys = [
        "holds a GNU long name of 68719476736 bytes (at most 4096); refused, nothing kept",
        "holds a PAX header of 68719476736 bytes (at most 4096); refused, nothing kept",
        "holds more than",
    ];
    assert_eq!(runs.len(), 3);
    for (run, why) in runs.iter().zip(whys) {
        let reason = run["reason"].as_str().unwrap_or_default();
        assert_eq!(run["status"], "failed", "{run}");
        assert!(
            reason.contains(why) && !reason.contains('\n'),
            "{why}\n{reason}"
        );
        let dir = out.join(run["dir"].as_str().unwrap());
        assert!(!dir.exists(), "{} kept", dir.display());
        let kept: Vec<_> = std::fs::read_dir(dir.parent().unwrap())
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        assert!(kept.is_empty(), "{kept:?}");
    }
    assert_eq!(hosts.sysctls(), before, "every sysctl back");
}

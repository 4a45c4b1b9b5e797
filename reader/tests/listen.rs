//! A sender behind NAT: `oscil-daemon --connect` dials out of one namespace to an
//! `oscil-reader --listen` in another, over a veth pair the test makes. The daemon's
//! namespace has no listening socket at all; the session still completes with a key, and
//! the listening reader refuses a daemon without the key or with another one.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use oscil_testkit::{ip, lacks_root, unique, workspace_bin, Csv, Netns};

const READER_IP: &str = "10.231.0.1";
const DAEMON_IP: &str = "10.231.0.2";
const READER_AT: &str = "10.231.0.1:5250";

/// Two namespaces joined by a veth pair: the reader's and the daemon's.
struct Pair {
    reader: Netns,
    daemon: Netns,
}

impl Pair {
    fn new() -> Pair {
        let (reader, daemon) = (Netns::new("oscr-"), Netns::new("oscd-"));
        let (r_end, d_end) = (unique("vr"), unique("vd"));
        ip(&[
            "link", "add", &r_end, "netns", &reader.0, "type", "veth", "peer", "name", &d_end,
            "netns", &daemon.0,
        ]);
        for (ns, end, addr) in [(&reader, &r_end, READER_IP), (&daemon, &d_end, DAEMON_IP)] {
            ip(&[
                "-n",
                &ns.0,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                end,
            ]);
            ip(&["-n", &ns.0, "link", "set", end, "up"]);
        }
        Pair { reader, daemon }
    }

    fn command(ns: &Netns, binary: &str) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &ns.0])
            .arg(workspace_bin(binary))
            .env_remove("OSCIL_KEY");
        command
    }

    /// `oscil-reader --listen` in the reader's namespace (`ip netns exec` execs it: the
    /// child is the reader itself).
    fn listening_reader(&self, key: &Path, out: &Path) -> Child {
        Pair::command(&self.reader, "oscil-reader")
            .args([
                "--listen", READER_AT, "-P", "2", "--fast", "1s", "--slow", "1s",
            ])
            .args(["--cycles", "1", "--quiet", "--key-file"])
            .arg(key)
            .arg("-o")
            .arg(out)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start oscil-reader --listen")
    }

    fn dialing_daemon(&self, key_args: &[&str]) -> Child {
        Pair::command(&self.daemon, "oscil-daemon")
            .args(["--connect", READER_AT])
            .args(key_args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("start oscil-daemon --connect")
    }

    /// The TCP sockets listening in the daemon's namespace, as `ss` lists them.
    fn daemon_listening(&self) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.daemon.0, "ss", "-Htln"])
            .output()
            .expect("run ss");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

fn new_key(dir: &Path, name: &str) -> std::path::PathBuf {
    let out = Command::new(workspace_bin("oscil-daemon"))
        .arg("--gen-key")
        .output()
        .expect("oscil-daemon --gen-key");
    assert!(out.status.success());
    let path = dir.join(name);
    std::fs::write(&path, &out.stdout).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// Waits for `child` up to `limit`; past it, kills it (by its own handle) and fails.
fn wait_for(mut child: Child, limit: Duration, what: &str) -> Output {
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what} still running after {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("collect output")
}

#[test]
fn a_daemon_behind_nat_dials_out_to_a_listening_reader() {
    if lacks_root("network namespaces") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let key = new_key(dir.path(), "key");
    let key_arg = key.to_str().unwrap();
    let out = dir.path().join("run");
    let pair = Pair::new();
    // The daemon first: it tries again until the reader is there.
    let daemon = pair.dialing_daemon(&["--key-file", key_arg]);
    std::thread::sleep(Duration::from_millis(300));
    let reader = pair.listening_reader(&key, &out);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        pair.daemon_listening(),
        "",
        "the daemon's namespace listens on nothing"
    );
    let read = wait_for(reader, Duration::from_secs(30), "the reader");
    let served = wait_for(daemon, Duration::from_secs(15), "the daemon");
    let said = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(read.status.success(), "reader: {}", said(&read));
    assert!(served.status.success(), "daemon: {}", said(&served));
    for (file, side) in [("reader.csv", "reader"), ("sender.csv", "daemon")] {
        let rows = Csv::read(&out.join(file));
        let flows = rows.column("flow");
        for flow in [0.0, 1.0] {
            assert!(
                flows.contains(&flow),
                "{side}'s rows of flow {flow} in {file}"
            );
        }
    }
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["ending"]["status"], "complete", "{meta}");
}

#[test]
fn a_listening_reader_refuses_an_unkeyed_and_a_wrong_keyed_daemon() {
    if lacks_root("network namespaces") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let key = new_key(dir.path(), "key");
    let other = new_key(dir.path(), "other");
    let out = dir.path().join("run");
    let pair = Pair::new();
    let reader = pair.listening_reader(&key, &out);
    std::thread::sleep(Duration::from_millis(300));
    for daemon_key in [
        &["--insecure-no-auth"][..],
        &["--key-file", other.to_str().unwrap()],
    ] {
        let daemon = pair.dialing_daemon(daemon_key);
        let refused = wait_for(daemon, Duration::from_secs(15), "a refused daemon");
        assert!(!refused.status.success(), "{daemon_key:?} was served");
    }
    let pid = reader.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let read = wait_for(reader, Duration::from_secs(10), "the reader after SIGTERM");
    let stderr = String::from_utf8_lossy(&read.stderr);
    let refusals: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with(&format!("oscil-reader: refused a daemon from {DAEMON_IP}:")))
        .collect();
    assert_eq!(refusals.len(), 2, "one line per daemon: {stderr}");
    for line in refusals {
        assert!(line.contains("did not prove it holds the key"), "{line}");
    }
    assert!(!read.status.success(), "{stderr}");
    assert!(
        !out.join("run.json").exists(),
        "no run directory after refusals"
    );
}

//! `--trace` over loopback: with tracefs pointed at an empty directory the run completes,
//! writes no trace file and says why in run.json; with the kernel's tracefs (root) both
//! files are written, the daemon's `snd_una` advances by the bytes the reader's TCP
//! received, and no event is lost. The daemon's side is its own to refuse: an unkeyed
//! daemon traces nothing by default, a trace past `--trace-budget` is refused, in words the
//! reader prints; a daemon killed while tracing leaves no ring buffer, and the next one
//! removes what it left; a missing tracefs is mounted without running any `mount`.

mod util;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use oscil_testkit::{
    assert_trace_complete_but_for_probes, free_port, lacks_root, number, workspace_bin, Csv, Netns,
    TraceAgainstRecord,
};
use util::assert_success;

const TRACEFS_INSTANCES: &str = "/sys/kernel/tracing/instances";

/// A daemon started with `args` and `env`, its stderr in a file; killed when dropped.
struct Daemon {
    child: Child,
    addr: String,
    log: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    /// What it has written to stderr so far.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its tracefs instances (named for its PID; see `oscil_kernel::trace::tracefs::Owner`).
    fn instances(&self) -> Vec<PathBuf> {
        let mine = format!("_{}_", self.child.id());
        std::fs::read_dir(TRACEFS_INSTANCES)
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
            .into_iter()
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with("oscil_daemon_") && name.contains(&mine)
            })
            .collect()
    }
}

fn daemon(args: &[&str], env: &[(&str, &Path)], log: &Path) -> Daemon {
    let addr = format!("127.0.0.1:{}", free_port());
    let child = Command::new(workspace_bin("oscil-daemon"))
        .args(["--listen", &addr])
        .args(args)
        .envs(env.iter().copied())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("start oscil-daemon");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(Instant::now() < deadline, "oscil-daemon never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    Daemon {
        child,
        addr,
        log: log.to_owned(),
    }
}

/// The reader's `--trace` run of `pattern` against `daemon` into `out`.
fn traced_reader(daemon: &Daemon, out: &Path, pattern: &[&str]) -> Command {
    let mut command = Command::new(workspace_bin("oscil-reader"));
    command
        .args(["--connect", &daemon.addr, "--quiet", "--trace"])
        .args(pattern)
        .args(["--pacing-rate", "200mbit", "--out"])
        .arg(out);
    command
}

const SHORT: [&str; 6] = ["--fast", "1s", "--slow", "1s", "--cycles", "1"];

fn run_json(out: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join("run.json")).expect("run.json");
    serde_json::from_str(&text).expect("run.json parses")
}

/// A traced run of `--fast 1s --slow 1s --cycles 1` at 200 Mbit/s against a daemon that
/// traces any session: its run.json.
fn traced_run(out: &Path, env: &[(&str, &Path)]) -> serde_json::Value {
    let log = out.with_extension("daemon.log");
    let daemon = daemon(&["--trace", "allow"], env, &log);
    let output = traced_reader(&daemon, out, &SHORT)
        .envs(env.iter().copied())
        .output()
        .expect("run oscil-reader");
    assert_success(&output);
    run_json(out)
}

/// Polls `done` every 20 ms, failing the test after `limit`.
fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn without_tracefs_the_run_completes_and_says_why_there_is_no_trace() {
    let scratch = tempfile::tempdir().unwrap();
    let empty = scratch.path().join("no-tracefs");
    std::fs::create_dir(&empty).unwrap();
    let out = scratch.path().join("run");
    let meta = traced_run(&out, &[("OSCIL_TRACEFS", &empty)]);
    assert_eq!(meta["ending"]["status"], "complete", "{}", meta["ending"]);
    for side in ["sender", "reader"] {
        let facts = &meta["trace"][side];
        let why = facts["absent"][0].as_str().unwrap_or_default();
        assert!(
            why.contains("no tracefs") && why.contains("no-tracefs"),
            "{side}: {facts}"
        );
        assert_eq!(facts["tracepoints"].as_array().map(Vec::len), Some(0));
        assert!(!out.join(format!("trace-{side}.csv")).exists(), "{side}");
    }
    // The run's own files are all there.
    assert!(Csv::read(&out.join("sender.csv")).rows.len() >= 15);
}

#[test]
fn a_traced_run_follows_every_acknowledged_byte_and_loses_no_event() {
    if lacks_root("tracefs") {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("run");
    let meta = traced_run(&out, &[]);
    assert_eq!(meta["ending"]["status"], "complete", "{}", meta["ending"]);
    assert_trace_complete_but_for_probes(&meta["trace"]);
    let traced = TraceAgainstRecord::of(&out);
    assert!(
        traced.within_one_window(),
        "snd_una advanced {} bytes, the reader's TCP received {}, window {}",
        traced.una_advance_bytes,
        traced.delivered_bytes,
        traced.window_bytes
    );
    assert_eq!(
        meta["trace"]["sender"]["events"]["probe"].as_u64(),
        Some(traced.acks as u64)
    );
    let sender = Csv::read(&out.join("trace-sender.csv"));
    // Times are on the run's clock and in order.
    let times = sender.column("t_s");
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    assert!(times[0] >= 0.0 && *times.last().unwrap() < 4.0, "{times:?}");
    // The receiver's autotuning, traced as the kernel ran it: a measurement at every read
    // (`tcp_rcv_space_adjust`), and a step wherever one measured more copied than the space
    // it had (`tcp_rcvbuf_grow`), the buffer never shrinking. Whether it grows at all is the
    // kernel's call on how fast the reader kept up, which a loaded machine changes (CI once
    // saw no step), so the steps are checked, not counted.
    let reader = Csv::read(&out.join("trace-reader.csv"));
    let kind = |k: &'static str| reader.rows.iter().filter(move |r| r["kind"] == k);
    assert!(
        kind("rcv_space_adjust").next().is_some(),
        "no autotuning measurement traced while the reader read"
    );
    let mut last_rcvbuf: std::collections::BTreeMap<String, f64> = Default::default();
    for step in kind("rcvbuf_grow") {
        assert!(
            number(step, "copied") > number(step, "space"),
            "a step without more copied than its space: {step:?}"
        );
        let rcvbuf = number(step, "rcvbuf");
        let before = last_rcvbuf.insert(step["flow"].clone(), rcvbuf);
        assert!(
            before.is_none_or(|b| b <= rcvbuf),
            "rcvbuf shrank: {step:?}"
        );
    }
    eprintln!("{} autotuning steps", kind("rcvbuf_grow").count());
}

/// The unprivileged user's attempt of the issue: `--trace` of an unkeyed loopback daemon.
/// By default it traces nothing, says so at start, and the reader prints why. No root.
#[test]
fn an_unkeyed_daemon_traces_nothing_by_default_and_the_reader_says_why() {
    let scratch = tempfile::tempdir().unwrap();
    let daemon = daemon(&[], &[], &scratch.path().join("daemon.log"));
    let out = scratch.path().join("run");
    let output = traced_reader(&daemon, &out, &SHORT).output().unwrap();
    assert_success(&output);
    let why = "the daemon traces only keyed sessions (--trace keyed) and has no key";
    assert_eq!(run_json(&out)["trace"]["sender"]["absent"][0], why);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!("trace, sender: 0 events (none), 0 lost; {why}")),
        "{stdout}"
    );
    assert!(!out.join("trace-sender.csv").exists());
    let said = format!("oscil-daemon: traces: none: {why}");
    wait_for(
        "the daemon's word on traces",
        Duration::from_secs(5),
        || daemon.log().contains(&said),
    );
}

/// CPUs online, as `/sys/devices/system/cpu/online` lists them (`0-1,4`).
fn online_cpus() -> u64 {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    text.trim()
        .split(',')
        .map(|range| match range.split_once('-') {
            Some((a, b)) => b.parse::<u64>().unwrap() - a.parse::<u64>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

/// A budget of one trace (4 MiB on each CPU): a second traced session while the first
/// runs is refused in words the reader prints, and runs untraced; once the first is done,
/// the next is traced again. Root (tracefs); about 8 s.
#[test]
fn a_trace_past_the_budget_is_refused_in_words_and_its_room_comes_back() {
    if lacks_root("tracefs") {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let budget = format!("{}M", 4 * online_cpus());
    let daemon = daemon(
        &["--trace", "allow", "--trace-budget", &budget],
        &[],
        &scratch.path().join("daemon.log"),
    );
    let said = "traces: any session that asks (--trace allow), 1 at once, each 4096 KiB per CPU";
    wait_for(
        "the daemon's word on traces",
        Duration::from_secs(5),
        || daemon.log().contains(said),
    );
    let first = scratch.path().join("first");
    let long = ["--fast", "4s", "--slow", "1s", "--cycles", "1"];
    let mut running = traced_reader(&daemon, &first, &long)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the first trace", Duration::from_secs(10), || {
        !daemon.instances().is_empty()
    });
    let second = scratch.path().join("second");
    let output = traced_reader(&daemon, &second, &SHORT).output().unwrap();
    assert_success(&output);
    let why = format!(
        "the daemon's trace budget ({} MiB, --trace-budget) is taken by 1 traced sessions",
        4 * online_cpus()
    );
    assert_eq!(
        run_json(&second)["trace"]["sender"]["absent"][0],
        why.as_str()
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains(&why));
    assert!(running.wait().unwrap().success());
    assert!(run_json(&first)["trace"]["sender"].get("absent").is_none());
    let third = scratch.path().join("third");
    assert_success(&traced_reader(&daemon, &third, &SHORT).output().unwrap());
    assert!(run_json(&third)["trace"]["sender"].get("absent").is_none());
}

/// The number a tracefs file starts with (`8198` of `8198`, `14` of `14 (expanded: 2816)`);
/// 0 while it cannot be read.
fn read_number(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// SIGKILL while a session is traced: the kernel stops the daemon's instance and frees its
/// ring buffers at once (the issue saw 3 instances of 8 MiB stay enabled and filtering),
/// and the next daemon removes the empty instance, saying so. Root (tracefs); about 4 s.
#[test]
fn a_daemon_killed_while_tracing_leaves_no_ring_buffer_and_the_next_removes_its_instance() {
    if lacks_root("tracefs") {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let mut killed = daemon(
        &["--trace", "allow"],
        &[],
        &scratch.path().join("killed.log"),
    );
    let out = scratch.path().join("run");
    let long = ["--fast", "20s", "--slow", "1s", "--cycles", "1"];
    let mut reader = traced_reader(&killed, &out, &long)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Made, then sized: 4 MiB on each CPU (and a few pages more).
    let sized = |i: &PathBuf| read_number(&i.join("buffer_total_size_kb")) >= 4096 * online_cpus();
    wait_for("the daemon's trace", Duration::from_secs(10), || {
        killed.instances().first().is_some_and(sized)
    });
    let instance = killed.instances().remove(0);
    let traced_kb = read_number(&instance.join("buffer_total_size_kb"));
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    let _ = reader.wait();
    // The kernel's own doing, when the daemon's `free_buffer` closed with it.
    assert!(instance.is_dir(), "the directory stays for the next daemon");
    let left_kb = read_number(&instance.join("buffer_total_size_kb"));
    assert!(
        left_kb < traced_kb / 64,
        "{left_kb} KiB left of {traced_kb}"
    );
    assert_eq!(read_number(&instance.join("tracing_on")), 0);

    let next = daemon(&[], &[], &scratch.path().join("next.log"));
    let name = instance.file_name().unwrap().to_string_lossy().into_owned();
    let said = format!(
        "oscil-daemon: removed 1 trace instance(s) a killed oscil-daemon left in {TRACEFS_INSTANCES}: {name}"
    );
    wait_for("the next daemon's word", Duration::from_secs(5), || {
        next.log().contains(&said)
    });
    assert!(!instance.exists(), "{}", next.log());
}

/// In a fresh namespace (`ip netns exec` mounts a /sys without tracefs) with a `mount` on
/// the PATH that would leave a mark: the trace works, and the mark is never left. Root;
/// about 3 s.
#[test]
fn a_missing_tracefs_is_mounted_by_the_system_call_never_a_mount_on_the_path() {
    if lacks_root("network namespaces, tracefs") {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let fake = scratch.path().join("bin");
    std::fs::create_dir(&fake).unwrap();
    let mark = scratch.path().join("mount-ran");
    let mount = fake.join("mount");
    std::fs::write(
        &mount,
        format!("#!/bin/sh\ntouch {}\nexit 1\n", mark.display()),
    )
    .unwrap();
    std::fs::set_permissions(&mount, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let ns = Netns::new("oscil-mnt-");
    let path = format!(
        "{}:{}",
        fake.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let port = free_port().to_string();
    let daemon = Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .arg(workspace_bin("oscil-daemon"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--trace", "allow"])
        .env("PATH", &path)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let daemon = KillOnDrop(daemon);
    wait_for("the daemon to listen", Duration::from_secs(10), || {
        let ss = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns.0,
                "ss",
                "-Hltn",
                &format!("sport = :{port}"),
            ])
            .output()
            .unwrap();
        !ss.stdout.is_empty()
    });
    let out = scratch.path().join("run");
    let output = Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .arg(workspace_bin("oscil-reader"))
        .args([
            "--connect",
            &format!("127.0.0.1:{port}"),
            "--quiet",
            "--trace",
        ])
        .args(SHORT)
        .arg("--out")
        .arg(&out)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_success(&output);
    drop(daemon);
    assert_trace_complete_but_for_probes(&run_json(&out)["trace"]);
    assert!(!mark.exists(), "a mount found on the PATH ran");
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

//! Helpers for oscil's end-to-end tests. They run the workspace's real binaries, and read
//! CSV files as plain text so that a test's expected figures never come from the code
//! under test.

mod skip;
pub mod sshd;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub use skip::{is_root, lacks_root, skip, NO_SKIP_ENV};

/// Unique name: prefix, our PID and a counter, short enough for an interface name, so
/// tests running at once (here or in another checkout) never collide.
pub fn unique(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}{}x{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The directory holding the workspace's binaries: a test runs from
/// `target/<profile>/deps/`, and cargo puts every binary in `target/<profile>/`.
pub fn bin_dir() -> PathBuf {
    std::env::current_exe()
        .expect("test executable path")
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_owned()
}

/// A workspace binary; fails the test with a hint when it is not built.
pub fn workspace_bin(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} is not built; run the tests with `cargo test --workspace`, which builds every binary",
        path.display()
    );
    path
}

/// Runs `ip` with `args`; fails the test if it fails.
pub fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("run ip");
    assert!(status.success(), "ip {args:?} failed");
}

/// A network namespace with its loopback up, deleted (with every process in it) on drop.
/// Making one needs root.
pub struct Netns(pub String);

impl Netns {
    pub fn new(prefix: &str) -> Netns {
        let name = unique(prefix);
        ip(&["netns", "add", &name]);
        let ns = Netns(name);
        ip(&["-n", &ns.0, "link", "set", "lo", "up"]);
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Ok(out) = Command::new("ip").args(["netns", "pids", &self.0]).output() {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = Command::new("kill").arg(pid).status();
            }
        }
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// oscil-daemon on a loopback port, killed (by its own handle) when dropped.
pub struct Daemon {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Daemon {
    /// Started on port 0: the daemon binds a free port itself and says which in its
    /// `--port-file`, so no other process can take the port between a choice and the bind.
    pub fn start(extra_args: &[&str]) -> Daemon {
        let port_file = std::env::temp_dir().join(unique("oscil-daemon-port-"));
        let mut child = Command::new(workspace_bin("oscil-daemon"))
            .args(["--listen", "127.0.0.1:0", "--port-file"])
            .arg(&port_file)
            .args(extra_args)
            .stderr(Stdio::null())
            .spawn()
            .expect("start oscil-daemon");
        // Generous: the daemon binds at once, but a loaded machine may be slow to start it.
        let deadline = Instant::now() + Duration::from_secs(30);
        let port = loop {
            let text = std::fs::read_to_string(&port_file).unwrap_or_default();
            if let Ok(port) = text.trim_end().parse::<u16>() {
                let _ = std::fs::remove_file(&port_file);
                break port;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("oscil-daemon exited before listening ({status})");
            }
            assert!(
                Instant::now() < deadline,
                "oscil-daemon said no port in 30 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        Daemon { child, addr }
    }

    /// Kills with SIGKILL: the daemon gets no chance to say goodbye.
    pub fn kill(&mut self) {
        self.child.kill().expect("kill oscil-daemon");
        self.child.wait().expect("reap oscil-daemon");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Checks the hosts' own load in a run's `host.csv`: every row of both sides has the egress
/// qdisc's and softnet's figures, and at least three rows in four the CPUs' (read at most
/// every 90 ms, so a run's last, partial row may have none), each a share within 0..=100.
pub fn assert_host_load_filled(run: &Path) {
    let rows = Csv::read(&run.join("host.csv")).rows;
    for side in ["reader", "sender"] {
        let rows: Vec<_> = rows.iter().filter(|r| r["side"] == side).collect();
        assert!(!rows.is_empty(), "{}: no {side} rows", run.display());
        for row in &rows {
            for column in [
                "qdisc_backlog_bytes",
                "qdisc_backlog_packets",
                "qdisc_drops",
                "qdisc_requeues",
                "softnet_dropped",
                "softnet_time_squeeze",
            ] {
                assert!(number(row, column) >= 0.0, "{side} {column}");
            }
        }
        let with_cpu: Vec<_> = rows
            .iter()
            .filter(|r| !r["cpu_busy_max_pct"].is_empty())
            .collect();
        assert!(
            with_cpu.len() * 4 >= rows.len() * 3,
            "{side}: CPU figures on {} of {} rows",
            with_cpu.len(),
            rows.len()
        );
        for row in with_cpu {
            let (max, mean) = (
                number(row, "cpu_busy_max_pct"),
                number(row, "cpu_busy_mean_pct"),
            );
            assert!(
                (0.0..=100.0).contains(&max) && (0.0..=max).contains(&mean),
                "{side}: CPU busy max {max}, mean {mean}"
            );
        }
    }
}

/// A CSV file as rows of column name -> text.
pub struct Csv {
    pub rows: Vec<HashMap<String, String>>,
}

impl Csv {
    pub fn read(path: &Path) -> Csv {
        let fail = |e: &dyn std::fmt::Display| -> ! { panic!("{}: {e}", path.display()) };
        let mut reader = csv::Reader::from_path(path).unwrap_or_else(|e| fail(&e));
        let header = reader.headers().unwrap_or_else(|e| fail(&e)).clone();
        let rows = reader
            .records()
            .map(|record| {
                let record = record.unwrap_or_else(|e| fail(&e));
                header
                    .iter()
                    .map(str::to_owned)
                    .zip(record.iter().map(str::to_owned))
                    .collect()
            })
            .collect();
        Csv { rows }
    }

    /// Column `name` of every row, parsed as a number.
    pub fn column(&self, name: &str) -> Vec<f64> {
        self.rows.iter().map(|row| number(row, name)).collect()
    }
}

/// Field `name` of a row, parsed as a number.
pub fn number(row: &HashMap<String, String>, name: &str) -> f64 {
    let text = row
        .get(name)
        .unwrap_or_else(|| panic!("no column {name:?}"));
    text.parse()
        .unwrap_or_else(|e| panic!("column {name:?} value {text:?}: {e}"))
}

/// A traced run (`--trace`) against its own record: how far the daemon's `snd_una`
/// advanced over its `tcp_probe` rows (summing each step's difference modulo 2^32, as
/// sequence numbers wrap), the bytes the reader's TCP received (reader.csv
/// `delivered_bytes`), and the largest window the sender was offered.
pub struct TraceAgainstRecord {
    pub una_advance_bytes: f64,
    pub delivered_bytes: f64,
    pub window_bytes: f64,
    pub acks: usize,
}

impl TraceAgainstRecord {
    pub fn of(run: &Path) -> TraceAgainstRecord {
        let trace = Csv::read(&run.join("trace-sender.csv"));
        let acks: Vec<&HashMap<String, String>> =
            trace.rows.iter().filter(|r| r["kind"] == "probe").collect();
        let una: Vec<u32> = acks
            .iter()
            .map(|r| r["snd_una"].parse().expect("snd_una"))
            .collect();
        let una_advance_bytes = una
            .windows(2)
            .map(|w| f64::from(w[1].wrapping_sub(w[0])))
            .sum();
        let window_bytes = acks
            .iter()
            .map(|r| number(r, "snd_wnd"))
            .fold(0.0, f64::max);
        let delivered_bytes = Csv::read(&run.join("reader.csv"))
            .column("delivered_bytes")
            .iter()
            .sum();
        TraceAgainstRecord {
            una_advance_bytes,
            delivered_bytes,
            window_bytes,
            acks: acks.len(),
        }
    }

    /// Whether `snd_una` advanced by the bytes delivered, within one window.
    pub fn within_one_window(&self) -> bool {
        (self.una_advance_bytes - self.delivered_bytes).abs() <= self.window_bytes
    }
}

/// Checks a traced run's `run.json` `trace` facts: no event lost on either side, nothing
/// absent on the sender's, and on the reader's nothing but the collapse and prune probes,
/// which need kprobe events (the development kernel has none: then the one line says so).
pub fn assert_trace_complete_but_for_probes(trace: &serde_json::Value) {
    for side in ["sender", "reader"] {
        let facts = &trace[side];
        assert_eq!(facts["lost_events"], 0, "{side}: {facts}");
    }
    let sender = &trace["sender"];
    assert!(sender.get("absent").is_none(), "{sender}");
    let reader = &trace["reader"];
    let absent: Vec<&str> = reader["absent"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    assert!(
        absent
            .iter()
            .all(|why| why.contains("tcp_collapse") || why.contains("tcp_prune")),
        "{reader}"
    );
    if !Path::new("/sys/kernel/tracing/kprobe_events").exists() {
        assert!(
            absent.len() == 1 && absent[0].contains("the kernel has no kprobe events"),
            "{reader}"
        );
    }
}

/// The first picture of `kind` that a report's `report.json` lists (in `report_dir`), with
/// its file checked to exist.
pub fn report_figure(report_dir: &Path, kind: &str) -> serde_json::Value {
    let path = report_dir.join("report.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let manifest: serde_json::Value = serde_json::from_str(&text).expect("report.json is JSON");
    let picture = manifest["figures"]
        .as_array()
        .expect("figures")
        .iter()
        .find(|f| f["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} picture in {}", path.display()))
        .clone();
    let file = picture["file"].as_str().expect("a file name");
    assert!(report_dir.join(file).is_file(), "{file} listed but absent");
    picture
}

/// `promtool check metrics` (Debian's prometheus) on every `.prom` file in `dir`, which
/// must hold some: each must pass Prometheus' own parser and lint. The files' text, by
/// name; `None` (having said why, a failure under `OSCIL_REQUIRE_ROOT`) without promtool.
pub fn promtool_checked(dir: &Path) -> Option<Vec<(String, String)>> {
    if Command::new("promtool").arg("--version").output().is_err() {
        skip("no promtool (apt-get install prometheus)");
        return None;
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "prom"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .prom file in {}", dir.display());
    let mut texts = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut child = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run promtool");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool check metrics {}: {}{}",
            file.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        texts.push((name, text));
    }
    Some(texts)
}

/// The value of the first sample of `metric` in OpenMetrics `text` whose labels include
/// every `key="value"` of `labels`.
pub fn openmetrics_value(text: &str, metric: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.strip_prefix(metric)?.strip_prefix('{'))
        .find(|l| labels.iter().all(|kv| l.contains(kv)))
        .and_then(|l| l.rsplit_once(' ')?.1.parse().ok())
}

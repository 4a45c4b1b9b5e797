//! Helpers for oscil's end-to-end tests. They run the workspace's real binaries, and read
//! CSV files as plain text so that a test's expected figures never come from the code
//! under test.

pub mod sshd;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Set by CI, which runs as root with every package the tests need: there a skip is a
/// failure, so a test that cannot run never passes silently.
pub const NO_SKIP_ENV: &str = "OSCIL_REQUIRE_ROOT";

/// Says why a test does not run here, or fails it where skipping is not allowed.
pub fn skip(reason: &str) {
    if std::env::var_os(NO_SKIP_ENV).is_some() {
        panic!("this test would skip ({reason}), and {NO_SKIP_ENV} is set");
    }
    eprintln!("skipped: {reason}");
}

/// True (after saying so) when a test that needs root must skip.
pub fn lacks_root(what: &str) -> bool {
    if is_root() {
        return false;
    }
    skip(&format!("needs root ({what})"));
    true
}

/// Whether we run as root.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

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
    pub fn start(extra_args: &[&str]) -> Daemon {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
        let child = Command::new(workspace_bin("oscil-daemon"))
            .arg("--listen")
            .arg(addr.to_string())
            .args(extra_args)
            .stderr(Stdio::null())
            .spawn()
            .expect("start oscil-daemon");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "oscil-daemon never listened on {addr}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
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

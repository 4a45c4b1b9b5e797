//! Helpers for the reader's end-to-end tests: the real daemon binary on loopback, the real
//! reader binary, and a plain CSV reader that knows nothing of oscil's own types.

#![allow(dead_code)] // each test file uses its own share of these

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A workspace binary, built beside this test's own executable.
pub fn workspace_bin(name: &str) -> PathBuf {
    let dir = std::env::current_exe()
        .expect("test executable path")
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_owned();
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is not built; run the tests with `cargo test --workspace` so every binary is built",
        path.display()
    );
    path
}

pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// oscil-daemon on a loopback port, killed when dropped.
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

pub fn reader() -> Command {
    Command::new(workspace_bin("oscil-reader"))
}

/// Runs the reader to completion with a short pattern unless the args say otherwise.
pub fn run_reader(daemon: &Daemon, out: &Path, extra_args: &[&str]) -> Output {
    reader()
        .arg("--connect")
        .arg(daemon.addr.to_string())
        .arg("--out")
        .arg(out)
        .arg("--quiet")
        .args(extra_args)
        .output()
        .expect("run oscil-reader")
}

pub fn assert_success(output: &Output) {
    assert!(
        output.status.success(),
        "oscil-reader failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A CSV file as rows of column name -> text.
pub struct Csv {
    pub rows: Vec<HashMap<String, String>>,
}

impl Csv {
    pub fn read(path: &Path) -> Csv {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut lines = text.lines();
        let header: Vec<String> = lines
            .next()
            .expect("a header line")
            .split(',')
            .map(str::to_owned)
            .collect();
        let rows = lines
            .map(|line| {
                header
                    .iter()
                    .cloned()
                    .zip(line.split(',').map(str::to_owned))
                    .collect()
            })
            .collect();
        Csv { rows }
    }

    /// Column `name` of every row, parsed as a number.
    pub fn column(&self, name: &str) -> Vec<f64> {
        self.rows
            .iter()
            .map(|row| {
                row.get(name)
                    .unwrap_or_else(|| panic!("no column {name}"))
                    .parse()
                    .unwrap_or_else(|e| panic!("column {name}: {e}"))
            })
            .collect()
    }
}

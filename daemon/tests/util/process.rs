//! The daemon binary as a child process, for tests that need its own open-files limit.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The daemon as a child process, with `ulimit -n NOFILE` (soft and hard), its stderr lines
/// collected.
pub struct DaemonProcess {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: mpsc::Receiver<String>,
    /// The line that says where it listens (and its open-files budget).
    pub listening: String,
}

impl DaemonProcess {
    /// Starts `oscil-daemon --listen 127.0.0.1:0 ARGS` under `ulimit -n nofile`.
    pub fn start(nofile: u64, args: &[&OsStr]) -> Self {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\""))
            .arg(env!("CARGO_BIN_EXE_oscil-daemon"))
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("start oscil-daemon");
        let (tx, log) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let (addr, listening) = loop {
            let line = log
                .recv_timeout(Duration::from_secs(10))
                .expect("oscil-daemon says where it listens");
            if let Some(addr) = line.strip_prefix("oscil-daemon: listening on ") {
                let addr = addr.split_whitespace().next().unwrap().parse().unwrap();
                break (addr, line);
            }
        };
        DaemonProcess {
            child,
            addr,
            log,
            listening,
        }
    }

    /// A field of `/proc/PID/status`, in its unit (kB for VmRSS).
    pub fn status(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with(field)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    pub fn rss_kib(&self) -> u64 {
        self.status("VmRSS:")
    }

    pub fn open_fds(&self) -> u64 {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id())).map_or(0, |d| d.count() as u64)
    }

    /// CPU time used so far, user plus system, in clock ticks (1/100 s).
    pub fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }

    pub fn nofile_limit(&self) -> String {
        let limits = std::fs::read_to_string(format!("/proc/{}/limits", self.child.id())).unwrap();
        let line = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .unwrap();
        line.split_whitespace()
            .skip(3)
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

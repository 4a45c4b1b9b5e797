//! Helpers for tests that need real network namespaces joined by oscil-link.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub const ADDR_A: &str = "10.77.0.1";
pub const ADDR_B: &str = "10.77.0.2";

pub use oscil_testkit::{ip, lacks_root, Netns};

#[macro_export]
macro_rules! require_root {
    () => {
        if common::lacks_root("network namespaces, TUN devices") {
            return;
        }
    };
}

/// One emulator at a time per test binary: the tests judge its timing, and on two cores
/// eight emulators with their senders and readers in parallel judge the scheduler instead.
static ONE_LINK_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Two namespaces, A (10.77.0.1) and B (10.77.0.2), with a persistent TUN `osl0` each,
/// joined by a running oscil-link. Stopped and removed on drop.
pub struct LinkedPair {
    pub a: Netns,
    pub b: Netns,
    link: Option<Child>,
    pub stats_path: PathBuf,
    _alone: MutexGuard<'static, ()>,
}

impl LinkedPair {
    /// Starts oscil-link with `args` (e.g. `["--rate", "20mbit", "--delay", "25ms"]`).
    pub fn start(args: &[&str]) -> LinkedPair {
        // A test that failed while holding the lock leaves nothing behind to protect.
        let alone = ONE_LINK_AT_A_TIME
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let a = Netns::new("olA");
        let b = Netns::new("olB");
        for (ns, addr) in [(&a, ADDR_A), (&b, ADDR_B)] {
            ip(&[
                "-n", &ns.0, "tuntap", "add", "dev", "osl0", "mode", "tun", "vnet_hdr",
            ]);
            ip(&[
                "-n",
                &ns.0,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "osl0",
            ]);
            ip(&[
                "-n",
                &ns.0,
                "link",
                "set",
                "osl0",
                "up",
                "txqueuelen",
                "1000",
            ]);
        }
        let stats_path = std::env::temp_dir().join(format!("{}.json", a.0));
        let link = Command::new(env!("CARGO_BIN_EXE_oscil-link"))
            .args(["--a-netns", &a.0, "--b-netns", &b.0])
            .args(["--a-dev", "osl0", "--b-dev", "osl0", "--stats"])
            .arg(&stats_path)
            .args(args)
            .stdin(Stdio::null())
            .spawn()
            .expect("start oscil-link");
        let pair = LinkedPair {
            a,
            b,
            link: Some(link),
            stats_path,
            _alone: alone,
        };
        pair.wait_for_carrier();
        pair
    }

    /// The TUN reports carrier once the emulator has attached to it.
    fn wait_for_carrier(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        for ns in [&self.a, &self.b] {
            loop {
                let out = Command::new("ip")
                    .args(["-n", &ns.0, "-o", "link", "show", "osl0"])
                    .output()
                    .expect("ip link show");
                if String::from_utf8_lossy(&out.stdout).contains("LOWER_UP") {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "oscil-link did not attach to {}",
                    ns.0
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// Stops the emulator (SIGTERM) and returns the statistics it wrote.
    pub fn stop(&mut self) -> serde_json::Value {
        let mut child = self.link.take().expect("link still running");
        let _ = Command::new("kill").arg(child.id().to_string()).status();
        let status = child.wait().expect("wait for oscil-link");
        assert!(status.success(), "oscil-link exited with {status}");
        let text = std::fs::read_to_string(&self.stats_path).expect("stats file");
        serde_json::from_str(&text).expect("stats JSON")
    }
}

impl Drop for LinkedPair {
    fn drop(&mut self) {
        if let Some(mut child) = self.link.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(&self.stats_path);
    }
}

/// Runs `f` on a new thread inside namespace `ns`, where its sockets will live.
pub fn spawn_in<T: Send + 'static>(
    ns: &Netns,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let name = ns.0.clone();
    std::thread::spawn(move || {
        oscil_link::enter_netns(&name).expect("enter namespace");
        f()
    })
}

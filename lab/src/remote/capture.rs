//! A packet capture on a real host (`oscil-lab --pcap` over ssh): tcpdump on the data
//! connections' port, headers only and bounded in packets, started once the daemon listens,
//! stopped by its PID when the run ends, and copied back into the run's directory. Where
//! the host has no tcpdump, it is said once and the runs go on without.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Stdio;

use crate::campaign::error::LabError;
use crate::remote::host::{Host, Proc};

/// The file each run's capture becomes in its run directory.
pub const FILE: &str = "sender.pcap";

/// Bytes kept of each packet: the link header tcpdump's `any` device adds (20), IPv6's
/// (40) and TCP's with every option (60) fit; no payload does.
pub const SNAP_BYTES: u32 = 128;

/// Packets a run's capture stops at: about a minute of a 10 Gbit/s flow's TSO segments,
/// and at most `MAX_BYTES` on disk.
pub const MAX_PACKETS: u64 = 500_000;

/// The most a capture file can hold: each packet's record header (16) and snap length,
/// and the file's own header.
pub const MAX_BYTES: u64 = MAX_PACKETS * (16 + SNAP_BYTES as u64) + 4096;

/// What a host has for capturing: tcpdump at a path, or nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum Capturer {
    Tcpdump(String),
    Absent,
}

impl Capturer {
    /// Looks for tcpdump on `host`'s PATH; when absent, says so in one line.
    pub fn find(host: &Host) -> Capturer {
        match host.run(&["sh", "-c", "command -v tcpdump"]) {
            Ok(path) if path.starts_with('/') => Capturer::Tcpdump(path),
            _ => {
                crate::campaign::ui::say(&format!(
                    "oscil-lab: {}: no tcpdump on the PATH; the runs go on without a packet capture",
                    host.name()
                ));
                Capturer::Absent
            }
        }
    }

    /// What `campaign.json` records of it.
    pub fn facts(&self) -> serde_json::Value {
        match self {
            Capturer::Tcpdump(path) => serde_json::json!({
                "tool": path, "file": FILE, "snap_bytes": SNAP_BYTES, "max_packets": MAX_PACKETS,
            }),
            Capturer::Absent => serde_json::json!({"absent": "no tcpdump on the sender's PATH"}),
        }
    }

    /// Starts capturing TCP on `port` into `file` on `host` (as root: tcpdump keeps its
    /// privileges, so it can write where the lab's work directory is); `None` without
    /// tcpdump.
    pub fn start(
        &self,
        host: &Host,
        port: u16,
        file: &str,
        log: &Path,
    ) -> Result<Option<Proc>, LabError> {
        let Capturer::Tcpdump(tcpdump) = self else {
            return Ok(None);
        };
        let (snap, count, port) = (
            SNAP_BYTES.to_string(),
            MAX_PACKETS.to_string(),
            port.to_string(),
        );
        let argv = [
            tcpdump.as_str(),
            "-i",
            "any",
            "-n",
            "-U",
            "-Z",
            "root",
            "-s",
            &snap,
            "-c",
            &count,
            "-w",
            file,
            "tcp",
            "port",
            &port,
        ];
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|source| LabError::io("cannot write", log.into(), source))?;
        let mut proc = host.spawn(&argv, &log_file)?;
        // tcpdump says "listening on" once its filter is in place; a little wait for it
        // so the run's first packets are in the file.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if proc.try_wait().is_some() {
                return Err(LabError::Setup(format!(
                    "{}: tcpdump ended at once (see {})",
                    host.name(),
                    log.display()
                )));
            }
            let said = std::fs::read_to_string(log).unwrap_or_default();
            if said.contains("listening on") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Ok(Some(proc))
    }
}

/// Copies a stopped capture's `file` from `host` into `run_dir` (at most [`MAX_BYTES`])
/// and removes it there. (Stopped by its PID with SIGTERM, on which tcpdump writes out
/// what it holds.)
pub fn fetch(host: &Host, file: &str, run_dir: &Path) -> Result<(), LabError> {
    let mut cat = host
        .command(&["cat", file])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| LabError::io("cannot run", "ssh".into(), e))?;
    let mut bytes = Vec::new();
    let read = cat
        .stdout
        .take()
        .expect("piped")
        .take(MAX_BYTES + 1)
        .read_to_end(&mut bytes);
    let _ = cat.kill();
    let _ = cat.wait();
    read.map_err(|e| LabError::io("cannot read", file.into(), e))?;
    let _ = host.run(&["rm", "-f", file]);
    if bytes.len() as u64 > MAX_BYTES {
        return Err(LabError::Setup(format!(
            "{}: {file} is over its bound of {MAX_BYTES} bytes",
            host.name()
        )));
    }
    std::fs::create_dir_all(run_dir).map_err(|e| LabError::io("cannot make", run_dir.into(), e))?;
    let path = run_dir.join(FILE);
    oscil_rundir::safe_fs::create_new(&path, 0o644)?
        .write_all(&bytes)
        .map_err(|e| LabError::io("cannot write", path.clone(), e))
}

//! The report tests' helpers: real runs over loopback, the report binary, and the
//! summary's figures computed here from the run directory's text, never by the code under
//! test.

#![allow(dead_code)] // each test file uses its own share of these

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use oscil_model::campaign::{Backend, Campaign, CampaignRun, Order, CAMPAIGN_FORMAT_VERSION};
use oscil_testkit::{number, workspace_bin, Csv, Daemon};
use serde_json::Value;

pub const MIB: f64 = 1024.0 * 1024.0;

/// One real reader run over loopback into `dir`.
pub fn reader_run(daemon: &Daemon, dir: &Path, label: &str, extra: &[&str]) {
    let out = Command::new(workspace_bin("oscil-reader"))
        .args(["--connect", &daemon.addr.to_string(), "--out"])
        .arg(dir)
        .args(["--quiet", "--label", label])
        .args(extra)
        .output()
        .expect("run oscil-reader");
    assert!(out.status.success(), "oscil-reader {label}: {out:?}");
}

/// Real reader runs over loopback against one daemon, each `(name, reader arguments)`
/// into `<scratch>/<name>` with the label `label(name)`; the scratch directory and the
/// runs' directories.
pub fn real_runs(
    runs: &[(String, Vec<&str>)],
    label: impl Fn(&str) -> String,
) -> (tempfile::TempDir, Vec<std::path::PathBuf>) {
    // Some runs are traced (--trace): this daemon traces any session.
    let daemon = Daemon::start(&["--trace", "allow"]);
    let scratch = tempfile::tempdir().expect("scratch dir");
    let dirs = runs
        .iter()
        .map(|(name, args)| {
            let dir = scratch.path().join(name);
            reader_run(&daemon, &dir, &label(name), args);
            dir
        })
        .collect();
    (scratch, dirs)
}

pub fn report(args: &[&Path], out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_oscil-report"))
        .args(args)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .expect("run oscil-report")
}

/// A campaign.json holding `runs`.
pub fn plan(runs: Vec<CampaignRun>, repeat: u32) -> Campaign {
    Campaign {
        format_version: CAMPAIGN_FORMAT_VERSION,
        software: "campaign test".into(),
        created_unix_ms: 1,
        backend: Backend::Hosts,
        sender: "127.0.0.1".into(),
        receiver: "127.0.0.1".into(),
        order: Order::Grouped,
        seed: 1,
        repeat,
        runs,
        hosts: None,
        calibrations: Vec::new(),
    }
}

/// Width and height from a PNG's signature and IHDR chunk.
pub fn png_size(path: &Path) -> (u32, u32) {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is not a PNG",
        path.display()
    );
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

/// The summary's figures over the spans of the schedule whose cycle `cycles` accepts,
/// from a run directory's text. Definitions: a sample belongs to the span holding the
/// middle of the interval that ends at it (a reader row after the end, to the last span);
/// network goodput of a phase = 8 x the bytes TCP delivered in its rows (`delivered_bytes`)
/// / its length in the schedule; the read rate likewise of the bytes read;
/// queued = wmem_queued summed over the flows of each sampling tick; RTT over sender rows
/// with an estimate; TCP memory = peak sender-side sockstat pages x page size, and the peak
/// of the sender namespace's `tcp_mem_ns_bytes`; the smallest safe lowat = 2 x the fast
/// phases' network goodput in bytes/s x their rows' largest `wake_to_write_max_us`; the most
/// not-sent bytes at a wake-up = the largest `wake_notsent_max_bytes` (both empty without
/// wake-ups).
pub struct Expected {
    pub net_goodput_fast_mbps: f64,
    pub net_goodput_slow_mbps: f64,
    pub read_fast_mbps: f64,
    pub read_slow_mbps: f64,
    pub slow_queued_peak_mib: f64,
    pub slow_queued_mean_mib: f64,
    pub tcp_mem_peak_sender_mib: f64,
    pub tcp_mem_ns_peak_sender_mib: f64,
    pub rtt_slow_mean_ms: f64,
    pub rtt_min_ms: f64,
    pub safe_lowat_bytes: Option<f64>,
    pub pollout_notsent_max_bytes: Option<f64>,
}

struct Span {
    cycle: u32,
    phase: String,
    start: f64,
    end: f64,
}

pub fn expected(dir: &Path, cycles: impl Fn(u32) -> bool) -> Expected {
    let meta: Value =
        serde_json::from_str(&fs::read_to_string(dir.join("run.json")).unwrap()).expect("run.json");
    let interval_s = meta["config"]["interval_us"].as_f64().unwrap() / 1e6;
    let spans: Vec<Span> = meta["schedule"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| Span {
            cycle: s["cycle"].as_u64().unwrap() as u32,
            phase: s["phase"].as_str().unwrap().to_string(),
            start: s["start_s"].as_f64().unwrap(),
            end: s["end_s"].as_f64().unwrap(),
        })
        .collect();
    let span_of = |t_s: f64| {
        let middle = t_s - interval_s / 2.0;
        spans.iter().find(|s| s.start <= middle && middle < s.end)
    };
    // (phase, kept) of a sample: in a span of an accepted cycle.
    let in_phase =
        |t_s: f64, phase: &str| span_of(t_s).is_some_and(|s| s.phase == phase && cycles(s.cycle));
    let in_kept = |t_s: f64| span_of(t_s).is_some_and(|s| cycles(s.cycle));
    let length_of = |phase: &str| -> f64 {
        spans
            .iter()
            .filter(|s| s.phase == phase && cycles(s.cycle))
            .map(|s| s.end - s.start)
            .sum()
    };
    let last = spans.last().unwrap();
    let reader = Csv::read(&dir.join("reader.csv")).rows;
    let sum_of = |column: &str, phase: &str| -> f64 {
        reader
            .iter()
            .filter(|r| {
                let t = number(r, "t_s");
                in_phase(t, phase)
                    || (span_of(t).is_none()
                        && t >= last.end
                        && last.phase == phase
                        && cycles(last.cycle))
            })
            .map(|r| number(r, column))
            .sum()
    };
    let read_bytes = |phase: &str| sum_of("bytes", phase);
    let delivered_bytes = |phase: &str| sum_of("delivered_bytes", phase);

    let sender = Csv::read(&dir.join("sender.csv")).rows;
    // The rows of one sampling pass carry the same time, as written; a late pass is a pass
    // of its own even when it rounds to its neighbour's tick.
    let mut queued_by_tick: BTreeMap<i64, (f64, f64)> = BTreeMap::new();
    for row in &sender {
        let pass = (number(row, "t_s") * 1e6).round() as i64;
        let entry = queued_by_tick
            .entry(pass)
            .or_insert((number(row, "t_s"), 0.0));
        entry.1 += number(row, "wmem_queued");
    }
    let slow_queued: Vec<f64> = queued_by_tick
        .values()
        .filter(|(t_s, _)| in_phase(*t_s, "slow"))
        .map(|(_, sum)| *sum)
        .collect();
    assert!(
        !slow_queued.is_empty(),
        "{}: no slow-phase samples",
        dir.display()
    );
    let rtts_ms = |slow_only: bool| -> Vec<f64> {
        sender
            .iter()
            .filter(|r| number(r, "rtt_us") > 0.0)
            .filter(|r| {
                let t = number(r, "t_s");
                if slow_only {
                    in_phase(t, "slow")
                } else {
                    in_kept(t)
                }
            })
            .map(|r| number(r, "rtt_us") / 1000.0)
            .collect()
    };
    let slow_rtts = rtts_ms(true);

    let page_bytes = meta["sender_host"]["page_size_bytes"].as_f64().unwrap();
    let host = Csv::read(&dir.join("host.csv")).rows;
    let sender_host = || {
        host.iter()
            .filter(|r| r["side"] == "sender" && in_kept(number(r, "t_s")))
    };
    let peak_pages = sender_host()
        .map(|r| number(r, "tcp_mem_pages"))
        .fold(0.0, f64::max);
    let peak_ns_bytes = sender_host()
        .filter(|r| !r["tcp_mem_ns_bytes"].is_empty())
        .map(|r| number(r, "tcp_mem_ns_bytes"))
        .fold(0.0, f64::max);

    let largest = |column: &str, phase: Option<&str>| {
        sender
            .iter()
            .filter(|r| !r[column].is_empty())
            .filter(|r| {
                let t = number(r, "t_s");
                phase.map_or(in_kept(t), |phase| in_phase(t, phase))
            })
            .map(|r| number(r, column))
            .reduce(f64::max)
    };
    let fast_bytes_per_s = delivered_bytes("fast") / length_of("fast");

    Expected {
        safe_lowat_bytes: largest("wake_to_write_max_us", Some("fast"))
            .map(|us| 2.0 * fast_bytes_per_s * us / 1e6),
        pollout_notsent_max_bytes: largest("wake_notsent_max_bytes", None),
        net_goodput_fast_mbps: delivered_bytes("fast") * 8.0 / length_of("fast") / 1e6,
        net_goodput_slow_mbps: delivered_bytes("slow") * 8.0 / length_of("slow") / 1e6,
        read_fast_mbps: read_bytes("fast") * 8.0 / length_of("fast") / 1e6,
        read_slow_mbps: read_bytes("slow") * 8.0 / length_of("slow") / 1e6,
        slow_queued_peak_mib: slow_queued.iter().copied().fold(0.0, f64::max) / MIB,
        slow_queued_mean_mib: slow_queued.iter().sum::<f64>() / slow_queued.len() as f64 / MIB,
        tcp_mem_peak_sender_mib: peak_pages * page_bytes / MIB,
        tcp_mem_ns_peak_sender_mib: peak_ns_bytes / MIB,
        rtt_slow_mean_ms: slow_rtts.iter().sum::<f64>() / slow_rtts.len() as f64,
        rtt_min_ms: rtts_ms(false).into_iter().fold(f64::INFINITY, f64::min),
    }
}

/// Equal to the precision the table prints (`decimals` places).
pub fn assert_close(label: &str, column: &str, found: f64, want: f64, decimals: i32) {
    let tolerance = 0.51 * 10f64.powi(-decimals) + want.abs() * 1e-9;
    assert!(
        (found - want).abs() <= tolerance,
        "{label}: {column} is {found} in the table, computed {want} from the CSVs"
    );
}

/// The error is one line on stderr, and the exit status says it failed.
pub fn one_line_error(result: &Output) -> String {
    assert!(!result.status.success(), "{result:?}");
    let stderr = String::from_utf8_lossy(&result.stderr).into_owned();
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    stderr
}

/// Headless Chromium (Debian's `/usr/bin/chromium`, which `.ci/run` installs), with a
/// profile of its own and nothing fetched from the network.
pub struct Chromium {
    path: PathBuf,
    profile: tempfile::TempDir,
}

impl Chromium {
    /// The browser, or `None` after saying that without it `what`.
    pub fn find(what: &str) -> Option<Chromium> {
        let path = PathBuf::from("/usr/bin/chromium");
        if !path.exists() {
            oscil_testkit::skip(&format!(
                "/usr/bin/chromium is absent, so {what} (Debian package chromium; .ci/run installs it)"
            ));
            return None;
        }
        let profile = tempfile::tempdir().expect("a profile directory");
        Some(Chromium { path, profile })
    }

    /// What Chromium prints for `page` with `extra` flags (`--dump-dom`: the DOM after the
    /// page's scripts ran, up to 10 s of virtual time). Killed, by its own handle, after
    /// 120 s; its output goes to a file, so a full pipe never stalls it.
    pub fn output(&self, page: &Path, extra: &[&str]) -> String {
        let log = self.profile.path().join("out.txt");
        let file = fs::File::create(&log).expect("chromium's log");
        let mut child = Command::new(&self.path)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--virtual-time-budget=10000",
            ])
            .arg(format!("--user-data-dir={}", self.profile.path().display()))
            .args(extra)
            .arg(format!("file://{}", page.display()))
            .stdout(file)
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium");
        let limit = Duration::from_secs(120);
        let deadline = Instant::now() + limit;
        while child.try_wait().expect("poll chromium").is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chromium did not finish within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        fs::read_to_string(&log).unwrap_or_default()
    }
}

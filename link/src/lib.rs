//! A userspace long-haul link emulator over TUN: delay, rate with a bounded queue, loss.
//!
//! Two TUN devices, one in each network namespace, joined by two threads, one per
//! direction. Each direction applies the same [`path::PathModel`]: random loss, a
//! drop-tail queue in front of a serializer at the link rate, then a one-way delay. The
//! model is deterministic and takes time as a parameter; [`forward`] is the thin I/O layer.

pub mod capture;
pub mod cli;
mod config;
pub mod delay_line;
pub mod forward;
pub mod path;
mod pcapng;
pub mod wire;

#[allow(unsafe_code)]
mod sys;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use crate::capture::Capture;
use crate::forward::{Direction, DirectionStats};
use crate::path::{PathConfig, PathModel, QUEUE_COUNTS};

pub use config::{LinkConfig, TunEnd};
pub use sys::{block_term_signals, process_cpu, wait_term_signal, wait_writable, CpuSeconds};

/// Bytes a queued segment may take in the delay line's buffer (MTU 1500 and headers).
const RING_BYTES_PER_QUEUED_SEGMENT: usize = 1600;

/// Why the link could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The namespace file could not be opened.
    #[error("network namespace {path}")]
    Netns {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The TUN device could not be created or attached.
    #[error("TUN device {dev} in {ns}")]
    Tun {
        dev: String,
        ns: String,
        source: std::io::Error,
    },
    /// A forwarding thread failed.
    #[error("forwarding {direction}")]
    Forward {
        direction: &'static str,
        source: std::io::Error,
    },
    /// SIGINT and SIGTERM could not be blocked for the threads to wait for them.
    #[error("blocking SIGINT/SIGTERM")]
    Signals(#[source] std::io::Error),
    /// A `--pcap` file could not be created.
    #[error("capture file {}", path.display())]
    Capture {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The `--stats` file could not be written.
    #[error("writing {}", path.display())]
    Stats {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What the link did, per direction, and what it cost. Serialized as the stats JSON.
#[derive(Debug, Clone, Serialize)]
pub struct LinkStats {
    pub emulator: &'static str,
    pub version: &'static str,
    pub rate_bps: u64,
    /// One-way delay from A to B.
    pub one_way_delay_ms: f64,
    /// One-way delay from B to A.
    pub reverse_delay_ms: f64,
    pub queue_limit: u32,
    pub queue_counts: &'static str,
    pub loss_pct: f64,
    pub seed: u64,
    pub gso: bool,
    pub elapsed_s: f64,
    /// CPU of the whole emulator process.
    pub cpu: CpuSeconds,
    pub a_to_b: DirectionStats,
    pub b_to_a: DirectionStats,
}

/// A running link.
pub struct Link {
    config: LinkConfig,
    started: Instant,
    stop: Arc<AtomicBool>,
    shared: [Arc<Mutex<DirectionStats>>; 2],
    threads: Vec<(&'static str, JoinHandle<std::io::Result<()>>)>,
}

impl Link {
    /// Creates (or attaches to) the two TUN devices and starts forwarding.
    pub fn start(config: LinkConfig) -> Result<Link, LinkError> {
        let ns_a = open_netns(&config.a)?;
        let ns_b = open_netns(&config.b)?;
        let tun_a = Arc::new(open_tun_in(&config.a, ns_a.as_ref(), config.gso)?);
        let tun_b = Arc::new(open_tun_in(&config.b, ns_b.as_ref(), config.gso)?);
        let path_config = PathConfig {
            rate_bps: config.rate_bps,
            delay: config.delay,
            queue_limit: config.queue_limit,
            loss: config.loss,
            seed: config.seed,
        };
        let ring_bytes = |delay: Duration| {
            let bytes = (config.rate_bps as f64 / 8.0 * delay.as_secs_f64()) as usize
                + config.queue_limit as usize * RING_BYTES_PER_QUEUED_SEGMENT;
            bytes + bytes / 4 + 4 * delay_line::MAX_FRAME
        };
        let epoch = Instant::now();
        let wall_epoch_ns = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64);
        let mut captures = open_captures(&config, wall_epoch_ns)?.into_iter();
        let stop = Arc::new(AtomicBool::new(false));
        let shared = [Arc::default(), Arc::default()];
        let directions = [
            (
                "a_to_b",
                Direction {
                    input: tun_a.clone(),
                    output: tun_b.clone(),
                    input_netns: ns_a,
                    input_dev: config.a.dev.clone(),
                    path: PathModel::new(path_config),
                    ring_bytes: ring_bytes(config.delay),
                    realtime: config.realtime,
                    capture: captures.next(),
                },
            ),
            (
                "b_to_a",
                Direction {
                    input: tun_b,
                    output: tun_a,
                    input_netns: ns_b,
                    input_dev: config.b.dev.clone(),
                    path: PathModel::new(PathConfig {
                        seed: path_config.seed.wrapping_add(1),
                        delay: config.reverse_delay,
                        ..path_config
                    }),
                    ring_bytes: ring_bytes(config.reverse_delay),
                    realtime: config.realtime,
                    capture: captures.next(),
                },
            ),
        ];
        let threads = directions
            .into_iter()
            .zip(shared.iter().cloned())
            .map(|((name, dir), stats)| {
                let stop = stop.clone();
                let handle = std::thread::Builder::new()
                    .name(format!("link-{name}"))
                    .spawn(move || forward::run(dir, epoch, &stop, &stats))
                    .expect("spawn a thread");
                (name, handle)
            })
            .collect();
        Ok(Link {
            config,
            started: epoch,
            stop,
            shared,
            threads,
        })
    }

    /// Whether both directions are still forwarding.
    pub fn is_running(&self) -> bool {
        self.threads.iter().all(|(_, t)| !t.is_finished())
    }

    /// Current statistics.
    pub fn stats(&self) -> LinkStats {
        let dir = |i: usize| *self.shared[i].lock().unwrap_or_else(|e| e.into_inner());
        LinkStats {
            emulator: "oscil-link",
            version: env!("CARGO_PKG_VERSION"),
            rate_bps: self.config.rate_bps,
            one_way_delay_ms: self.config.delay.as_secs_f64() * 1e3,
            reverse_delay_ms: self.config.reverse_delay.as_secs_f64() * 1e3,
            queue_limit: self.config.queue_limit,
            queue_counts: QUEUE_COUNTS,
            loss_pct: self.config.loss * 100.0,
            seed: self.config.seed,
            gso: self.config.gso,
            elapsed_s: self.started.elapsed().as_secs_f64(),
            cpu: process_cpu(),
            a_to_b: dir(0),
            b_to_a: dir(1),
        }
    }

    /// Stops both directions and returns the final statistics.
    pub fn stop(mut self) -> Result<LinkStats, LinkError> {
        self.stop.store(true, Ordering::Relaxed);
        let mut first_error = None;
        for (direction, handle) in self.threads.drain(..) {
            let result = handle
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("forwarding thread panicked")));
            if let Err(source) = result {
                first_error.get_or_insert(LinkError::Forward { direction, source });
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(self.stats()),
        }
    }
}

/// What `oscil-link` does: starts the link, writes `stats_path` once the devices are attached,
/// every second and on exit, and runs until SIGINT or SIGTERM (or a forwarding thread ends).
pub fn run_until_stopped(config: LinkConfig, stats_path: Option<&Path>) -> Result<(), LinkError> {
    block_term_signals().map_err(LinkError::Signals)?;
    let link = Link::start(config)?;
    // Written at once, so a script can wait for the file to know the link is up.
    if let Some(path) = stats_path {
        write_stats(path, &link.stats())?;
    }
    loop {
        let signal = wait_term_signal(Duration::from_secs(1));
        if signal.is_some() || !link.is_running() {
            break;
        }
        if let Some(path) = stats_path {
            write_stats(path, &link.stats())?;
        }
    }
    let stats = link.stop()?;
    if let Some(path) = stats_path {
        write_stats(path, &stats)?;
    }
    Ok(())
}

/// Writes the stats atomically (temporary file, then rename) so a reader never sees half.
fn write_stats(path: &Path, stats: &LinkStats) -> Result<(), LinkError> {
    let tmp = path.with_extension("json.tmp");
    let json = serde_json::to_string_pretty(stats).expect("the stats serialize");
    let stats_error = |source| LinkError::Stats {
        path: path.to_owned(),
        source,
    };
    std::fs::write(&tmp, json + "\n").map_err(stats_error)?;
    std::fs::rename(&tmp, path).map_err(stats_error)
}

/// Moves the calling thread into a network namespace given by name (as for `ip netns`)
/// or path; sockets it opens afterwards live there. For tests and tools around the link.
pub fn enter_netns(name_or_path: &str) -> std::io::Result<()> {
    let end = TunEnd {
        netns: Some(name_or_path.to_string()),
        dev: String::new(),
    };
    let path = end.netns_path().expect("netns was given");
    sys::enter_netns(&File::open(path)?)
}

/// The captures of A to B and B to A with `--pcap` (none without), sharing one byte cap.
fn open_captures(config: &LinkConfig, wall_epoch_ns: u64) -> Result<Vec<Capture>, LinkError> {
    let Some(capture) = &config.capture else {
        return Ok(Vec::new());
    };
    let budget = Arc::new(AtomicU64::new(capture.max_bytes));
    [("a_to_b", config.delay), ("b_to_a", config.reverse_delay)]
        .into_iter()
        .map(|(direction, delay)| {
            let path = capture.file(direction);
            let delay_ns = delay.as_nanos() as u64;
            Capture::create(
                &path,
                direction,
                capture,
                budget.clone(),
                wall_epoch_ns,
                delay_ns,
            )
            .map_err(|source| LinkError::Capture { path, source })
        })
        .collect()
}

fn open_netns(end: &TunEnd) -> Result<Option<File>, LinkError> {
    end.netns_path()
        .map(|path| File::open(&path).map_err(|source| LinkError::Netns { path, source }))
        .transpose()
}

/// Opens the TUN device on a short-lived thread inside the endpoint's namespace, where
/// the kernel creates it; the fd then works from any thread.
fn open_tun_in(end: &TunEnd, ns: Option<&File>, gso: bool) -> Result<File, LinkError> {
    let result = std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(ns) = ns {
                sys::enter_netns(ns)?;
            }
            sys::open_tun(&end.dev, gso)
        })
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("TUN thread panicked")))
    });
    result.map(File::from).map_err(|source| LinkError::Tun {
        dev: end.dev.clone(),
        ns: end.describe(),
        source,
    })
}

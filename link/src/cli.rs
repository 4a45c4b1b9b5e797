//! The link's command line: its flags (the help text is their doc comments) and their
//! conversion into a [`LinkConfig`]. `main.rs` only parses, calls the library and maps the
//! error to an exit code.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use oscil_cli::path_args::{default_queue_limit, parse_loss, parse_one_way_delay};
use oscil_cli::placeholder;
use oscil_cli::units::{parse_bytes, parse_rate_bps, whole};

use crate::capture::CaptureConfig;
use crate::config::{LinkConfig, TunEnd};

/// Emulates a long, fat link between two network namespaces without netem: each direction
/// gets random loss, a drop-tail queue in front of the rate limit, then a one-way delay.
/// Runs until SIGINT/SIGTERM, then writes its statistics.
#[derive(Debug, Parser)]
#[command(
    name = "oscil-link",
    version,
    allow_negative_numbers = true,
    args_override_self = true
)]
pub struct Cli {
    /// Network namespace of side A (name under /run/netns, or a path); default: our own.
    #[arg(long, value_name = "NETNS")]
    a_netns: Option<String>,
    /// Network namespace of side B (name under /run/netns, or a path); default: our own.
    #[arg(long, value_name = "NETNS")]
    b_netns: Option<String>,
    /// TUN device in side A's namespace (created if missing, else attached).
    #[arg(long, default_value = "osla", value_name = "DEV")]
    a_dev: String,
    /// TUN device in side B's namespace (created if missing, else attached).
    #[arg(long, default_value = "oslb", value_name = "DEV")]
    b_dev: String,
    /// Bottleneck rate per direction, as tc writes it (10mbit, 1gbit, 500kbit).
    #[arg(long, value_parser = parse_rate_bps, value_name = placeholder::RATE)]
    rate: u64,
    /// One-way delay from A to B, e.g. 233ms; also from B to A unless --reverse-delay is
    /// given (RTT = the sum of the two).
    #[arg(long, value_parser = parse_one_way_delay, value_name = placeholder::DUR)]
    delay: Duration,
    /// One-way delay from B to A (e.g. 0 to delay only the A-to-B direction, as netem on
    /// one side's egress does); default: the same as --delay.
    #[arg(long, value_parser = parse_one_way_delay, value_name = placeholder::DUR)]
    reverse_delay: Option<Duration>,
    /// Queue limit in packets (segments waiting for serialization); default: what drains
    /// in 60 ms at the rate, at least 50 (50 at 10mbit, 4954 at 1gbit).
    #[arg(long, value_name = placeholder::N, value_parser = whole("count", 1, u32::MAX))]
    queue: Option<u32>,
    /// Random loss per packet read from TUN, in percent (0.5 or 0.5%). With GSO a lost
    /// packet may carry many segments; add --no-gso for loss per wire packet.
    #[arg(long, value_parser = parse_loss, default_value = "0", value_name = "PCT")]
    loss: f64,
    /// Seed of the loss generator.
    #[arg(long, default_value_t = 1, value_parser = whole("seed", 0, u64::MAX), value_name = placeholder::N)]
    seed: u64,
    /// Write statistics as JSON here: once the devices are attached, every second, on exit.
    #[arg(value_parser = oscil_cli::files::path, long, value_name = placeholder::FILE)]
    pub stats: Option<PathBuf>,
    /// Take one MTU-sized packet per read instead of 64 KB GSO packets, so loss and queue
    /// drops hit single wire packets (about 30% of a core at 100mbit; 1gbit needs GSO).
    #[arg(long)]
    no_gso: bool,
    /// Do not raise the forwarding threads to real-time (SCHED_FIFO) priority.
    #[arg(long)]
    no_realtime: bool,
    /// Capture the headers of every packet entering the link, per direction, as pcapng in
    /// DIR (link-a_to_b.pcapng, link-b_to_a.pcapng), timed by the emulator's clock; each
    /// packet's comment says when it left the queue and was delivered, or why it was dropped.
    #[arg(long, value_name = "DIR")]
    pcap: Option<PathBuf>,
    /// Bytes kept of each captured packet from its IP header on (the headers, not the data).
    #[arg(long, default_value = "128", value_name = placeholder::BYTES, value_parser = whole("snap length", 20u32, 65_535))]
    pcap_snap: u32,
    /// Most bytes both capture files may take together; packets past it are counted in the
    /// stats, not captured.
    #[arg(long, default_value = "256M", value_name = placeholder::BYTES, value_parser = parse_bytes)]
    pcap_max_bytes: u64,
}

/// A link the command line cannot make: every one a usage error (exit 2), found before
/// any device is touched.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Side A and side B named the same device in the same namespace.
    #[error("side A and side B are the same device {0:?}: give --a-dev and --b-dev different names, or put them in different namespaces")]
    SameDevice(String),
    /// A namespace that is not there (`ip netns add NAME` makes one).
    #[error("{flag} {name}: no such network namespace ({} is missing{hint})", .path.display())]
    NoNetns {
        flag: &'static str,
        name: String,
        path: PathBuf,
        /// How to make one, for a name (`ip netns add NAME`); empty for a path.
        hint: String,
    },
    /// `--stats` cannot be written.
    #[error(transparent)]
    Stats(#[from] oscil_cli::files::OutputFileError),
}

impl Cli {
    /// The link asked for, and where its statistics go; two ends that are one, a namespace
    /// that is not there and a statistics file that cannot be written are refused.
    pub fn into_config(self) -> Result<(LinkConfig, Option<PathBuf>), CliError> {
        if self.a_netns == self.b_netns && self.a_dev == self.b_dev {
            return Err(CliError::SameDevice(self.a_dev));
        }
        if let Some(stats) = &self.stats {
            oscil_cli::files::check_writable_file("--stats", stats)?;
        }
        let config = LinkConfig {
            a: TunEnd {
                netns: self.a_netns,
                dev: self.a_dev,
            },
            b: TunEnd {
                netns: self.b_netns,
                dev: self.b_dev,
            },
            rate_bps: self.rate,
            delay: self.delay,
            reverse_delay: self.reverse_delay.unwrap_or(self.delay),
            queue_limit: self.queue.unwrap_or_else(|| default_queue_limit(self.rate)),
            loss: self.loss,
            seed: self.seed,
            gso: !self.no_gso,
            realtime: !self.no_realtime,
            capture: self.pcap.map(|dir| CaptureConfig {
                dir,
                snap_bytes: self.pcap_snap,
                max_bytes: self.pcap_max_bytes,
            }),
        };
        for (flag, end) in [("--a-netns", &config.a), ("--b-netns", &config.b)] {
            match (&end.netns, end.netns_path()) {
                (Some(name), Some(path)) if !path.exists() => {
                    return Err(CliError::NoNetns {
                        flag,
                        name: name.clone(),
                        hint: match name.contains('/') {
                            true => String::new(),
                            false => format!("; ip netns add {name} makes one"),
                        },
                        path,
                    })
                }
                _ => {}
            }
        }
        Ok((config, self.stats))
    }
}

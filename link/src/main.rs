//! `oscil-link`: joins two network namespaces through two TUN devices with an emulated
//! long-haul link (the same delay, rate, queue and loss in both directions).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use oscil_cli::path_args::default_queue_limit;
use oscil_cli::placeholder;
use oscil_cli::units::{parse_duration, parse_percent, parse_rate_bps, whole};
use oscil_link::{Link, LinkConfig, LinkStats, TunEnd};

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
struct Cli {
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
    #[arg(long, value_parser = parse_duration, value_name = placeholder::DUR)]
    delay: Duration,
    /// One-way delay from B to A (e.g. 0 to delay only the A-to-B direction, as netem on
    /// one side's egress does); default: the same as --delay.
    #[arg(long, value_parser = parse_duration, value_name = placeholder::DUR)]
    reverse_delay: Option<Duration>,
    /// Queue limit in packets (segments waiting for serialization); default: what drains
    /// in 60 ms at the rate, at least 50 (50 at 10mbit, 4954 at 1gbit).
    #[arg(long, value_name = placeholder::N, value_parser = whole("count", 1, u32::MAX))]
    queue: Option<u32>,
    /// Random loss per packet read from TUN, in percent (0.5 or 0.5%). With GSO a lost
    /// packet may carry many segments; add --no-gso for loss per wire packet.
    #[arg(long, value_parser = parse_percent, default_value = "0", value_name = "PCT")]
    loss: f64,
    /// Seed of the loss generator.
    #[arg(long, default_value_t = 1, value_parser = whole("seed", 0, u64::MAX), value_name = placeholder::N)]
    seed: u64,
    /// Write statistics as JSON here: once the devices are attached, every second, on exit.
    #[arg(long, value_name = placeholder::FILE)]
    stats: Option<PathBuf>,
    /// Take one MTU-sized packet per read instead of 64 KB GSO packets, so loss and queue
    /// drops hit single wire packets (about 30% of a core at 100mbit; 1gbit needs GSO).
    #[arg(long)]
    no_gso: bool,
    /// Do not raise the forwarding threads to real-time (SCHED_FIFO) priority.
    #[arg(long)]
    no_realtime: bool,
}

fn main() -> ExitCode {
    let cli: Cli = oscil_cli::parse();
    if cli.a_netns == cli.b_netns && cli.a_dev == cli.b_dev {
        eprintln!(
            "oscil-link: side A and side B are the same device {:?}: give --a-dev and --b-dev different names, or put them in different namespaces",
            cli.a_dev
        );
        return ExitCode::from(oscil_cli::exit::USAGE);
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("oscil-link: {}", oscil_model::error_text::error_line(&*e));
            ExitCode::from(oscil_cli::exit::FAILED_START)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let config = LinkConfig {
        a: TunEnd {
            netns: cli.a_netns,
            dev: cli.a_dev,
        },
        b: TunEnd {
            netns: cli.b_netns,
            dev: cli.b_dev,
        },
        rate_bps: cli.rate,
        delay: cli.delay,
        reverse_delay: cli.reverse_delay.unwrap_or(cli.delay),
        queue_limit: cli.queue.unwrap_or_else(|| default_queue_limit(cli.rate)),
        loss: cli.loss,
        seed: cli.seed,
        gso: !cli.no_gso,
        realtime: !cli.no_realtime,
    };
    oscil_link::block_term_signals().context("blocking SIGINT/SIGTERM")?;
    let link = Link::start(config)?;
    // Written at once, so a script can wait for the file to know the link is up.
    if let Some(path) = &cli.stats {
        write_stats(path, &link.stats())?;
    }
    loop {
        let signal = oscil_link::wait_term_signal(Duration::from_secs(1));
        if signal.is_some() || !link.is_running() {
            break;
        }
        if let Some(path) = &cli.stats {
            write_stats(path, &link.stats())?;
        }
    }
    let stats = link.stop()?;
    if let Some(path) = &cli.stats {
        write_stats(path, &stats)?;
    }
    Ok(())
}

/// Writes the stats atomically (temporary file, then rename) so a reader never sees half.
fn write_stats(path: &Path, stats: &LinkStats) -> anyhow::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let json = serde_json::to_string_pretty(stats)?;
    std::fs::write(&tmp, json + "\n").with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}

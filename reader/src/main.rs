//! oscil-reader: parses flags, runs one session, prints the summary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use oscil_kernel::SocketOptions;
use oscil_protocol::units::{
    parse_bytes_u32, parse_fraction, parse_positive_duration, parse_rate_bps,
    parse_whole_ms_duration, UnitError,
};
use oscil_protocol::{PatternConfig, RunStatus};
use oscil_reader::{Outcome, ReaderConfig};

/// Reads from oscil-daemon in an oscillating pattern (fast, then a trickle) and records both
/// ends of every flow into a run directory.
///
/// The default pattern is Cloudflare's: 5 s at full speed, then 15 s reading 5% of the best
/// one-second read so far, three times over.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Args {
    /// The daemon's control address, HOST:PORT ([v6addr]:PORT for IPv6).
    #[arg(long, short = 'c', value_name = "HOST:PORT")]
    connect: String,
    /// The run directory to write (must be empty or absent, unless --force).
    #[arg(long, short = 'o', value_name = "DIR")]
    out: PathBuf,
    /// Write into a non-empty directory, replacing the run files.
    #[arg(long)]
    force: bool,

    /// Length of each full-speed phase (whole milliseconds).
    #[arg(long, default_value = "5s", value_parser = parse_fast, value_name = "DUR")]
    fast: Duration,
    /// Length of each slow phase (whole milliseconds; 0 for none).
    #[arg(long, default_value = "15s", value_parser = parse_whole_ms_duration, value_name = "DUR")]
    slow: Duration,
    /// Share of the best one-second read that each slow second reads (0.05 or 5%).
    #[arg(long, default_value = "0.05", value_parser = parse_fraction)]
    fraction: f64,
    /// How many fast+slow cycles to run.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    cycles: u32,
    /// Control pattern: read at full speed for the whole run, as iperf3 does.
    #[arg(long)]
    full_speed: bool,

    /// Parallel data connections.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    flows: u32,
    /// Sampling interval of both ends.
    #[arg(long, default_value = "100ms", value_parser = parse_positive_duration, value_name = "DUR")]
    interval: Duration,

    /// TCP_NOTSENT_LOWAT for the daemon's sockets (bytes; 128k works).
    #[arg(long, value_parser = parse_bytes_u32, value_name = "BYTES")]
    notsent_lowat: Option<u32>,
    /// SO_SNDBUF for the daemon's sockets (the kernel doubles it; disables autotuning).
    #[arg(long, value_parser = parse_bytes_u32, value_name = "BYTES")]
    sndbuf: Option<u32>,
    /// Congestion control for the daemon's sockets (cubic, bbr, reno, ...).
    #[arg(long, value_name = "NAME")]
    congestion: Option<String>,
    /// SO_MAX_PACING_RATE for the daemon's sockets, as tc writes rates (100mbit).
    #[arg(long, value_parser = parse_pacing_rate, value_name = "RATE")]
    pacing_rate: Option<u64>,
    /// SO_RCVBUF for the reader's own sockets (the kernel doubles it; disables autotuning).
    #[arg(long, value_parser = parse_bytes_u32, value_name = "BYTES")]
    rcvbuf: Option<u32>,

    /// File holding the daemon's pre-shared key (else $OSCIL_KEY; never on the command line).
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// Name of the run on charts (default: the directory's name).
    #[arg(long)]
    label: Option<String>,
    /// A JSON file describing the setup (the lab's link and sysctls), kept in run.json as "lab".
    #[arg(long, value_name = "FILE")]
    meta: Option<PathBuf>,
    /// No progress display.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// A fast phase: above zero and whole milliseconds, as the pattern stores it.
fn parse_fast(input: &str) -> Result<Duration, UnitError> {
    parse_positive_duration(input)?;
    parse_whole_ms_duration(input)
}

/// The kernel paces in whole bytes per second, so a rate below 8 bit/s would be no pacing.
fn parse_pacing_rate(input: &str) -> Result<u64, String> {
    match parse_rate_bps(input) {
        Ok(bps) if bps < 8 => Err(format!(
            "pacing rate {input:?} is below 8 bit/s, the kernel's smallest"
        )),
        other => other.map_err(|e: UnitError| e.to_string()),
    }
}

impl Args {
    fn into_config(self) -> anyhow::Result<ReaderConfig> {
        let lab_meta = match &self.meta {
            None => None,
            Some(path) => {
                let text = std::fs::read(path)
                    .with_context(|| format!("cannot read --meta file {}", path.display()))?;
                let value: serde_json::Value = serde_json::from_slice(&text)
                    .with_context(|| format!("--meta file {} is not JSON", path.display()))?;
                Some(value)
            }
        };
        Ok(ReaderConfig {
            connect: self.connect,
            out: self.out,
            force: self.force,
            flows: self.flows,
            interval: self.interval,
            pattern: PatternConfig {
                fast_ms: self.fast.as_millis() as u64,
                slow_ms: self.slow.as_millis() as u64,
                fraction: self.fraction,
                cycles: self.cycles,
                full_speed: self.full_speed,
            },
            sender_request: SocketOptions {
                notsent_lowat_bytes: self.notsent_lowat,
                sndbuf_bytes: self.sndbuf,
                rcvbuf_bytes: None,
                congestion: self.congestion,
                max_pacing_rate_bps: self.pacing_rate,
            },
            reader_request: SocketOptions {
                rcvbuf_bytes: self.rcvbuf,
                ..SocketOptions::default()
            },
            key: oscil_protocol::key::load_key(self.key_file.as_deref())?,
            label: self.label,
            lab_meta,
            progress: !self.quiet,
        })
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let json = args.json;
    let quiet = args.quiet;
    // A --meta file that cannot be used is a bad flag, like those clap rejects: exit 2.
    let config = match args.into_config() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("oscil-reader: {error:#}");
            return ExitCode::from(2);
        }
    };
    match run(config) {
        Ok(outcome) => report(&outcome, json, quiet),
        Err(error) => {
            eprintln!("oscil-reader: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(config: ReaderConfig) -> anyhow::Result<Outcome> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let outcome = oscil_reader::run(config, stop_signals()?).await?;
        Ok(outcome)
    })
}

/// One message per Ctrl-C or SIGTERM.
fn stop_signals() -> anyhow::Result<tokio::sync::mpsc::UnboundedReceiver<()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
    let mut terminate = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            if tx.send(()).is_err() {
                return;
            }
        }
    });
    Ok(rx)
}

fn report(outcome: &Outcome, json: bool, quiet: bool) -> ExitCode {
    let ending = &outcome.meta.ending;
    if json {
        let value = serde_json::json!({
            "status": ending.status,
            "reason": ending.reason,
            "duration_s": ending.duration_s,
            "phases": outcome.summary.phases,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&value).expect("summary serializes")
        );
    } else if !quiet {
        print!("{}", outcome.summary);
    }
    match ending.status {
        RunStatus::Complete => ExitCode::SUCCESS,
        RunStatus::Partial => {
            eprintln!(
                "oscil-reader: run cut short after {:.1} s: {} (the run directory holds everything up to then)",
                ending.duration_s, ending.reason
            );
            ExitCode::from(3)
        }
    }
}

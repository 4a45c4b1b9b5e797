//! oscil-reader: parses flags, runs one session, prints the summary.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use oscil_cli::address::{self, Endpoint};
use oscil_cli::placeholder;
use oscil_cli::request_args::{
    cloudflare, parse_pacing_rate, parse_slow_rate, parse_write_size, TypedDuration,
};
use oscil_cli::units::{
    parse_bytes_u32, parse_fraction, parse_positive_duration, parse_whole_ms_duration, UnitError,
};
use oscil_kernel::SocketOptions;
use oscil_protocol::request::{self, SessionRequest, MAX_CYCLES, MAX_FLOWS};
use oscil_protocol::{PatternConfig, SlowRule};
use oscil_reader::{Outcome, ReaderConfig, ReaderError};
use oscil_rundir::{RunDirError, RunStatus};

/// Reads from oscil-daemon in an oscillating pattern (fast, then a trickle) and records both
/// ends of every flow into a run directory.
///
/// The default pattern is Cloudflare's: 5 s at full speed, then 15 s reading 5% of the best
/// one-second read so far, three times over.
#[derive(Parser, Debug)]
#[command(
    version,
    about,
    long_about = None,
    allow_negative_numbers = true,
    args_override_self = true
)]
struct Args {
    /// The daemon: HOST, HOST:PORT, [IPV6]:PORT or a bare IPv6 address; port 5250 unless given.
    #[arg(long, short = 'c', value_parser = address::parse_connect, value_name = placeholder::ADDR)]
    connect: Endpoint,
    #[command(flatten)]
    address: oscil_cli::AddressFlags,
    /// Local address to connect from (a multi-homed host's WAN address).
    #[arg(long, short = 'B', value_parser = address::parse_bind, value_name = placeholder::ADDR)]
    bind: Option<IpAddr>,
    /// The run directory to write (must be empty or absent, unless --force).
    #[arg(long, short = 'o', value_name = placeholder::DIR)]
    out: PathBuf,
    /// Write into a non-empty directory, replacing the run files.
    #[arg(long)]
    force: bool,

    /// Length of each full-speed phase (whole milliseconds).
    #[arg(long, default_value_t = cloudflare::FAST, value_parser = parse_fast, value_name = "DUR")]
    fast: TypedDuration,
    /// Length of each slow phase (whole milliseconds; 0 for none).
    #[arg(long, default_value_t = cloudflare::SLOW, value_parser = parse_slow, value_name = "DUR")]
    slow: TypedDuration,
    /// Share of the peak that each slow second reads (0.05 or 5%): the most bytes TCP
    /// delivered to a flow in one second of a fast phase so far.
    #[arg(long, default_value_t = cloudflare::FRACTION, value_parser = parse_fraction)]
    fraction: f64,
    /// Read the slow phases at this absolute rate, all flows together (5mbit, 1gbit),
    /// instead of --fraction of the peak: the same workload whatever the setting under test.
    #[arg(long, value_parser = parse_slow_rate, value_name = placeholder::RATE)]
    slow_rate: Option<u64>,
    /// How many fast+slow cycles to run.
    #[arg(long, value_name = placeholder::N, default_value_t = cloudflare::CYCLES, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_CYCLES)))]
    cycles: u32,
    /// Control pattern: read at full speed for the whole run, as iperf3 does.
    #[arg(long)]
    full_speed: bool,
    /// A full-speed run of this length, as iperf3 -t (replaces the pattern).
    #[arg(long, short = 't', value_parser = parse_positive_duration, value_name = placeholder::DUR)]
    time: Option<Duration>,

    /// Parallel data connections (iperf3's -P).
    #[arg(long, short = 'P', visible_alias = "parallel", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_FLOWS)), value_name = placeholder::N)]
    flows: u32,
    /// Sampling interval of both ends.
    #[arg(long, default_value_t = cloudflare::INTERVAL, value_parser = parse_interval, value_name = "DUR")]
    interval: TypedDuration,

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
    #[arg(long, value_parser = parse_pacing_rate, value_name = placeholder::RATE)]
    pacing_rate: Option<u64>,
    /// Bytes the daemon offers the kernel per write: unsent bytes can reach lowat/2 plus one
    /// write, so large writes hide what small ones show. [default: 262144, or 131072 with
    /// --zerocopy]
    #[arg(long, value_parser = parse_write_size, value_name = "BYTES")]
    write_size: Option<u32>,
    /// Mark every flow's stream this often and record how long each mark takes from the
    /// daemon's write to this reader's read (markers.csv); at least --interval. Off unless
    /// given.
    #[arg(long, value_parser = parse_positive_duration, value_name = placeholder::DUR)]
    marker_every: Option<Duration>,
    /// No idle probe: by default a separate connection to the daemon echoes 8 bytes every
    /// 100 ms beside the loaded flows (probe.csv), the path's round trip without the send
    /// queue.
    #[arg(long)]
    no_probe: bool,
    /// The daemon sends with sendfile from a file instead of write, as iperf3 -Z.
    #[arg(long)]
    zerocopy: bool,
    /// SO_RCVBUF for the reader's own sockets (the kernel doubles it; disables autotuning).
    #[arg(long, value_parser = parse_bytes_u32, value_name = "BYTES")]
    rcvbuf: Option<u32>,
    /// Trace every ACK of the daemon's data sockets (snd_una, snd_nxt, windows, cwnd,
    /// retransmits, congestion states) and this reader's receive-buffer autotuning, from the
    /// kernel's tracepoints, into trace-sender.csv and trace-reader.csv. Needs root and
    /// tracefs on each side; without them the run goes on and run.json says why.
    #[arg(long)]
    trace: bool,

    /// While the daemon answers that it is busy (at its sessions, flows or connection
    /// limits), keep trying, with backoff, for this long; 0 gives up at once.
    #[arg(long, default_value = "30s", value_parser = parse_whole_ms_duration, value_name = placeholder::DUR)]
    busy_retry: Duration,

    /// File holding the daemon's pre-shared key (else $OSCIL_KEY; never on the command line).
    #[arg(long, value_name = placeholder::FILE)]
    key_file: Option<PathBuf>,
    /// Name of the run on charts (default: the directory's name).
    #[arg(long, value_name = "NAME")]
    label: Option<String>,
    /// A JSON file describing the setup (the lab's link and sysctls), kept in run.json as "lab".
    #[arg(long, value_name = placeholder::FILE)]
    meta: Option<PathBuf>,
    /// No progress display while the run goes on (the summary is still printed at the end).
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Print the result as JSON on stdout, an error object on failure (iperf3's -J).
    #[arg(long, short = 'J')]
    json: bool,
}

/// A fast phase: above zero and whole milliseconds, as the pattern stores it.
fn parse_fast(input: &str) -> Result<TypedDuration, UnitError> {
    parse_positive_duration(input)?;
    parse_slow(input)
}

/// A slow phase: whole milliseconds (0 for none).
fn parse_slow(input: &str) -> Result<TypedDuration, UnitError> {
    parse_whole_ms_duration(input).map(TypedDuration)
}

fn parse_interval(input: &str) -> Result<TypedDuration, UnitError> {
    parse_positive_duration(input).map(TypedDuration)
}

impl Args {
    /// The pattern asked for; `-t` makes it one full-speed phase of that length.
    fn pattern(&self) -> PatternConfig {
        match self.time {
            Some(time) => PatternConfig {
                fast_ms: time.as_millis() as u64,
                slow_ms: 0,
                fraction: self.fraction,
                cycles: 1,
                full_speed: true,
            },
            None => PatternConfig {
                fast_ms: self.fast.0.as_millis() as u64,
                slow_ms: self.slow.0.as_millis() as u64,
                fraction: self.fraction,
                cycles: self.cycles,
                full_speed: self.full_speed,
            },
        }
    }

    /// The session asked for, checked by the rules the lab and the daemon use too.
    fn request(&self) -> Result<SessionRequest, request::RequestError> {
        let request = SessionRequest {
            flows: self.flows,
            interval: self.interval.0,
            pattern: Some(self.pattern()),
            marker_every: self.marker_every,
            write_size_bytes: self.write_size,
            sender: SocketOptions {
                notsent_lowat_bytes: self.notsent_lowat,
                sndbuf_bytes: self.sndbuf,
                rcvbuf_bytes: None,
                congestion: self.congestion.clone(),
                max_pacing_rate_bps: self.pacing_rate,
                zerocopy: self.zerocopy,
            },
            slow_rate_bps: self.slow_rate,
        };
        request.validate()?;
        Ok(request)
    }

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
        let request = self.request()?;
        let pattern = self.pattern();
        let connect = self.address.with_port(&self.connect);
        // A source address chooses the family of the daemon's address looked up, too.
        let family = match (self.address.family(), self.bind) {
            (address::IpFamily::Any, Some(bind)) if bind.is_ipv4() => address::IpFamily::V4,
            (address::IpFamily::Any, Some(_)) => address::IpFamily::V6,
            (family, _) => family,
        };
        if let Some(bind) = self.bind {
            if !family.allows(bind) {
                anyhow::bail!("--bind {bind} is not of the address family asked (-4/-6)");
            }
            if let Some(daemon) = connect.ip().filter(|ip| ip.is_ipv4() != bind.is_ipv4()) {
                anyhow::bail!("-B {bind} and the daemon's address {daemon} are of different IP versions: connect from an address of the daemon's");
            }
        }
        Ok(ReaderConfig {
            connect: connect.lookup_form(),
            family,
            bind: self.bind,
            out: self.out,
            force: self.force,
            flows: request.flows,
            interval: request.interval,
            pattern,
            slow_rule: match request.slow_rate_bps {
                Some(bps) => SlowRule::Absolute {
                    bytes_per_s: bps / 8,
                },
                None => SlowRule::PeakDelivered,
            },
            reader_request: SocketOptions {
                rcvbuf_bytes: self.rcvbuf,
                ..SocketOptions::default()
            },
            write_size_bytes: request::write_size_bytes(
                request.write_size_bytes,
                request.sender.zerocopy,
            ),
            sender_request: request.sender,
            marker_every: request.marker_every,
            probe: !self.no_probe,
            trace: self.trace,
            busy_retry: self.busy_retry,
            key: oscil_protocol::key::load_key(self.key_file.as_deref())?,
            label: self.label,
            lab_meta,
            progress: !self.quiet,
        })
    }
}

fn main() -> ExitCode {
    let args: Args = oscil_cli::parse();
    for warning in
        oscil_cli::start_warnings("oscil-reader", args.notsent_lowat, args.key_file.as_deref())
    {
        eprintln!("{warning}");
    }
    let json = args.json;
    // Values clap cannot check alone (a --meta file, the pattern against the interval) are
    // bad flags too: exit 2, nothing started.
    let config = match args.into_config() {
        Ok(config) => config,
        Err(error) => return fail(oscil_cli::exit::USAGE, &error, json),
    };
    match run(config.clone()) {
        Ok(outcome) => report(&config, &outcome, json),
        Err(error) => fail(start_failure_code(&error), &error, json),
    }
}

/// A used --out is a bad value, as in oscil-report: exit 2 (nothing was started); any other
/// failure to start is 1.
fn start_failure_code(error: &anyhow::Error) -> u8 {
    match error.downcast_ref::<ReaderError>() {
        Some(ReaderError::RunDir(RunDirError::NotEmpty(_))) => oscil_cli::exit::USAGE,
        _ => oscil_cli::exit::FAILED_START,
    }
}

/// One line on stderr; with --json also an error object on stdout, as iperf3 -J does.
fn fail(code: u8, error: &anyhow::Error, json: bool) -> ExitCode {
    let line = oscil_protocol::error_text::error_line(&**error);
    eprintln!("oscil-reader: {line}");
    if json {
        println!("{}", oscil_cli::json_error(code, &line));
    }
    ExitCode::from(code)
}

/// Descriptors the reader holds beside its data connections: the control connection, the
/// run files, the runtime's epoll and wakers, the sampler's netlink socket, stdio.
const FILES_BESIDE_FLOWS: u64 = 64;

/// Raises the open files limit as far as the hard limit allows, and refuses before
/// connecting when `flows` still cannot fit.
fn make_room_for(flows: u32) -> anyhow::Result<()> {
    let needed = u64::from(flows) + FILES_BESIDE_FLOWS;
    let (soft, hard) = oscil_kernel::raise_nofile_limit()
        .context("cannot raise the open files limit (RLIMIT_NOFILE)")?;
    if needed > soft {
        anyhow::bail!(
            "--flows {flows} needs about {needed} open files, but this process may open {soft} \
             (hard limit {hard}): raise it (ulimit -Hn as root, or LimitNOFILE=) or ask fewer flows"
        );
    }
    Ok(())
}

fn run(config: ReaderConfig) -> anyhow::Result<Outcome> {
    make_room_for(config.flows)?;
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

fn report(config: &ReaderConfig, outcome: &Outcome, json: bool) -> ExitCode {
    let meta = &outcome.meta;
    let ending = &meta.ending;
    let code = match ending.status {
        // Holes lose no bytes, only time resolution, and the rows say which span each
        // covers: the run is usable, so it exits 0 with a line and a status that say so.
        RunStatus::Complete | RunStatus::Holes => oscil_cli::exit::OK,
        RunStatus::Partial => oscil_cli::exit::CUT_SHORT,
    };
    if json {
        // Documented field by field in docs/json.md.
        let value = serde_json::json!({
            "status": ending.status,
            "exit_code": code,
            "reason": ending.reason,
            "duration_s": ending.duration_s,
            "label": meta.label.clone().unwrap_or_else(|| dir_name(&config.out)),
            "out": config.out,
            "config": meta.config,
            "versions": { "reader": meta.reader_software, "daemon": meta.daemon_software },
            "sender_options": meta.sender_options,
            "phases": outcome.summary.phases,
            "cycles": outcome.summary.cycles,
            "clock": meta.clock,
            "markers": meta.markers,
            "probe": meta.probe,
            "trace": meta.trace,
            "safe_lowat_bytes": outcome.summary.safe_lowat_bytes,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&value).expect("summary serializes")
        );
    } else {
        print!("{}", outcome.summary);
        if let (Some(clock), Some(markers)) = (&meta.clock, &meta.markers) {
            // The uncertainty of the clocks' offset is that of every marker latency.
            println!(
                "markers: {} of {} read; daemon clock offset {:+.3} ms ± {:.3} ms",
                markers.resolved,
                markers.announced,
                clock.offset_us / 1000.0,
                clock.uncertainty_us / 1000.0,
            );
        }
        for line in meta.trace.iter().flat_map(|t| t.lines()) {
            println!("{line}");
        }
    }
    match ending.status {
        RunStatus::Partial => eprintln!(
            "oscil-reader: run cut short after {:.1} s: {} (the run directory holds everything up to then)",
            ending.duration_s, ending.reason
        ),
        RunStatus::Holes => eprintln!(
            "oscil-reader: run has holes: {} (run.json \"sampling\" counts them)",
            ending.reason
        ),
        RunStatus::Complete => {}
    }
    ExitCode::from(code)
}

fn dir_name(dir: &std::path::Path) -> String {
    dir.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use oscil_protocol::control::{DEFAULT_WRITE_BYTES, DEFAULT_ZEROCOPY_WRITE_BYTES};

    #[test]
    fn the_defaults_are_the_cloudflare_pattern_and_the_protocols_write_sizes() {
        let args = Args::try_parse_from(["oscil-reader", "-c", "h", "-o", "x"]).unwrap();
        assert_eq!(args.pattern(), PatternConfig::CLOUDFLARE);
        assert_eq!(args.interval.0, request::DEFAULT_INTERVAL);
        let command = Args::command();
        let help = command
            .get_arguments()
            .find(|a| a.get_long() == Some("write-size"))
            .and_then(|a| a.get_help())
            .unwrap()
            .to_string();
        let defaults = format!(
            "[default: {DEFAULT_WRITE_BYTES}, or {DEFAULT_ZEROCOPY_WRITE_BYTES} with --zerocopy]"
        );
        assert!(help.contains(&defaults), "{help}");
    }
}

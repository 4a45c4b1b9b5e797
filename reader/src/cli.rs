//! The reader's command line: its flags (the help text is their doc comments), their
//! conversion into a [`ReaderConfig`], and what a failure to start means for the exit code.
//! `main.rs` only parses, calls the library and prints.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use oscil_cli::address::{self, Endpoint};
use oscil_cli::group::{self, parse_group, GroupSpec};
use oscil_cli::placeholder;
use oscil_cli::request_args::{
    cloudflare, parse_pacing_rate, parse_slow_rate_arg, parse_write_size, SlowRateArg,
    TypedDuration,
};
use oscil_cli::units::{
    parse_bytes_u32, parse_fraction, parse_positive_duration, parse_whole_ms_duration, whole,
    UnitError,
};
use oscil_model::group::{total_flows, FlowGroup, Reading};
use oscil_model::pattern::{Fraction, PatternConfig, SlowRule};
use oscil_model::socket::{SocketOptions, WriteMode};
use oscil_protocol::auth::AuthError;
use oscil_protocol::key::{load_key, KeySource};
use oscil_protocol::request::{self, SessionRequest, MAX_CYCLES, MAX_FLOWS};

use crate::config::ReaderConfig;
use crate::error::ReaderError;
use crate::summary::Output;

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
pub struct Args {
    /// The daemon: HOST, HOST:PORT, [IPV6]:PORT or a bare IPv6 address; port 5250 unless given.
    #[arg(long, short = 'c', value_parser = address::parse_connect, value_name = placeholder::ADDR, required_unless_present = "listen")]
    connect: Option<Endpoint>,
    /// Connect to nothing: wait here for an `oscil-daemon --connect` to dial in (a sender
    /// behind NAT): PORT or :PORT (every address), HOST, HOST:PORT, [IPV6]:PORT; port 5250
    /// unless given. Needs a key; only a daemon that proves it gets the session.
    #[arg(long, value_parser = address::parse_listen, value_name = placeholder::ADDR, conflicts_with_all = ["connect", "bind", "busy_retry"])]
    listen: Option<Endpoint>,
    #[command(flatten)]
    address: oscil_cli::AddressFlags,
    /// Local address to connect from (a multi-homed host's WAN address).
    #[arg(long, short = 'B', value_parser = address::parse_bind, value_name = placeholder::ADDR)]
    bind: Option<IpAddr>,
    /// The run directory to write (must be empty or absent, unless --force).
    #[arg(value_parser = oscil_cli::files::path, long, short = 'o', value_name = placeholder::DIR)]
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
    fraction: Fraction,
    /// Read the slow phases at this absolute rate, all flows together (5mbit, 1gbit): the
    /// same workload whatever the setting under test, as oscil-lab does. `auto-per-run`
    /// (the default) reads --fraction of this run's own peak, which on a long path depends
    /// on how far slow start got: fine for one run, not for comparing two.
    #[arg(long, value_parser = parse_slow_rate_arg, value_name = "RATE|auto-per-run")]
    slow_rate: Option<SlowRateArg>,
    /// How many fast+slow cycles to run.
    #[arg(long, value_name = placeholder::N, default_value_t = cloudflare::CYCLES, value_parser = whole("count", 1, MAX_CYCLES))]
    cycles: u32,
    /// Control pattern: read at full speed for the whole run, as iperf3 does.
    #[arg(long)]
    full_speed: bool,
    /// A full-speed run of this length, as iperf3 -t (replaces the pattern).
    #[arg(long, short = 't', value_parser = parse_positive_duration, value_name = placeholder::DUR, conflicts_with_all = ["fast", "slow", "cycles", "full_speed", "fraction", "slow_rate"])]
    time: Option<Duration>,

    /// Parallel data connections (iperf3's -P).
    #[arg(long, short = 'P', visible_alias = "parallel", default_value_t = 1, value_parser = whole("count", 1, MAX_FLOWS), value_name = placeholder::N)]
    flows: u32,
    /// A group of flows with settings of its own (repeatable; the flows are numbered in
    /// group order). SPEC is a comma list of flows=N and any of notsent-lowat=, sndbuf=,
    /// congestion=, pacing-rate=, write-mode=, write-size=, pattern=oscillating|full-speed,
    /// fraction= and slow-rate=, each value read as the flag of that name reads it. The
    /// flags are every group's defaults, which its SPEC overrides; --slow-rate stays the
    /// rate of all flows together, a group without its own reading its flows' share.
    /// Refused beside --flows: each SPEC says its flows=, and together they keep --flows's
    /// limit. Without --group, the run is one group made of the flags.
    #[arg(long, value_parser = parse_group, value_name = "SPEC", conflicts_with = "flows")]
    group: Vec<GroupSpec>,
    /// Sampling interval of both ends.
    #[arg(long, default_value_t = cloudflare::INTERVAL, value_parser = parse_interval, value_name = "DUR")]
    interval: TypedDuration,

    /// The socket option TCP_NOTSENT_LOWAT on each of the daemon's data sockets (not the
    /// sysctl net.ipv4.tcp_notsent_lowat, which oscil-lab --tcp-notsent-lowat sets) (bytes;
    /// 128k works).
    #[arg(long, visible_alias = "lowat", value_parser = parse_bytes_u32, value_name = "BYTES")]
    pub notsent_lowat: Option<u32>,
    /// SO_SNDBUF for the daemon's sockets (the kernel doubles it; disables autotuning).
    #[arg(long, value_parser = parse_bytes_u32, value_name = "BYTES")]
    sndbuf: Option<u32>,
    /// Congestion control for the daemon's sockets (cubic, bbr, reno, ...).
    #[arg(long, visible_alias = "cc", value_name = "NAME")]
    congestion: Option<String>,
    /// SO_MAX_PACING_RATE for the daemon's sockets, as tc writes rates (100mbit).
    #[arg(long, value_parser = parse_pacing_rate, value_name = placeholder::RATE)]
    pacing_rate: Option<u64>,
    /// Bytes the daemon offers the kernel per write: unsent bytes can reach lowat/2 plus one
    /// write, so large writes hide what small ones show. [default: 262144, or 131072 with
    /// --zerocopy]
    #[arg(long, value_parser = parse_write_size, value_name = "BYTES")]
    write_size: Option<u32>,
    /// How the daemon writes: until-eagain (write until the kernel refuses, then wait for
    /// POLLOUT) or per-wake (one write each time poll says writable, as an event loop
    /// writes; the seed's writer). A small SO_SNDBUF bounds per-wake much more tightly.
    #[arg(long, default_value_t = WriteMode::UntilEagain, value_name = "until-eagain|per-wake")]
    write_mode: WriteMode,
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
    #[arg(value_parser = oscil_cli::files::path, long, value_name = placeholder::FILE)]
    pub key_file: Option<PathBuf>,
    /// Name of the run on charts (default: the directory's name).
    #[arg(long, value_name = "NAME", value_parser = parse_label)]
    label: Option<String>,
    /// A JSON file describing the run, in any shape you like, kept in run.json as "meta".
    #[arg(value_parser = oscil_cli::files::path, long, value_name = placeholder::FILE)]
    meta: Option<PathBuf>,
    /// The lab's record of the run (oscil-lab writes it), checked and kept in run.json as
    /// "lab".
    #[arg(value_parser = oscil_cli::files::path, long, value_name = placeholder::FILE)]
    lab_record: Option<PathBuf>,
    /// No progress display while the run goes on (the summary is still printed at the end).
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Print the result as JSON on stdout, an error object on failure (iperf3's -J).
    #[arg(long, short = 'J')]
    pub json: bool,
    /// Print JSON lines on stdout as the run goes on, each flushed: a start line (the
    /// session's settings and both hosts), one line per sampling interval (both ends'
    /// figures, per group, with the phase and the time) and an end line (what --json
    /// prints). Described by docs/json-stream.schema.json. The run stops, its directory
    /// complete up to then, when stdout's reader leaves (| head): exit 3, nothing said.
    #[arg(long, conflicts_with = "json")]
    pub json_stream: bool,
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

/// An empty `--label`: clap shows this line after the flag's name.
#[derive(Debug, thiserror::Error)]
#[error("a label names the run on charts and in the report's file names: give one, or leave out --label for the directory's name")]
pub struct EmptyLabel;

/// A run's name on charts and in file names: not empty.
fn parse_label(input: &str) -> Result<String, EmptyLabel> {
    match input.trim() {
        "" => Err(EmptyLabel),
        label => Ok(label.to_owned()),
    }
}

fn parse_interval(input: &str) -> Result<TypedDuration, UnitError> {
    parse_positive_duration(input).map(TypedDuration)
}

impl Args {
    /// How the run's result goes to stdout.
    pub fn output(&self) -> Output {
        match (self.json, self.json_stream) {
            (_, true) => Output::JsonStream,
            (true, false) => Output::Json,
            (false, false) => Output::Text,
        }
    }

    /// The lines said before anything starts: a lowat of 0, a key file others may read.
    pub fn start_warnings(&self) -> Vec<String> {
        oscil_cli::start_warnings("oscil-reader", self.notsent_lowat, self.key_file.as_deref())
    }

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
        let mut request = SessionRequest {
            flows: self.flows,
            interval: self.interval.0,
            pattern: Some(self.pattern()),
            marker_every: self.marker_every,
            write_size_bytes: self.write_size,
            write_mode: self.write_mode,
            sender: SocketOptions {
                notsent_lowat_bytes: self.notsent_lowat,
                sndbuf_bytes: self.sndbuf,
                rcvbuf_bytes: None,
                congestion: self.congestion.clone(),
                max_pacing_rate_bps: self.pacing_rate,
                zerocopy: self.zerocopy,
            },
            slow_rate_bps: self.slow_rate.and_then(SlowRateArg::bps),
            groups: Vec::new(),
        };
        if !self.group.is_empty() {
            request.groups = group::resolve(&self.group, &request.flow_groups()[0]);
            let total = total_flows(&request.groups);
            request.flows = u32::try_from(total).unwrap_or(u32::MAX);
            // The run's timetable oscillates while any group does.
            if let Some(pattern) = &mut request.pattern {
                pattern.full_speed = request
                    .groups
                    .iter()
                    .all(|g| g.pattern == Reading::FullSpeed);
            }
        }
        request.validate()?;
        Ok(request)
    }

    /// `--meta`'s JSON, read within its bound.
    fn meta_value(&self) -> anyhow::Result<Option<serde_json::Value>> {
        let Some(path) = &self.meta else {
            return Ok(None);
        };
        let text = read_meta(path)?;
        let value = serde_json::from_slice(&text)
            .with_context(|| format!("--meta file {} is not JSON", path.display()))?;
        Ok(Some(value))
    }

    /// The daemon's address (or the one to listen on), whether this reader listens, and the
    /// address family to look it up in, checked against `--bind`.
    fn daemon_address(&self, keyed: bool) -> anyhow::Result<(Endpoint, bool, address::IpFamily)> {
        let (endpoint, listen) = match (&self.connect, &self.listen) {
            (_, Some(listen)) => (listen, true),
            (Some(connect), None) => (connect, false),
            (None, None) => anyhow::bail!("give the daemon's address (--connect) or --listen"),
        };
        if listen && !keyed {
            anyhow::bail!("--listen needs a key, as a daemon on a public address does: give --key-file or $OSCIL_KEY (oscil-daemon --gen-key makes one)");
        }
        let connect = self.address.with_port(endpoint);
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
        Ok((connect, listen, family))
    }

    /// The run's configuration, and where its key came from.
    pub fn into_config(self) -> anyhow::Result<(ReaderConfig, Option<KeySource>)> {
        let (key, key_source) = load_key(self.key_file.as_deref())?.unzip();
        let meta = self.meta_value()?;
        let lab = self
            .lab_record
            .as_deref()
            .map(oscil_rundir::lab::read_record)
            .transpose()
            .context("--lab-record")?;
        let request = self.request()?;
        let pattern = request.pattern.unwrap_or_else(|| self.pattern());
        let groups = groups_as_run(&request);
        let (connect, listen, family) = self.daemon_address(key.is_some())?;
        let config = ReaderConfig {
            connect: connect.lookup_form(),
            listen,
            family,
            bind: self.bind,
            out: self.out,
            force: self.force,
            flows: request.flows,
            interval: request.interval,
            pattern,
            slow_rule: match request.slow_rate_bps {
                Some(rate) => SlowRule::Absolute {
                    bytes_per_s: rate.bytes_per_s(),
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
            write_mode: request.write_mode,
            sender_request: request.sender,
            groups,
            marker_every: request.marker_every,
            probe: !self.no_probe,
            trace: self.trace,
            busy_retry: self.busy_retry,
            key,
            label: self.label,
            lab,
            meta,
            progress: !self.quiet,
            json_stream: self.json_stream,
        };
        Ok((config, key_source))
    }
}

/// The request's groups as they run: each with the daemon's write size it will use.
fn groups_as_run(request: &SessionRequest) -> Vec<FlowGroup> {
    let zerocopy = request.sender.zerocopy;
    let with_size = |group: FlowGroup| FlowGroup {
        write_size_bytes: Some(request::write_size_bytes(group.write_size_bytes, zerocopy)),
        ..group
    };
    request.flow_groups().into_iter().map(with_size).collect()
}

/// Longest `--meta` file read: the lab's are a few hundred bytes.
const MAX_META_BYTES: u64 = 1 << 20;

/// The `--meta` file's bytes: a regular file of at most [`MAX_META_BYTES`] (a device such
/// as /dev/zero is refused at once, never read without bound).
fn read_meta(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    use oscil_rundir::safe_fs::{read_bounded, SafeFsError};
    read_bounded(path, MAX_META_BYTES).map_err(|e| match &e {
        SafeFsError::Io { source, .. } => anyhow::anyhow!(
            "cannot read --meta file {}: {}",
            path.display(),
            oscil_model::error_text::os_error(source)
        ),
        other => anyhow::anyhow!("--meta file {other}"),
    })
}

/// A daemon that refused this reader's key, or did not prove it holds it: the line says
/// where the key came from (a `$OSCIL_KEY` left in the environment is easy to forget).
pub fn with_the_key_named(error: anyhow::Error, source: Option<KeySource>) -> anyhow::Error {
    let about_the_key = matches!(
        error.downcast_ref::<ReaderError>(),
        Some(ReaderError::RefusedBeforeAuth(_) | ReaderError::Auth(AuthError::DaemonUnproven))
    );
    match source {
        Some(source) if about_the_key => anyhow::anyhow!(
            "{} (this reader's key came from {source})",
            oscil_model::error_text::error_line(&*error)
        ),
        _ => error,
    }
}

/// An -o that is used, a file or cannot be made, and a daemon's address that does not
/// resolve (or not in the family asked) are bad values, as in every binary (docs/cli.md):
/// exit 2, nothing was started; any other failure to start is 1.
pub fn start_failure_code(error: &anyhow::Error) -> u8 {
    match error.downcast_ref::<ReaderError>() {
        Some(ReaderError::RunDir(e)) if e.is_bad_path() => oscil_cli::exit::USAGE,
        Some(ReaderError::Address { .. } | ReaderError::NoAddressOfFamily { .. }) => {
            oscil_cli::exit::USAGE
        }
        _ => oscil_cli::exit::FAILED_START,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use oscil_model::pattern::BitRate;
    use oscil_model::run::sampling::DEFAULT_INTERVAL;
    use oscil_model::socket::{DEFAULT_WRITE_BYTES, DEFAULT_ZEROCOPY_WRITE_BYTES};

    #[test]
    fn the_defaults_are_the_cloudflare_pattern_and_the_protocols_write_sizes() {
        let args = Args::try_parse_from(["oscil-reader", "-c", "h", "-o", "x"]).unwrap();
        assert_eq!(args.pattern(), PatternConfig::CLOUDFLARE);
        assert_eq!(args.interval.0, DEFAULT_INTERVAL);
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

    /// `full` with two groups, each carrying every setting of its own; the flags stay the
    /// run's (zerocopy).
    fn grouped(
        full: &oscil_cli::invocation::ReaderInvocation,
    ) -> oscil_cli::invocation::ReaderInvocation {
        let mut grouped = full.clone();
        let first = grouped.request.flow_groups().remove(0);
        grouped.request.groups = vec![
            FlowGroup {
                flows: 2,
                pattern: Reading::FullSpeed,
                slow_rate_bps: None,
                ..first.clone()
            },
            FlowGroup {
                flows: 3,
                sender: SocketOptions {
                    congestion: Some("reno".into()),
                    notsent_lowat_bytes: Some(16384),
                    ..first.sender.clone()
                },
                pattern: Reading::Oscillating,
                ..first
            },
        ];
        grouped.request.flows = 5;
        grouped.request.pattern = grouped.request.pattern.map(|p| PatternConfig {
            full_speed: false,
            slow_ms: 1000,
            ..p
        });
        grouped
    }

    /// What another program asks for in one typed value reads back the same through this
    /// parser, every flag set and none.
    #[test]
    fn an_invocation_parses_back_to_its_request() {
        use oscil_cli::invocation::ReaderInvocation;
        let full = ReaderInvocation {
            connect: "10.0.0.1:41000".into(),
            key_file: "/k".into(),
            out: "/o".into(),
            lab_record: Some("/r.json".into()),
            label: Some("lowat-128k".into()),
            request: SessionRequest {
                marker_every: Some(Duration::from_millis(1500)),
                write_size_bytes: Some(16384),
                write_mode: WriteMode::PerWake,
                sender: SocketOptions {
                    notsent_lowat_bytes: Some(131072),
                    sndbuf_bytes: Some(65536),
                    rcvbuf_bytes: None,
                    congestion: Some("bbr".into()),
                    max_pacing_rate_bps: Some(50_000_001),
                    zerocopy: true,
                },
                slow_rate_bps: Some(BitRate::from_bps(5_000_000)),
                ..SessionRequest::new(
                    4,
                    Duration::from_micros(50_250),
                    Some(PatternConfig {
                        fast_ms: 2500,
                        slow_ms: 0,
                        fraction: Fraction::new(0.0123).unwrap(),
                        cycles: 7,
                        full_speed: true,
                    }),
                )
            },
            rcvbuf_bytes: Some(1 << 20),
            probe: false,
            trace: true,
            quiet: true,
        };
        let bare = ReaderInvocation {
            lab_record: None,
            label: None,
            request: SessionRequest::new(1, DEFAULT_INTERVAL, Some(PatternConfig::CLOUDFLARE)),
            rcvbuf_bytes: None,
            probe: true,
            trace: false,
            quiet: false,
            ..full.clone()
        };
        for invocation in [grouped(&full), full, bare] {
            let argv = std::iter::once("oscil-reader".to_string()).chain(invocation.argv());
            let args = Args::try_parse_from(argv).unwrap();
            assert_eq!(args.request().unwrap(), invocation.request);
            assert_eq!(
                args.connect,
                Some(address::parse_connect(&invocation.connect).unwrap())
            );
            assert_eq!(args.out, PathBuf::from(&invocation.out));
            assert_eq!(args.key_file, Some(PathBuf::from(&invocation.key_file)));
            assert_eq!(args.lab_record, invocation.lab_record.map(PathBuf::from));
            assert_eq!(args.label, invocation.label);
            assert_eq!(args.rcvbuf, invocation.rcvbuf_bytes);
            assert_eq!(
                (!args.no_probe, args.trace, args.quiet),
                (invocation.probe, invocation.trace, invocation.quiet)
            );
        }
    }
}

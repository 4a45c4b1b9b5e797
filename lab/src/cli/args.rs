//! The flags, each parsed by clap into its type: a value that cannot be used is clap's usage
//! error (exit 2, one line) naming the flag, before anything else is looked at.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use oscil_cli::group::{parse_group, GroupSpec};
use oscil_cli::list::{list, list_or_default, List};
use oscil_cli::path_args::{parse_loss, parse_rtt};
use oscil_cli::request_args::{
    parse_pacing_rate, parse_slow_rate_arg, parse_write_size, SlowRateArg,
};
use oscil_cli::units::{
    parse_bytes, parse_bytes_u32, parse_duration, parse_fraction, parse_positive_duration,
    parse_rate_bps, whole, UnitError,
};
use oscil_model::campaign::{Direction, UnknownDirection};
use oscil_model::lab::LinkKind;
use oscil_model::pattern::Fraction;
use oscil_model::socket::{UnknownWriteMode, WriteMode};
use oscil_model::sysctl::{Sysctl, NOTSENT_LOWAT_UNLIMITED};
use oscil_protocol::request::{self, RequestError, MAX_CYCLES, MAX_FLOWS};

use crate::remote::host::{check_bin_dir, check_ssh_option, check_ssh_target, HostArgError};

/// Runs a campaign: every combination of the listed settings, each repeated, between an
/// oscil-daemon and an oscil-reader on two network namespaces joined by an emulated
/// long-haul link (the default), or on two real hosts over ssh (--sender/--receiver).
/// LISTs are comma-separated; `default` leaves the kernel's (or the host's) own value.
#[derive(Debug, Parser)]
#[command(
    name = "oscil-lab",
    version,
    args_conflicts_with_subcommands = true,
    allow_negative_numbers = true,
    args_override_self = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Sub>,

    /// Bottleneck rates, as tc writes them [default: 1gbit] (namespace lab only).
    #[arg(long, value_name = "LIST", value_parser = list(parse_rate_bps), help_heading = "Emulated path")]
    pub rate: Option<List<u64>>,
    /// Round-trip times, split into two equal one-way delays [default: 466ms].
    #[arg(long, value_name = "LIST", value_parser = list(parse_rtt), help_heading = "Emulated path")]
    pub rtt: Option<List<Duration>>,
    /// Bottleneck queue in packets [default: what drains in 60 ms, at least 50].
    #[arg(long, value_name = "PKTS", value_parser = whole("count", 1, 1_000_000u32), help_heading = "Emulated path")]
    pub queue: Option<u32>,
    /// Random loss per packet, percent (0.5 or 0.5%) [default: 0].
    #[arg(long, value_name = "PCT", value_parser = parse_loss, help_heading = "Emulated path")]
    pub loss: Option<f64>,
    /// oscil-link over TUN, or veth + netem where the kernel has sch_netem [default: tun].
    #[arg(long, value_parser = link_kind(), help_heading = "Emulated path")]
    pub link: Option<LinkKind>,
    /// Keep a packet capture of each run's link: the headers (128 bytes) of every packet
    /// entering it, per direction, as pcapng in the run's directory (link-a_to_b.pcapng,
    /// sender to receiver, and link-b_to_a.pcapng), at most 256 MiB a run (TUN link only).
    /// With --sender/--receiver: tcpdump on the sender, TCP on the daemon's port, 128 bytes
    /// of each packet, at most 500000 packets, as sender.pcap in the run's directory (said
    /// once, and no capture, where the sender has no tcpdump).
    #[arg(long, help_heading = "Emulated path")]
    pub pcap: bool,

    /// The sysctl net.ipv4.tcp_notsent_lowat in the sender's namespace or host, for every
    /// socket without its own (not the socket option oscil-reader's --notsent-lowat sets)
    /// (bytes: 131072, 128k) [default: default,131072].
    #[arg(
        long = "tcp-notsent-lowat",
        visible_aliases = ["lowat", "notsent-lowat"],
        value_name = "LIST",
        value_parser = list_or_default(parse_lowat),
        help_heading = "Settings (axes)"
    )]
    pub tcp_notsent_lowat: Option<List<Option<u64>>>,
    /// net.ipv4.tcp_wmem on the sender, MIN:DEF:MAX [lab: 4096:16384:536870912; hosts: default].
    #[arg(long, value_name = "LIST", value_parser = list_or_default(parse_triple), help_heading = "Settings (axes)")]
    pub wmem: Option<List<Option<[u64; 3]>>>,
    /// net.ipv4.tcp_rmem on the receiver, MIN:DEF:MAX [lab: 8192:262144:536870912; hosts: default].
    #[arg(long, value_name = "LIST", value_parser = list_or_default(parse_triple), help_heading = "Settings (axes)")]
    pub rmem: Option<List<Option<[u64; 3]>>>,
    /// net.ipv4.tcp_adv_win_scale on the receiver [default: default].
    #[arg(long, value_name = "LIST", value_parser = list_or_default(parse_adv_win_scale), help_heading = "Settings (axes)")]
    pub adv_win_scale: Option<List<Option<i32>>>,
    /// Congestion control, set per socket by the daemon [default: cubic].
    #[arg(
        long,
        visible_alias = "congestion",
        value_name = "LIST",
        value_parser = list_or_default(parse_congestion),
        help_heading = "Settings (axes)"
    )]
    pub cc: Option<List<Option<String>>>,
    /// SO_SNDBUF on the daemon's sockets (16k; disables send autotuning) [default: default].
    #[arg(long, value_name = "LIST", value_parser = list_or_default(parse_bytes_u32), help_heading = "Settings (axes)")]
    pub sndbuf: Option<List<Option<u32>>>,
    /// SO_RCVBUF on the reader's sockets [default: default].
    #[arg(long, value_name = "LIST", value_parser = list_or_default(parse_bytes_u32), help_heading = "Settings (axes)")]
    pub rcvbuf: Option<List<Option<u32>>>,
    /// SO_MAX_PACING_RATE on the daemon's sockets (100mbit) [default: default].
    #[arg(long, value_name = "LIST", value_parser = list_or_default(parse_pacing_rate), help_heading = "Settings (axes)")]
    pub pacing_rate: Option<List<Option<u64>>>,
    /// How the daemon writes: until-eagain (write until the kernel refuses), per-wake (one
    /// --write-size write each time poll says writable: an event loop's writer, the seed's)
    /// [default: until-eagain].
    #[arg(long, value_name = "LIST", value_parser = list(parse_write_mode), help_heading = "Settings (axes)")]
    pub write_mode: Option<List<WriteMode>>,
    /// Reading patterns: oscillating, full-speed (the iperf3-like control) [default: oscillating].
    #[arg(long, value_name = "LIST", value_parser = list(parse_pattern), help_heading = "Settings (axes)")]
    pub pattern: Option<List<ReadPattern>>,
    /// Which way the data flows over the emulated link: forward (the daemon in the sending
    /// namespace), reverse (the daemon in the receiving one, data flowing back), both (a
    /// forward and a reverse pair at the same time, the reverse run in RUN/reverse); the
    /// namespace lab only [default: forward].
    #[arg(long, value_name = "LIST", value_parser = list(parse_direction), help_heading = "Settings (axes)")]
    pub direction: Option<List<Direction>>,

    /// A group of flows with settings of its own, the same in every configuration
    /// (repeatable): SPEC is oscil-reader's --group grammar, a comma list of flows=N and any
    /// of notsent-lowat= (the socket option, not --tcp-notsent-lowat's sysctl), sndbuf=,
    /// congestion=, pacing-rate=, write-mode=, write-size=, pattern=, fraction=, slow-rate=.
    /// Each configuration's settings are every group's defaults, which its SPEC overrides; a
    /// group without slow-rate= reads its flows' share of the path's. Refused beside
    /// --flows: the SPECs say the flows.
    #[arg(long, value_name = "SPEC", value_parser = parse_group, conflicts_with = "flows", help_heading = "Reading pattern")]
    pub group: Vec<GroupSpec>,
    /// A group of the reverse pair's flows in a --direction both configuration (repeatable,
    /// --group's grammar); without it the reverse pair runs the forward pair's flows.
    #[arg(long, value_name = "SPEC", value_parser = parse_group, help_heading = "Reading pattern")]
    pub reverse_group: Vec<GroupSpec>,
    /// Data connections per run [default: 1].
    #[arg(long, value_name = "N", value_parser = whole("count", 1, MAX_FLOWS), help_heading = "Reading pattern")]
    pub flows: Option<u32>,
    /// Length of each fast phase [default: 5s].
    #[arg(long, value_name = "DUR", value_parser = parse_positive_duration, help_heading = "Reading pattern")]
    pub fast: Option<Duration>,
    /// Length of each slow phase [default: 15s].
    #[arg(long, value_name = "DUR", value_parser = parse_duration, help_heading = "Reading pattern")]
    pub slow: Option<Duration>,
    /// Share of the path's rate that each slow second reads (of the calibration's peak on
    /// real hosts, of each run's own with --slow-rate auto-per-run) [default: 0.05].
    #[arg(long, value_name = "F", value_parser = parse_fraction, help_heading = "Reading pattern")]
    pub fraction: Option<Fraction>,
    /// Fast+slow cycles [default: 3].
    #[arg(long, value_name = "N", value_parser = whole("count", 1, MAX_CYCLES), help_heading = "Reading pattern")]
    pub cycles: Option<u32>,
    /// Short pattern: --fast 2s --slow 4s --cycles 1 (explicit values win).
    #[arg(long, help_heading = "Reading pattern")]
    pub quick: bool,
    /// Sampling interval [default: 100ms].
    #[arg(long, value_name = "DUR", value_parser = parse_positive_duration, help_heading = "Reading pattern")]
    pub interval: Option<Duration>,
    /// Bytes the daemon offers the kernel per write [default: the daemon's, 256k]; the
    /// seed's lab wrote 16k.
    #[arg(long, value_name = "BYTES", value_parser = parse_write_size, help_heading = "Reading pattern")]
    pub write_size: Option<u32>,
    /// Mark every flow's stream this often and record each mark's latency from the
    /// daemon's write to the reader's read (at least --interval; `off` for none) [default:
    /// 1s].
    #[arg(long, value_name = "DUR", value_parser = parse_marker_every, help_heading = "Reading pattern")]
    pub marker_every: Option<MarkerEvery>,
    /// No idle probe connection beside the flows (by default one echoes 8 bytes every
    /// 100 ms: the path's round trip without the send queue, probe.csv).
    #[arg(long, help_heading = "Reading pattern")]
    pub no_probe: bool,
    /// Read the slow phases at this absolute rate, all flows together (5mbit), or at
    /// --fraction of each run's own peak (auto-per-run: configurations may then read
    /// different workloads, which the report says) [default: one rate per path, --fraction
    /// of the emulated path's rate; on real hosts of the peak of a calibration run at full
    /// speed, one per pair before its first run].
    #[arg(
        long,
        value_name = "RATE|auto-per-run",
        value_parser = parse_slow_rate_arg,
        help_heading = "Reading pattern"
    )]
    pub slow_rate: Option<SlowRateArg>,
    /// Trace every ACK of the sender's data sockets and the receiver's autotuning from the
    /// kernel's tracepoints (trace-sender.csv, trace-reader.csv) and draw the report's
    /// time-sequence pictures; costs CPU (docs/PERFORMANCE.md).
    #[arg(long, help_heading = "Reading pattern")]
    pub trace: bool,

    /// Runs per configuration [default: 1].
    #[arg(long, value_name = "N", value_parser = whole("count", 1, 1000u32), help_heading = "Campaign")]
    pub repeat: Option<u32>,
    /// Order of the runs [default: shuffled].
    #[arg(long, value_enum, help_heading = "Campaign")]
    pub order: Option<OrderArg>,
    /// Seed of the shuffled order [default: from the clock; recorded in campaign.json].
    #[arg(long, value_name = "N", value_parser = whole("seed", 0, u64::MAX), help_heading = "Campaign")]
    pub seed: Option<u64>,
    /// The campaign directory [default: lab-<date>-<time>].
    #[arg(value_parser = oscil_cli::files::path, long, short = 'o', value_name = "DIR", help_heading = "Campaign")]
    pub out: Option<PathBuf>,
    /// Start afresh in a non-empty --out, deleting its campaign.json, runs/ and report/.
    #[arg(long, help_heading = "Campaign")]
    pub force: bool,
    /// Continue the campaign in DIR: skip complete runs, rerun partial and failed ones.
    #[arg(value_parser = oscil_cli::files::path, long, value_name = "DIR", help_heading = "Campaign")]
    pub resume: Option<PathBuf>,
    /// Print every run and the total duration; touch nothing.
    #[arg(long, help_heading = "Campaign")]
    pub dry_run: bool,
    /// How progress goes to stderr: `human` (a bar on a terminal, a line per run), `json`
    /// (one JSON object a line: run started and finished with its settings, pair and
    /// round, rounds, redos, ETA, every other line as a message, and the end with the exit
    /// code; docs/lab.md) or `none` (warnings and errors only).
    #[arg(
        long,
        value_enum,
        default_value_t,
        value_name = "MODE",
        help_heading = "Campaign"
    )]
    pub progress: crate::progress::ProgressMode,

    /// Two real hosts: the sender (runs oscil-daemon), as ssh takes it.
    #[arg(long, value_name = "USER@HOST", value_parser = ssh_target, help_heading = "Two real hosts")]
    pub sender: Option<String>,
    /// The receiver (runs oscil-reader): `local` (this machine) or USER@HOST.
    #[arg(long, value_name = "local|USER@HOST", value_parser = receiver, help_heading = "Two real hosts")]
    pub receiver: Option<Receiver>,
    /// Passed to ssh as -o KEY=VALUE (repeatable): only options that say how to reach and
    /// authenticate a host (Port, User, IdentityFile, StrictHostKeyChecking, ...; any other
    /// is refused with the whole list), never one that runs a command.
    #[arg(long, value_name = "KEY=VALUE", value_parser = ssh_option, help_heading = "Two real hosts")]
    pub ssh_option: Vec<String>,
    /// Where the oscil binaries are on the hosts [default: the remote PATH].
    #[arg(long, value_name = "DIR", value_parser = bin_dir, help_heading = "Two real hosts")]
    pub remote_bin: Option<String>,
    /// Copy this build's binaries to the hosts (into --remote-bin, else a temporary directory).
    #[arg(long, help_heading = "Two real hosts")]
    pub install: bool,

    /// Many hosts: an Ansible inventory naming them, read through ansible-inventory where it
    /// is installed (group_vars, host_vars, ranges, plugins), or the JSON
    /// `ansible-inventory --list` prints (FILE, or - for standard input); without Ansible,
    /// INI and YAML inventories are read by the lab itself. Pairs of hosts are measured in
    /// rounds, no host in two runs at once.
    #[arg(value_parser = oscil_cli::files::path, long, value_name = "FILE|DIR|-", help_heading = "Many hosts")]
    pub inventory: Option<PathBuf>,
    /// Let ansible-inventory run the inventory plugins an inventory names (auto, script,
    /// generator, a cloud's): they run code as this user, even for --dry-run. Without it
    /// only the static plugins (ini, yaml, toml, host_list) read the inventory.
    #[arg(long, help_heading = "Many hosts")]
    pub inventory_plugins: bool,
    /// The ordered pairs of --inventory to measure: all, hub:NAME (NAME to and from each
    /// other host) or SENDER>RECEIVER,... [default: all].
    #[arg(long, value_name = "all|hub:NAME|A>B,...", help_heading = "Many hosts")]
    pub pairs: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Sub {
    /// Put back every sysctl a campaign on real hosts changed, and stop its daemon (after a crash).
    Restore {
        /// The campaign directory.
        #[arg(value_parser = oscil_cli::files::path)]
        dir: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OrderArg {
    Shuffled,
    Grouped,
}

/// `--pattern`'s entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadPattern {
    Oscillating,
    /// The control: full speed for the whole run, as iperf3 reads.
    FullSpeed,
}

/// `--marker-every`: how often to mark every flow's stream, or not at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerEvery {
    Off,
    Every(Duration),
}

/// `--receiver`: this machine, or one reached over ssh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Receiver {
    Local,
    Ssh(String),
}

/// What is wrong with one value of one flag (clap names the flag).
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    #[error(transparent)]
    Unit(#[from] UnitError),
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error("{0:?} is not MIN:DEFAULT:MAX (e.g. 4096:16384:536870912)")]
    NotTriple(String),
    #[error("{0:?}: MIN <= DEFAULT <= MAX is needed")]
    TripleOrder(String),
    #[error("{input:?} is not a whole number from {min} to {max}")]
    OutOfRange { input: String, min: i64, max: i64 },
    #[error(transparent)]
    WriteMode(#[from] UnknownWriteMode),
    #[error("{0:?} is not a pattern (oscillating or full-speed)")]
    Pattern(String),
    #[error("0 would stall every write: a socket without its own TCP_NOTSENT_LOWAT may write only while its unsent bytes are below {lowat}, and none are below 0 (`default` leaves the kernel's)", lowat = Sysctl::TcpNotsentLowat)]
    ZeroLowat,
}

/// `--link`: one of the kinds the record names.
fn link_kind() -> impl clap::builder::TypedValueParser<Value = LinkKind> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(LinkKind::ALL.map(LinkKind::name)).map(|name| {
        let found = LinkKind::ALL.into_iter().find(|k| k.name() == name);
        found.expect("clap checked it is one of them")
    })
}

/// `MIN:DEF:MAX`, each a byte size.
pub fn parse_triple(input: &str) -> Result<[u64; 3], ValueError> {
    let parts: Vec<&str> = input.split(':').collect();
    if parts.len() != 3 {
        return Err(ValueError::NotTriple(input.to_owned()));
    }
    let mut triple = [0; 3];
    for (slot, part) in triple.iter_mut().zip(parts) {
        *slot = parse_bytes(part)?;
    }
    match triple[0] <= triple[1] && triple[1] <= triple[2] {
        true => Ok(triple),
        false => Err(ValueError::TripleOrder(input.to_owned())),
    }
}

/// A name the kernel would read as written; whether this kernel has it is checked apart
/// (`check_congestion_available`), as only the lab's own kernel can be asked.
fn parse_congestion(input: &str) -> Result<String, ValueError> {
    request::check_congestion_name(input)?;
    Ok(input.to_owned())
}

/// `net.ipv4.tcp_notsent_lowat`: unlike the socket option, where 0 means "use the
/// sysctl", the sysctl's 0 is taken as the limit itself; the kernel holds it in 32 bits.
fn parse_lowat(input: &str) -> Result<u64, ValueError> {
    match parse_bytes(input)? {
        0 => Err(ValueError::ZeroLowat),
        bytes if bytes > NOTSENT_LOWAT_UNLIMITED => Err(ValueError::OutOfRange {
            input: input.to_owned(),
            min: 1,
            max: NOTSENT_LOWAT_UNLIMITED as i64,
        }),
        bytes => Ok(bytes),
    }
}

fn parse_adv_win_scale(input: &str) -> Result<i32, ValueError> {
    match input.parse::<i32>() {
        Ok(v) if (-31..=31).contains(&v) => Ok(v),
        _ => Err(ValueError::OutOfRange {
            input: input.to_owned(),
            min: -31,
            max: 31,
        }),
    }
}

fn parse_write_mode(input: &str) -> Result<WriteMode, UnknownWriteMode> {
    input.parse()
}

fn parse_direction(input: &str) -> Result<Direction, UnknownDirection> {
    input.parse()
}

fn parse_pattern(input: &str) -> Result<ReadPattern, ValueError> {
    match input {
        "oscillating" => Ok(ReadPattern::Oscillating),
        "full-speed" => Ok(ReadPattern::FullSpeed),
        _ => Err(ValueError::Pattern(input.to_owned())),
    }
}

fn parse_marker_every(input: &str) -> Result<MarkerEvery, UnitError> {
    match input {
        "off" => Ok(MarkerEvery::Off),
        every => parse_positive_duration(every).map(MarkerEvery::Every),
    }
}

/// `[USER@]HOST`, refusing what ssh would read as an option.
fn ssh_target(input: &str) -> Result<String, HostArgError> {
    check_ssh_target(input).map(|()| input.to_owned())
}

fn receiver(input: &str) -> Result<Receiver, HostArgError> {
    match input {
        "local" => Ok(Receiver::Local),
        target => ssh_target(target).map(Receiver::Ssh),
    }
}

fn ssh_option(input: &str) -> Result<String, HostArgError> {
    check_ssh_option(input).map(|()| input.to_owned())
}

fn bin_dir(input: &str) -> Result<String, HostArgError> {
    check_bin_dir(input).map(|()| input.to_owned())
}

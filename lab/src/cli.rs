//! The command line, and its translation into a typed [`Job`]. Every value is checked here,
//! with the same parsers as the binaries, before anything exists on any host.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use oscil_cli::request_args::{
    parse_pacing_rate, parse_slow_rate_arg, parse_write_size, ArgError, SlowRateArg,
};
use oscil_cli::units::{
    parse_bytes, parse_bytes_u32, parse_duration, parse_fraction, parse_percent,
    parse_positive_duration, parse_rate_bps, UnitError,
};
use oscil_kernel::congestion::CongestionControls;
use oscil_model::campaign::{Order, PathSettings};
use oscil_model::lab::LinkKind;
use oscil_model::pattern::PatternConfig;
use oscil_model::sampling::DEFAULT_INTERVAL;
use oscil_model::socket::{UnknownWriteMode, WriteMode};
use oscil_model::sysctl::{Sysctl, NOTSENT_LOWAT_UNLIMITED};
use oscil_protocol::request::{self, RequestError, SessionRequest, MAX_CYCLES, MAX_FLOWS};

use crate::backend::fleet::inventory::Plugins;
use crate::config::{BackendSpec, HostsSpec, Job, NewCampaign};
use crate::plan::matrix::{AxisValue, Matrix, Setting};
use crate::remote::host::{check_bin_dir, check_ssh_option, check_ssh_target, HostArgError};

/// The lab's marker interval unless `--marker-every` says otherwise, µs.
const DEFAULT_MARKER_EVERY_US: u64 = 1_000_000;

/// `--quick`: one short cycle, for trying a setup.
const QUICK: PatternConfig = PatternConfig {
    fast_ms: 2000,
    slow_ms: 4000,
    cycles: 1,
    ..PatternConfig::CLOUDFLARE
};

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
    #[arg(long, value_name = "LIST", help_heading = "Emulated path")]
    pub rate: Option<String>,
    /// Round-trip times, split into two equal one-way delays [default: 466ms].
    #[arg(long, value_name = "LIST", help_heading = "Emulated path")]
    pub rtt: Option<String>,
    /// Bottleneck queue in packets [default: what drains in 60 ms, at least 50].
    #[arg(long, value_name = "PKTS", help_heading = "Emulated path")]
    pub queue: Option<String>,
    /// Random loss per packet, percent (0.5 or 0.5%) [default: 0].
    #[arg(long, value_name = "PCT", help_heading = "Emulated path")]
    pub loss: Option<String>,
    /// oscil-link over TUN, or veth + netem where the kernel has sch_netem [default: tun].
    #[arg(long, value_parser = link_kind(), help_heading = "Emulated path")]
    pub link: Option<LinkKind>,

    /// net.ipv4.tcp_notsent_lowat on the sender (bytes: 131072, 128k) [default: default,131072].
    #[arg(
        long,
        visible_alias = "notsent-lowat",
        value_name = "LIST",
        help_heading = "Settings (axes)"
    )]
    pub lowat: Option<String>,
    /// net.ipv4.tcp_wmem on the sender, MIN:DEF:MAX [lab: 4096:16384:536870912; hosts: default].
    #[arg(long, value_name = "LIST", help_heading = "Settings (axes)")]
    pub wmem: Option<String>,
    /// net.ipv4.tcp_rmem on the receiver, MIN:DEF:MAX [lab: 8192:262144:536870912; hosts: default].
    #[arg(long, value_name = "LIST", help_heading = "Settings (axes)")]
    pub rmem: Option<String>,
    /// net.ipv4.tcp_adv_win_scale on the receiver [default: default].
    #[arg(long, value_name = "LIST", help_heading = "Settings (axes)")]
    pub adv_win_scale: Option<String>,
    /// Congestion control, set per socket by the daemon [default: cubic].
    #[arg(
        long,
        visible_alias = "congestion",
        value_name = "LIST",
        help_heading = "Settings (axes)"
    )]
    pub cc: Option<String>,
    /// SO_SNDBUF on the daemon's sockets (16k; disables send autotuning) [default: default].
    #[arg(long, value_name = "LIST", help_heading = "Settings (axes)")]
    pub sndbuf: Option<String>,
    /// SO_RCVBUF on the reader's sockets [default: default].
    #[arg(long, value_name = "LIST", help_heading = "Settings (axes)")]
    pub rcvbuf: Option<String>,
    /// SO_MAX_PACING_RATE on the daemon's sockets (100mbit) [default: default].
    #[arg(long, value_name = "LIST", help_heading = "Settings (axes)")]
    pub pacing_rate: Option<String>,
    /// How the daemon writes: until-eagain (write until the kernel refuses), per-wake (one
    /// --write-size write each time poll says writable: an event loop's writer, the seed's)
    /// [default: until-eagain].
    #[arg(long, value_name = "LIST", help_heading = "Settings (axes)")]
    pub write_mode: Option<String>,
    /// Reading patterns: oscillating, full-speed (the iperf3-like control) [default: oscillating].
    #[arg(long, value_name = "LIST", help_heading = "Settings (axes)")]
    pub pattern: Option<String>,

    /// Data connections per run [default: 1].
    #[arg(long, value_name = "N", help_heading = "Reading pattern")]
    pub flows: Option<String>,
    /// Length of each fast phase [default: 5s].
    #[arg(long, value_name = "DUR", help_heading = "Reading pattern")]
    pub fast: Option<String>,
    /// Length of each slow phase [default: 15s].
    #[arg(long, value_name = "DUR", help_heading = "Reading pattern")]
    pub slow: Option<String>,
    /// Share of the path's rate that each slow second reads (of the calibration's peak on
    /// real hosts, of each run's own with --slow-rate auto-per-run) [default: 0.05].
    #[arg(long, value_name = "F", help_heading = "Reading pattern")]
    pub fraction: Option<String>,
    /// Fast+slow cycles [default: 3].
    #[arg(long, value_name = "N", help_heading = "Reading pattern")]
    pub cycles: Option<String>,
    /// Short pattern: --fast 2s --slow 4s --cycles 1 (explicit values win).
    #[arg(long, help_heading = "Reading pattern")]
    pub quick: bool,
    /// Sampling interval [default: 100ms].
    #[arg(long, value_name = "DUR", help_heading = "Reading pattern")]
    pub interval: Option<String>,
    /// Bytes the daemon offers the kernel per write [default: the daemon's, 256k]; the
    /// seed's lab wrote 16k.
    #[arg(long, value_name = "BYTES", help_heading = "Reading pattern")]
    pub write_size: Option<String>,
    /// Mark every flow's stream this often and record each mark's latency from the
    /// daemon's write to the reader's read (at least --interval; `off` for none) [default:
    /// 1s].
    #[arg(long, value_name = "DUR", help_heading = "Reading pattern")]
    pub marker_every: Option<String>,
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
        help_heading = "Reading pattern"
    )]
    pub slow_rate: Option<String>,
    /// Trace every ACK of the sender's data sockets and the receiver's autotuning from the
    /// kernel's tracepoints (trace-sender.csv, trace-reader.csv) and draw the report's
    /// time-sequence pictures; costs CPU (docs/PERFORMANCE.md).
    #[arg(long, help_heading = "Reading pattern")]
    pub trace: bool,

    /// Runs per configuration [default: 1].
    #[arg(long, value_name = "N", help_heading = "Campaign")]
    pub repeat: Option<String>,
    /// Order of the runs [default: shuffled].
    #[arg(long, value_enum, help_heading = "Campaign")]
    pub order: Option<OrderArg>,
    /// Seed of the shuffled order [default: from the clock; recorded in campaign.json].
    #[arg(long, value_name = "N", help_heading = "Campaign")]
    pub seed: Option<String>,
    /// The campaign directory [default: lab-<date>-<time>].
    #[arg(long, short = 'o', value_name = "DIR", help_heading = "Campaign")]
    pub out: Option<PathBuf>,
    /// Start afresh in a non-empty --out, deleting its campaign.json, runs/ and report/.
    #[arg(long, help_heading = "Campaign")]
    pub force: bool,
    /// Continue the campaign in DIR: skip complete runs, rerun partial and failed ones.
    #[arg(long, value_name = "DIR", help_heading = "Campaign")]
    pub resume: Option<PathBuf>,
    /// Print every run and the total duration; touch nothing.
    #[arg(long, help_heading = "Campaign")]
    pub dry_run: bool,

    /// Two real hosts: the sender (runs oscil-daemon), as ssh takes it.
    #[arg(long, value_name = "USER@HOST", help_heading = "Two real hosts")]
    pub sender: Option<String>,
    /// The receiver (runs oscil-reader): `local` (this machine) or USER@HOST.
    #[arg(long, value_name = "local|USER@HOST", help_heading = "Two real hosts")]
    pub receiver: Option<String>,
    /// Passed to ssh as -o KEY=VALUE (repeatable): only options that say how to reach and
    /// authenticate a host (Port, User, IdentityFile, StrictHostKeyChecking, ...; any other
    /// is refused with the whole list), never one that runs a command.
    #[arg(long, value_name = "KEY=VALUE", help_heading = "Two real hosts")]
    pub ssh_option: Vec<String>,
    /// Where the oscil binaries are on the hosts [default: the remote PATH].
    #[arg(long, value_name = "DIR", help_heading = "Two real hosts")]
    pub remote_bin: Option<String>,
    /// Copy this build's binaries to the hosts (into --remote-bin, else a temporary directory).
    #[arg(long, help_heading = "Two real hosts")]
    pub install: bool,

    /// Many hosts: an Ansible inventory naming them, read through ansible-inventory where it
    /// is installed (group_vars, host_vars, ranges, plugins), or the JSON
    /// `ansible-inventory --list` prints (FILE, or - for standard input); without Ansible,
    /// INI and YAML inventories are read by the lab itself. Pairs of hosts are measured in
    /// rounds, no host in two runs at once.
    #[arg(long, value_name = "FILE|DIR|-", help_heading = "Many hosts")]
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
        dir: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OrderArg {
    Shuffled,
    Grouped,
}

/// A value on the command line that cannot be used; the message names the option.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("--{option}: {detail}")]
    Invalid {
        option: &'static str,
        detail: ValueError,
    },
    #[error("{0} describe the emulated path; they do not apply to real hosts (the campaign measures the path instead)")]
    PathOnHosts(String),
    #[error(
        "--sender and --receiver go together (one names the daemon's host, the other the reader's)"
    )]
    HalfHosts,
    /// ssh's own words on an ssh target or option.
    #[error("--{option}: {detail}")]
    Ssh {
        option: &'static str,
        detail: HostArgError,
    },
    #[error("--resume takes the plan from DIR/campaign.json; leave out {0}")]
    PlanWithResume(String),
    /// A run the plan holds breaks a rule of every session (the reader's and the daemon's).
    #[error("{source} (configuration {label})")]
    Request { label: String, source: RequestError },
}

/// What is wrong with one value of one option.
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    #[error(transparent)]
    Unit(#[from] UnitError),
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error(transparent)]
    Arg(#[from] ArgError),
    #[error("entry {index} of {list:?} is empty")]
    EmptyEntry { index: usize, list: String },
    #[error("{0:?} is listed twice")]
    Twice(String),
    #[error("{first:?} and {again:?} are one value: list it once")]
    SameValue { first: String, again: String },
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
    #[error("{0:?} is not a seed (a whole number from 0 to 2^64-1)")]
    Seed(String),
    #[error("{name:?} is not a congestion control this kernel has (it has: {available})")]
    NoSuchCongestion { name: String, available: String },
    #[error("cannot read the congestion controls this kernel has: {0}")]
    CongestionList(String),
    #[error("{path}: {source}")]
    Inventory {
        path: std::path::PathBuf,
        source: crate::backend::fleet::inventory::InventoryError,
    },
    #[error(transparent)]
    Pairs(#[from] crate::backend::fleet::pairs::PairsError),
    #[error(transparent)]
    Fleet(#[from] crate::config::FleetError),
    #[error("pairs of what? give --inventory")]
    PairsWithoutInventory,
    #[error("names the hosts; leave out --sender and --receiver")]
    InventoryWithHosts,
    #[error("0 would stall every write: a socket without its own TCP_NOTSENT_LOWAT may write only while its unsent bytes are below {lowat}, and none are below 0 (`default` leaves the kernel's)", lowat = Sysctl::TcpNotsentLowat)]
    ZeroLowat,
}

fn invalid<E: Into<ValueError>>(option: &'static str) -> impl Fn(E) -> CliError {
    move |detail| CliError::Invalid {
        option,
        detail: detail.into(),
    }
}

/// `--link`: one of the kinds the record names.
fn link_kind() -> impl clap::builder::TypedValueParser<Value = LinkKind> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(LinkKind::ALL.map(LinkKind::name)).map(|name| {
        let found = LinkKind::ALL.into_iter().find(|k| k.name() == name);
        found.expect("clap checked it is one of them")
    })
}

/// Splits a LIST, refusing empty and repeated entries.
fn entries(option: &'static str, text: &str) -> Result<Vec<String>, CliError> {
    let items: Vec<String> = text.split(',').map(|s| s.trim().to_owned()).collect();
    if let Some(i) = items.iter().position(String::is_empty) {
        return Err(invalid(option)(ValueError::EmptyEntry {
            index: i + 1,
            list: text.to_owned(),
        }));
    }
    for (i, item) in items.iter().enumerate() {
        if items[..i].contains(item) {
            return Err(invalid(option)(ValueError::Twice(item.clone())));
        }
    }
    Ok(items)
}

/// A LIST's entries, each with its value: two spellings of one value (`128k,131072`,
/// `100ms,0.1s`) would run one configuration twice under two labels, so they are refused.
fn values_of<T: PartialEq>(
    option: &'static str,
    text: &str,
    parse: impl Fn(&str) -> Result<T, ValueError>,
) -> Result<Vec<(String, T)>, CliError> {
    let mut values: Vec<(String, T)> = Vec::new();
    for entry in entries(option, text)? {
        let value = parse(&entry).map_err(invalid(option))?;
        if let Some((first, _)) = values.iter().find(|(_, v)| *v == value) {
            return Err(invalid(option)(ValueError::SameValue {
                first: first.clone(),
                again: entry,
            }));
        }
        values.push((entry, value));
    }
    Ok(values)
}

/// One axis: each entry parsed, `default` meaning "leave it alone".
struct Axis<'a> {
    option: &'static str,
    text: &'a str,
    /// The label names an entry as `<prefix><entry>` ...
    prefix: &'static str,
    /// ... unless it has this one's value (the backend's default, left out of labels).
    omit: Option<&'a str>,
}

impl<'a> Axis<'a> {
    /// The axis of `option`: its given LIST, else `default`.
    fn new(
        option: &'static str,
        given: &'a Option<String>,
        default: &'a str,
        prefix: &'static str,
        omit: Option<&'a str>,
    ) -> Axis<'a> {
        let text = given.as_deref().unwrap_or(default);
        Axis {
            option,
            text,
            prefix,
            omit,
        }
    }

    fn values<T: PartialEq>(
        &self,
        parse: impl Fn(&str) -> Result<T, ValueError>,
        set: impl Fn(Option<T>) -> Setting,
    ) -> Result<Vec<AxisValue>, CliError> {
        let parse = |text: &str| match text {
            "default" => Ok(None),
            text => parse(text).map(Some),
        };
        let omitted = self
            .omit
            .map(&parse)
            .transpose()
            .map_err(invalid(self.option))?;
        values_of(self.option, self.text, parse)?
            .into_iter()
            .map(|(entry, value)| {
                Ok(AxisValue {
                    label: (omitted.as_ref() != Some(&value))
                        .then(|| format!("{}{entry}", self.prefix)),
                    set: set(value),
                })
            })
            .collect()
    }
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
/// ([`check_congestion_available`]), as only the lab's own kernel can be asked.
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

/// A count, as the binaries read theirs (`--flows`, `--cycles`).
fn parse_count(input: &str, max: u32) -> Result<u32, UnitError> {
    oscil_cli::units::whole("count", 1, max)(input)
}

fn parse_pattern(input: &str) -> Result<bool, ValueError> {
    match input {
        "oscillating" => Ok(false),
        "full-speed" => Ok(true),
        _ => Err(ValueError::Pattern(input.to_owned())),
    }
}

/// Applies `parse` to an optional value, naming the option on failure.
fn opt<T, E: Into<ValueError>>(
    option: &'static str,
    value: &Option<String>,
    parse: impl Fn(&str) -> Result<T, E>,
) -> Result<Option<T>, CliError> {
    value
        .as_deref()
        .map(|v| parse(v).map_err(invalid(option)))
        .transpose()
}

impl Cli {
    /// The job this command line asks for. `default_seed` and `default_out` come from
    /// the clock in `main`, so this stays a pure function.
    pub fn into_job(self, default_seed: u64, default_out: PathBuf) -> Result<Job, CliError> {
        if let Some(Sub::Restore { dir }) = self.command {
            return Ok(Job::Restore { dir });
        }
        if let Some(dir) = self.resume.clone() {
            self.refuse_plan_options()?;
            return Ok(Job::Resume {
                dir,
                dry_run: self.dry_run,
            });
        }
        let backend = self.backend()?;
        let matrix = self.matrix(&backend)?;
        let repeat = opt("repeat", &self.repeat, |v| parse_count(v, 1000))?.unwrap_or(1);
        let seed = opt("seed", &self.seed, |v| {
            v.parse::<u64>().map_err(|_| ValueError::Seed(v.to_owned()))
        })?
        .unwrap_or(default_seed);
        let order = match self.order {
            Some(OrderArg::Grouped) => Order::Grouped,
            Some(OrderArg::Shuffled) | None => Order::Shuffled,
        };
        Ok(Job::New(Box::new(NewCampaign {
            matrix,
            repeat,
            order,
            seed,
            out: self.out.unwrap_or(default_out),
            force: self.force,
            dry_run: self.dry_run,
            backend,
        })))
    }

    /// The options that make a plan, by name, when given.
    fn plan_options(&self) -> Vec<&'static str> {
        let given = [
            ("--rate", self.rate.is_some()),
            ("--rtt", self.rtt.is_some()),
            ("--queue", self.queue.is_some()),
            ("--loss", self.loss.is_some()),
            ("--link", self.link.is_some()),
            ("--lowat", self.lowat.is_some()),
            ("--wmem", self.wmem.is_some()),
            ("--rmem", self.rmem.is_some()),
            ("--adv-win-scale", self.adv_win_scale.is_some()),
            ("--cc", self.cc.is_some()),
            ("--sndbuf", self.sndbuf.is_some()),
            ("--rcvbuf", self.rcvbuf.is_some()),
            ("--pacing-rate", self.pacing_rate.is_some()),
            ("--write-mode", self.write_mode.is_some()),
            ("--pattern", self.pattern.is_some()),
            ("--flows", self.flows.is_some()),
            ("--fast", self.fast.is_some()),
            ("--slow", self.slow.is_some()),
            ("--fraction", self.fraction.is_some()),
            ("--cycles", self.cycles.is_some()),
            ("--quick", self.quick),
            ("--interval", self.interval.is_some()),
            ("--write-size", self.write_size.is_some()),
            ("--marker-every", self.marker_every.is_some()),
            ("--slow-rate", self.slow_rate.is_some()),
            ("--trace", self.trace),
            ("--repeat", self.repeat.is_some()),
            ("--order", self.order.is_some()),
            ("--seed", self.seed.is_some()),
            ("--out", self.out.is_some()),
            ("--force", self.force),
            ("--sender", self.sender.is_some()),
            ("--receiver", self.receiver.is_some()),
            ("--ssh-option", !self.ssh_option.is_empty()),
            ("--remote-bin", self.remote_bin.is_some()),
            ("--install", self.install),
            ("--inventory", self.inventory.is_some()),
            ("--pairs", self.pairs.is_some()),
        ];
        given.iter().filter(|(_, g)| *g).map(|(n, _)| *n).collect()
    }

    fn refuse_plan_options(&self) -> Result<(), CliError> {
        match self.plan_options() {
            given if given.is_empty() => Ok(()),
            given => Err(CliError::PlanWithResume(given.join(", "))),
        }
    }

    fn backend(&self) -> Result<BackendSpec, CliError> {
        let fleet = self.inventory.is_some();
        let (sender, receiver) = match (&self.sender, &self.receiver) {
            (None, None) if !fleet => {
                if self.pairs.is_some() {
                    return Err(invalid("pairs")(ValueError::PairsWithoutInventory));
                }
                return Ok(BackendSpec::Netns {
                    link: self.link.unwrap_or(LinkKind::Tun),
                });
            }
            (None, None) => Default::default(),
            _ if fleet => {
                return Err(invalid("inventory")(ValueError::InventoryWithHosts));
            }
            (Some(s), Some(r)) => (s.clone(), r.clone()),
            _ => return Err(CliError::HalfHosts),
        };
        let path_options: Vec<&str> = [
            ("--rate", self.rate.is_some()),
            ("--rtt", self.rtt.is_some()),
            ("--queue", self.queue.is_some()),
            ("--loss", self.loss.is_some()),
            ("--link", self.link.is_some()),
        ]
        .iter()
        .filter(|(_, given)| *given)
        .map(|(name, _)| *name)
        .collect();
        if !path_options.is_empty() {
            return Err(CliError::PathOnHosts(path_options.join(", ")));
        }
        for option in &self.ssh_option {
            check_ssh_option(option).map_err(|e| CliError::Ssh {
                option: "ssh-option",
                detail: e,
            })?;
        }
        if let Some(dir) = &self.remote_bin {
            check_bin_dir(dir).map_err(|detail| CliError::Ssh {
                option: "remote-bin",
                detail,
            })?;
        }
        if let Some(path) = &self.inventory {
            return fleet_spec(self, path);
        }
        Ok(BackendSpec::Hosts(HostsSpec {
            sender: check_target("sender", &sender)?,
            receiver: (receiver != "local")
                .then(|| check_target("receiver", &receiver))
                .transpose()?,
            ssh_options: self.ssh_option.clone(),
            remote_bin: self.remote_bin.clone(),
            install: self.install,
        }))
    }

    /// The Cloudflare pattern, or `--quick`'s, with the values given.
    fn pattern_config(&self) -> Result<PatternConfig, CliError> {
        let base = if self.quick {
            QUICK
        } else {
            PatternConfig::CLOUDFLARE
        };
        let ms = |d: std::time::Duration| d.as_millis() as u64;
        let fast = opt("fast", &self.fast, parse_positive_duration)?.map(ms);
        let slow = opt("slow", &self.slow, parse_duration)?.map(ms);
        let cycles = opt("cycles", &self.cycles, |v| parse_count(v, MAX_CYCLES))?;
        Ok(PatternConfig {
            fast_ms: fast.unwrap_or(base.fast_ms),
            slow_ms: slow.unwrap_or(base.slow_ms),
            fraction: opt("fraction", &self.fraction, parse_fraction)?.unwrap_or(base.fraction),
            cycles: cycles.unwrap_or(base.cycles),
            full_speed: false,
        })
    }

    /// Markers every second unless told otherwise (`off` for none): a write's wait to be
    /// read is the figure a person understands first, and a queue that holds writes longer
    /// than the run still shows in it (censored). Never more often than the sampling.
    fn marker_every_us(&self, interval_us: u64) -> Result<Option<u64>, CliError> {
        if self.marker_every.as_deref() == Some("off") {
            return Ok(None);
        }
        // Shorter than the sampling interval is refused with every run's request (`matrix`).
        let every = opt("marker-every", &self.marker_every, parse_positive_duration)?;
        Ok(Some(
            every.map_or(DEFAULT_MARKER_EVERY_US.max(interval_us), |d| {
                d.as_micros() as u64
            }),
        ))
    }

    fn matrix(&self, backend: &BackendSpec) -> Result<Matrix, CliError> {
        let lab = matches!(backend, BackendSpec::Netns { .. });
        let pattern = self.pattern_config()?;
        let interval = opt("interval", &self.interval, parse_positive_duration)?;
        let interval_us = interval.unwrap_or(DEFAULT_INTERVAL).as_micros() as u64;
        let marker_every_us = self.marker_every_us(interval_us)?;
        let mut axes = Vec::new();
        if lab {
            axes.push(self.paths()?);
        }
        axes.extend(self.setting_axes(lab)?);
        axes.push(self.patterns(pattern)?);
        let matrix = Matrix {
            axes,
            flows: opt("flows", &self.flows, |v| parse_count(v, MAX_FLOWS))?.unwrap_or(1),
            interval_us,
            write_size_bytes: opt("write-size", &self.write_size, parse_write_size)?,
            marker_every_us,
            slow_rate: match opt("slow-rate", &self.slow_rate, parse_slow_rate_arg)? {
                None => crate::plan::matrix::SlowRateChoice::PerPath,
                Some(SlowRateArg::Bps(bps)) => crate::plan::matrix::SlowRateChoice::Given(bps),
                Some(SlowRateArg::AutoPerRun) => crate::plan::matrix::SlowRateChoice::PerRun,
            },
            no_probe: self.no_probe,
            trace: self.trace,
            pattern,
        };
        // Every run's session, by the rules the reader and the daemon will apply to it.
        for config in crate::plan::matrix::configurations(&matrix) {
            SessionRequest::of_run(&config.settings)
                .validate()
                .map_err(|source| CliError::Request {
                    label: config.label,
                    source,
                })?;
        }
        Ok(matrix)
    }

    /// The sysctl and socket option axes, in label order. The lab's buffer defaults are
    /// Cloudflare's triples; real hosts keep their own unless told.
    fn setting_axes(&self, lab: bool) -> Result<Vec<Vec<AxisValue>>, CliError> {
        let (wmem, rmem) = if lab {
            ("4096:16384:536870912", "8192:262144:536870912")
        } else {
            ("default", "default")
        };
        let bytes_u32 = |v: &str| Ok(parse_bytes_u32(v)?);
        let d = Some("default");
        Ok(vec![
            Axis::new("cc", &self.cc, "cubic", "", None)
                .values(parse_congestion, Setting::Congestion)?,
            Axis::new("lowat", &self.lowat, "default,131072", "lowat-", None)
                .values(parse_lowat, Setting::Lowat)?,
            Axis::new("wmem", &self.wmem, wmem, "wmem-", Some(wmem))
                .values(parse_triple, Setting::Wmem)?,
            Axis::new("rmem", &self.rmem, rmem, "rmem-", Some(rmem))
                .values(parse_triple, Setting::Rmem)?,
            Axis::new("adv-win-scale", &self.adv_win_scale, "default", "adv-", d)
                .values(parse_adv_win_scale, Setting::AdvWinScale)?,
            Axis::new("sndbuf", &self.sndbuf, "default", "sndbuf-", d)
                .values(bytes_u32, Setting::Sndbuf)?,
            Axis::new("rcvbuf", &self.rcvbuf, "default", "rcvbuf-", d)
                .values(bytes_u32, Setting::Rcvbuf)?,
            Axis::new("pacing-rate", &self.pacing_rate, "default", "pacing-", d)
                .values(|v| Ok(parse_pacing_rate(v)?), Setting::PacingRate)?,
            self.write_modes()?,
        ])
    }

    /// Rate x RTT, with the loss and queue every path shares.
    fn paths(&self) -> Result<Vec<AxisValue>, CliError> {
        let loss_pct = opt("loss", &self.loss, parse_percent)?.map_or(0.0, |p| p * 100.0);
        let queue_packets = opt("queue", &self.queue, |v| parse_count(v, 1_000_000))?;
        let rates = values_of("rate", self.rate.as_deref().unwrap_or("1gbit"), |v| {
            Ok(parse_rate_bps(v)?)
        })?;
        let rtts = values_of("rtt", self.rtt.as_deref().unwrap_or("466ms"), |v| {
            Ok(parse_positive_duration(v)?)
        })?;
        let mut paths = Vec::new();
        for (rate, rate_bps) in &rates {
            for (rtt, duration) in &rtts {
                paths.push(AxisValue {
                    label: Some(format!("{rate}_{rtt}")),
                    set: Setting::Path(Some(PathSettings {
                        rate_bps: *rate_bps,
                        rtt_us: duration.as_micros() as u64,
                        loss_pct,
                        queue_packets,
                    })),
                });
            }
        }
        Ok(paths)
    }

    /// The writer axis: labelled only where it is not the daemon's default.
    fn write_modes(&self) -> Result<Vec<AxisValue>, CliError> {
        let text = self.write_mode.as_deref().unwrap_or("until-eagain");
        entries("write-mode", text)?
            .iter()
            .map(|entry| {
                let mode: WriteMode = entry
                    .parse()
                    .map_err(|e| invalid("write-mode")(ValueError::WriteMode(e)))?;
                Ok(AxisValue {
                    label: (!mode.is_until_eagain()).then(|| mode.to_string()),
                    set: Setting::WriteMode(mode),
                })
            })
            .collect()
    }

    fn patterns(&self, pattern: PatternConfig) -> Result<Vec<AxisValue>, CliError> {
        let text = self.pattern.as_deref().unwrap_or("oscillating");
        values_of("pattern", text, parse_pattern)?
            .into_iter()
            .map(|(_, full_speed)| {
                Ok(AxisValue {
                    label: full_speed.then(|| "full-speed".to_owned()),
                    set: Setting::Pattern(PatternConfig {
                        full_speed,
                        ..pattern
                    }),
                })
            })
            .collect()
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

/// Refuses a `--cc` entry this kernel has neither loaded nor as a module, naming those it
/// has. Only for the emulated lab, whose daemon runs on this kernel; a real sender's daemon
/// refuses the session instead (before any data flows).
pub fn check_congestion_available(
    job: &Job,
    available: impl FnOnce() -> std::io::Result<CongestionControls>,
) -> Result<(), CliError> {
    let Job::New(campaign) = job else {
        return Ok(());
    };
    if !matches!(campaign.backend, BackendSpec::Netns { .. }) {
        return Ok(());
    }
    let configs = crate::plan::matrix::configurations(&campaign.matrix);
    let mut names: Vec<&str> = Vec::new();
    for name in configs
        .iter()
        .filter_map(|c| c.settings.congestion.as_deref())
    {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    if names.is_empty() {
        return Ok(());
    }
    let available =
        available().map_err(|e| invalid("cc")(ValueError::CongestionList(e.to_string())))?;
    match names.into_iter().find(|name| !available.has(name)) {
        None => Ok(()),
        Some(name) => Err(invalid("cc")(ValueError::NoSuchCongestion {
            name: name.to_owned(),
            available: available.describe(),
        })),
    }
}

/// `--inventory FILE --pairs …` (with `--ssh-option`, `--remote-bin`, `--install`): the
/// fleet, or why not in one line (the file and the line when the inventory is at fault).
fn fleet_spec(cli: &Cli, path: &std::path::Path) -> Result<BackendSpec, CliError> {
    let inventory = |detail: ValueError| CliError::Invalid {
        option: "inventory",
        detail,
    };
    let plugins = match cli.inventory_plugins {
        true => Plugins::Allowed,
        false => Plugins::StaticOnly,
    };
    let (hosts, reader) =
        crate::backend::fleet::inventory::load(path, plugins).map_err(|source| {
            inventory(ValueError::Inventory {
                path: path.to_path_buf(),
                source,
            })
        })?;
    crate::campaign::ui::say(&format!(
        "oscil-lab: {} host(s) read from {} {}, {}",
        hosts.len(),
        crate::backend::fleet::inventory::source_name(path),
        reader.text(),
        plugins.text()
    ));
    let pairs =
        crate::backend::fleet::pairs::parse_pairs(cli.pairs.as_deref().unwrap_or("all"), &hosts)
            .map_err(|detail| CliError::Invalid {
                option: "pairs",
                detail: ValueError::Pairs(detail),
            })?;
    let spec = crate::config::FleetSpec {
        hosts,
        pairs,
        ssh_options: cli.ssh_option.clone(),
        remote_bin: cli.remote_bin.clone(),
        install: cli.install,
    };
    spec.check()
        .map_err(|detail| inventory(ValueError::Fleet(detail)))?;
    Ok(BackendSpec::Fleet(spec))
}

/// `[USER@]HOST`, refusing what ssh would read as an option.
fn check_target(option: &'static str, target: &str) -> Result<String, CliError> {
    check_ssh_target(target).map_err(|detail| CliError::Ssh { option, detail })?;
    Ok(target.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::matrix::configurations;
    use oscil_model::campaign::SlowRateBasis;

    fn job(args: &[&str]) -> Result<Job, CliError> {
        let cli = Cli::try_parse_from(std::iter::once("oscil-lab").chain(args.iter().copied()))
            .expect("clap accepts it");
        cli.into_job(42, PathBuf::from("lab-default"))
    }

    fn new(args: &[&str]) -> NewCampaign {
        match job(args).unwrap() {
            Job::New(campaign) => *campaign,
            other => panic!("not a new campaign: {other:?}"),
        }
    }

    fn error(args: &[&str]) -> String {
        job(args).unwrap_err().to_string()
    }

    #[test]
    fn defaults_are_the_cloudflare_comparison() {
        let campaign = new(&[]);
        let labels: Vec<String> = configurations(&campaign.matrix)
            .into_iter()
            .map(|c| c.label)
            .collect();
        assert_eq!(
            labels,
            [
                "1gbit_466ms_cubic_lowat-default",
                "1gbit_466ms_cubic_lowat-131072"
            ]
        );
        let settings = &configurations(&campaign.matrix)[1].settings;
        assert_eq!(settings.wmem_bytes, Some([4096, 16384, 536870912]));
        assert_eq!(settings.rmem_bytes, Some([8192, 262144, 536870912]));
        assert_eq!(settings.pattern, PatternConfig::CLOUDFLARE);
        assert_eq!((campaign.seed, campaign.repeat), (42, 1));
        assert_eq!(campaign.order, Order::Shuffled);
        assert_eq!(campaign.out, PathBuf::from("lab-default"));
    }

    #[test]
    fn the_slow_rate_is_one_per_path_unless_asked_otherwise() {
        let settings = |args: &[&str]| {
            let s = &configurations(&new(args).matrix)[0].settings;
            (s.slow_rate_bps, s.slow_rate_basis)
        };
        // 5% of the default path's 1 Gbit/s.
        assert_eq!(
            settings(&[]),
            (Some(50_000_000), Some(SlowRateBasis::PathRate))
        );
        assert_eq!(
            settings(&["--rate", "100mbit", "--fraction", "10%"]),
            (Some(10_000_000), Some(SlowRateBasis::PathRate))
        );
        let hosts = ["--sender", "root@a", "--receiver", "local"];
        assert_eq!(
            settings(&hosts),
            (None, Some(SlowRateBasis::Calibration { peak_bps: None }))
        );
        assert_eq!(
            settings(&["--slow-rate", "5mbit"]),
            (Some(5_000_000), Some(SlowRateBasis::Given))
        );
        assert_eq!(
            settings(&["--slow-rate", "auto-per-run"]),
            (None, Some(SlowRateBasis::PerRun))
        );
        assert!(error(&["--slow-rate", "fast"]).starts_with("--slow-rate: \"fast\" is neither"));
    }

    #[test]
    fn values_take_the_binaries_grammar() {
        let campaign = new(&[
            "--lowat",
            "default,128k",
            "--rate",
            "10mbit",
            "--sndbuf",
            "16k,64KiB",
            "--quick",
            "--slow",
            "3s",
            "--loss",
            "0.0",
        ]);
        let configs = configurations(&campaign.matrix);
        assert_eq!(configs.len(), 4);
        assert_eq!(configs[2].label, "10mbit_466ms_cubic_lowat-128k_sndbuf-16k");
        assert_eq!(configs[2].settings.lowat_bytes, Some(131072));
        assert_eq!(configs[3].settings.sndbuf_bytes, Some(65536));
        let pattern = configs[0].settings.pattern;
        assert_eq!(
            (pattern.fast_ms, pattern.slow_ms, pattern.cycles),
            (2000, 3000, 1)
        );
        let path = configs[0].settings.path.as_ref().unwrap();
        assert_eq!(
            (path.rate_bps, path.rtt_us, path.loss_pct),
            (10_000_000, 466_000, 0.0)
        );
    }

    #[test]
    fn buffer_triples_and_patterns_label_only_when_not_default() {
        let campaign = new(&[
            "--wmem",
            "4096:16384:536870912,4096:16384:4M",
            "--pattern",
            "oscillating,full-speed",
            "--lowat",
            "default",
        ]);
        let configs = configurations(&campaign.matrix);
        let labels: Vec<&str> = configs.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "1gbit_466ms_cubic_lowat-default",
                "1gbit_466ms_cubic_lowat-default_full-speed",
                "1gbit_466ms_cubic_lowat-default_wmem-4096-16384-4M",
                "1gbit_466ms_cubic_lowat-default_wmem-4096-16384-4M_full-speed",
            ]
        );
        assert_eq!(configs[2].settings.wmem_bytes, Some([4096, 16384, 4 << 20]));
        assert!(configs[1].settings.pattern.full_speed);
    }

    #[test]
    fn the_writer_is_an_axis_labelled_where_it_is_not_the_daemons_default() {
        let matrix = new(&["--write-mode", "until-eagain,per-wake"]).matrix;
        let modes: Vec<_> = configurations(&matrix)
            .into_iter()
            .map(|c| (c.label.ends_with("_per-wake"), c.settings.write_mode))
            .collect();
        use WriteMode::{PerWake, UntilEagain};
        let expected = [(false, UntilEagain), (true, PerWake)];
        assert_eq!(modes, [expected, expected].concat(), "for each lowat");
        assert_eq!(
            error(&["--write-mode", "eager"]),
            "--write-mode: \"eager\" is not a write mode (until-eagain or per-wake)"
        );
    }

    #[test]
    fn bad_values_name_the_option() {
        assert!(error(&["--cycles", "0"]).starts_with("--cycles: "));
        assert!(
            error(&["--fast", "2"]).starts_with("--fast: "),
            "a bare number is no duration"
        );
        assert!(error(&["--lowat", "default,,1"]).contains("empty"));
        assert!(error(&["--lowat", "1,1"]).contains("twice"));
        assert!(error(&["--lowat", "8G"])
            .starts_with("--lowat: \"8G\" is not a whole number from 1 to 4294967295"));
        assert!(error(&["--lowat", "default,0"]).starts_with("--lowat: 0 would stall every write"));
        assert!(error(&["--rate", "fast"]).starts_with("--rate: "));
        assert!(error(&["--wmem", "1:2"]).contains("MIN:DEFAULT:MAX"));
        assert!(error(&["--wmem", "3:2:1"]).contains("MIN <= DEFAULT <= MAX"));
        assert!(error(&["--pattern", "wavy"]).starts_with("--pattern: "));
        assert!(error(&["--cc", "Cubic;"]).starts_with("--cc: "));
        assert!(error(&["--repeat", "0"]).starts_with("--repeat: "));
        assert!(error(&["--adv-win-scale", "99"]).starts_with("--adv-win-scale: "));
    }

    /// Two spellings of one value would run one configuration twice under two labels.
    #[test]
    fn a_value_is_listed_once_however_it_is_spelt() {
        assert_eq!(
            error(&["--lowat", "128k,128KiB,131072"]),
            "--lowat: \"128k\" and \"128KiB\" are one value: list it once"
        );
        assert_eq!(
            error(&["--rtt", "100ms,0.1s"]),
            "--rtt: \"100ms\" and \"0.1s\" are one value: list it once"
        );
        assert!(
            error(&["--rate", "1gbit,1000mbit"]).starts_with("--rate: \"1gbit\" and \"1000mbit\"")
        );
        assert!(error(&["--wmem", "4096:16384:4M,4k:16k:4194304"]).contains("one value"));
        assert!(error(&["--sndbuf", "default,16k,16384"]).contains("one value"));
        // The backend's default is left out of labels by value, too.
        let campaign = new(&["--wmem", "4k:16k:512M", "--lowat", "default"]);
        let configs = configurations(&campaign.matrix);
        assert_eq!(configs[0].label, "1gbit_466ms_cubic_lowat-default");
    }

    #[test]
    fn hosts_refuse_path_options_and_half_pairs() {
        let message = error(&["--sender", "root@a", "--receiver", "local", "--rtt", "40ms"]);
        assert!(
            message.starts_with("--rtt describe the emulated path"),
            "{message}"
        );
        assert!(error(&["--sender", "root@a"]).contains("go together"));
        assert!(
            error(&["--sender=-oProxyCommand=x", "--receiver", "local"]).starts_with("--sender")
        );
        let campaign = new(&[
            "--sender",
            "root@a",
            "--receiver",
            "local",
            "--ssh-option",
            "Port=2222",
        ]);
        let configs = configurations(&campaign.matrix);
        assert_eq!(configs[0].label, "cubic_lowat-default");
        assert_eq!(configs[0].settings.path, None);
        assert_eq!(
            configs[0].settings.wmem_bytes, None,
            "hosts keep their own tcp_wmem"
        );
        match campaign.backend {
            BackendSpec::Hosts(hosts) => {
                assert_eq!(hosts.receiver, None);
                assert_eq!(hosts.ssh_options, ["Port=2222"]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_run_is_checked_by_the_session_rules() {
        let message = error(&["--fast", "1s", "--slow", "1s", "--interval", "5s"]);
        assert!(
            message.starts_with("--interval 5000 ms is longer than the shortest phase (1000 ms)"),
            "{message}"
        );
        assert!(error(&["--write-size", "0"]).starts_with("--write-size: write size of 0 bytes"));
        assert!(error(&["--write-size", "4G"]).contains("1 to 16777216 bytes"));
        assert!(error(&["--pacing-rate", "4bit"]).contains("below 8 bit/s"));
        assert!(error(&["--slow-rate", "4bit"]).contains("would read nothing"));
        let message = error(&["--marker-every", "50ms"]);
        assert!(
            message
                .starts_with("--marker-every 50ms is shorter than the sampling --interval 100ms"),
            "{message}"
        );
        // --quick's 2 s phases hold a 1 s interval; the full-speed control holds anything
        // up to the whole run.
        assert!(job(&["--quick", "--interval", "1s"]).is_ok());
        assert!(error(&["--quick", "--interval", "3s"]).contains("shortest phase (2000 ms)"));
    }

    #[test]
    fn a_congestion_control_the_kernel_lacks_is_named_with_those_it_has() {
        let have = || {
            Ok(CongestionControls::from_lists(
                "reno cubic",
                vec!["tcp_bbr.ko".into()],
            ))
        };
        let plan = job(&["--cc", "cubic,bbr,foo"]).unwrap();
        assert_eq!(
            check_congestion_available(&plan, have).unwrap_err().to_string(),
            "--cc: \"foo\" is not a congestion control this kernel has (it has: reno cubic; as modules: bbr)"
        );
        let plan = job(&["--cc", "cubic,bbr"]).unwrap();
        assert!(check_congestion_available(&plan, have).is_ok());
        // Real hosts: the sender's kernel is not this one.
        let hosts = job(&["--cc", "foo", "--sender", "root@a", "--receiver", "local"]).unwrap();
        let unasked = || -> std::io::Result<CongestionControls> { panic!("not asked") };
        assert!(check_congestion_available(&hosts, unasked).is_ok());
    }

    #[test]
    fn help_shows_the_defaults_the_plan_uses() {
        use clap::CommandFactory;
        let command = Cli::command();
        let help = |long: &str| {
            command
                .get_arguments()
                .find(|a| a.get_long() == Some(long))
                .and_then(|a| a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default()
        };
        let defaults = [
            (
                "fast",
                oscil_cli::request_args::cloudflare::FAST.to_string(),
            ),
            (
                "slow",
                oscil_cli::request_args::cloudflare::SLOW.to_string(),
            ),
            (
                "cycles",
                oscil_cli::request_args::cloudflare::CYCLES.to_string(),
            ),
            (
                "fraction",
                oscil_cli::request_args::cloudflare::FRACTION.to_string(),
            ),
            (
                "interval",
                oscil_cli::request_args::cloudflare::INTERVAL.to_string(),
            ),
        ];
        for (long, default) in defaults {
            let shown = format!("[default: {default}]");
            assert!(help(long).contains(&shown), "--{long}: {}", help(long));
        }
        let q = QUICK;
        let quick = format!(
            "--fast {} --slow {} --cycles {}",
            oscil_cli::request_args::TypedDuration::from_millis(q.fast_ms),
            oscil_cli::request_args::TypedDuration::from_millis(q.slow_ms),
            q.cycles
        );
        assert!(help("quick").contains(&quick), "{}", help("quick"));
    }

    #[test]
    fn resume_and_restore_take_a_directory_only() {
        assert!(matches!(
            job(&["--resume", "d"]).unwrap(),
            Job::Resume { .. }
        ));
        assert!(error(&["--resume", "d", "--rate", "1gbit"]).contains("leave out --rate"));
        assert!(matches!(
            job(&["restore", "d"]).unwrap(),
            Job::Restore { .. }
        ));
    }

    #[test]
    fn the_command_line_reads_the_inventory_and_refuses_what_does_not_fit() {
        let dir = tempfile::tempdir().unwrap();
        // JSON as ansible-inventory prints it: read by the lab, whether Ansible is here or not.
        let inventory = dir.path().join("hosts.json");
        let hostvars = r#""a": {"ansible_host": "10.0.0.1"}, "b": {"ansible_host": "10.0.0.2"}"#;
        std::fs::write(
            &inventory,
            format!(
                r#"{{"all": {{"hosts": ["a", "b"]}}, "_meta": {{"hostvars": {{{hostvars}}}}}}}"#
            ),
        )
        .unwrap();
        let inv = inventory.to_str().unwrap();
        let Ok(crate::config::Job::New(new)) = job(&["--inventory", inv, "--pairs", "b>a"]) else {
            panic!("a fleet job")
        };
        let BackendSpec::Fleet(spec) = &new.backend else {
            panic!("a fleet backend")
        };
        assert_eq!(spec.pairs.len(), 1);
        assert_eq!(spec.hosts[1].address, "10.0.0.2");
        let error = |args: &[&str]| job(args).unwrap_err().to_string();
        assert!(error(&[
            "--inventory",
            inv,
            "--sender",
            "root@x",
            "--receiver",
            "local"
        ])
        .contains("leave out --sender"));
        assert!(error(&["--pairs", "all"]).contains("give --inventory"));
        assert!(
            error(&["--inventory", inv, "--rtt", "40ms"]).contains("do not apply to real hosts")
        );
        assert_eq!(
            error(&["--inventory", inv, "--pairs", "a>c"]),
            "--pairs: \"c\" is not in the inventory (it has: a, b)"
        );
        std::fs::write(
            &inventory,
            r#"{"all": {"hosts": {"a": {"ansible_port": "x"}}}}"#,
        )
        .unwrap();
        assert_eq!(
            error(&["--inventory", inv]),
            format!("--inventory: {inv}: group \"all\": its hosts are a list of names")
        );
        std::fs::write(
            &inventory,
            r#"{"_meta": {"hostvars": {"a": {"ansible_port": "x"}}}}"#,
        )
        .unwrap();
        assert_eq!(
            error(&["--inventory", inv]),
            format!("--inventory: {inv}: host \"a\": ansible_port \"x\" is not a port (1-65535)")
        );
        assert!(error(&["--inventory", "/nonexistent/hosts.yml"])
            .starts_with("--inventory: /nonexistent/hosts.yml: "));
    }
}

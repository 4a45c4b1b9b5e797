//! The daemon's command line: its flags (the help text is their doc comments) and their
//! conversion into a checked [`DaemonConfig`]. `main.rs` only parses, calls the library and
//! maps the error to an exit code.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use oscil_cli::address::{self, Endpoint, IpFamily};
use oscil_cli::placeholder;
use oscil_cli::units::{duration_within, parse_bytes, parse_bytes_u32, whole, MAX_DURATION};
use oscil_model::socket::SocketOptions;
use oscil_protocol::key::{load_key, KeySource};

use crate::budget;
use crate::config::{DaemonConfig, TracePolicy};
use crate::gate::admission::StartupLimits;
use crate::session::{self, ScratchError};

/// Serve oscil test sessions: stream at full speed on every data connection, with the socket
/// options each session asks for, and send samples of the sender's side to the reader.
#[derive(Debug, Parser)]
#[command(
    name = "oscil-daemon",
    version,
    allow_negative_numbers = true,
    args_override_self = true
)]
pub struct Cli {
    /// Address to listen on for control and data connections: PORT or :PORT (every
    /// address), HOST, HOST:PORT, [IPV6]:PORT. Port 5250 unless given.
    #[arg(long, short = 'l', default_value = "127.0.0.1:5250", value_parser = address::parse_listen, value_name = placeholder::ADDR)]
    listen: Endpoint,
    /// Listen on nothing: dial out to an `oscil-reader --listen` at HOST[:PORT] (a sender
    /// behind NAT), serve that one session, and exit. While nothing accepts there, tries
    /// again with backoff for 30 s.
    #[arg(long, value_parser = address::parse_connect, value_name = placeholder::ADDR, conflicts_with_all = ["listen", "port_file", "max_sessions", "max_startups", "per_source_max_startups"])]
    connect: Option<Endpoint>,
    /// Once listening, write the port listened on to FILE, one line (for a program that
    /// starts the daemon on port 0): the file appears whole, by a rename.
    #[arg(value_parser = oscil_cli::files::path, long, value_name = placeholder::FILE)]
    pub port_file: Option<PathBuf>,
    #[command(flatten)]
    address: oscil_cli::AddressFlags,
    /// The socket option TCP_NOTSENT_LOWAT for sessions that do not ask (e.g. 128k); unset:
    /// the sysctl net.ipv4.tcp_notsent_lowat applies.
    #[arg(long, visible_alias = "lowat", value_parser = parse_bytes_u32, value_name = placeholder::BYTES)]
    pub notsent_lowat: Option<u32>,
    /// SO_SNDBUF for sessions that do not ask (the kernel doubles it; disables autotuning).
    #[arg(long, value_parser = parse_bytes_u32, value_name = placeholder::BYTES)]
    sndbuf: Option<u32>,
    /// Congestion control for sessions that do not ask (e.g. cubic, bbr, reno).
    #[arg(long, visible_alias = "cc", value_name = "NAME")]
    congestion: Option<String>,
    /// File holding the pre-shared key readers must prove they hold (else $OSCIL_KEY; never
    /// on the command line).
    #[arg(value_parser = oscil_cli::files::path, long, value_name = placeholder::FILE)]
    pub key_file: Option<PathBuf>,
    /// Serve anyone on a non-loopback address without a key.
    #[arg(long)]
    insecure_no_auth: bool,
    /// Tag no write with TX timestamps (sender.csv's residence_us stays empty): for
    /// measuring what the timestamps cost (scripts/bench-loopback --without-timestamps).
    #[arg(long)]
    no_tx_timestamps: bool,
    /// Print a fresh key (for --key-file) and exit.
    #[arg(long)]
    pub gen_key: bool,
    /// Sessions served at once; more are refused as busy.
    #[arg(long, default_value_t = 16, value_parser = whole("count", 1, u16::MAX), value_name = placeholder::N)]
    max_sessions: u16,
    /// Data connections one session may open.
    #[arg(long, default_value_t = 256, value_parser = whole("count", 1, u32::MAX), value_name = placeholder::N)]
    max_flows: u32,
    /// Data connections of all sessions together. Unset: as many as the open files limit
    /// allows beside the sessions and unauthenticated connections, at most 1024; given: it
    /// must fit in that limit. Each flow holds 2 descriptors, each session 4 more.
    #[arg(long, value_parser = whole("count", 1, u32::MAX), value_name = placeholder::N)]
    pub max_total_flows: Option<u32>,
    /// A session's total pacing rate (100mbit, 1gbit), split evenly over its flows and set
    /// as each flow's SO_MAX_PACING_RATE; a reader may ask for less, never more.
    #[arg(long, value_parser = oscil_cli::request_args::parse_pacing_rate, value_name = placeholder::RATE)]
    max_rate: Option<u64>,
    /// Shortest sampling interval a reader may ask: each sample is one row per flow, so this
    /// caps the rows a session sends per second (1ms for one flow is fine; for 1,000, not).
    #[arg(long, default_value = "10ms", value_parser = duration_within(Duration::from_micros(1), Duration::from_secs(60), "readers sample at most every minute; a longer floor would refuse every session"), value_name = placeholder::DUR)]
    min_interval: Duration,
    /// Longest session served.
    #[arg(long, default_value = "15m", value_parser = duration_within(Duration::from_secs(1), MAX_DURATION, "a shorter limit would refuse every run"), value_name = placeholder::DUR)]
    max_session_time: Duration,
    /// Renamed: a duration beside --max-sessions (a count) was too easy to confuse.
    #[arg(long, hide = true, value_parser = renamed("--max-session", "--max-session-time"))]
    max_session: Option<String>,
    /// Unauthenticated connections held at once, as sshd's MaxStartups START:RATE:FULL: from
    /// START on, refuse new ones with probability RATE%, rising to 100% at FULL.
    #[arg(long, default_value = "10:30:100", value_name = "START:RATE:FULL")]
    max_startups: StartupLimits,
    /// Unauthenticated connections held at once from one address (IPv6: one /64).
    #[arg(long, default_value_t = 10, value_parser = whole("count", 1, u16::MAX), value_name = placeholder::N)]
    per_source_max_startups: u16,
    /// Time a connection has to authenticate (or, for a data connection, to name its session).
    #[arg(long, default_value = "3s", value_parser = duration_within(TIMEOUT_FLOOR, Duration::from_secs(600), TIMEOUT_WHY), value_name = placeholder::DUR)]
    preauth_timeout: Duration,
    /// Which sessions' sockets a reader's --trace may trace: a trace pins ring buffers on
    /// every CPU for the session, so by default only sessions of a daemon with a key.
    #[arg(long, value_enum, default_value_t = TracePolicy::Keyed, value_name = "WHO")]
    trace: TracePolicy,
    /// The ring buffers of all sessions' traces together (4 MiB per CPU each, less where
    /// that would not fit); a trace past it is refused, and the reader says why.
    #[arg(long, default_value = "64M", value_parser = parse_bytes, value_name = placeholder::BYTES)]
    trace_budget: u64,
    /// Time allowed after authentication for the data connections and start, and for each
    /// control write.
    #[arg(long, default_value = "10s", value_parser = duration_within(TIMEOUT_FLOOR, Duration::from_secs(600), TIMEOUT_WHY), value_name = placeholder::DUR)]
    handshake_timeout: Duration,
}

/// The shortest timeout a daemon takes: below it, a path of a few hundred ms round trip (a
/// handshake takes two or three) would fail every session.
const TIMEOUT_FLOOR: Duration = Duration::from_secs(1);
const TIMEOUT_WHY: &str =
    "a handshake takes a few round trips, so a shorter timeout fails every session on a long path";

/// A flag given by its old name: clap shows this line after the flag.
#[derive(Debug, thiserror::Error)]
#[error("{old} is now {new}")]
pub struct RenamedFlag {
    old: &'static str,
    new: &'static str,
}

/// A value parser that always fails, pointing at a flag's new name.
fn renamed(
    old: &'static str,
    new: &'static str,
) -> impl Fn(&str) -> Result<String, RenamedFlag> + Clone + Send + Sync + 'static {
    move |_| Err(RenamedFlag { old, new })
}

/// Where the daemon's connections come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// It listens here and accepts every reader that proves the key (`--listen`).
    Listen(SocketAddr),
    /// It dials the reader listening here, for one session (`--connect`).
    Connect(SocketAddr),
}

impl Cli {
    /// The lines said before anything starts: a lowat of 0, a key file others may read.
    pub fn start_warnings(&self) -> Vec<String> {
        oscil_cli::start_warnings("oscil-daemon", self.notsent_lowat, self.key_file.as_deref())
    }

    /// Where connections come from and the daemon's settings, checked: flags that cannot
    /// work are usage errors, found before anything starts.
    pub fn checked(&self) -> anyhow::Result<(Opening, DaemonConfig, Option<KeySource>)> {
        if let Some(path) = &self.port_file {
            oscil_cli::files::check_writable_file("--port-file", path)?;
        }
        let opening = match &self.connect {
            Some(reader) => Opening::Connect(self.resolve("--connect", reader)?),
            None => Opening::Listen(self.resolve("--listen", &self.listen)?),
        };
        let (config, key_source) = self.config(&opening)?;
        Ok((opening, config, key_source))
    }

    /// The socket address of `flag`'s endpoint, resolved, with -p/-4/-6 applied.
    fn resolve(&self, flag: &str, endpoint: &Endpoint) -> anyhow::Result<SocketAddr> {
        let mut endpoint = self.address.with_port(endpoint);
        let family = self.address.family();
        if family == IpFamily::V4 && endpoint.ip() == Some(Ipv6Addr::UNSPECIFIED.into()) {
            endpoint.host = Ipv4Addr::UNSPECIFIED.to_string();
        }
        let family_ok = |a: &SocketAddr| family.allows(a.ip());
        endpoint
            .lookup_form()
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {flag} {endpoint}"))?
            .find(family_ok)
            .with_context(|| {
                let (version, family_flag) = match family {
                    IpFamily::V4 => ("IPv4", "-4"),
                    _ => ("IPv6", "-6"),
                };
                format!("{flag} {endpoint} has no {version} address ({family_flag} asks it): leave out {family_flag}")
            })
    }

    /// The daemon's settings, and where its key came from.
    fn config(&self, opening: &Opening) -> anyhow::Result<(DaemonConfig, Option<KeySource>)> {
        if self.min_interval >= self.max_session_time {
            anyhow::bail!(
                "--min-interval {} is not below --max-session-time {}: no session could be sampled",
                format_args!("{:?}", self.min_interval),
                format_args!("{:?}", self.max_session_time)
            );
        }
        let (key, key_source) = load_key(self.key_file.as_deref())?.unzip();
        let (verb, addr) = match *opening {
            Opening::Listen(addr) => ("listen on", addr),
            Opening::Connect(addr) => ("connect to", addr),
        };
        if key.is_none() && !addr.ip().is_loopback() && !self.insecure_no_auth {
            anyhow::bail!(
                "refusing to {verb} {addr} without a key: give --key-file or $OSCIL_KEY \
                 (oscil-daemon --gen-key makes one), or --insecure-no-auth"
            );
        }
        let config = DaemonConfig {
            default_options: SocketOptions {
                notsent_lowat_bytes: self.notsent_lowat,
                sndbuf_bytes: self.sndbuf,
                congestion: self.congestion.clone(),
                ..Default::default()
            },
            key,
            max_sessions: usize::from(self.max_sessions),
            max_flows: self.max_flows,
            max_total_flows: self
                .max_total_flows
                .unwrap_or(budget::DEFAULT_MAX_TOTAL_FLOWS),
            max_rate_bps: self.max_rate,
            max_session: self.max_session_time,
            min_interval: self.min_interval,
            max_startups: self.max_startups,
            max_startups_per_source: usize::from(self.per_source_max_startups),
            preauth_timeout: self.preauth_timeout,
            handshake_timeout: self.handshake_timeout,
            tx_timestamps: !self.no_tx_timestamps,
            trace: self.trace,
            trace_budget_bytes: self.trace_budget,
            ..Default::default()
        };
        let notes = check_default_options(&config, addr.is_ipv6())
            .map_err(|e| anyhow::anyhow!("default socket options: {e}"))?;
        for note in notes {
            eprintln!("oscil-daemon: default socket options: {note}");
        }
        Ok((config, key_source))
    }
}

/// Why the daemon's default options could serve no session ([`check_default_options`]).
#[derive(Debug, thiserror::Error)]
pub enum DefaultOptionsError {
    /// `--congestion` is not a name a congestion control can have.
    #[error(transparent)]
    Congestion(#[from] oscil_protocol::request::RequestError),
    /// The kernel refuses them, or no socket could be opened to try them on.
    #[error(transparent)]
    Scratch(#[from] ScratchError),
}

/// Checks the daemon's default options on a scratch socket, so a bad `--congestion` fails
/// at start rather than in every session; returns, in words, what the kernel changed of
/// them (`SO_SNDBUF 0 requested, kernel set 4608`), to be said at start.
pub fn check_default_options(
    config: &DaemonConfig,
    ipv6: bool,
) -> Result<Vec<String>, DefaultOptionsError> {
    if let Some(name) = &config.default_options.congestion {
        oscil_protocol::request::check_congestion_name(name)?;
    }
    Ok(session::validate_options(&config.default_options, ipv6)?.notes)
}

/// `--gen-key`: prints a fresh key on stdout, made 0600 when stdout is a file.
pub fn print_new_key() -> std::io::Result<()> {
    let key = oscil_protocol::key::generate_key()?;
    if let Err(e) = oscil_protocol::key::protect_stdout_file() {
        eprintln!(
            "oscil-daemon: warning: cannot make the key file 0600: {}",
            oscil_model::error_text::os_error(&e)
        );
    }
    oscil_cli::outln!("{key}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What another program asks for in one typed value reads back the same here.
    #[test]
    fn an_invocation_parses_back() {
        let invocation = oscil_cli::invocation::DaemonInvocation {
            listen: "[::]:0".into(),
            key_file: "/tmp/oscil-lab.x/key".into(),
            port_file: Some("/tmp/oscil-lab.x/daemon.port".into()),
        };
        let argv = std::iter::once("oscil-daemon".to_string()).chain(invocation.argv());
        let cli = Cli::try_parse_from(argv).unwrap();
        assert_eq!(
            cli.listen,
            address::parse_listen(&invocation.listen).unwrap()
        );
        assert_eq!(cli.key_file, Some(PathBuf::from(&invocation.key_file)));
        assert_eq!(cli.port_file, invocation.port_file.map(PathBuf::from));
    }
}

//! What a run is asked to do, already validated, and who is asking.

use std::path::PathBuf;
use std::time::Duration;

use oscil_model::pattern::{PatternConfig, SlowRule};
use oscil_model::socket::SocketOptions;

/// This reader as it names itself in the hello and in `run.json`.
pub const SOFTWARE: &str = concat!("oscil-reader ", env!("CARGO_PKG_VERSION"));

/// Everything a run needs, already validated.
#[derive(Debug, Clone)]
pub struct ReaderConfig {
    /// The daemon, as `HOST:PORT` (`[V6]:PORT`).
    pub connect: String,
    /// `connect` is where this reader waits for the daemon to dial in (`--listen`), not
    /// where it dials.
    pub listen: bool,
    /// Which IP version to connect over (`-4`, `-6`).
    pub family: oscil_cli::address::IpFamily,
    /// Local address every connection is made from.
    pub bind: Option<std::net::IpAddr>,
    pub out: PathBuf,
    /// Write into a non-empty directory.
    pub force: bool,
    pub flows: u32,
    pub interval: Duration,
    pub pattern: PatternConfig,
    /// How the slow phases' rate is chosen.
    pub slow_rule: SlowRule,
    /// Socket options the daemon sets on its data sockets: the run's flags, every group's
    /// defaults.
    pub sender_request: SocketOptions,
    /// The session's groups, at least one, their flows adding up to `flows`; each with its
    /// write size resolved.
    pub groups: Vec<oscil_model::group::FlowGroup>,
    /// Socket options set on the reader's data sockets.
    pub reader_request: SocketOptions,
    /// Bytes the daemon offers the kernel per write.
    pub write_size_bytes: u32,
    /// How the daemon writes (`--write-mode`).
    pub write_mode: oscil_model::socket::WriteMode,
    /// Mark every flow's stream this often (at least `interval`); `None`: no markers.
    pub marker_every: Option<Duration>,
    /// Trace both sides' data sockets (`--trace`).
    pub trace: bool,
    /// Open the idle probe connection beside the flows (`probe.csv`); off with `--no-probe`.
    pub probe: bool,
    /// How long to keep trying while the daemon says it is busy (zero: not at all).
    pub busy_retry: Duration,
    /// The pre-shared key, when the daemon has one.
    pub key: Option<oscil_protocol::key::Key>,
    pub label: Option<String>,
    /// The lab's record of the run, kept in run.json as `lab`.
    pub lab: Option<oscil_model::lab::LabRecord>,
    /// The person's description of the run, kept in run.json as `meta`.
    pub meta: Option<serde_json::Value>,
    pub progress: bool,
    /// Print both ends' samples as JSON lines on stdout while the run goes on.
    pub json_stream: bool,
}

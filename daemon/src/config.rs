//! How the daemon serves sessions: its limits and defaults, set by the command line.

use std::time::Duration;

use oscil_model::socket::SocketOptions;
use oscil_model::socket::DEFAULT_WRITE_BYTES;
use oscil_protocol::key::Key;

use crate::gate::admission::StartupLimits;

/// How the daemon serves sessions. `Default` gives the CLI's defaults.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// Options for sessions that leave them unset (per option).
    pub default_options: SocketOptions,
    /// When set, a session must prove it holds this key.
    pub key: Option<Key>,
    /// Sessions served at once; more are refused as busy.
    pub max_sessions: usize,
    /// Data connections one session may ask for.
    pub max_flows: u32,
    /// Data connections of all sessions together.
    pub max_total_flows: u32,
    /// A session's total `SO_MAX_PACING_RATE`, split evenly over its flows.
    pub max_rate_bps: Option<u64>,
    /// Longest a session may stream; longer requests are refused, and a session still
    /// running then is ended.
    pub max_session: Duration,
    /// Unauthenticated connections held at once, with random early drop (sshd's MaxStartups).
    pub max_startups: StartupLimits,
    /// Unauthenticated connections held at once from one source (an IPv4 address, an IPv6 /64).
    pub max_startups_per_source: usize,
    /// The whole pre-authentication phase of a connection: its first bytes, the hello, the
    /// proof, or a data connection's hello.
    pub preauth_timeout: Duration,
    /// Time allowed for each step after authentication: all data connections plus the start
    /// message; also for each control write.
    pub handshake_timeout: Duration,
    /// How often refusals before authentication are summarised in the log.
    pub refusal_summary_every: Duration,
    /// Shortest sampling interval a session may ask for.
    pub min_interval: Duration,
    /// Size of the prefilled buffer each write offers the kernel unless a session asks for
    /// another: 256 KiB, as measured against 64 and 128 KiB with scripts/bench-loopback
    /// (see `flow::write_forever`).
    pub write_chunk_bytes: usize,
    /// How long past its announced duration a session may stream before the daemon ends
    /// it (the reader normally says stop first).
    pub overrun_grace: Duration,
    /// Tag one write per flow per interval with TX timestamps (send-queue residence).
    pub tx_timestamps: bool,
    /// Which sessions' sockets may be traced (`--trace`).
    pub trace: TracePolicy,
    /// The ring buffers of every session's trace together, bytes (`--trace-budget`).
    pub trace_budget_bytes: u64,
}

/// Which sessions may have their sockets traced: a trace pins ring buffers on every CPU for
/// the whole session, so by default only a reader that proved it holds the key gets one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TracePolicy {
    /// Any session that asks.
    Allow,
    /// Sessions of a daemon with a key (so the reader proved it holds it); none without.
    Keyed,
    /// None.
    Off,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            default_options: SocketOptions::default(),
            key: None,
            max_sessions: 16,
            max_flows: 256,
            max_total_flows: 1024,
            max_rate_bps: None,
            max_session: Duration::from_secs(15 * 60),
            max_startups: StartupLimits::default(),
            max_startups_per_source: 10,
            preauth_timeout: Duration::from_secs(3),
            handshake_timeout: Duration::from_secs(10),
            refusal_summary_every: Duration::from_secs(10),
            min_interval: Duration::from_millis(10),
            write_chunk_bytes: DEFAULT_WRITE_BYTES as usize,
            overrun_grace: Duration::from_secs(5),
            tx_timestamps: true,
            trace: TracePolicy::Keyed,
            trace_budget_bytes: 64 << 20,
        }
    }
}

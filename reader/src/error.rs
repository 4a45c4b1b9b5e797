//! Why a run could not start, or could not be recorded.

use std::time::Duration;

use oscil_kernel::SockoptError;
use oscil_protocol::control::FrameError;
use oscil_rundir::RunDirError;

/// Why a run could not start, or could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum ReaderError {
    /// The daemon's address does not resolve.
    #[error("cannot resolve daemon address {addr:?}: {detail}")]
    Address { addr: String, detail: String },
    /// The daemon's name has no address of the IP version asked (by -4/-6 or -B's address).
    #[error("{addr} has no {family} address ({chosen_by}): {advice}")]
    NoAddressOfFamily {
        addr: String,
        family: &'static str,
        chosen_by: String,
        advice: String,
    },
    /// `--listen`'s address cannot be listened on.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    /// Stopped (Ctrl-C, SIGTERM) while no daemon had connected yet.
    #[error("stopped while waiting for a daemon to connect (--listen)")]
    StoppedListening,
    /// A connection to a listening reader that is not one of the session's data connections
    /// (said on the line that names its address), or a daemon that opened one wrongly.
    #[error("{0}")]
    DataRefused(&'static str),
    /// The control connection could not be opened.
    #[error("cannot connect to the daemon at {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    /// A setup step took too long.
    #[error("timed out {0}")]
    Timeout(&'static str),
    /// Something answered, but not an oscil daemon.
    #[error("{addr} does not speak the oscil protocol: {detail} (iperf3 listens on 5201, oscil-daemon on 5250)")]
    NotOscil { addr: String, detail: String },
    /// Something accepted the connection and then said nothing oscil understands in time:
    /// iperf3's server answers one byte and waits for parameters.
    #[error("{addr} accepted the connection but said nothing oscil understands within {waited}: is it an oscil-daemon? (iperf3 listens on 5201, oscil-daemon on 5250)")]
    Silent { addr: String, waited: String },
    /// Something accepted the connection and hung up before any answer: an oscil-daemon
    /// always answers (a challenge, a refusal, or busy), so it is likely something else.
    #[error("{addr} {how} the connection before any answer: is it an oscil-daemon? (a daemon answers even when it refuses; iperf3 listens on 5201, oscil-daemon on 5250)")]
    ClosedUnanswered { addr: String, how: &'static str },
    /// The daemon refused an authenticated session (its words, escaped).
    #[error("the daemon refused the session: {0}")]
    Refused(String),
    /// The daemon refused before authentication: it says no more than that.
    #[error(
        "the daemon refused the connection before authentication ({0}): check the key \
         (--key-file or $OSCIL_KEY), that both ends speak protocol version {version}, and the \
         daemon's log",
        version = oscil_protocol::control::PROTOCOL_VERSION
    )]
    RefusedBeforeAuth(String),
    /// The handshake failed on this side: the daemon did not prove the key, or wants one.
    #[error("authentication failed: {0}")]
    Auth(#[from] oscil_protocol::auth::AuthError),
    /// The kernel's CSPRNG failed.
    #[error("cannot draw a nonce from the kernel: {0}")]
    Random(std::io::Error),
    /// The daemon speaks another protocol version.
    #[error(
        "the daemon speaks protocol version {daemon}, this reader speaks {}; use matching versions",
        oscil_protocol::control::PROTOCOL_VERSION
    )]
    Version { daemon: u32 },
    /// The daemon's welcome states host facts that cannot be true.
    #[error("the daemon's welcome is not believable: {0}")]
    ImpossibleWelcome(#[from] crate::record::checks::WelcomeError),
    /// The daemon runs another writer than the one asked: one older than `--write-mode`
    /// ignores the request and writes until `EAGAIN`, which would measure something else.
    #[error("--write-mode {asked}: the daemon writes {runs} (a daemon older than --write-mode writes only until-eagain); use a daemon of this version")]
    WriteMode {
        asked: oscil_model::socket::WriteMode,
        runs: oscil_model::socket::WriteMode,
    },
    /// The daemon sent a message out of order.
    #[error("the daemon sent something other than {0}")]
    Unexpected(&'static str),
    /// The daemon is at a limit that frees up by itself (its words, escaped).
    #[error("the daemon is busy: {0}; try again later (--busy-retry)")]
    Busy(String),
    /// The daemon was still busy when the time allowed for trying again ran out.
    #[error("the daemon stayed busy for {:.0} s ({detail}): try again later, or allow longer with --busy-retry", waited.as_secs_f64())]
    StillBusy { waited: Duration, detail: String },
    /// The daemon closed before the session was set up.
    #[error("the daemon closed the control connection before answering")]
    ClosedEarly,
    /// The control connection failed or carried garbage.
    #[error(transparent)]
    Control(#[from] FrameError),
    /// A data connection could not be opened.
    #[error("data connection {flow}: {source}")]
    Data { flow: u32, source: std::io::Error },
    /// The kernel refused one of the reader's socket options.
    #[error("reader socket option: {0}")]
    Sockopt(#[from] SockoptError),
    /// The run directory could not be written.
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// The sampler thread could not start.
    #[error("cannot start the sampler thread: {0}")]
    Thread(std::io::Error),
    /// Every clock exchange had a negative round trip: a clock stepped meanwhile.
    #[error("cannot estimate the daemon's clock: every exchange crossed a clock step")]
    Clock,
}

//! The command lines one oscil program starts another with, each from one typed value: the
//! lab fills in an [`ReaderInvocation`] (around the run's `SessionRequest`, checked by the
//! rules every session keeps) or a [`DaemonInvocation`] and runs its `argv`, written in the
//! grammar the binary parses. Each binary's own tests parse these back to the same values,
//! so a flag renamed there cannot drift from here unseen.

use oscil_model::pattern::BitRate;
use oscil_protocol::request::SessionRequest;

use crate::request_args::TypedDuration;

/// An `oscil-reader` run as another program asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReaderInvocation {
    /// The daemon, `HOST:PORT`.
    pub connect: String,
    pub key_file: String,
    /// The run directory.
    pub out: String,
    /// The lab's record of the run (`--lab-record`).
    pub lab_record: Option<String>,
    pub label: Option<String>,
    /// What the session asks of the daemon and the reader; `pattern` is always given.
    pub request: SessionRequest,
    /// `SO_RCVBUF` on the reader's own sockets.
    pub rcvbuf_bytes: Option<u32>,
    /// The idle probe beside the flows (`--no-probe` when false).
    pub probe: bool,
    pub trace: bool,
    /// No progress display (`--quiet`).
    pub quiet: bool,
}

/// An `oscil-daemon` as another program starts it.
#[derive(Debug, Clone, PartialEq)]
pub struct DaemonInvocation {
    /// `HOST:PORT` or `[IPV6]:PORT`; port 0 for any free one (see `port_file`).
    pub listen: String,
    pub key_file: String,
    /// Where the daemon writes the port it listens on, once it does (`--port-file`).
    pub port_file: Option<String>,
}

/// Arguments as a list being written: a flag with a value, a flag alone.
#[derive(Default)]
struct Argv(Vec<String>);

impl Argv {
    fn value(&mut self, flag: &str, value: impl ToString) {
        self.0.extend([flag.to_owned(), value.to_string()]);
    }

    fn some(&mut self, flag: &str, value: Option<impl ToString>) {
        if let Some(value) = value {
            self.value(flag, value);
        }
    }

    fn switch(&mut self, flag: &str, on: bool) {
        if on {
            self.0.push(flag.to_owned());
        }
    }
}

impl ReaderInvocation {
    /// `oscil-reader`'s arguments (without the program's name).
    pub fn argv(&self) -> Vec<String> {
        let mut argv = Argv::default();
        argv.value("--connect", &self.connect);
        argv.value("--key-file", &self.key_file);
        argv.value("--out", &self.out);
        argv.some("--lab-record", self.lab_record.as_ref());
        argv.some("--label", self.label.as_ref());
        argv.switch("--quiet", self.quiet);
        let r = &self.request;
        if let Some(p) = &r.pattern {
            argv.value("--fast", TypedDuration::from_millis(p.fast_ms));
            argv.value("--slow", TypedDuration::from_millis(p.slow_ms));
            argv.value("--fraction", p.fraction);
            argv.value("--cycles", p.cycles);
            argv.switch("--full-speed", p.full_speed);
        }
        // Groups say their flows; each SPEC carries all its settings, so the flags below
        // (their defaults) change none of them.
        match r.groups.is_empty() {
            true => argv.value("--flows", r.flows),
            false => r
                .groups
                .iter()
                .for_each(|group| argv.value("--group", crate::group::spec_of(group))),
        }
        argv.value("--interval", TypedDuration(r.interval));
        argv.some("--marker-every", r.marker_every.map(TypedDuration));
        argv.some("--write-size", r.write_size_bytes);
        // Only another writer than the default: a reader older than the setting still runs.
        argv.some(
            "--write-mode",
            Some(r.write_mode).filter(|m| !m.is_until_eagain()),
        );
        argv.some("--slow-rate", r.slow_rate_bps);
        let s = &r.sender;
        argv.some("--notsent-lowat", s.notsent_lowat_bytes);
        argv.some("--sndbuf", s.sndbuf_bytes);
        argv.some("--congestion", s.congestion.as_ref());
        argv.some(
            "--pacing-rate",
            s.max_pacing_rate_bps.map(BitRate::from_bps),
        );
        argv.switch("--zerocopy", s.zerocopy);
        argv.some("--rcvbuf", self.rcvbuf_bytes);
        argv.switch("--no-probe", !self.probe);
        argv.switch("--trace", self.trace);
        argv.0
    }
}

impl DaemonInvocation {
    /// `oscil-daemon`'s arguments (without the program's name).
    pub fn argv(&self) -> Vec<String> {
        let mut argv = Argv::default();
        argv.value("--listen", &self.listen);
        argv.value("--key-file", &self.key_file);
        argv.some("--port-file", self.port_file.as_ref());
        argv.0
    }
}

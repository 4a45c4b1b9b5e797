//! One run on any backend: oscil-daemon on the sender's host, oscil-reader on the
//! receiver's, supervised until the reader ends (or a stop signal asks it to end early).

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use oscil_model::campaign::{CampaignRun, RunSettings};
use oscil_model::lab::Sides;
use oscil_model::sysctl::{Side, SysctlValues};
use oscil_protocol::request::SessionRequest;

use oscil_cli::invocation::{DaemonInvocation, ReaderInvocation};

use super::sysctl;
use crate::remote::host::{Host, HostError, Proc};
use crate::sys;

/// The two ends of a campaign, as one run needs them.
pub struct Ends {
    pub sender: Host,
    pub receiver: Host,
    /// oscil-daemon on the sender's host; oscil-reader on the receiver's.
    pub daemon_bin: String,
    pub reader_bin: String,
    /// The campaign's key file, on each host.
    pub sender_key: String,
    pub receiver_key: String,
    /// The address the daemon listens on, and the one the reader connects to.
    pub listen_ip: String,
    pub connect_host: String,
    /// Where, on the sender's host, the daemon (started on port 0) writes its port: in
    /// the lab's own private directory there.
    pub port_file: String,
}

/// Where one run's files go, on the receiver's host and on this machine.
pub struct RunFiles<'a> {
    /// The reader's --out, on the receiver's host.
    pub out: &'a str,
    /// The lab's record of the run (the reader's --lab-record), on the receiver's host.
    pub lab_record: &'a str,
    /// Logs of the daemon and the reader, on this machine.
    pub daemon_log: &'a Path,
    pub reader_log: &'a Path,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{0}")]
    Host(#[from] HostError),
    #[error("cannot write log {path}: {source}")]
    Log {
        path: String,
        source: std::io::Error,
    },
    #[error("oscil-daemon did not start listening: {detail}")]
    NotListening { detail: String },
}

/// How the reader ended: its exit code (None if killed), and whether the lab asked it to stop.
pub struct ReaderEnd {
    pub code: Option<i32>,
    pub stopped: bool,
    /// How the reverse pair's reader ended, in a `--direction both` run.
    pub reverse: Option<Box<ReaderEnd>>,
}

/// The logs of a `--direction both` run's reverse pair, beside the forward pair's.
pub const REVERSE_DAEMON_LOG: &str = "daemon-reverse.log";
pub const REVERSE_READER_LOG: &str = "reader-reverse.log";

fn log_file(path: &Path) -> Result<File, SessionError> {
    File::create(path).map_err(|source| SessionError::Log {
        path: path.display().to_string(),
        source,
    })
}

/// The last non-empty line of a log, for a one-line reason.
pub fn last_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "no output".into())
}

/// How the reader is started for a run: the run's settings as one typed value (its session
/// request, checked by the rules every session keeps) and where its files go.
pub fn reader_invocation(
    run: &CampaignRun,
    connect: String,
    key: &str,
    files: &RunFiles,
) -> ReaderInvocation {
    let s = &run.settings;
    ReaderInvocation {
        connect,
        key_file: key.to_owned(),
        out: files.out.to_owned(),
        lab_record: Some(files.lab_record.to_owned()),
        label: Some(run.label.clone()),
        request: SessionRequest::of_run(s),
        rcvbuf_bytes: s.rcvbuf_bytes,
        probe: !s.no_probe,
        trace: s.trace,
        quiet: true,
    }
}

impl Ends {
    /// Sets what a run asks for on the host each sysctl belongs to; `before` (sender,
    /// receiver) stands in for every `default`.
    pub fn set_sysctls(
        &self,
        settings: &RunSettings,
        before: [&SysctlValues; 2],
    ) -> Result<(), HostError> {
        sysctl::write(
            &self.sender,
            &sysctl::wanted(settings, before[0], Side::Sender),
        )?;
        sysctl::write(
            &self.receiver,
            &sysctl::wanted(settings, before[1], Side::Receiver),
        )
    }

    /// The sysctls in force on each side, for the run's record.
    pub fn sysctls_in_force(&self) -> Result<Sides<SysctlValues>, HostError> {
        Ok(Sides {
            sender: sysctl::read(&self.sender, &sysctl::recorded())?,
            receiver: sysctl::read(&self.receiver, &sysctl::recorded())?,
        })
    }

    /// Starts the daemon on a port of its own choosing and waits until it says which, in
    /// its `--port-file` (no other program's output is read for it).
    pub fn start_daemon(&self, log: &Path) -> Result<(Proc, u16), SessionError> {
        self.sender.run(&["rm", "-f", &self.port_file])?;
        let invocation = DaemonInvocation {
            listen: format!("{}:0", self.listen_ip),
            key_file: self.sender_key.clone(),
            port_file: Some(self.port_file.clone()),
        };
        let args = invocation.argv();
        let mut argv = vec![self.daemon_bin.as_str()];
        argv.extend(args.iter().map(String::as_str));
        let mut daemon = self.sender.spawn(&argv, &log_file(log)?)?;
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = daemon.try_wait() {
                let detail = format!("it exited ({status}): {}", last_line(log));
                return Err(SessionError::NotListening { detail });
            }
            // Absent until the daemon listens; then its port, whole (it is renamed into place).
            let said = self.sender.run(&["cat", &self.port_file]).ok();
            if let Some(port) = said.and_then(|text| text.parse::<u16>().ok()) {
                return Ok((daemon, port));
            }
            if Instant::now() > deadline {
                let detail = format!("no port after 15 s: {}", last_line(log));
                return Err(SessionError::NotListening { detail });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts the reader against a daemon on `port`.
    pub fn spawn_reader(
        &self,
        run: &CampaignRun,
        port: u16,
        files: &RunFiles,
    ) -> Result<Proc, SessionError> {
        let connect = format!("{}:{port}", self.connect_host);
        let args = reader_invocation(run, connect, &self.receiver_key, files).argv();
        let mut argv = vec![self.reader_bin.as_str()];
        argv.extend(args.iter().map(String::as_str));
        Ok(self.receiver.spawn(&argv, &log_file(files.reader_log)?)?)
    }

    /// Runs the reader to its end against a daemon on `port` (see [`supervise`]).
    pub fn run_reader(
        &self,
        run: &CampaignRun,
        port: u16,
        files: &RunFiles,
        tick: &mut dyn FnMut(Duration),
    ) -> Result<ReaderEnd, SessionError> {
        let reader = self.spawn_reader(run, port, files)?;
        Ok(supervise(vec![reader], tick).remove(0))
    }
}

/// Waits for every reader to end, each's end in order. `tick` is called about every 100 ms
/// with the time since they started. A stop signal to the lab becomes a SIGINT to each
/// reader still running, which then finishes its run directory (partial) and exits.
pub fn supervise(mut readers: Vec<Proc>, tick: &mut dyn FnMut(Duration)) -> Vec<ReaderEnd> {
    let started = Instant::now();
    let mut ends: Vec<Option<ReaderEnd>> = readers.iter().map(|_| None).collect();
    let mut asked_to_stop: Option<Instant> = None;
    loop {
        for (reader, end) in readers.iter_mut().zip(&mut ends) {
            if end.is_none() {
                *end = reader.try_wait().map(|status| ReaderEnd {
                    code: status.code(),
                    stopped: asked_to_stop.is_some(),
                    reverse: None,
                });
            }
        }
        if ends.iter().all(Option::is_some) {
            return ends.into_iter().flatten().collect();
        }
        match asked_to_stop {
            None if sys::stop_signal().is_some() => {
                for (reader, _) in readers.iter().zip(&ends).filter(|(_, e)| e.is_none()) {
                    reader.signal(sys::SIGINT);
                }
                asked_to_stop = Some(Instant::now());
            }
            // They had their chance to write their last samples: now they must go.
            Some(when) if when.elapsed() > Duration::from_secs(10) => {
                for (reader, end) in readers.iter_mut().zip(&mut ends) {
                    if end.is_none() {
                        let status = reader.stop(Duration::from_secs(2));
                        *end = Some(ReaderEnd {
                            code: status.and_then(|s| s.code()),
                            stopped: true,
                            reverse: None,
                        });
                    }
                }
                return ends.into_iter().flatten().collect();
            }
            _ => {}
        }
        tick(started.elapsed());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::matrix::{configurations, plan_runs, AxisValue, Matrix, Setting};
    use oscil_model::campaign::Order;
    use oscil_model::pattern::PatternConfig;

    /// Every per-socket setting of a run reaches the reader's session request (which the
    /// reader's own tests parse back from `argv`).
    #[test]
    fn the_readers_request_carries_every_per_socket_setting() {
        let value = |set| AxisValue {
            label: Some("x".into()),
            set,
        };
        let matrix = Matrix {
            axes: vec![
                vec![value(Setting::Sndbuf(Some(16384)))],
                vec![value(Setting::Rcvbuf(Some(32768)))],
                vec![value(Setting::PacingRate(Some(50_000_000)))],
                vec![value(Setting::Congestion(Some("bbr".into())))],
            ],
            flows: 4,
            interval_us: 50_000,
            write_size_bytes: Some(16384),
            marker_every_us: Some(1_000_000),
            trace: true,
            pattern: PatternConfig {
                full_speed: true,
                ..PatternConfig::CLOUDFLARE
            },
            ..Matrix::default()
        };
        let runs = plan_runs(&configurations(&matrix), 1, Order::Grouped, 0);
        let log = Path::new("/dev/null");
        let files = RunFiles {
            out: "/o",
            lab_record: "/m.json",
            daemon_log: log,
            reader_log: log,
        };
        let reader = reader_invocation(&runs[0], "10.0.0.1:5250".into(), "/k", &files);
        let r = &reader.request;
        assert_eq!((r.flows, r.interval), (4, Duration::from_millis(50)));
        assert!(r.pattern.unwrap().full_speed);
        assert_eq!(r.sender.sndbuf_bytes, Some(16384));
        assert_eq!(r.sender.max_pacing_rate_bps, Some(50_000_000));
        assert_eq!(r.sender.congestion.as_deref(), Some("bbr"));
        assert_eq!(r.write_size_bytes, Some(16384));
        assert_eq!(r.marker_every, Some(Duration::from_secs(1)));
        assert_eq!(reader.rcvbuf_bytes, Some(32768));
        assert!(reader.trace && reader.probe && reader.quiet);
        assert_eq!(reader.lab_record.as_deref(), Some("/m.json"));
        assert_eq!(reader.label.as_deref(), Some(runs[0].label.as_str()));
    }
}

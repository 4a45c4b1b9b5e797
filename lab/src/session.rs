//! One run on any backend: oscil-daemon on the sender's host, oscil-reader on the
//! receiver's, supervised until the reader ends (or a stop signal asks it to end early).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use oscil_rundir::campaign::{CampaignRun, RunSettings};

use crate::host::{Host, HostError, Proc};
use crate::sys;
use crate::sysctl::{self, Sysctls, RECEIVER_KEYS, RECORDED, SENDER_KEYS};

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
}

/// Where one run's files go, on the receiver's host and on this machine.
pub struct RunFiles<'a> {
    /// The reader's --out, on the receiver's host.
    pub out: &'a str,
    /// The reader's --meta, on the receiver's host.
    pub meta: &'a str,
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
    #[error("oscil-daemon did not listen on port {port}: {detail}")]
    NotListening { port: u16, detail: String },
}

/// How the reader ended: its exit code (None if killed), and whether the lab asked it to stop.
pub struct ReaderEnd {
    pub code: Option<i32>,
    pub stopped: bool,
}

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

/// The reader's flags for a run: its settings, in the binaries' own grammar.
pub fn reader_args(run: &CampaignRun, connect: &str, key: &str, files: &RunFiles) -> Vec<String> {
    let s = &run.settings;
    let p = &s.pattern;
    let mut args: Vec<String> = [
        "--connect",
        connect,
        "--key-file",
        key,
        "--out",
        files.out,
        "--meta",
        files.meta,
        "--label",
        &run.label,
        "--quiet",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let mut add = |flag: &str, value: String| args.extend([flag.to_owned(), value]);
    add("--fast", format!("{}ms", p.fast_ms));
    add("--slow", format!("{}ms", p.slow_ms));
    add("--fraction", p.fraction.to_string());
    add("--cycles", p.cycles.to_string());
    add("--flows", s.flows.to_string());
    add("--interval", format!("{}us", s.interval_us));
    if let Some(cc) = &s.congestion {
        add("--congestion", cc.clone());
    }
    if let Some(bytes) = s.sndbuf_bytes {
        add("--sndbuf", bytes.to_string());
    }
    if let Some(bytes) = s.rcvbuf_bytes {
        add("--rcvbuf", bytes.to_string());
    }
    if let Some(bps) = s.pacing_rate_bps {
        add("--pacing-rate", format!("{bps}bit"));
    }
    if let Some(bytes) = s.write_size_bytes {
        add("--write-size", bytes.to_string());
    }
    if let Some(us) = s.marker_every_us {
        add("--marker-every", format!("{us}us"));
    }
    if let Some(bps) = s.slow_rate_bps {
        add("--slow-rate", format!("{bps}bit"));
    }
    if p.full_speed {
        args.push("--full-speed".into());
    }
    if s.no_probe {
        args.push("--no-probe".into());
    }
    if s.trace {
        args.push("--trace".into());
    }
    args
}

impl Ends {
    /// Sets what a run asks for on the host each sysctl belongs to; `before` (sender,
    /// receiver) stands in for every `default`.
    pub fn set_sysctls(
        &self,
        settings: &RunSettings,
        before: [&Sysctls; 2],
    ) -> Result<(), HostError> {
        sysctl::write(
            &self.sender,
            &sysctl::wanted(settings, before[0], &SENDER_KEYS),
        )?;
        sysctl::write(
            &self.receiver,
            &sysctl::wanted(settings, before[1], &RECEIVER_KEYS),
        )
    }

    /// The sysctls in force on each side, for the run's metadata.
    pub fn sysctls_in_force(&self) -> Result<BTreeMap<&'static str, Sysctls>, HostError> {
        Ok(BTreeMap::from([
            ("sender", sysctl::read(&self.sender, &RECORDED)?),
            ("receiver", sysctl::read(&self.receiver, &RECORDED)?),
        ]))
    }

    /// Starts the daemon on `port` and waits until it listens.
    pub fn start_daemon(&self, port: u16, log: &Path) -> Result<Proc, SessionError> {
        let listen = format!("{}:{port}", self.listen_ip);
        let argv = [
            self.daemon_bin.as_str(),
            "--listen",
            &listen,
            "--key-file",
            &self.sender_key,
        ];
        let mut daemon = self.sender.spawn(&argv, &log_file(log)?)?;
        let filter = format!("sport = :{port}");
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = daemon.try_wait() {
                let detail = format!("it exited ({status}): {}", last_line(log));
                return Err(SessionError::NotListening { port, detail });
            }
            if !self.sender.run(&["ss", "-Hltn", &filter])?.is_empty() {
                return Ok(daemon);
            }
            if Instant::now() > deadline {
                let detail = format!("nothing after 15 s: {}", last_line(log));
                return Err(SessionError::NotListening { port, detail });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs the reader to its end against a daemon on `port`. `tick` is called about every
    /// 100 ms with the time since the reader started. A stop signal to the lab becomes a
    /// SIGINT to the reader, which then finishes its run directory (partial) and exits.
    pub fn run_reader(
        &self,
        run: &CampaignRun,
        port: u16,
        files: &RunFiles,
        tick: &mut dyn FnMut(Duration),
    ) -> Result<ReaderEnd, SessionError> {
        let connect = format!("{}:{port}", self.connect_host);
        let args = reader_args(run, &connect, &self.receiver_key, files);
        let mut argv = vec![self.reader_bin.as_str()];
        argv.extend(args.iter().map(String::as_str));
        let mut reader = self.receiver.spawn(&argv, &log_file(files.reader_log)?)?;
        let started = Instant::now();
        let mut asked_to_stop: Option<Instant> = None;
        loop {
            if let Some(status) = reader.try_wait() {
                return Ok(ReaderEnd {
                    code: status.code(),
                    stopped: asked_to_stop.is_some(),
                });
            }
            match asked_to_stop {
                None if sys::stop_signal().is_some() => {
                    reader.signal(sys::SIGINT);
                    asked_to_stop = Some(Instant::now());
                }
                // It had its chance to write its last samples: now it must go.
                Some(when) if when.elapsed() > Duration::from_secs(10) => {
                    let status = reader.stop(Duration::from_secs(2));
                    return Ok(ReaderEnd {
                        code: status.and_then(|s| s.code()),
                        stopped: true,
                    });
                }
                _ => {}
            }
            tick(started.elapsed());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A port in 20000..60000 not in `used`, chosen from `seed`, for a daemon on a shared host.
pub fn pick_port(used: &[u16], seed: u64) -> u16 {
    const FIRST: u64 = 20000;
    const COUNT: u64 = 40000;
    (0..COUNT)
        .map(|i| (FIRST + (seed.wrapping_add(i.wrapping_mul(7919))) % COUNT) as u16)
        .find(|port| !used.contains(port))
        .unwrap_or(0)
}

/// The TCP ports listening on `host` (from `ss -Hltn`).
pub fn listening_ports(host: &Host) -> Result<Vec<u16>, HostError> {
    let text = host.run(&["ss", "-Hltn"])?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_whitespace().nth(3))
        .filter_map(|local| local.rsplit(':').next()?.parse().ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{configurations, plan_runs, AxisValue, Matrix, Setting};
    use oscil_protocol::PatternConfig;
    use oscil_rundir::campaign::Order;

    #[test]
    fn ports_avoid_those_in_use() {
        let port = pick_port(&[], 5);
        assert!((20000..60000).contains(&port));
        let next = pick_port(&[port], 5);
        assert_ne!(next, port);
        assert!((20000..60000).contains(&next));
    }

    #[test]
    fn reader_flags_carry_every_per_socket_setting() {
        let value = |set| AxisValue {
            label: Some("x".into()),
            set,
        };
        let matrix = Matrix {
            axes: vec![
                vec![value(Setting::Sndbuf(Some(16384)))],
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
            meta: "/m.json",
            daemon_log: log,
            reader_log: log,
        };
        let args = reader_args(&runs[0], "10.0.0.1:5250", "/k", &files).join(" ");
        for expected in [
            "--connect 10.0.0.1:5250",
            "--key-file /k",
            "--out /o",
            "--meta /m.json",
            "--fast 5000ms",
            "--slow 15000ms",
            "--cycles 3",
            "--flows 4",
            "--interval 50000us",
            "--sndbuf 16384",
            "--pacing-rate 50000000bit",
            "--congestion bbr",
            "--write-size 16384",
            "--marker-every 1000000us",
            "--full-speed",
            "--trace",
        ] {
            assert!(args.contains(expected), "{expected} missing from {args}");
        }
    }
}

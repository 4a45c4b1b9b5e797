//! A session request and its rules, stated once: the reader checks its flags with them, the
//! lab every run it plans (before anything exists on any host), the daemon every hello. A
//! default or a limit written here is the only copy; the binaries' clap defaults and help
//! derive from it (through `oscil_cli::request_args`, which reads them as typed).

use std::time::Duration;

use oscil_model::campaign::RunSettings;
use oscil_model::group::{share_bps, total_flows, FlowGroup, Reading};
use oscil_model::pattern::{BitRate, PatternConfig};
use oscil_model::socket::{
    SocketOptions, WriteMode, DEFAULT_WRITE_BYTES, DEFAULT_ZEROCOPY_WRITE_BYTES,
};
use oscil_model::text::escape_peer;

use crate::control::{Hello, MAX_WRITE_BYTES};

/// The kernel paces in whole bytes per second: below 8 bit/s a pacing rate would be none.
pub const MIN_PACING_RATE_BPS: u64 = 8;

/// The most data connections one session may ask for, in the reader and the lab alike.
pub const MAX_FLOWS: u32 = 10_000;

/// The most groups of flows one session may hold: a hello with this many, every setting at
/// its longest, still fits the daemon's first frame before authentication
/// ([`crate::control::MAX_PREAUTH_FRAME_BYTES`]).
pub const MAX_GROUPS: usize = 8;

/// The most fast+slow cycles one run may ask for.
pub const MAX_CYCLES: u32 = 10_000;

/// The longest session any request may ask, ms: a week (longer ones overflow the hello's
/// microseconds before any daemon's own limit is reached).
pub const MAX_SESSION_MS: u64 = 7 * 24 * 3600 * 1000;

/// The kernel's `TCP_CA_NAME_MAX` less its NUL.
pub const MAX_CONGESTION_NAME_BYTES: usize = 15;

/// Why a session request cannot be served by any daemon: each message names the flag that
/// sets the value, which is what the person at the reader (or the lab) can change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    #[error("--flows {flows}: 1 to {MAX_FLOWS} data connections per session")]
    Flows { flows: u32 },
    #[error("--cycles {cycles}: 1 to {MAX_CYCLES} cycles per run")]
    Cycles { cycles: u32 },
    #[error("a fast phase of 0 ms: every cycle needs one")]
    NoFastPhase,
    #[error("a sampling --interval of zero")]
    NoInterval,
    #[error("a run of {:.1} days ({cycles} cycles of --fast and --slow): at most a week per session (a daemon serves 15 min unless its --max-session-time says more)", *.total_s as f64 / 86400.0)]
    TooLong { total_s: u64, cycles: u32 },
    #[error("--interval {interval_ms} ms is longer than the shortest phase ({shortest_ms} ms): every phase needs at least one sample")]
    IntervalOverPhase { interval_ms: u64, shortest_ms: u64 },
    #[error("--marker-every {every:?} is shorter than the sampling --interval {interval:?}")]
    MarkersBeforeSamples { every: Duration, interval: Duration },
    #[error("write size of {bytes} bytes: 1 to {MAX_WRITE_BYTES} bytes at a time")]
    WriteSize { bytes: u64 },
    #[error("pacing rate of {bps} bit/s is below {MIN_PACING_RATE_BPS} bit/s, the kernel's smallest (it paces whole bytes per second)")]
    PacingRate { bps: u64 },
    #[error("slow rate of {bps} bit/s is below {MIN_PACING_RATE_BPS} bit/s: the slow phases would read nothing")]
    SlowRate { bps: u64 },
    /// The kernel takes a congestion control name up to its first NUL, so `reno\0\n...`
    /// would pass as reno and carry the rest into a log: only module-name characters.
    #[error("congestion control \"{shown}\" is not a kernel module name (1 to {MAX_CONGESTION_NAME_BYTES} letters, digits, _ or -)")]
    CongestionName { shown: String },
    #[error("--group given {groups} times: a session holds at most {MAX_GROUPS} groups")]
    Groups { groups: usize },
    /// The groups' flows together: each group's are checked as that group's.
    #[error("--group: {flows} flows in all, but a session holds 1 to {MAX_FLOWS}")]
    TotalFlows { flows: u64 },
    /// One group's setting, named by its place on the command line (from 1).
    #[error("--group {number}: {source}")]
    Group {
        number: usize,
        source: Box<RequestError>,
    },
}

/// What one session asks of the daemon and of the reader, as the reader sends it (less the
/// key and the run directory, which are the reader's own business).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRequest {
    pub flows: u32,
    pub interval: Duration,
    /// The reading pattern; `None` for the daemon, which is told only the session's length.
    pub pattern: Option<PatternConfig>,
    pub marker_every: Option<Duration>,
    /// Bytes per write of the daemon; `None` for its default ([`write_size_bytes`]).
    pub write_size_bytes: Option<u32>,
    /// How the daemon's writers write (`--write-mode`).
    pub write_mode: WriteMode,
    /// The daemon's socket options.
    pub sender: SocketOptions,
    /// The slow phases' absolute rate, all flows together (`--slow-rate`).
    pub slow_rate_bps: Option<BitRate>,
    /// The session's groups of flows (`--group`), each with all its settings; empty: one
    /// group made of the fields above ([`SessionRequest::flow_groups`]). With groups,
    /// `flows` is their total.
    pub groups: Vec<FlowGroup>,
}

impl SessionRequest {
    /// A request with the defaults for everything but the flows, interval and pattern.
    /// What a lab run asks of its reader and daemon, for the rules every session keeps
    /// (the lab sets the lowat and the buffers as sysctls, not on the sockets; a group's
    /// `notsent-lowat=` is the socket option). A group with no slow rate of its own reads
    /// its flows' share of the run's.
    pub fn of_run(run: &RunSettings) -> SessionRequest {
        let total = total_flows(&run.groups);
        let groups = run.groups.iter().map(|group| FlowGroup {
            slow_rate_bps: group.slow_rate_bps.or_else(|| {
                let share = |bps| share_bps(bps, group.flows, total, MIN_PACING_RATE_BPS);
                run.slow_rate_bps.map(|rate| share(rate.bps()))
            }),
            ..group.clone()
        });
        SessionRequest {
            groups: groups.collect(),
            marker_every: run.marker_every_us.map(Duration::from_micros),
            write_size_bytes: run.write_size_bytes,
            write_mode: run.write_mode,
            sender: SocketOptions {
                sndbuf_bytes: run.sndbuf_bytes,
                congestion: run.congestion.clone(),
                max_pacing_rate_bps: run.pacing_rate_bps,
                ..SocketOptions::default()
            },
            slow_rate_bps: run.slow_rate_bps,
            ..SessionRequest::new(
                run.flows,
                Duration::from_micros(run.interval_us),
                Some(run.pattern),
            )
        }
    }

    pub fn new(flows: u32, interval: Duration, pattern: Option<PatternConfig>) -> Self {
        SessionRequest {
            flows,
            interval,
            pattern,
            marker_every: None,
            write_size_bytes: None,
            write_mode: WriteMode::default(),
            sender: SocketOptions::default(),
            slow_rate_bps: None,
            groups: Vec::new(),
        }
    }

    /// The session's groups: as asked, or the one group of the run-wide settings.
    pub fn flow_groups(&self) -> Vec<FlowGroup> {
        if !self.groups.is_empty() {
            return self.groups.clone();
        }
        let pattern = self.pattern.unwrap_or(PatternConfig::CLOUDFLARE);
        vec![FlowGroup {
            flows: self.flows,
            sender: self.sender.clone(),
            write_size_bytes: self.write_size_bytes,
            write_mode: self.write_mode,
            pattern: match pattern.full_speed {
                true => Reading::FullSpeed,
                false => Reading::Oscillating,
            },
            fraction: pattern.fraction,
            slow_rate_bps: self.slow_rate_bps.map(BitRate::bps),
        }]
    }

    /// What a hello asks for, to be checked by the same rules as the reader's flags.
    pub fn of_hello(hello: &Hello) -> Self {
        SessionRequest {
            marker_every: hello.marker_every_us.map(Duration::from_micros),
            write_size_bytes: hello.write_size_bytes,
            write_mode: hello.write_mode,
            sender: hello.options.clone(),
            groups: hello.groups.clone(),
            ..SessionRequest::new(hello.flows, Duration::from_micros(hello.interval_us), None)
        }
    }

    /// Every rule a request must keep, whoever serves it; a daemon's own limits
    /// (`--max-flows`, `--max-session-time`, ...) come on top.
    pub fn validate(&self) -> Result<(), RequestError> {
        match self.groups.is_empty() {
            true => self.flow_groups().iter().try_for_each(check_group)?,
            false => check_groups(&self.groups, self.flows)?,
        }
        if self.interval.is_zero() {
            return Err(RequestError::NoInterval);
        }
        if let Some(pattern) = &self.pattern {
            check_pattern(pattern, self.interval)?;
        }
        match self.marker_every.filter(|every| *every < self.interval) {
            Some(every) => Err(RequestError::MarkersBeforeSamples {
                every,
                interval: self.interval,
            }),
            None => Ok(()),
        }
    }
}

/// Each group's own settings by the rules of the flags they stand for, and the flows of
/// all of them together within [`MAX_FLOWS`] and equal to the session's.
fn check_groups(groups: &[FlowGroup], flows: u32) -> Result<(), RequestError> {
    if groups.len() > MAX_GROUPS {
        return Err(RequestError::Groups {
            groups: groups.len(),
        });
    }
    for (group, number) in groups.iter().zip(1..) {
        check_group(group).map_err(|source| RequestError::Group {
            number,
            source: Box::new(source),
        })?;
    }
    let total = total_flows(groups);
    match groups.is_empty() || (total <= u64::from(MAX_FLOWS) && total == u64::from(flows)) {
        true => Ok(()),
        false => Err(RequestError::TotalFlows { flows: total }),
    }
}

/// One group's flows and settings (a request without groups is one).
fn check_group(group: &FlowGroup) -> Result<(), RequestError> {
    if !(1..=MAX_FLOWS).contains(&group.flows) {
        return Err(RequestError::Flows { flows: group.flows });
    }
    if let Some(bytes) = group.write_size_bytes {
        check_write_size(u64::from(bytes))?;
    }
    if let Some(bps) = group.sender.max_pacing_rate_bps {
        check_pacing_rate(bps)?;
    }
    if let Some(bps) = group.slow_rate_bps {
        check_slow_rate(bps)?;
    }
    match &group.sender.congestion {
        Some(name) => check_congestion_name(name),
        None => Ok(()),
    }
}

/// Cycles within bounds, a fast phase in each, and every phase at least one sampling
/// interval long, or it would vanish from the record.
fn check_pattern(pattern: &PatternConfig, interval: Duration) -> Result<(), RequestError> {
    if !(1..=MAX_CYCLES).contains(&pattern.cycles) {
        return Err(RequestError::Cycles {
            cycles: pattern.cycles,
        });
    }
    if pattern.fast_ms == 0 {
        return Err(RequestError::NoFastPhase);
    }
    let total =
        u64::from(pattern.cycles).saturating_mul(pattern.fast_ms.saturating_add(pattern.slow_ms));
    if total > MAX_SESSION_MS {
        return Err(RequestError::TooLong {
            total_s: total / 1000,
            cycles: pattern.cycles,
        });
    }
    let shortest_ms = match pattern.full_speed {
        true => pattern.total().as_millis() as u64,
        false => [pattern.fast_ms, pattern.slow_ms]
            .into_iter()
            .filter(|&ms| ms > 0)
            .min()
            .unwrap_or(0),
    };
    let interval_ms = interval.as_millis() as u64;
    if interval > Duration::from_millis(shortest_ms) {
        return Err(RequestError::IntervalOverPhase {
            interval_ms,
            shortest_ms,
        });
    }
    Ok(())
}

/// The daemon's write size for a request: the one asked, else the default for its way of
/// sending.
pub fn write_size_bytes(asked: Option<u32>, zerocopy: bool) -> u32 {
    asked.unwrap_or(match zerocopy {
        true => DEFAULT_ZEROCOPY_WRITE_BYTES,
        false => DEFAULT_WRITE_BYTES,
    })
}

/// 1 to [`MAX_WRITE_BYTES`]: the daemon holds one such buffer per session.
pub fn check_write_size(bytes: u64) -> Result<u32, RequestError> {
    match u32::try_from(bytes) {
        Ok(n) if (1..=MAX_WRITE_BYTES).contains(&n) => Ok(n),
        _ => Err(RequestError::WriteSize { bytes }),
    }
}

/// At least [`MIN_PACING_RATE_BPS`].
pub fn check_pacing_rate(bps: u64) -> Result<u64, RequestError> {
    match bps < MIN_PACING_RATE_BPS {
        true => Err(RequestError::PacingRate { bps }),
        false => Ok(bps),
    }
}

/// At least one byte a second, or the slow phases would read nothing.
pub fn check_slow_rate(bps: u64) -> Result<u64, RequestError> {
    match bps < MIN_PACING_RATE_BPS {
        true => Err(RequestError::SlowRate { bps }),
        false => Ok(bps),
    }
}

/// A congestion control name the kernel would read as written.
pub fn check_congestion_name(name: &str) -> Result<(), RequestError> {
    let valid = (1..=MAX_CONGESTION_NAME_BYTES).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    match valid {
        true => Ok(()),
        false => Err(RequestError::CongestionName {
            shown: escape_peer(name),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oscil_model::run::sampling::DEFAULT_INTERVAL;

    fn request() -> SessionRequest {
        SessionRequest::new(1, DEFAULT_INTERVAL, Some(PatternConfig::CLOUDFLARE))
    }

    #[test]
    fn the_defaults_are_a_valid_request() {
        assert_eq!(request().validate(), Ok(()));
    }

    #[test]
    fn every_phase_holds_a_sample() {
        let mut r = request();
        r.interval = Duration::from_secs(6);
        let error = r.validate().unwrap_err();
        assert_eq!(
            error,
            RequestError::IntervalOverPhase {
                interval_ms: 6000,
                shortest_ms: 5000
            }
        );
        // A slow phase of 0 is no phase; the full-speed run is one phase of the whole.
        r.pattern = Some(PatternConfig {
            slow_ms: 0,
            fast_ms: 7000,
            ..PatternConfig::CLOUDFLARE
        });
        assert_eq!(r.validate(), Ok(()));
        r.pattern = Some(PatternConfig {
            full_speed: true,
            fast_ms: 1000,
            slow_ms: 1000,
            cycles: 3,
            ..PatternConfig::CLOUDFLARE
        });
        assert_eq!(r.validate(), Ok(()));
        r.interval = Duration::from_millis(6001);
        assert!(r.validate().is_err());
    }

    #[test]
    fn limits_name_the_flag() {
        let mut r = request();
        r.marker_every = Some(Duration::from_millis(50));
        assert_eq!(
            r.validate().unwrap_err().to_string(),
            "--marker-every 50ms is shorter than the sampling --interval 100ms"
        );
        r.marker_every = Some(DEFAULT_INTERVAL);
        assert_eq!(r.validate(), Ok(()));
        for (bytes, ok) in [
            (0, false),
            (1, true),
            (16 << 20, true),
            ((16 << 20) + 1, false),
        ] {
            assert_eq!(check_write_size(bytes).is_ok(), ok, "{bytes}");
        }
        assert_eq!(
            check_pacing_rate(7),
            Err(RequestError::PacingRate { bps: 7 })
        );
        assert_eq!(check_pacing_rate(8), Ok(8));
        assert!(check_slow_rate(4)
            .unwrap_err()
            .to_string()
            .contains("read nothing"));
        r.sender.congestion = Some("reno\0\nforged".into());
        let error = r.validate().unwrap_err().to_string();
        assert!(error.contains("not a kernel module name"), "{error}");
        assert!(!error.contains('\n') && !error.contains('\0'), "{error}");
        r.flows = 0;
        assert_eq!(r.validate(), Err(RequestError::Flows { flows: 0 }));
    }

    #[test]
    fn groups_are_held_to_the_flags_rules_and_the_flows_to_the_sessions_limit() {
        let mut r = request();
        let one = r.flow_groups().remove(0);
        r.groups = vec![
            one.clone(),
            FlowGroup {
                flows: 3,
                ..one.clone()
            },
        ];
        r.flows = 4;
        assert_eq!(r.validate(), Ok(()));
        r.flows = 5;
        assert_eq!(r.validate(), Err(RequestError::TotalFlows { flows: 4 }));
        let nine = vec![r.groups[0].clone(); MAX_GROUPS + 1];
        let error = RequestError::Groups { groups: 9 };
        assert_eq!(check_groups(&nine, 9), Err(error));
        r.groups[1].flows = MAX_FLOWS;
        r.flows = MAX_FLOWS + 1;
        let error = r.validate().unwrap_err().to_string();
        assert!(error.contains("10001 flows in all"), "{error}");
        r.groups[1].flows = 3;
        r.flows = 4;
        r.groups[1].sender.max_pacing_rate_bps = Some(1);
        assert_eq!(
            r.validate().unwrap_err().to_string(),
            "--group 2: pacing rate of 1 bit/s is below 8 bit/s, the kernel's smallest (it paces whole bytes per second)"
        );
    }

    #[test]
    fn a_lab_run_with_groups_shares_its_slow_rate_among_those_without_their_own() {
        let mut run = RunSettings::unset(4, 100_000, PatternConfig::CLOUDFLARE);
        let one = SessionRequest::of_run(&run).flow_groups().remove(0);
        run.slow_rate_bps = Some(BitRate::from_bps(4_000_000));
        run.groups = vec![
            FlowGroup {
                flows: 1,
                ..one.clone()
            },
            FlowGroup {
                flows: 3,
                slow_rate_bps: Some(9_000),
                ..one
            },
        ];
        let groups = SessionRequest::of_run(&run).groups;
        let rates: Vec<_> = groups.iter().map(|g| g.slow_rate_bps).collect();
        assert_eq!(rates, [Some(1_000_000), Some(9_000)]);
    }
}

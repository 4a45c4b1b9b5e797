//! The campaign directory: the interface between `oscil-lab`, which plans and runs a matrix
//! of settings (each repeated), and `oscil-report`, which groups the runs into
//! configurations.
//!
//! ```text
//! <out>/campaign.json           the plan and each run's status
//! <out>/runs/<label>/rep-<k>/   one run directory each
//!                               (runs/<pair>/<label>/rep-<k>/ when many hosts)
//! <out>/report/                 the report over every complete run
//! ```

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::safe_fs::{self, SafeFsError};
use oscil_kernel::sysctl::{Sysctl, SysctlValue};
use oscil_kernel::SocketOptions;
use oscil_protocol::control::WriteMode;
use oscil_protocol::pattern::PatternConfig;
use oscil_protocol::request::SessionRequest;

pub const CAMPAIGN_JSON: &str = "campaign.json";

/// The most bytes a `campaign.json` may hold (a plan of 10,000 runs takes ~15 MB).
pub const MAX_CAMPAIGN_BYTES: u64 = 64 << 20;
/// The longest configuration label: it names directories.
pub const MAX_LABEL_BYTES: usize = 200;

/// Bumped on any incompatible change to `campaign.json`.
pub const CAMPAIGN_FORMAT_VERSION: u32 = 1;

/// `campaign.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Campaign {
    pub format_version: u32,
    /// `oscil-lab` and the versions of the binaries it ran.
    pub software: String,
    pub created_unix_ms: u64,
    pub backend: Backend,
    /// Where each end ran: namespace names in the lab, `user@host` over ssh.
    pub sender: String,
    pub receiver: String,
    pub order: Order,
    /// Seeds the shuffled order, so a campaign's order can be reproduced.
    pub seed: u64,
    pub repeat: u32,
    /// Every run of the plan, in the order they run.
    pub runs: Vec<CampaignRun>,
    /// Anything a backend records about its hosts (kernel, sysctls before the campaign).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<serde_json::Value>,
    /// On real hosts, each pair's calibration run, which fixed its slow rate: one workload
    /// for every configuration of the pair, kept for `--resume`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calibrations: Vec<Calibration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Two network namespaces on this machine joined by an emulated link.
    Netns,
    /// Two real machines over ssh.
    Hosts,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Runs in a seeded random order, so slow drift cannot pass for a setting's effect.
    Shuffled,
    /// Each configuration's repetitions back to back, configurations in matrix order.
    Grouped,
}

/// One run of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignRun {
    /// Names the configuration: every repetition of it shares the label.
    pub label: String,
    /// 1-based.
    pub repetition: u32,
    /// 1-based place in the order.
    pub position: u32,
    /// The run directory, relative to the campaign directory: `runs/<label>/rep-<k>`.
    pub dir: PathBuf,
    pub settings: RunSettings,
    pub status: CampaignRunStatus,
    /// Why a run is partial or failed, or what holes a complete run has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The pair of hosts of a many-host campaign (`sender-to-receiver`), whose runs go
    /// under `runs/<pair>/<label>/rep-<k>`; `None` for one pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<String>,
    /// Why the lab's link emulator spoiled this run (it fell behind the path asked for), in
    /// the report's words (`oscil_rundir::link_health`), whose verdicts leave it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_spoiled: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CampaignRunStatus {
    Pending,
    Complete,
    Partial,
    Failed,
}

/// What one configuration sets. `None` leaves the kernel's (or the host's) own value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// The emulated path; `None` on real hosts, where the path is measured instead.
    pub path: Option<PathSettings>,
    /// `net.ipv4.tcp_notsent_lowat` on the sender.
    pub lowat_bytes: Option<u64>,
    /// `net.ipv4.tcp_wmem` on the sender: min, default, max.
    pub wmem_bytes: Option<[u64; 3]>,
    /// `net.ipv4.tcp_rmem` on the receiver: min, default, max.
    pub rmem_bytes: Option<[u64; 3]>,
    /// `net.ipv4.tcp_adv_win_scale` on the receiver.
    pub adv_win_scale: Option<i32>,
    /// Set per socket by the daemon.
    pub congestion: Option<String>,
    pub sndbuf_bytes: Option<u32>,
    pub rcvbuf_bytes: Option<u32>,
    pub pacing_rate_bps: Option<u64>,
    pub flows: u32,
    pub interval_us: u64,
    pub pattern: PatternConfig,
    /// Bytes per write asked of the daemon; `None`: its default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_size_bytes: Option<u32>,
    /// How the daemon writes (`--write-mode`); absent: until `EAGAIN`, as before the setting.
    #[serde(default, skip_serializing_if = "WriteMode::is_until_eagain")]
    pub write_mode: WriteMode,
    /// The marker interval asked of the reader, µs; `None`: no markers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marker_every_us: Option<u64>,
    /// The reader's absolute `--slow-rate`, bit/s; `None`: `fraction` x the peak TCP
    /// delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_rate_bps: Option<u64>,
    /// How `slow_rate_bps` was chosen; `None` in campaigns made before it was recorded (and
    /// for a pattern with no slow phase).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_rate_basis: Option<SlowRateBasis>,
    /// The reader's `--no-probe`: no idle probe connection beside the flows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_probe: bool,
    /// The reader's `--trace`: trace every ACK on both sides.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trace: bool,
}

/// How the lab chose a run's slow rate. Every configuration of a path must read its slow
/// phases at one rate, or a comparison of them compares two workloads (issue 29: a per-run
/// peak on a 466 ms path is decided by how far slow start got).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "by")]
pub enum SlowRateBasis {
    /// `--slow-rate RATE` as given.
    Given,
    /// `fraction` x the emulated path's rate (`path.rate_bps`): the namespace lab's
    /// default, known before any run.
    PathRate,
    /// `fraction` x the peak of the pair's calibration run (`campaign.json`
    /// `calibrations`): the default on real hosts. `None` until the calibration has run.
    Calibration { peak_bps: Option<u64> },
    /// Each run's own peak (`--slow-rate auto-per-run`): configurations may read different
    /// workloads, which the report then says.
    PerRun,
}

/// A calibration: one run of a pair at full speed, before its first run, whose peak fixes
/// the slow rate of every run of that pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The pair measured (`CampaignRun::pair`); `None` for a campaign of one pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<String>,
    /// Its run directory, relative to the campaign directory (`calibration`, or
    /// `calibration/<pair>`); the report reads only the plan's runs, so not this one.
    pub dir: PathBuf,
    /// How long it read at full speed: as long as a run's fast phases together, ms.
    pub full_speed_ms: u64,
    /// The most TCP delivered to each flow in a one-second window of it, summed over the
    /// flows (the reader's own peak rule), bit/s.
    pub peak_bps: u64,
    /// When it ended, ms since the Unix epoch.
    pub measured_unix_ms: u64,
}

impl SlowRateBasis {
    /// The rule in words, after "slow phases at": `5% of the emulated path's rate`.
    pub fn describe(&self, fraction: f64) -> String {
        let share = format!("{}%", (fraction * 1e4).round() / 1e2);
        match self {
            SlowRateBasis::Given => "the rate given (--slow-rate)".into(),
            SlowRateBasis::PathRate => format!("{share} of the emulated path's rate"),
            SlowRateBasis::Calibration { peak_bps: Some(bps) } => format!(
                "{share} of the pair's calibration run's peak, {:.1} Mbit/s",
                *bps as f64 / 1e6
            ),
            SlowRateBasis::Calibration { peak_bps: None } => format!(
                "{share} of a calibration run's peak (one run at full speed per pair, before its first run)"
            ),
            SlowRateBasis::PerRun => format!(
                "{share} of each run's own peak (auto-per-run: configurations may read different workloads)"
            ),
        }
    }
}

/// An emulated path, the same in both directions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathSettings {
    pub rate_bps: u64,
    /// Round trip, split into two equal one-way delays.
    pub rtt_us: u64,
    pub loss_pct: f64,
    /// Bottleneck queue in packets; `None`: the emulator's default for the rate.
    pub queue_packets: Option<u32>,
}

/// Why a campaign directory cannot be read or written; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    #[error("{0}: no such directory")]
    NoSuchDir(PathBuf),
    #[error("{0}: not a campaign directory (no campaign.json)")]
    NotACampaign(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a valid campaign.json: {source}")]
    Bad {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: campaign format {found} is newer than this build reads ({CAMPAIGN_FORMAT_VERSION})")]
    NewerFormat { path: PathBuf, found: u32 },
    /// Not a regular file, too large, or (for the lab) owned or writable by another user.
    #[error(transparent)]
    File(#[from] SafeFsError),
    /// A run's label or directory that is not the plain name the lab gives.
    #[error("{path}: {why}; refused")]
    Unsafe { path: PathBuf, why: String },
}

/// One flow, the default sampling interval, the Cloudflare pattern, nothing set.
impl Default for RunSettings {
    fn default() -> Self {
        let interval_us = oscil_protocol::request::DEFAULT_INTERVAL.as_micros() as u64;
        RunSettings::unset(1, interval_us, PatternConfig::CLOUDFLARE)
    }
}

impl RunSettings {
    /// Settings that leave every kernel and socket value alone.
    pub fn unset(flows: u32, interval_us: u64, pattern: PatternConfig) -> RunSettings {
        RunSettings {
            path: None,
            lowat_bytes: None,
            wmem_bytes: None,
            rmem_bytes: None,
            adv_win_scale: None,
            congestion: None,
            sndbuf_bytes: None,
            rcvbuf_bytes: None,
            pacing_rate_bps: None,
            flows,
            interval_us,
            write_size_bytes: None,
            write_mode: WriteMode::default(),
            marker_every_us: None,
            slow_rate_bps: None,
            slow_rate_basis: None,
            no_probe: false,
            trace: false,
            pattern,
        }
    }

    /// The sysctls a run's settings set (each on its [`Sysctl::side`]'s host), and what
    /// this run sets each to; `None` leaves the host's own value.
    pub fn sysctls(&self) -> [(Sysctl, Option<SysctlValue>); 4] {
        [
            (
                Sysctl::TcpNotsentLowat,
                self.lowat_bytes
                    .map(|b| SysctlValue::Integer(i64::try_from(b).unwrap_or(i64::MAX))),
            ),
            (Sysctl::TcpWmem, self.wmem_bytes.map(SysctlValue::Triple)),
            (Sysctl::TcpRmem, self.rmem_bytes.map(SysctlValue::Triple)),
            (
                Sysctl::TcpAdvWinScale,
                self.adv_win_scale
                    .map(|v| SysctlValue::Integer(i64::from(v))),
            ),
        ]
    }

    /// The sysctls any run may set: the only ones the lab changes on a host.
    pub fn sysctls_set() -> impl Iterator<Item = Sysctl> {
        RunSettings::default()
            .sysctls()
            .into_iter()
            .map(|(sysctl, _)| sysctl)
    }

    /// What this run asks of its reader and daemon, for the rules every session keeps (the
    /// lab sets the lowat and the buffers as sysctls, not on the sockets).
    pub fn session_request(&self) -> SessionRequest {
        SessionRequest {
            marker_every: self.marker_every_us.map(Duration::from_micros),
            write_size_bytes: self.write_size_bytes,
            write_mode: self.write_mode,
            sender: SocketOptions {
                sndbuf_bytes: self.sndbuf_bytes,
                congestion: self.congestion.clone(),
                max_pacing_rate_bps: self.pacing_rate_bps,
                ..SocketOptions::default()
            },
            slow_rate_bps: self.slow_rate_bps,
            ..SessionRequest::new(
                self.flows,
                Duration::from_micros(self.interval_us),
                Some(self.pattern),
            )
        }
    }
}

impl CampaignRun {
    /// The configuration's name in a report: the label, after the pair's name in a
    /// many-host campaign (`a-to-b_lowat-131072`), since each pair is a path of its own.
    pub fn configuration_name(&self) -> String {
        match &self.pair {
            Some(pair) => format!("{pair}_{}", self.label),
            None => self.label.clone(),
        }
    }
}

impl Campaign {
    /// The runs that finished, each with its directory under `campaign_dir`, or why that
    /// directory is not to be read (a link out of the campaign).
    pub fn complete_runs<'a>(
        &'a self,
        campaign_dir: &'a Path,
    ) -> impl Iterator<Item = (&'a CampaignRun, Result<PathBuf, CampaignError>)> + 'a {
        self.runs
            .iter()
            .filter(|run| run.status == CampaignRunStatus::Complete)
            .map(move |run| (run, run_dir(campaign_dir, run)))
    }
}

/// `run`'s directory under `campaign_dir`, when every directory on the way down from the
/// campaign is a directory and not a link (which could lead anywhere).
pub fn run_dir(campaign_dir: &Path, run: &CampaignRun) -> Result<PathBuf, CampaignError> {
    let mut path = campaign_dir.to_owned();
    for part in run.dir.components() {
        path.push(part);
        let meta = path
            .symlink_metadata()
            .map_err(|source| CampaignError::Io {
                path: path.clone(),
                source,
            })?;
        if !meta.file_type().is_dir() {
            return Err(CampaignError::Unsafe {
                path: path.clone(),
                why: "not a directory (a link out of the campaign?)".into(),
            });
        }
    }
    Ok(path)
}

/// True when `dir` holds a `campaign.json` (in any form: a link or a FIFO there is
/// refused when read, not taken for a run directory).
pub fn is_campaign(dir: &Path) -> bool {
    dir.join(CAMPAIGN_JSON).symlink_metadata().is_ok()
}

/// True when `label` is a plain name: letters, digits, `-_.+,=`, not `.` or `..`, at most
/// [`MAX_LABEL_BYTES`]; what the lab's plan gives and what may name a directory.
pub fn is_plain_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= MAX_LABEL_BYTES
        && !label.starts_with('.')
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.+,=".contains(c))
}

/// Every run's label is plain and its directory is `runs/<label>/rep-<k>`, so nothing in
/// `campaign.json` can point outside the campaign directory or into another run's.
fn check_runs(path: &Path, campaign: &Campaign) -> Result<(), CampaignError> {
    let unsafe_run = |why: String| CampaignError::Unsafe {
        path: path.to_owned(),
        why,
    };
    for run in &campaign.runs {
        if !is_plain_label(&run.label) {
            let shown = oscil_protocol::text::escape_peer(&run.label);
            return Err(unsafe_run(format!("label \"{shown}\" is not a plain name")));
        }
        if let Some(cc) = run
            .settings
            .congestion
            .as_deref()
            .filter(|cc| !crate::is_congestion_name(cc))
        {
            let shown = oscil_protocol::text::escape_peer(cc);
            return Err(unsafe_run(format!("congestion \"{shown}\" is not a name")));
        }
        if let Some(pair) = run.pair.as_deref().filter(|p| !is_plain_label(p)) {
            let shown = oscil_protocol::text::escape_peer(pair);
            return Err(unsafe_run(format!("pair \"{shown}\" is not a plain name")));
        }
        let expected = Path::new("runs")
            .join(run.pair.as_deref().unwrap_or_default())
            .join(&run.label)
            .join(format!("rep-{}", run.repetition));
        let plain = run
            .dir
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
        if !plain || run.dir != expected {
            return Err(unsafe_run(format!(
                "run directory {:?} is not {}",
                run.dir,
                expected.display()
            )));
        }
    }
    Ok(())
}

/// `dir` is there and holds a `campaign.json`, or which of the two it lacks.
pub fn check_is_campaign(dir: &Path) -> Result<(), CampaignError> {
    match (dir.symlink_metadata().is_ok(), is_campaign(dir)) {
        (_, true) => Ok(()),
        (false, false) => Err(CampaignError::NoSuchDir(dir.to_owned())),
        (true, false) => Err(CampaignError::NotACampaign(dir.to_owned())),
    }
}

impl CampaignError {
    /// True when the directory the command line names is no campaign at all: a bad value
    /// (exit 2), not a failure.
    pub fn is_bad_path(&self) -> bool {
        matches!(
            self,
            CampaignError::NoSuchDir(_) | CampaignError::NotACampaign(_)
        )
    }
}

/// Reads `campaign.json`: a regular file of bounded size whose runs name only plain
/// directories inside the campaign.
pub fn load(dir: &Path) -> Result<Campaign, CampaignError> {
    let path = dir.join(CAMPAIGN_JSON);
    check_is_campaign(dir)?;
    let text = safe_fs::read_bounded(&path, MAX_CAMPAIGN_BYTES)?;
    let found = serde_json::from_slice::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("format_version")?.as_u64());
    if let Some(found) = found.filter(|&v| v > u64::from(CAMPAIGN_FORMAT_VERSION)) {
        return Err(CampaignError::NewerFormat {
            path,
            found: found as u32,
        });
    }
    let campaign = serde_json::from_slice(&text).map_err(|source| CampaignError::Bad {
        path: path.clone(),
        source,
    })?;
    check_runs(&path, &campaign)?;
    Ok(campaign)
}

/// Writes `campaign.json` atomically (a temporary file renamed over it), so a crash or a
/// signal mid-write never leaves a campaign that cannot be resumed.
pub fn save(dir: &Path, campaign: &Campaign) -> Result<(), CampaignError> {
    let text = serde_json::to_vec_pretty(campaign).expect("a campaign always serializes");
    Ok(safe_fs::write_atomic(
        &dir.join(CAMPAIGN_JSON),
        &text,
        0o644,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn campaign() -> Campaign {
        let settings = RunSettings {
            path: Some(PathSettings {
                rate_bps: 1_000_000_000,
                rtt_us: 466_000,
                loss_pct: 0.0,
                queue_packets: None,
            }),
            lowat_bytes: Some(131072),
            wmem_bytes: Some([4096, 16384, 536870912]),
            rmem_bytes: None,
            adv_win_scale: None,
            congestion: Some("cubic".into()),
            ..RunSettings::default()
        };
        let run = |repetition, status| CampaignRun {
            label: "1gbit_466ms_cubic_lowat-131072".into(),
            repetition,
            position: repetition,
            dir: PathBuf::from(format!(
                "runs/1gbit_466ms_cubic_lowat-131072/rep-{repetition}"
            )),
            settings: settings.clone(),
            status,
            reason: None,
            pair: None,
            link_spoiled: None,
        };
        Campaign {
            format_version: CAMPAIGN_FORMAT_VERSION,
            software: "oscil-lab 0.1.0".into(),
            created_unix_ms: 1,
            backend: Backend::Netns,
            sender: "oscil-snd-1".into(),
            receiver: "oscil-rcv-1".into(),
            order: Order::Shuffled,
            seed: 7,
            repeat: 2,
            runs: vec![
                run(1, CampaignRunStatus::Complete),
                run(2, CampaignRunStatus::Failed),
            ],
            hosts: None,
            calibrations: Vec::new(),
        }
    }

    #[test]
    fn saves_loads_and_lists_complete_runs() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_campaign(dir.path()));
        save(dir.path(), &campaign()).unwrap();
        assert!(is_campaign(dir.path()));
        let loaded = load(dir.path()).unwrap();
        assert_eq!(loaded, campaign());
        let run_dir = dir.path().join("runs/1gbit_466ms_cubic_lowat-131072/rep-1");
        std::fs::create_dir_all(&run_dir).unwrap();
        let complete: Vec<_> = loaded.complete_runs(dir.path()).collect();
        assert_eq!(complete.len(), 1);
        assert_eq!(complete[0].1.as_ref().unwrap(), &run_dir);
        std::fs::remove_dir(&run_dir).unwrap();
        std::os::unix::fs::symlink("/", &run_dir).unwrap();
        let err = loaded
            .complete_runs(dir.path())
            .next()
            .unwrap()
            .1
            .unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
        let text = std::fs::read_to_string(dir.path().join(CAMPAIGN_JSON)).unwrap();
        assert!(text.contains(r#""status": "failed""#), "{text}");
    }

    #[test]
    fn run_directories_outside_the_campaign_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for (label, run_dir) in [
            ("../../etc", "runs/../../etc/rep-1"),
            ("x", "/etc"),
            ("x", "runs/y/rep-1"),
            ("a\u{1b}[2J", "runs/a\u{1b}[2J/rep-1"),
        ] {
            let mut bad = campaign();
            bad.runs[0].label = label.into();
            bad.runs[0].dir = run_dir.into();
            save(dir.path(), &bad).unwrap();
            let err = load(dir.path()).unwrap_err().to_string();
            assert!(err.ends_with("; refused"), "{err}");
            assert!(!err.contains('\u{1b}'), "{err}");
        }
    }

    #[test]
    fn a_campaign_json_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join(CAMPAIGN_JSON)).unwrap();
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn newer_format_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CAMPAIGN_JSON), r#"{"format_version": 99}"#).unwrap();
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("format 99"), "{err}");
    }
}

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

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::pattern::{BitRate, PatternConfig};
use crate::socket::WriteMode;
use crate::sysctl::{Sysctl, SysctlValue};

pub const CAMPAIGN_JSON: &str = "campaign.json";

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
    pub slow_rate_bps: Option<BitRate>,
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
    /// The lab's `--group`s, resolved over this run's settings, their flows adding up to
    /// `flows`; a group's `slow_rate_bps` is its own, or when `None` its flows' share of
    /// `slow_rate_bps`. Empty: one group of the settings above.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<crate::group::FlowGroup>,
    /// Which way the data flows (the lab's `--direction`); absent: forward, as before.
    #[serde(default, skip_serializing_if = "Direction::is_forward")]
    pub direction: Direction,
    /// The lab's `--reverse-group`s for the reverse pair of a `both` run, resolved as
    /// `groups` are. Empty: the reverse pair runs this run's own flows and groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reverse_groups: Vec<crate::group::FlowGroup>,
}

/// Where a `--direction both` run keeps its reverse pair's run directory: inside the
/// forward pair's, which stays where a run's directory always is.
pub const REVERSE_DIR: &str = "reverse";

/// Which way a lab run's data flows over its path (`oscil-lab --direction`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// The daemon on the sending end, the reader on the receiving one.
    #[default]
    Forward,
    /// The daemon on the receiving end, the reader on the sending one: data flows back.
    Reverse,
    /// A forward pair and a reverse pair over the same path at the same time.
    Both,
}

impl Direction {
    pub fn is_forward(&self) -> bool {
        *self == Direction::Forward
    }

    /// Its name on the command line and in labels.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Forward => "forward",
            Direction::Reverse => "reverse",
            Direction::Both => "both",
        }
    }
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Direction {
    type Err = UnknownDirection;

    fn from_str(input: &str) -> Result<Self, UnknownDirection> {
        [Direction::Forward, Direction::Reverse, Direction::Both]
            .into_iter()
            .find(|d| d.name() == input)
            .ok_or_else(|| UnknownDirection(crate::text::escape_peer(input)))
    }
}

/// A direction that is not forward, reverse or both.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("\"{0}\" is not a direction (forward, reverse or both)")]
pub struct UnknownDirection(String);

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
    pub fn describe(&self, fraction: crate::pattern::Fraction) -> String {
        let share = format!("{}%", fraction.percent());
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

/// One flow, the default sampling interval, the Cloudflare pattern, nothing set.
impl Default for RunSettings {
    fn default() -> Self {
        let interval_us = crate::run::sampling::DEFAULT_INTERVAL.as_micros() as u64;
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
            groups: Vec::new(),
            direction: Direction::Forward,
            reverse_groups: Vec::new(),
        }
    }

    /// The settings of a `both` run's reverse pair: its own groups when it has them (their
    /// flows the pair's), otherwise these; recorded as a reverse run.
    pub fn reverse_pair(&self) -> RunSettings {
        let mut reverse = self.clone();
        if !self.reverse_groups.is_empty() {
            reverse.groups = self.reverse_groups.clone();
            let flows = crate::group::total_flows(&reverse.groups);
            reverse.flows = u32::try_from(flows).unwrap_or(u32::MAX);
            let full_speed =
                |g: &crate::group::FlowGroup| g.pattern == crate::group::Reading::FullSpeed;
            reverse.pattern.full_speed = reverse.groups.iter().all(full_speed);
        }
        reverse.direction = Direction::Reverse;
        reverse.reverse_groups = Vec::new();
        reverse
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

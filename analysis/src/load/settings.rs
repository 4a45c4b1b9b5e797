//! What a run was set up with, read from its `run.json`: the settings that tell runs
//! apart (in words, for charts and tables) and the key that makes runs repetitions of one
//! configuration.

use oscil_model::campaign::RunSettings;
use oscil_model::host::HostFacts;
use oscil_model::run::RunMeta;
use oscil_model::socket::WriteMode;
use oscil_model::socket::DEFAULT_WRITE_BYTES;
use oscil_model::sysctl::{Sysctl, SysctlValue, NOTSENT_LOWAT_UNLIMITED};
use serde_json::json;

use crate::human;
use crate::load::groups;

/// Where a run's notsent threshold came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LowatSource {
    /// `TCP_NOTSENT_LOWAT` on the daemon's sockets.
    Socket,
    /// `net.ipv4.tcp_notsent_lowat` on the sender's host.
    Sysctl,
}

/// The settings that tell one run from another.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub flows: u32,
    /// The notsent threshold in force, `None` for the kernel's default (no threshold).
    pub lowat: Option<(u64, LowatSource)>,
    /// `SO_SNDBUF` asked of the daemon; `None` leaves autotuning on.
    pub sndbuf_bytes: Option<u32>,
    pub congestion: Option<String>,
    /// The lab's emulated path, from the run's settings.
    pub path_rtt_ms: Option<f64>,
    pub path_rate_bps: Option<f64>,
    pub full_speed: bool,
    /// How the daemon wrote (`--write-mode`).
    pub write_mode: WriteMode,
    /// Further settings the lab set, by name (`wmem`, `4096:16384:4194304`).
    pub lab_settings: Vec<(String, String)>,
    /// `net.ipv4.tcp_wmem` on the sender and `tcp_rmem` on the receiver as recorded during
    /// the run, for the recommendation's sysctl file.
    pub sender_tcp_wmem: Option<SysctlValue>,
    pub reader_tcp_rmem: Option<SysctlValue>,
    /// Each group of flows in words (`4 × lowat 128 KiB`) where the run had several
    /// (`--group`); empty otherwise.
    pub groups: Vec<String>,
}

impl Settings {
    /// The settings `run.json` records, with the lab's ([`run_settings`]) where it set some.
    pub fn from_meta(meta: &RunMeta, campaign: Option<&RunSettings>) -> Settings {
        let lab = run_settings(meta, campaign);
        let path = lab.as_ref().and_then(|s| s.path.as_ref());
        Settings {
            flows: meta.config.flows,
            lowat: lowat(meta),
            sndbuf_bytes: meta.config.sender_request.sndbuf_bytes,
            congestion: meta
                .sender_options
                .as_ref()
                .map(|o| o.congestion.clone())
                .filter(|c| !c.is_empty())
                .or_else(|| {
                    let value = sender_sysctl(meta, Sysctl::TcpCongestionControl)?;
                    value.name().map(str::to_owned)
                }),
            path_rtt_ms: path.map(|p| p.rtt_us as f64 / 1000.0),
            path_rate_bps: path.map(|p| p.rate_bps as f64),
            full_speed: meta.config.pattern.full_speed,
            write_mode: meta.config.write_mode,
            lab_settings: lab.as_ref().map(buffer_settings).unwrap_or_default(),
            sender_tcp_wmem: sender_sysctl(meta, Sysctl::TcpWmem),
            reader_tcp_rmem: meta.reader_host.sysctl(Sysctl::TcpRmem),
            groups: match meta.config.groups.len() {
                0 | 1 => Vec::new(),
                _ => (meta.config.groups.iter())
                    .zip(groups::names(&meta.config.groups))
                    .map(|(g, name)| format!("{} × {name}", g.flows))
                    .collect(),
            },
        }
    }

    /// The lowat setting in words: `lowat 16 KiB`, `lowat 128 KiB (sysctl)`, `lowat default`.
    pub fn lowat_text(&self) -> String {
        match self.lowat {
            None => "lowat default".into(),
            Some((bytes, LowatSource::Socket)) => format!("lowat {}", human::size(bytes as f64)),
            Some((bytes, LowatSource::Sysctl)) => {
                format!("lowat {} (sysctl)", human::size(bytes as f64))
            }
        }
    }

    /// The settings in words, each with a name, so runs can be told apart by the ones that
    /// differ. The path is not among them (see `path_text`).
    pub fn parts(&self) -> Vec<(String, String)> {
        let mut parts = vec![("lowat".to_string(), self.lowat_text())];
        if let Some(bytes) = self.sndbuf_bytes {
            parts.push((
                "sndbuf".into(),
                format!("sndbuf {}", human::size(f64::from(bytes))),
            ));
        }
        if let Some(cc) = &self.congestion {
            parts.push(("congestion".into(), cc.clone()));
        }
        for (name, value) in &self.lab_settings {
            parts.push((name.clone(), format!("{name} {value}")));
        }
        let plural = if self.flows == 1 { "" } else { "s" };
        parts.push(("flows".into(), format!("{} flow{plural}", self.flows)));
        if !self.groups.is_empty() {
            parts.push((
                "groups".into(),
                format!("groups {}", self.groups.join(" + ")),
            ));
        }
        if self.full_speed {
            parts.push(("reader".into(), "full-speed reader".into()));
        }
        if !self.write_mode.is_until_eagain() {
            parts.push(("writer".into(), format!("{} writer", self.write_mode)));
        }
        parts
    }

    /// Everything but the path, in words: runs with the same key differ only in path.
    pub fn key(&self) -> String {
        let parts: Vec<String> = self.parts().into_iter().map(|(_, text)| text).collect();
        parts.join(", ")
    }

    /// The path's settings in words, each with a name, as `parts` gives the others.
    pub fn path_parts(&self) -> Vec<(String, String)> {
        let mut parts = Vec::new();
        if let Some(rtt) = self.path_rtt_ms {
            parts.push(("rtt".to_string(), format!("RTT {}", human::ms(rtt))));
        }
        if let Some(rate) = self.path_rate_bps {
            parts.push(("rate".to_string(), human::rate(rate)));
        }
        parts
    }

    /// The path in words, when the lab recorded it.
    pub fn path_text(&self) -> Option<String> {
        let parts: Vec<String> = self.path_parts().into_iter().map(|(_, t)| t).collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// The socket option if set, else the sender host's sysctl if it sets a threshold.
fn lowat(meta: &RunMeta) -> Option<(u64, LowatSource)> {
    let socket = match &meta.sender_options {
        Some(options) => options.notsent_lowat_bytes,
        None => meta.config.sender_request.notsent_lowat_bytes.unwrap_or(0),
    };
    if socket != 0 {
        return Some((u64::from(socket), LowatSource::Socket));
    }
    let sysctl = sender_sysctl(meta, Sysctl::TcpNotsentLowat)?.integer()?;
    u64::try_from(sysctl)
        .ok()
        .filter(|&v| v < NOTSENT_LOWAT_UNLIMITED)
        .map(|v| (v, LowatSource::Sysctl))
}

/// The buffer sysctls a run's settings set, in words, skipping those left alone.
fn buffer_settings(run: &RunSettings) -> Vec<(String, String)> {
    let triple = |t: [u64; 3]| format!("{}:{}:{}", t[0], t[1], t[2]);
    let mut parts = Vec::new();
    if let Some(t) = run.wmem_bytes {
        parts.push(("wmem".to_string(), triple(t)));
    }
    if let Some(t) = run.rmem_bytes {
        parts.push(("rmem".to_string(), triple(t)));
    }
    if let Some(v) = run.adv_win_scale {
        parts.push(("adv_win_scale".to_string(), v.to_string()));
    }
    parts
}

/// A sysctl of the sender's host as the daemon recorded it, typed.
fn sender_sysctl(meta: &RunMeta, sysctl: Sysctl) -> Option<SysctlValue> {
    meta.sender_host.as_ref()?.sysctl(sysctl)
}

/// What the lab set for the run: the campaign's settings (`campaign.json`), else the lab's
/// record in `run.json`; `None` for a run the lab did not make.
pub fn run_settings(meta: &RunMeta, campaign: Option<&RunSettings>) -> Option<RunSettings> {
    campaign
        .cloned()
        .or_else(|| Some(meta.lab.as_ref()?.settings.clone()))
}

/// What makes runs repetitions of one configuration: the lab's settings when it made the
/// run ([`run_settings`]); otherwise the settings `run.json` records: socket options asked
/// of both ends, flows, interval, pattern, the sender's `tcp_wmem` and `tcp_notsent_lowat`,
/// the receiver's `tcp_rmem`. Runs with equal keys are grouped.
pub fn configuration_key(meta: &RunMeta, campaign: Option<&RunSettings>) -> String {
    if let Some(settings) = run_settings(meta, campaign) {
        return format!("campaign {}", json!(settings));
    }
    let text = |value: Option<SysctlValue>| value.map(|v| v.to_string());
    let key = json!({
        "sender_request": meta.config.sender_request,
        "reader_request": meta.config.reader_request,
        "flows": meta.config.flows,
        "interval_us": meta.config.interval_us,
        "pattern": meta.config.pattern,
        // Only a size other than the default, so runs from before it was recorded group
        // with today's default ones.
        "write_size_bytes": meta.config.write_size_bytes.filter(|&n| n != DEFAULT_WRITE_BYTES),
        "write_mode": (!meta.config.write_mode.is_until_eagain()).then_some(meta.config.write_mode),
        "tcp_wmem": text(sender_sysctl(meta, Sysctl::TcpWmem)),
        "tcp_notsent_lowat": text(sender_sysctl(meta, Sysctl::TcpNotsentLowat)),
        "tcp_rmem": text(meta.reader_host.sysctl(Sysctl::TcpRmem)),
    });
    // Only runs of several groups name them, so runs before groups keep their key.
    match meta.config.groups.len() {
        0 | 1 => format!("run.json {key}"),
        _ => format!("run.json {key} groups {}", json!(meta.config.groups)),
    }
}

/// The path runs were made on: the lab's rate and RTT, else the two ends: each host by
/// its boot id (its hostname in runs before boot ids were recorded) and its network
/// namespace, so a loopback run and a run between two namespaces of one host are two
/// paths (between real hosts the path is measured, not set).
pub fn path_key(settings: &Settings, meta: &RunMeta) -> String {
    match (settings.path_rtt_ms, settings.path_rate_bps) {
        (None, None) => format!(
            "hosts {} -> {}",
            meta.sender_host.as_ref().map_or("?".into(), end_key),
            end_key(&meta.reader_host)
        ),
        (rtt, rate) => format!("lab {rtt:?} {rate:?}"),
    }
}

/// One end of a path: its host (boot id, else hostname) and network namespace.
fn end_key(host: &HostFacts) -> String {
    let host_id = host.boot_id.as_deref().unwrap_or(&host.hostname);
    match host.netns_inode {
        Some(inode) => format!("{host_id} netns {inode}"),
        None => host_id.to_owned(),
    }
}

/// Whether both ends ran in one network namespace of one host (loopback): a namespace's
/// or host's memory figure then holds the reader's receive queues too.
pub fn shared_namespace(meta: &RunMeta) -> bool {
    meta.sender_host
        .as_ref()
        .is_some_and(|sender| end_key(sender) == end_key(&meta.reader_host))
}

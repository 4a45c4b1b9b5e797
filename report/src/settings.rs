//! What a run was set up with, read from its `run.json`: the settings that tell runs
//! apart (in words, for charts and tables) and the key that makes runs repetitions of one
//! configuration.

use oscil_protocol::control::DEFAULT_WRITE_BYTES;
use oscil_rundir::campaign::RunSettings;
use oscil_rundir::RunMeta;
use serde_json::{json, Value};

use crate::human;

/// The sysctl value that means "no lowat": the kernel's default.
const LOWAT_UNLIMITED: u64 = u32::MAX as u64;

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
    /// The lab's path, when run.json's `lab` object says.
    pub path_rtt_ms: Option<f64>,
    pub path_rate_bps: Option<f64>,
    pub full_speed: bool,
    /// Further settings the lab recorded, by name (`wmem`, `4096:16384:4194304`).
    pub lab_settings: Vec<(String, String)>,
    /// `net.ipv4.tcp_wmem` on the sender and `tcp_rmem` on the receiver as recorded during
    /// the run (`4096 16384 4194304`), for the recommendation's sysctl file.
    pub sender_tcp_wmem: Option<String>,
    pub reader_tcp_rmem: Option<String>,
}

impl Settings {
    /// The settings `run.json` records; the path, where the lab's free-form object does not
    /// give it, from the campaign's settings (`campaign.json`, else `lab.settings`).
    pub fn from_meta(meta: &RunMeta, campaign: Option<&RunSettings>) -> Settings {
        let lab = meta.lab.as_ref();
        let planned = campaign
            .cloned()
            .or_else(|| lab_run_settings(meta))
            .and_then(|s| s.path);
        Settings {
            flows: meta.config.flows,
            lowat: lowat(meta),
            sndbuf_bytes: meta.config.sender_request.sndbuf_bytes,
            congestion: meta
                .sender_options
                .as_ref()
                .map(|o| o.congestion.clone())
                .filter(|c| !c.is_empty())
                .or_else(|| sender_sysctl_of(meta, "net.ipv4.tcp_congestion_control")),
            path_rtt_ms: lab
                .and_then(lab_rtt_ms)
                .or_else(|| planned.as_ref().map(|p| p.rtt_us as f64 / 1000.0)),
            path_rate_bps: lab
                .and_then(lab_rate_bps)
                .or_else(|| planned.as_ref().map(|p| p.rate_bps as f64)),
            full_speed: meta.config.pattern.full_speed,
            lab_settings: lab.map(lab_settings).unwrap_or_default(),
            sender_tcp_wmem: sender_sysctl_of(meta, "net.ipv4.tcp_wmem"),
            reader_tcp_rmem: reader_sysctl(meta, "net.ipv4.tcp_rmem"),
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
        if self.full_speed {
            parts.push(("reader".into(), "full-speed reader".into()));
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
    sender_sysctl_of(meta, "net.ipv4.tcp_notsent_lowat")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&v| v < LOWAT_UNLIMITED)
        .map(|v| (v, LowatSource::Sysctl))
}

/// A number from the lab object or its `link` or `path` object, given as a number or as
/// a string in a unit. Anything else there is ignored: the object is free-form.
fn lab_number(lab: &Value, keys: &[&str], parse: impl Fn(&str) -> Option<f64>) -> Option<f64> {
    let places = [Some(lab), lab.get("link"), lab.get("path")];
    places.into_iter().flatten().find_map(|place| {
        keys.iter().find_map(|key| match place.get(key)? {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => parse(s),
            _ => None,
        })
    })
}

/// Settings the lab recorded that the run directory does not otherwise name
/// (`lab.settings.wmem`, `rmem`, `adv_win_scale`), skipping defaults.
fn lab_settings(lab: &Value) -> Vec<(String, String)> {
    let Some(settings) = lab.get("settings") else {
        return Vec::new();
    };
    if let Ok(run) = serde_json::from_value::<RunSettings>(settings.clone()) {
        return campaign_settings(&run);
    }
    ["wmem", "rmem", "adv_win_scale"]
        .iter()
        .filter_map(|key| {
            let value = match settings.get(key)? {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return None,
            };
            (value != "default" && !value.is_empty()).then(|| (key.to_string(), value))
        })
        .collect()
}

/// A campaign's buffer settings in words, as the lab's free-form ones are given.
fn campaign_settings(run: &RunSettings) -> Vec<(String, String)> {
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

fn lab_rtt_ms(lab: &Value) -> Option<f64> {
    lab_number(lab, &["rtt_ms"], |s| s.trim().parse().ok()).or_else(|| {
        lab_number(lab, &["rtt"], |s| {
            oscil_cli::units::parse_duration(s)
                .ok()
                .map(|d| d.as_secs_f64() * 1000.0)
        })
    })
}

fn lab_rate_bps(lab: &Value) -> Option<f64> {
    lab_number(lab, &["rate_bps"], |s| s.trim().parse().ok()).or_else(|| {
        lab_number(lab, &["rate"], |s| {
            oscil_cli::units::parse_rate_bps(s).ok().map(|r| r as f64)
        })
    })
}

/// A reader-side sysctl, from the reader's host facts.
fn reader_sysctl(meta: &RunMeta, name: &str) -> Option<String> {
    meta.reader_host.sysctls.get(name).cloned()
}

fn sender_sysctl_of(meta: &RunMeta, name: &str) -> Option<String> {
    meta.sender_host.as_ref()?.sysctls.get(name).cloned()
}

/// The lab's settings, when `run.json`'s `lab.settings` is a campaign's `RunSettings`.
pub fn lab_run_settings(meta: &RunMeta) -> Option<RunSettings> {
    serde_json::from_value(meta.lab.as_ref()?.get("settings")?.clone()).ok()
}

/// What makes runs repetitions of one configuration: the campaign's settings when there
/// are some (from `campaign.json`, else `run.json`'s `lab.settings`); otherwise the
/// settings `run.json` records: socket options asked of both ends, flows, interval,
/// pattern, the sender's `tcp_wmem` and `tcp_notsent_lowat`, the receiver's `tcp_rmem`,
/// and the lab's path and settings when present. Runs with equal keys are grouped.
pub fn configuration_key(meta: &RunMeta, campaign: Option<&RunSettings>) -> String {
    if let Some(settings) = campaign.cloned().or_else(|| lab_run_settings(meta)) {
        return format!("campaign {}", json!(settings));
    }
    let lab = meta.lab.as_ref();
    let key = json!({
        "sender_request": meta.config.sender_request,
        "reader_request": meta.config.reader_request,
        "flows": meta.config.flows,
        "interval_us": meta.config.interval_us,
        "pattern": meta.config.pattern,
        // Only a size other than the default, so runs from before it was recorded group
        // with today's default ones.
        "write_size_bytes": meta.config.write_size_bytes.filter(|&n| n != DEFAULT_WRITE_BYTES),
        "tcp_wmem": sender_sysctl_of(meta, "net.ipv4.tcp_wmem"),
        "tcp_notsent_lowat": sender_sysctl_of(meta, "net.ipv4.tcp_notsent_lowat"),
        "tcp_rmem": reader_sysctl(meta, "net.ipv4.tcp_rmem"),
        "path": [lab.and_then(lab_rtt_ms), lab.and_then(lab_rate_bps)],
        "lab_settings": lab.and_then(|l| l.get("settings")),
    });
    format!("run.json {key}")
}

/// The path runs were made on: the lab's rate and RTT, else the pair of hosts (between
/// real hosts the path is measured, not set).
pub fn path_key(settings: &Settings, meta: &RunMeta) -> String {
    match (settings.path_rtt_ms, settings.path_rate_bps) {
        (None, None) => format!(
            "hosts {} -> {}",
            meta.sender_host
                .as_ref()
                .map_or("?", |h| h.hostname.as_str()),
            meta.reader_host.hostname
        ),
        (rtt, rate) => format!("lab {rtt:?} {rate:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lab_path_reads_numbers_or_units() {
        assert_eq!(lab_rtt_ms(&json!({"rtt_ms": 20})), Some(20.0));
        assert_eq!(lab_rtt_ms(&json!({"rtt": "80ms"})), Some(80.0));
        assert_eq!(lab_rtt_ms(&json!({"rtt_ms": [1]})), None);
        assert_eq!(lab_rate_bps(&json!({"rate": "100mbit"})), Some(100e6));
        assert_eq!(lab_rate_bps(&json!({"rate_bps": 5e7})), Some(5e7));
        assert_eq!(lab_rate_bps(&json!("not an object")), None);
        let lab = json!({"link": {"rtt_ms": 80.5, "rate_bps": 1e8}});
        assert_eq!(
            (lab_rtt_ms(&lab), lab_rate_bps(&lab)),
            (Some(80.5), Some(1e8))
        );
    }

    #[test]
    fn lab_settings_skip_defaults() {
        let lab = json!({"settings": {"lowat": "131072", "wmem": "4096:16384:4194304", "rmem": "default", "adv_win_scale": 1}});
        let found = lab_settings(&lab);
        let texts: Vec<(&str, &str)> = found
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            texts,
            vec![("wmem", "4096:16384:4194304"), ("adv_win_scale", "1")]
        );
    }
}

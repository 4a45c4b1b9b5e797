//! What a run was set up with and the figures that describe it, as pure functions of a
//! loaded run directory: nothing here draws or writes.
//!
//! Definitions (the summary table and the comparison chart use these):
//! - goodput of a phase: bytes the reader read in rows of that phase (its `phase` column),
//!   times 8, over the phase's total length in the schedule;
//! - sender queued bytes: `wmem_queued` summed over flows at each tick; a tick's phase is
//!   the one holding the middle of the interval that ends at it (the reader's rule);
//! - TCP memory: sockstat `tcp_mem_pages` times the side's page size;
//! - RTT: the sender's smoothed `rtt_us`, rows with no estimate (0) left out.

use oscil_protocol::pattern::phase_of_sample;
use oscil_protocol::records::{Phase, ReaderSample, SenderSample, Side};
use oscil_protocol::{Run, RunStatus};
use serde_json::Value;

use crate::human;
use crate::series::{self, Tick};

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
}

impl Settings {
    pub fn from_run(run: &Run) -> Settings {
        let meta = &run.meta;
        let lab = meta.lab.as_ref();
        Settings {
            flows: meta.config.flows,
            lowat: lowat(run),
            sndbuf_bytes: meta.config.sender_request.sndbuf_bytes,
            congestion: meta
                .sender_options
                .as_ref()
                .map(|o| o.congestion.clone())
                .filter(|c| !c.is_empty())
                .or_else(|| sender_sysctl(run, "net.ipv4.tcp_congestion_control")),
            path_rtt_ms: lab.and_then(lab_rtt_ms),
            path_rate_bps: lab.and_then(lab_rate_bps),
            full_speed: meta.config.pattern.full_speed,
            lab_settings: lab.map(lab_settings).unwrap_or_default(),
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

fn sender_sysctl(run: &Run, name: &str) -> Option<String> {
    run.meta.sender_host.as_ref()?.sysctls.get(name).cloned()
}

/// The socket option if set, else the sender host's sysctl if it sets a threshold.
fn lowat(run: &Run) -> Option<(u64, LowatSource)> {
    let socket = match &run.meta.sender_options {
        Some(options) => options.notsent_lowat_bytes,
        None => run
            .meta
            .config
            .sender_request
            .notsent_lowat_bytes
            .unwrap_or(0),
    };
    if socket != 0 {
        return Some((u64::from(socket), LowatSource::Socket));
    }
    sender_sysctl(run, "net.ipv4.tcp_notsent_lowat")
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

fn lab_rtt_ms(lab: &Value) -> Option<f64> {
    lab_number(lab, &["rtt_ms"], |s| s.trim().parse().ok()).or_else(|| {
        lab_number(lab, &["rtt"], |s| {
            oscil_protocol::units::parse_duration(s)
                .ok()
                .map(|d| d.as_secs_f64() * 1000.0)
        })
    })
}

fn lab_rate_bps(lab: &Value) -> Option<f64> {
    lab_number(lab, &["rate_bps"], |s| s.trim().parse().ok()).or_else(|| {
        lab_number(lab, &["rate"], |s| {
            oscil_protocol::units::parse_rate_bps(s)
                .ok()
                .map(|r| r as f64)
        })
    })
}

/// The figures of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub label: String,
    pub settings: Settings,
    /// Why the run was cut short, if it was.
    pub partial: Option<String>,
    pub duration_s: f64,
    pub goodput_fast_bps: Option<f64>,
    pub goodput_slow_bps: Option<f64>,
    pub slow_queued_peak_bytes: Option<f64>,
    pub slow_queued_mean_bytes: Option<f64>,
    pub slow_notsent_peak_bytes: Option<f64>,
    pub slow_notsent_mean_bytes: Option<f64>,
    pub tcp_mem_peak_sender_bytes: Option<f64>,
    pub tcp_mem_peak_reader_bytes: Option<f64>,
    pub rtt_slow_mean_ms: Option<f64>,
    pub rtt_min_ms: Option<f64>,
}

impl RunSummary {
    /// The path RTT the lab set, else the lowest RTT measured.
    pub fn path_rtt_ms(&self) -> Option<f64> {
        self.settings.path_rtt_ms.or(self.rtt_min_ms)
    }

    /// The memory figure that the comparison shows: the sender's host, else the reader's.
    pub fn tcp_mem_peak_bytes(&self) -> Option<f64> {
        self.tcp_mem_peak_sender_bytes
            .or(self.tcp_mem_peak_reader_bytes)
    }
}

pub fn interval_s(run: &Run) -> f64 {
    match run.meta.config.interval_us {
        0 => 0.1,
        us => us as f64 / 1e6,
    }
}

/// The phase a sender tick describes: the same rule the reader uses for its rows.
pub fn tick_phase(run: &Run, t_s: f64) -> Option<Phase> {
    phase_of_sample(&run.meta.schedule, t_s, interval_s(run))
}

/// `value` of the reader's rows, gathered by tick.
pub fn reader_ticks(run: &Run, value: impl Fn(&ReaderSample) -> Option<f64>) -> Vec<Tick> {
    series::ticks(&run.reader, interval_s(run), |r| r.t_s, value)
}

/// `value` of the sender's rows, gathered by tick.
pub fn sender_ticks(run: &Run, value: impl Fn(&SenderSample) -> Option<f64>) -> Vec<Tick> {
    series::ticks(&run.sender, interval_s(run), |r| r.t_s, value)
}

pub fn summarize(run: &Run) -> RunSummary {
    let meta = &run.meta;
    let schedule = &meta.schedule;
    let goodput = |phase: Phase| {
        let length_s: f64 = schedule
            .iter()
            .filter(|s| s.phase == phase)
            .map(|s| s.end_s - s.start_s)
            .sum();
        let bytes: u64 = run
            .reader
            .iter()
            .filter(|r| r.phase == phase)
            .map(|r| r.bytes)
            .sum();
        (length_s > 0.0).then(|| bytes as f64 * 8.0 / length_s)
    };
    let slow_sums = |value: fn(&SenderSample) -> u32| -> Vec<f64> {
        sender_ticks(run, |r| Some(f64::from(value(r))))
            .into_iter()
            .filter(|t| tick_phase(run, t.t_s) == Some(Phase::Slow))
            .map(|t| t.sum)
            .collect()
    };
    let queued = slow_sums(|r| r.wmem_queued);
    let notsent = slow_sums(|r| r.notsent_bytes);
    let slow_rtts: Vec<f64> = run
        .sender
        .iter()
        .filter(|r| r.rtt_us > 0 && tick_phase(run, r.t_s) == Some(Phase::Slow))
        .map(|r| f64::from(r.rtt_us) / 1000.0)
        .collect();
    let page_size = |side: Side| {
        let host = match side {
            Side::Sender => meta.sender_host.as_ref().unwrap_or(&meta.reader_host),
            Side::Reader => &meta.reader_host,
        };
        host.page_size_bytes as f64
    };
    let tcp_mem_peak = |side: Side| {
        run.host
            .iter()
            .filter(|h| h.side == side)
            .map(|h| h.tcp_mem_pages)
            .max()
            .map(|pages| pages as f64 * page_size(side))
    };
    RunSummary {
        label: run.label(),
        settings: Settings::from_run(run),
        partial: (meta.ending.status == RunStatus::Partial).then(|| meta.ending.reason.clone()),
        duration_s: meta.ending.duration_s,
        goodput_fast_bps: goodput(Phase::Fast),
        goodput_slow_bps: goodput(Phase::Slow),
        slow_queued_peak_bytes: max(&queued),
        slow_queued_mean_bytes: mean(&queued),
        slow_notsent_peak_bytes: max(&notsent),
        slow_notsent_mean_bytes: mean(&notsent),
        tcp_mem_peak_sender_bytes: tcp_mem_peak(Side::Sender),
        tcp_mem_peak_reader_bytes: tcp_mem_peak(Side::Reader),
        rtt_slow_mean_ms: mean(&slow_rtts),
        rtt_min_ms: run
            .sender
            .iter()
            .filter(|r| r.rtt_us > 0)
            .map(|r| f64::from(r.rtt_us) / 1000.0)
            .reduce(f64::min),
    }
}

fn max(values: &[f64]) -> Option<f64> {
    values.iter().copied().reduce(f64::max)
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The change of `value` against `baseline`, in percent; none when either is missing or
/// the baseline is zero.
pub fn change_percent(value: Option<f64>, baseline: Option<f64>) -> Option<f64> {
    let (value, baseline) = (value?, baseline?);
    (baseline != 0.0).then(|| (value - baseline) / baseline * 100.0)
}

/// Whether `--baseline` names one of the runs; the error lists the labels there are.
pub fn check_baseline(labels: &[String], baseline: &str) -> Result<(), String> {
    if labels.iter().any(|l| l == baseline) {
        return Ok(());
    }
    Err(format!(
        "--baseline {baseline:?}: no run has that label (runs: {})",
        labels.join(", ")
    ))
}

/// For each run, the index of the run it is compared with.
///
/// With a label, every run is compared with that run. Without one, a run is compared with
/// the first run that has the kernel's default lowat on the same lab path (or on any path,
/// if its own has none); `None` where no such run exists.
pub fn baselines(
    summaries: &[RunSummary],
    label: Option<&str>,
) -> Result<Vec<Option<usize>>, String> {
    if let Some(label) = label {
        let labels: Vec<String> = summaries.iter().map(|s| s.label.clone()).collect();
        check_baseline(&labels, label)?;
        let index = labels.iter().position(|l| l == label).unwrap_or_default();
        return Ok(vec![Some(index); summaries.len()]);
    }
    let same_path = |a: &Settings, b: &Settings| {
        a.path_rtt_ms == b.path_rtt_ms && a.path_rate_bps == b.path_rate_bps
    };
    let is_default = |s: &&RunSummary| s.settings.lowat.is_none();
    Ok(summaries
        .iter()
        .map(|run| {
            let candidates = || summaries.iter().enumerate().filter(|(_, s)| is_default(s));
            candidates()
                .find(|(_, s)| same_path(&s.settings, &run.settings))
                .or_else(|| candidates().next())
                .map(|(i, _)| i)
        })
        .collect())
}

/// Each run's settings that are not the same in every run, in words (the path included),
/// so a chart across runs can name each run briefly. Where nothing differs, the lowat.
pub fn distinguishing(summaries: &[RunSummary]) -> Vec<String> {
    let parts: Vec<Vec<(String, String)>> = summaries
        .iter()
        .map(|s| {
            let mut parts = s.settings.parts();
            parts.extend(s.settings.path_parts());
            parts
        })
        .collect();
    let text_of = |run: &[(String, String)], name: &str| {
        run.iter()
            .find(|(n, _)| n == name)
            .map_or(String::new(), |(_, text)| text.clone())
    };
    let mut names: Vec<&String> = parts.iter().flatten().map(|(name, _)| name).collect();
    let mut seen = Vec::new();
    names.retain(|name| {
        let new = !seen.contains(name);
        seen.push(*name);
        new
    });
    let varying: Vec<&String> = names
        .into_iter()
        .filter(|name| {
            parts
                .iter()
                .any(|run| text_of(run, name) != text_of(&parts[0], name))
        })
        .collect();
    parts
        .iter()
        .zip(summaries)
        .map(|(run, summary)| {
            let texts: Vec<String> = varying
                .iter()
                .map(|name| text_of(run, name))
                .filter(|text| !text.is_empty())
                .collect();
            if texts.is_empty() {
                summary.settings.lowat_text()
            } else {
                texts.join(", ")
            }
        })
        .collect()
}

/// Whether the runs were made on different paths, so figures against RTT say something:
/// the lab's path facts differ, or, with none recorded, the lowest measured RTTs differ by
/// more than half (and a millisecond).
pub fn paths_differ(summaries: &[RunSummary]) -> bool {
    let lab: Vec<(Option<f64>, Option<f64>)> = summaries
        .iter()
        .map(|s| (s.settings.path_rtt_ms, s.settings.path_rate_bps))
        .collect();
    if lab.iter().any(|&p| p != (None, None)) {
        return lab.windows(2).any(|w| w[0] != w[1]);
    }
    let rtts: Vec<f64> = summaries.iter().filter_map(|s| s.rtt_min_ms).collect();
    match (rtts.iter().copied().reduce(f64::min), max(&rtts)) {
        (Some(lo), Some(hi)) => hi > lo * 1.5 && hi - lo > 1.0,
        _ => false,
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

    fn run(label: &str, lowat: Option<u64>, rtt_ms: Option<f64>) -> RunSummary {
        RunSummary {
            label: label.into(),
            settings: Settings {
                flows: 1,
                lowat: lowat.map(|b| (b, LowatSource::Socket)),
                sndbuf_bytes: None,
                congestion: Some("cubic".into()),
                path_rtt_ms: rtt_ms,
                path_rate_bps: None,
                full_speed: false,
                lab_settings: Vec::new(),
            },
            partial: None,
            duration_s: 60.0,
            goodput_fast_bps: None,
            goodput_slow_bps: None,
            slow_queued_peak_bytes: None,
            slow_queued_mean_bytes: None,
            slow_notsent_peak_bytes: None,
            slow_notsent_mean_bytes: None,
            tcp_mem_peak_sender_bytes: None,
            tcp_mem_peak_reader_bytes: None,
            rtt_slow_mean_ms: None,
            rtt_min_ms: None,
        }
    }

    #[test]
    fn each_run_is_compared_with_the_default_lowat_run_on_its_path() {
        let runs = [
            run("a", Some(16384), Some(20.0)),
            run("b", None, Some(20.0)),
            run("c", None, Some(80.0)),
            run("d", Some(16384), Some(80.0)),
            run("e", Some(16384), None),
        ];
        assert_eq!(
            baselines(&runs, None).unwrap(),
            vec![Some(1), Some(1), Some(2), Some(2), Some(1)]
        );
        assert_eq!(baselines(&runs, Some("d")).unwrap(), vec![Some(3); 5]);
        let err = baselines(&runs, Some("z")).unwrap_err();
        assert!(err.contains("a, b, c, d, e"), "{err}");
        assert_eq!(baselines(&runs[..1], None).unwrap(), vec![None]);
        assert!(paths_differ(&runs));
        assert!(!paths_differ(&runs[..2]));
    }

    #[test]
    fn runs_are_named_by_the_settings_that_differ() {
        let runs = [
            run("a", Some(16384), Some(20.0)),
            run("b", None, Some(20.0)),
            run("c", None, Some(80.0)),
        ];
        assert_eq!(
            distinguishing(&runs),
            vec![
                "lowat 16 KiB, RTT 20.0 ms",
                "lowat default, RTT 20.0 ms",
                "lowat default, RTT 80.0 ms"
            ]
        );
        assert_eq!(distinguishing(&runs[1..2]), vec!["lowat default"]);
    }

    #[test]
    fn change_against_a_zero_baseline_is_none() {
        assert_eq!(change_percent(Some(150.0), Some(100.0)), Some(50.0));
        assert_eq!(change_percent(Some(1.0), Some(0.0)), None);
        assert_eq!(change_percent(None, Some(1.0)), None);
    }
}

//! The figures for Prometheus: every run's and every configuration's headline figures in
//! the OpenMetrics text format (gauges only, so node_exporter's textfile collector, which
//! reads the older text format, takes the files too). One file per run,
//! `oscil-run-<run>.prom`, and one for the campaign's configurations,
//! `oscil-campaign.prom`, each written whole and renamed into place. The figures are the
//! registry's ([`crate::figures::metrics::METRICS`]), named for Prometheus: the column's
//! stem and the base unit (`_bytes`, `_seconds`, `_bytes_per_second`, `_ratio`); the
//! per-GB costs are left out. Labels: the pair, the path's RTT, the configuration and its
//! settings.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

use oscil_rundir::safe_fs;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use crate::figures::metrics::{Metric, METRICS};
use crate::figures::stats::Estimate;
use crate::load::configs::Configuration;
use crate::load::settings::LowatSource;
use crate::load::summary::{pair_of, RunSummary, Scope};

type Labels = Vec<(String, String)>;
type Gauges = Family<Labels, Gauge<f64, AtomicU64>>;

/// The campaign's file in the metrics directory.
pub const CAMPAIGN_FILE: &str = "oscil-campaign.prom";

/// How Prometheus names a figure of the registry: its stem, its base unit and the factor
/// from the registry's base (ms to seconds, bits to bytes: `promtool check metrics` wants
/// bytes); `None` for the per-GB costs. `ns` (a namespace's) is spelled out, or Prometheus
/// reads nanoseconds.
pub fn name(metric: &Metric) -> Option<(String, &'static str, f64)> {
    let (suffix, unit, factor) = match metric.unit.name {
        "Mbit/s" => ("_mbps", "bytes_per_second", 1.0 / 8.0),
        "MiB" => ("_mib", "bytes", 1.0),
        "bytes" => ("_bytes", "bytes", 1.0),
        "ms" => ("_ms", "seconds", 1e-3),
        "%" => ("_pct", "ratio", 1.0),
        "" => ("_count", "events", 1.0),
        _ => return None,
    };
    let stem = metric
        .column
        .strip_suffix(suffix)?
        .replace("_ns_", "_netns_");
    Some((stem, unit, factor))
}

fn unit(name: &str) -> Unit {
    match name {
        "bytes" => Unit::Bytes,
        "seconds" => Unit::Seconds,
        other => Unit::Other(other.into()),
    }
}

/// A label name Prometheus takes: letters, digits and `_`.
fn label_name(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The labels a run's or a configuration's series carry: the pair (many hosts), the path's
/// RTT in whole ms (the lab's, else the lowest measured), the configuration and each of
/// its settings.
fn labels(summary: &RunSummary, configuration: &str, rtt_ms: Option<f64>) -> Labels {
    let mut labels: Labels = Vec::new();
    let mut add = |k: &str, v: String| labels.push((label_name(k), v));
    if let Some(pair) = pair_of(&summary.path_key) {
        add("pair", pair.to_owned());
    }
    if let Some(ms) = rtt_ms {
        add("path_rtt_ms", format!("{ms:.0}"));
    }
    add("configuration", configuration.to_owned());
    let s = &summary.settings;
    match s.lowat {
        None => add("lowat", "default".into()),
        Some((bytes, source)) => {
            add("lowat", bytes.to_string());
            if source == LowatSource::Sysctl {
                add("lowat_from", "sysctl".into());
            }
        }
    }
    if let Some(bytes) = s.sndbuf_bytes {
        add("sndbuf", bytes.to_string());
    }
    if let Some(cc) = &s.congestion {
        add("congestion", cc.clone());
    }
    add("flows", s.flows.to_string());
    for (name, value) in &s.lab_settings {
        add(name, value.clone());
    }
    if s.full_speed {
        add("reader", "full-speed".into());
    }
    labels
}

/// One series: its labels, each registry figure's value, and (for a configuration) how
/// many runs it holds.
struct Series {
    labels: Labels,
    values: Vec<Option<f64>>,
    runs: Option<usize>,
}

/// One registry of gauges, a family per figure, each series' value in it.
fn registry(prefix: &str, series: &[Series], help_suffix: &str) -> String {
    let mut registry = Registry::with_prefix(prefix);
    let shown: Vec<(usize, &Metric)> = METRICS
        .iter()
        .enumerate()
        .filter(|(_, m)| name(m).is_some())
        .collect();
    for (i, metric) in shown {
        let (stem, unit_name, factor) = name(metric).expect("filtered");
        let family = Gauges::default();
        for s in series {
            if let Some(v) = s.values[i].filter(|v| v.is_finite()) {
                family.get_or_create(&s.labels).set(v * factor);
            }
        }
        let help = format!("{} ({help_suffix})", metric.title);
        registry.register_with_unit(stem, help, unit(unit_name), family);
    }
    if series.iter().any(|s| s.runs.is_some()) {
        let family = Gauges::default();
        for s in series {
            if let Some(n) = s.runs {
                family.get_or_create(&s.labels).set(n as f64);
            }
        }
        registry.register("runs", "Complete runs of the configuration", family);
    }
    let mut text = String::new();
    encode(&mut text, &registry).expect("writes to a String");
    text
}

/// Writes a file per run (`oscil-<png stem>.prom`) and the campaign's into `dir`; the
/// files written.
pub fn write(
    dir: &Path,
    summaries: &[RunSummary],
    configs: &[Configuration],
    pngs: &[String],
    scope: Scope,
) -> Result<Vec<PathBuf>, safe_fs::SafeFsError> {
    std::fs::create_dir_all(dir).map_err(safe_fs::SafeFsError::io(dir))?;
    let values = |s: &RunSummary| -> Vec<Option<f64>> {
        METRICS.iter().map(|m| s.value(m, scope)).collect()
    };
    let config_of = |run: usize| configs.iter().find(|c| c.runs.contains(&run));
    let mut files = Vec::new();
    let put = |name: String, text: String, files: &mut Vec<PathBuf>| {
        let path = dir.join(name);
        safe_fs::write_atomic(&path, text.as_bytes(), 0o644)?;
        files.push(path);
        Ok::<(), safe_fs::SafeFsError>(())
    };
    let scope_text = |s: &RunSummary| scope.text(s.cycles());
    for (i, (summary, png)) in summaries.iter().zip(pngs).enumerate() {
        let config = config_of(i).map_or(summary.label.as_str(), |c| c.name.as_str());
        let mut labels = labels(summary, config, summary.path_rtt_ms());
        labels.push(("run".into(), summary.label.clone()));
        if let Some(rep) = summary.repetition {
            labels.push(("repetition".into(), rep.to_string()));
        }
        let run = Series {
            labels,
            values: values(summary),
            runs: None,
        };
        let text = registry("oscil_run", &[run], &scope_text(summary));
        let stem = png.strip_suffix(".png").unwrap_or(png);
        put(format!("oscil-{stem}.prom"), text, &mut files)?;
    }
    let series: Vec<Series> = configs
        .iter()
        .map(|c| {
            let runs: Vec<&RunSummary> = c.runs.iter().map(|&i| &summaries[i]).collect();
            let rtt_ms = runs.iter().filter_map(|s| s.path_rtt_ms()).reduce(f64::min);
            let means = (0..METRICS.len())
                .map(|m| {
                    let v: Vec<f64> = runs
                        .iter()
                        .filter_map(|s| s.value(&METRICS[m], scope))
                        .collect();
                    Estimate::of(&v, METRICS[m].range()).map(|e| e.mean)
                })
                .collect();
            Series {
                labels: labels(runs[0], &c.name, rtt_ms),
                values: means,
                runs: Some(runs.len()),
            }
        })
        .collect();
    let text = registry(
        "oscil_campaign",
        &series,
        "mean over the configuration's runs",
    );
    put(CAMPAIGN_FILE.into(), text, &mut files)?;
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every figure exported has a name of its own in Prometheus' alphabet, with its unit.
    #[test]
    fn each_figure_has_one_prometheus_name_with_its_unit() {
        let names: Vec<String> = METRICS
            .iter()
            .filter_map(name)
            .map(|(stem, unit, _)| format!("{stem}_{unit}"))
            .collect();
        assert!(names.len() >= 30, "{names:?}");
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
        for n in &names {
            assert!(
                n.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{n}"
            );
        }
        assert!(names.contains(&"slow_queued_peak_bytes".to_string()));
        assert!(names.contains(&"net_goodput_fast_bytes_per_second".to_string()));
        assert!(names.contains(&"tcp_mem_netns_peak_sender_bytes".to_string()));
        assert!(names.contains(&"rtt_slow_mean_seconds".to_string()));
    }
}

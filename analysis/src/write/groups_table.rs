//! `groups.csv` (contract): one row per configuration and group of flows, written only
//! when some configuration's runs had several groups (`--group`); docs/run-directory.md
//! says what each column means.

use crate::figures::groups::ConfigGroups;
use crate::load::configs::Configuration;
use crate::load::summary::{RunSummary, Scope};

const HEADER: [&str; 31] = [
    "configuration",
    "path",
    "figures",
    "runs",
    "group",
    "group_settings",
    "flows",
    "delivered_bytes",
    "config_delivered_bytes",
    "delivered_share_pct",
    "path_share_pct",
    "goodput_mbps",
    "fast_goodput_mbps",
    "slow_goodput_mbps",
    "jain_groups",
    "jain_flows",
    "slow_queued_mean_bytes",
    "slow_queued_peak_bytes",
    "slow_notsent_mean_bytes",
    "slow_notsent_peak_bytes",
    "slow_rmem_mean_bytes",
    "slow_rmem_peak_bytes",
    "slow_residence_p50_ms",
    "slow_residence_p99_ms",
    "slow_marker_p50_ms",
    "slow_marker_p99_ms",
    "network_limited_pct",
    "rwnd_limited_pct",
    "sndbuf_limited_pct",
    "application_limited_pct",
    "limited_by",
];

/// The table; `groups` from `figures::groups::of_configs`.
pub fn csv(
    summaries: &[RunSummary],
    configs: &[Configuration],
    groups: &[ConfigGroups],
    scope: Scope,
) -> Result<String, csv::Error> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer.write_record(HEADER)?;
    for config in groups {
        let c = &configs[config.config];
        let first = &summaries[c.runs[0]];
        for group in &config.groups {
            let mut row = vec![
                c.name.clone(),
                first.settings.path_text().unwrap_or_default(),
                scope.text(first.cycles()),
                config.runs.to_string(),
                group.index.to_string(),
                group.name.clone(),
                group.flows.to_string(),
                group.delivered_bytes().to_string(),
                config.delivered_bytes.to_string(),
                pct(group.delivered_share),
                pct(group.path_share),
                mbps(group.both().net_goodput_bps()),
                mbps(group.fast.net_goodput_bps()),
                mbps(group.slow.net_goodput_bps()),
                fixed(config.jain_groups, 4),
                fixed(config.jain_flows, 4),
                fixed(group.slow.queued_mean_bytes(), 0),
                whole(group.slow.queued_peak()),
                fixed(group.slow.notsent_mean_bytes(), 0),
                whole(group.slow.notsent_peak()),
                fixed(group.slow_rmem.mean(), 0),
                fixed(group.slow_rmem.peak(), 0),
                ms(group.slow.residence_quantile_us(0.5)),
                ms(group.slow.residence_quantile_us(0.99)),
                ms(group.slow.marker_quantile_us(0.5)),
                ms(group.slow.marker_quantile_us(0.99)),
            ];
            let limited = group.limited_by();
            row.extend(
                [
                    limited.and_then(|l| l.network_share()),
                    limited.and_then(|l| l.rwnd_share()),
                    limited.and_then(|l| l.sndbuf_share()),
                    limited.and_then(|l| l.application_share()),
                ]
                .map(pct),
            );
            row.push(group.limited_most().unwrap_or("").into());
            writer.write_record(&row)?;
        }
    }
    let bytes = writer.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8(bytes).expect("the table is built from strings"))
}

fn pct(share: Option<f64>) -> String {
    fixed(share.map(|s| s * 100.0), 2)
}

fn mbps(bps: Option<f64>) -> String {
    fixed(bps.map(|b| b / 1e6), 3)
}

fn ms(us: Option<u64>) -> String {
    fixed(us.map(|us| us as f64 / 1000.0), 3)
}

fn whole(value: Option<u64>) -> String {
    value.map_or(String::new(), |v| v.to_string())
}

fn fixed(value: Option<f64>, decimals: usize) -> String {
    value.map_or(String::new(), |v| format!("{v:.decimals$}"))
}

//! What the report says about groups of flows, in words: within one configuration, each
//! group against the last group (its share of what TCP delivered, of the
//! path, how much less or more it queued in the slow phases, its marker latency), with
//! Jain's indices; and the same group across configurations on one path.

use crate::figures::groups::{ConfigGroups, GroupFigures};
use crate::human;
use crate::load::configs::Configuration;

/// One line per configuration with groups, then one per group met in several
/// configurations of one path.
pub fn lines(configs: &[Configuration], groups: &[ConfigGroups]) -> Vec<String> {
    let mut lines: Vec<String> = groups.iter().map(|g| within(configs, g)).collect();
    lines.extend(across(configs, groups));
    lines
}

/// The group others are compared with: the last (`--group flows=4,notsent-lowat=128k
/// --group flows=4` compares the lowat group with the default one).
fn reference(groups: &[GroupFigures]) -> Option<&GroupFigures> {
    groups.last()
}

fn named(g: &GroupFigures) -> String {
    let plural = if g.flows == 1 { "" } else { "s" };
    format!("{} ({} flow{plural})", g.name, g.flows)
}

fn percent(share: Option<f64>) -> String {
    share.map_or("n/a".into(), |s| format!("{:.0}%", s * 100.0))
}

/// How much less (or more) `a` is than `b`, in words: `91% less`, `2.3× more`.
fn less_or_more(a: f64, b: f64) -> String {
    if b <= 0.0 {
        return if a <= 0.0 {
            "as much".into()
        } else {
            "more".into()
        };
    }
    if a <= b {
        format!("{:.0}% less", (1.0 - a / b) * 100.0)
    } else {
        format!("{:.1}× more", a / b)
    }
}

/// A configuration's groups against its reference group.
fn within(configs: &[Configuration], config: &ConfigGroups) -> String {
    let name = &configs[config.config].name;
    let Some(reference) = reference(&config.groups) else {
        return format!("{name}: no groups");
    };
    let mut parts = Vec::new();
    for g in config.groups.iter().filter(|g| g.index != reference.index) {
        let mut text = format!(
            "{}: {} of what TCP delivered",
            named(g),
            percent(g.delivered_share)
        );
        if g.path_share.is_some() {
            text += &format!(" ({} of the path)", percent(g.path_share));
        }
        text += &format!(
            " against {} for {}",
            percent(reference.delivered_share),
            named(reference)
        );
        if let (Some(a), Some(b)) = (
            g.slow.queued_mean_bytes(),
            reference.slow.queued_mean_bytes(),
        ) {
            text += &format!(
                "; {} queued in the slow phases ({} against {})",
                less_or_more(a, b),
                human::mib(a),
                human::mib(b)
            );
        }
        if let (Some(a), Some(b)) = (
            g.slow.notsent_mean_bytes(),
            reference.slow.notsent_mean_bytes(),
        ) {
            text += &format!(", {} not sent", less_or_more(a, b));
        }
        if let (Some(a), Some(b)) = (
            g.slow.marker_quantile_us(0.5),
            reference.slow.marker_quantile_us(0.5),
        ) {
            text += &format!(
                "; median marker latency {} against {}",
                human::wait(a as f64 / 1000.0),
                human::wait(b as f64 / 1000.0)
            );
        }
        if let Some(limit) = g.limited_most() {
            text += &format!("; mostly {limit}-limited");
        }
        parts.push(text);
    }
    let jain = |index: Option<f64>| index.map_or("n/a".into(), |j| format!("{j:.2}"));
    format!(
        "{name}: {}. Jain's index {} across groups, {} across flows.",
        parts.join("; "),
        jain(config.jain_groups),
        jain(config.jain_flows)
    )
}

/// Each group (by its settings) met in several configurations of one path: its share and
/// slow-phase queue in each.
fn across(configs: &[Configuration], groups: &[ConfigGroups]) -> Vec<String> {
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut lines = Vec::new();
    for config in groups {
        let path = &configs[config.config].path_key;
        for g in &config.groups {
            let key = (path.clone(), g.name.clone());
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            let met: Vec<String> = groups
                .iter()
                .filter(|c| &configs[c.config].path_key == path)
                .filter_map(|c| {
                    let same = c.groups.iter().find(|x| x.name == g.name)?;
                    let queued = same
                        .slow
                        .queued_mean_bytes()
                        .map_or("n/a".into(), human::mib);
                    Some(format!(
                        "{} of what TCP delivered and {queued} queued in {}",
                        percent(same.delivered_share),
                        configs[c.config].name
                    ))
                })
                .collect();
            if met.len() > 1 {
                lines.push(format!(
                    "{} across configurations: {}.",
                    g.name,
                    met.join("; ")
                ));
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn less_or_more_in_words() {
        assert_eq!(less_or_more(9.0, 100.0), "91% less");
        assert_eq!(less_or_more(230.0, 100.0), "2.3× more");
        assert_eq!(less_or_more(0.0, 0.0), "as much");
    }
}

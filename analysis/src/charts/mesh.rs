//! `mesh.png` and `mesh.csv`: a many-host campaign at a glance. Every pair of hosts is a
//! path (its `path_key` is `pair <sender>-to-<receiver>`); each path shows at its measured
//! RTT the bloat (slow phases' mean queued bytes) and the goodput (fast phases) of the
//! kernel's default lowat and of the setting the recommendation chose, so where a setting
//! pays and what it costs read against RTT and rate together.

use crate::charts::chart::{Axis, Figure, Line, Panel, Weight, BLUE, VERMILLION};
use crate::figures::metrics::Metric;
use crate::figures::stats::Estimate;
use crate::human::{MBIT, MIB};
use crate::load::configs::Configuration;
use crate::load::summary::{pair_of, RunSummary, Scope};
use crate::verdicts::recommend::{self, PathChoice};
use crate::verdicts::verdict;

/// One path of the mesh: where it sits and what its default and chosen settings did.
#[derive(Debug, Clone, PartialEq)]
pub struct MeshPath {
    pub pair: String,
    pub rtt_ms: f64,
    /// The chosen configuration's name; `None`: nothing chosen (see the recommendation).
    pub chosen: Option<String>,
    /// (default, chosen) slow-phase mean queued bytes.
    pub queued_bytes: (Option<f64>, Option<f64>),
    /// (default, chosen) fast-phase network goodput, bit/s.
    pub goodput_bps: (Option<f64>, Option<f64>),
}

/// Every pair path with a baseline configuration, in order of RTT; empty unless the
/// campaign had pairs.
pub fn mesh_paths(
    summaries: &[RunSummary],
    configs: &[Configuration],
    choices: &[PathChoice],
    scope: Scope,
) -> Vec<MeshPath> {
    let mean = |c: Option<usize>, m: &Metric| -> Option<f64> {
        Estimate::of(
            &verdict::values(summaries, &configs[c?], m, scope),
            m.range(),
        )
        .map(|e| e.mean)
    };
    let mut paths: Vec<MeshPath> = choices
        .iter()
        .filter_map(|choice| {
            let pair = pair_of(&choice.path_key)?;
            // The kernel's default lowat, else what the path's configurations are
            // compared with (a host whose own default sets a threshold).
            let default = choice.default.or_else(|| {
                configs
                    .iter()
                    .find(|c| c.path_key == choice.path_key)?
                    .baseline
            })?;
            let rtt_ms = configs[default]
                .runs
                .iter()
                .filter_map(|&r| summaries[r].path_rtt_ms())
                .reduce(f64::min)?;
            Some(MeshPath {
                pair: pair.to_owned(),
                rtt_ms,
                chosen: choice.chosen.map(|c| configs[c].name.clone()),
                queued_bytes: (
                    mean(Some(default), recommend::queued()),
                    mean(choice.chosen, recommend::queued()),
                ),
                goodput_bps: (
                    mean(Some(default), recommend::goodput()),
                    mean(choice.chosen, recommend::goodput()),
                ),
            })
        })
        .collect();
    paths.sort_by(|a, b| a.rtt_ms.total_cmp(&b.rtt_ms));
    paths
}

/// The mesh as a picture: bloat and goodput against RTT, the default's and the chosen
/// setting's; `None` for fewer than two pair paths.
pub fn mesh_figure(paths: &[MeshPath]) -> Option<Figure> {
    if paths.len() < 2 {
        return None;
    }
    let x_max = paths.iter().map(|p| p.rtt_ms).fold(1.0, f64::max) * 1.1;
    let points = |f: &dyn Fn(&MeshPath) -> Option<f64>| -> Vec<(f64, f64)> {
        paths
            .iter()
            .filter_map(|p| Some((p.rtt_ms, f(p)?)))
            .collect()
    };
    let panel =
        |key: &str, title: &str, label: &str, pick: &dyn Fn(&MeshPath, bool) -> Option<f64>| {
            let lines = vec![
                Line::new("kernel's default lowat", BLUE, points(&|p| pick(p, false)))
                    .weighted(Weight::Points),
                Line::new(
                    "recommended setting",
                    VERMILLION,
                    points(&|p| pick(p, true)),
                )
                .weighted(Weight::Points),
            ];
            Panel {
                key: key.into(),
                configurations: Vec::new(),
                title: title.into(),
                x_label: "path RTT (ms, lowest measured)".into(),
                x_range: (0.0, x_max),
                left: Axis {
                    label: label.into(),
                    lines,
                    ..Axis::default()
                },
                right: None,
                shade: Vec::new(),
            }
        };
    let changed = paths
        .iter()
        .filter(|p| p.chosen.is_some() && p.queued_bytes.1 != p.queued_bytes.0)
        .count();
    let undecided = paths.iter().filter(|p| p.chosen.is_none()).count();
    Some(Figure {
        header: vec![
            format!(
                "The mesh: {} paths (pairs of hosts); a setting other than the default recommended on {changed}, nothing on {undecided} (recommendation.md says why)",
                paths.len()
            ),
            "Each dot is a path at its lowest measured RTT; mesh.csv names each path and its choice".into(),
        ],
        warning: None,
        panels: vec![
            panel(
                "mesh_queued",
                "Bloat: mean sender queued bytes, slow phases",
                "queued (MiB)",
                &|p, chosen| pick(p.queued_bytes, chosen).map(|b| b / MIB),
            ),
            panel(
                "mesh_goodput",
                "Rate: network goodput, fast phases",
                "goodput (Mbit/s)",
                &|p, chosen| pick(p.goodput_bps, chosen).map(|b| b / MBIT),
            ),
        ],
    })
}

fn pick(pair: (Option<f64>, Option<f64>), chosen: bool) -> Option<f64> {
    if chosen {
        pair.1
    } else {
        pair.0
    }
}

/// `mesh.csv`: a line per path.
pub fn mesh_csv(paths: &[MeshPath]) -> String {
    let number =
        |v: Option<f64>, scale: f64| v.map_or(String::new(), |v| format!("{:.3}", v / scale));
    let mut text = String::from(
        "pair,rtt_ms,chosen,default_queued_mib,chosen_queued_mib,default_goodput_mbps,chosen_goodput_mbps\n",
    );
    for p in paths {
        text.push_str(&format!(
            "{},{:.1},{},{},{},{},{}\n",
            p.pair,
            p.rtt_ms,
            p.chosen.as_deref().unwrap_or(""),
            number(p.queued_bytes.0, MIB),
            number(p.queued_bytes.1, MIB),
            number(p.goodput_bps.0, MBIT),
            number(p.goodput_bps.1, MBIT),
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::summary::pair_path_text;

    fn path(pair: &str, rtt_ms: f64, chosen: Option<&str>) -> MeshPath {
        MeshPath {
            pair: pair.into(),
            rtt_ms,
            chosen: chosen.map(Into::into),
            queued_bytes: (Some(2.0 * MIB), chosen.map(|_| MIB)),
            goodput_bps: (Some(20e6), chosen.map(|_| 19e6)),
        }
    }

    #[test]
    fn the_mesh_puts_each_path_at_its_rtt_with_its_default_and_its_choice() {
        let paths = [
            path("a-to-b", 20.0, Some("a-to-b_lowat-131072")),
            path("b-to-a", 150.0, None),
        ];
        let figure = mesh_figure(&paths).unwrap();
        let bloat = &figure.panels[0].left.lines;
        assert_eq!(bloat[0].points, [(20.0, 2.0), (150.0, 2.0)]);
        assert_eq!(
            bloat[1].points,
            [(20.0, 1.0)],
            "no choice on b-to-a, no dot"
        );
        assert_eq!(figure.panels[1].left.lines[1].points, [(20.0, 19.0)]);
        assert!(figure.header[0].contains("2 paths"));
        assert!(figure.header[0].contains("recommended on 1, nothing on 1"));
        let csv = mesh_csv(&paths);
        assert_eq!(
            csv.lines().nth(1).unwrap(),
            "a-to-b,20.0,a-to-b_lowat-131072,2.000,1.000,20.000,19.000"
        );
        assert_eq!(csv.lines().nth(2).unwrap(), "b-to-a,150.0,,2.000,,20.000,");
        assert!(mesh_figure(&paths[..1]).is_none());
        assert_eq!(pair_of("pair a-to-b"), Some("a-to-b"));
        assert_eq!(pair_of("hosts x -> y"), None);
        assert_eq!(
            pair_path_text("pair a-to-b", Some(20.04)).unwrap(),
            "a-to-b (measured, 20.0 ms min RTT)"
        );
    }
}

//! Paths the lab did not record: runs keyed by their two ends (`settings::path_key`) are
//! told apart further by what they measured, so two runs between the same namespaces over
//! links of 20 ms and 80 ms are two paths. Two runs share a measured path when their lowest
//! RTTs are within 20% or 2 ms of each other, and, where both rates tell the path (see
//! [`path_rate_bps`]), their fast phases' network goodput within 20%. docs/report.md states
//! the same tolerance.

use crate::human;
use crate::load::summary::{pair_of, RunSummary, Scope};

/// Lowest RTTs this share of the larger apart, or [`RTT_SLACK_MS`], are one path.
const RTT_SHARE: f64 = 0.2;
const RTT_SLACK_MS: f64 = 2.0;
/// Rates this share of the larger apart are one path.
const RATE_SHARE: f64 = 0.2;
/// Below this lowest RTT (one host, a LAN) the hosts' CPUs set the rate, which differs
/// twofold from run to run on loopback: it tells no path apart.
const MIN_RATE_RTT_MS: f64 = 2.0;
/// A run whose fast phases were held back by a window or buffer this share of the flows'
/// time or more measured its setting, not the path's rate.
const MAX_HELD_BACK_SHARE: f64 = 0.5;

/// What a run measured of its path.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Measured {
    rtt_ms: Option<f64>,
    rate_bps: Option<f64>,
}

/// Whether `run`'s path was measured, not set: no lab path, no many-host pair.
fn is_measured(run: &RunSummary) -> bool {
    let lab = run.settings.path_rtt_ms.is_some() || run.settings.path_rate_bps.is_some();
    !lab && pair_of(&run.path_key).is_none()
}

/// The fast phases' network goodput where it tells the path's rate: a path of at least
/// [`MIN_RATE_RTT_MS`], and flows the network held back rather than a window or buffer.
fn path_rate_bps(run: &RunSummary) -> Option<f64> {
    let fast = run.window(Scope::Whole).fast;
    let limited = fast.limited_by?;
    let held_back = limited.rwnd_share()? + limited.sndbuf_share()?;
    let long = run.rtt_min_ms()? >= MIN_RATE_RTT_MS;
    (long && held_back < MAX_HELD_BACK_SHARE)
        .then(|| fast.net_goodput_bps())
        .flatten()
}

fn measured(run: &RunSummary) -> Measured {
    Measured {
        rtt_ms: run.rtt_min_ms(),
        rate_bps: path_rate_bps(run),
    }
}

/// Whether `a` and `b` are within `share` of the larger or `slack` of each other.
fn close(a: f64, b: f64, share: f64, slack: f64) -> bool {
    (a - b).abs() <= (share * a.max(b)).max(slack)
}

/// Whether two runs' figures say one path; a figure either lacks tells nothing apart.
fn same_path(a: Measured, b: Measured) -> bool {
    let rtt = match (a.rtt_ms, b.rtt_ms) {
        (Some(x), Some(y)) => close(x, y, RTT_SHARE, RTT_SLACK_MS),
        _ => true,
    };
    let rate = match (a.rate_bps, b.rate_bps) {
        (Some(x), Some(y)) => close(x, y, RATE_SHARE, 0.0),
        _ => true,
    };
    rtt && rate
}

/// Splits the runs of each pair of ends into measured paths, in order of first appearance:
/// a run joins the first path of its ends whose first run it matches, else starts one.
/// Each path's key gets ` measured <n>`.
pub fn split_measured(runs: &mut [RunSummary]) {
    let mut paths: Vec<(String, Measured, usize)> = Vec::new();
    for run in runs.iter_mut().filter(|r| is_measured(r)) {
        let figures = measured(run);
        let found = paths
            .iter()
            .find(|(ends, first, _)| *ends == run.path_key && same_path(*first, figures));
        let n = match found {
            Some(&(_, _, n)) => n,
            None => {
                let n = 1 + paths
                    .iter()
                    .filter(|(ends, ..)| *ends == run.path_key)
                    .count();
                paths.push((run.path_key.clone(), figures, n));
                n
            }
        };
        run.path_key = format!("{} measured {n}", run.path_key);
    }
}

/// A measured path in words, from its first run: `measured path: lowest RTT 20.3 ms, fast
/// phases 95.0 Mbit/s (no lab path recorded)`.
pub fn measured_text(run: &RunSummary) -> String {
    let mut parts = Vec::new();
    if let Some(ms) = run.rtt_min_ms() {
        parts.push(format!("lowest RTT {}", human::ms(ms)));
    }
    if let Some(bps) = path_rate_bps(run) {
        parts.push(format!("fast phases {}", human::rate(bps)));
    }
    match parts.is_empty() {
        true => "measured path (no lab path recorded)".into(),
        false => format!("measured path: {} (no lab path recorded)", parts.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(rtt_ms: f64, rate_mbps: Option<f64>) -> Measured {
        Measured {
            rtt_ms: Some(rtt_ms),
            rate_bps: rate_mbps.map(|m| m * 1e6),
        }
    }

    #[test]
    fn rtts_within_a_fifth_or_two_ms_are_one_path() {
        assert!(same_path(path(20.0, None), path(23.0, None)));
        assert!(!same_path(path(20.0, None), path(80.0, None)));
        // Loopback's tiny RTTs differ many times over, by far less than 2 ms.
        assert!(same_path(path(0.02, None), path(0.3, None)));
        assert!(!same_path(path(0.05, None), path(10.0, None)));
    }

    #[test]
    fn rates_tell_paths_apart_only_where_both_are_known() {
        assert!(same_path(path(20.0, Some(95.0)), path(20.0, Some(88.0))));
        assert!(!same_path(path(20.0, Some(95.0)), path(20.0, Some(900.0))));
        assert!(same_path(path(20.0, Some(95.0)), path(20.0, None)));
    }
}

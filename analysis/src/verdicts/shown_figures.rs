//! Which of the compared figures (`metrics::compared`) a person is shown, in the order of
//! the questions they came with (how much memory the sender holds, how much of it waits
//! unsent, what the network delivered, how long a write waits, what it costs), and a line
//! for each left out: not measured (with the option that measures it), or host-wide
//! sockstat where the sender's own namespace sum says the same of the setting alone.

use crate::figures::metrics::{Metric, METRICS};
use crate::verdicts::verdict::Cell;

/// The questions in order, each by words its figures' column names hold.
const ORDER: &[&str] = &[
    "tcp_mem_ns",
    "queued",
    "notsent",
    "tcp_mem_peak",
    "goodput",
    "residence",
    "pending",
    "marker",
    "rtt",
    "limited",
    "cpu",
];

/// The figures shown (indices into `METRICS`) and one line per figure left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    pub metrics: Vec<usize>,
    pub left_out: Vec<String>,
}

fn question(m: &Metric) -> usize {
    ORDER
        .iter()
        .position(|word| m.column.contains(word))
        .unwrap_or(ORDER.len())
}

/// The option that measures a figure no run measured.
pub fn measured_by(column: &str) -> &'static str {
    if column.contains("marker") {
        "oscil-reader or oscil-lab --marker-every 1s measures it"
    } else if column.contains("residence") || column.contains("pending") {
        "the daemon's TX timestamps measure it (on unless oscil-daemon --no-tx-timestamps, and where the kernel allows SO_TIMESTAMPING)"
    } else if column.contains("_ns_") {
        "a daemon and reader of this version measure it (sock_diag over each side's namespace)"
    } else if column.contains("cpu") {
        "no run spent 0.5 s of CPU or more, and below that the kernel's 10 ms ticks are over 2% of the figure (longer runs or more flows measure it)"
    } else {
        "a run of this version measures it"
    }
}

/// The compared figures shown for `cells` (one row per configuration, one cell per
/// `METRICS` entry), in the order of the questions.
pub fn shown(cells: &[Vec<Cell>]) -> Shown {
    let measured = |m: usize| cells.iter().any(|row| row[m].estimate.is_some());
    let namespace = METRICS
        .iter()
        .position(|m| m.column == "tcp_mem_ns_peak_sender_mib")
        .is_some_and(measured);
    let mut metrics: Vec<usize> = Vec::new();
    let mut left_out = Vec::new();
    for (i, m) in METRICS.iter().enumerate().filter(|(_, m)| m.compared) {
        if !measured(i) {
            left_out.push(format!(
                "{}: not measured; {}.",
                m.title,
                measured_by(m.column)
            ));
        } else if namespace && m.column == "tcp_mem_peak_sender_mib" {
            left_out.push(format!(
                "{}: left out; it counts every socket of the host, and the sender's own namespace sum above is the setting's effect.",
                m.title
            ));
        } else {
            metrics.push(i);
        }
    }
    metrics.sort_by_key(|&i| question(&METRICS[i]));
    Shown { metrics, left_out }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::stats::Estimate;

    fn cells(measured: &[&str]) -> Vec<Vec<Cell>> {
        let row = METRICS
            .iter()
            .map(|m| Cell {
                estimate: measured
                    .contains(&m.column)
                    .then(|| Estimate::of(&[1.0, 2.0], m.range()).unwrap()),
                change: None,
                workload_differs: None,
                from_zero: false,
            })
            .collect();
        vec![row]
    }

    #[test]
    fn unmeasured_figures_are_left_out_with_the_option_that_measures_them() {
        let goodput = crate::verdicts::recommend::goodput().column;
        let shown = shown(&cells(&[goodput, "slow_queued_mean_mib"]));
        let columns: Vec<&str> = shown.metrics.iter().map(|&i| METRICS[i].column).collect();
        assert_eq!(columns, ["slow_queued_mean_mib", goodput]);
        let markers = shown
            .left_out
            .iter()
            .find(|l| l.starts_with("Median marker latency"))
            .expect("a line for the markers");
        assert!(markers.contains("--marker-every"), "{markers}");
    }

    #[test]
    fn host_wide_memory_gives_way_to_the_namespace_sum() {
        let both = ["tcp_mem_peak_sender_mib", "tcp_mem_ns_peak_sender_mib"];
        let shown_both = shown(&cells(&both));
        let columns: Vec<&str> = shown_both
            .metrics
            .iter()
            .map(|&i| METRICS[i].column)
            .collect();
        assert_eq!(columns, ["tcp_mem_ns_peak_sender_mib"]);
        assert!(shown_both
            .left_out
            .iter()
            .any(|l| l.contains("every socket of the host")));
        let only_host = shown(&cells(&both[..1]));
        assert_eq!(
            only_host
                .metrics
                .iter()
                .map(|&i| METRICS[i].column)
                .collect::<Vec<_>>(),
            ["tcp_mem_peak_sender_mib"]
        );
    }
}

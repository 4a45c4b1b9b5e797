//! Whether a run's hosts, not the setting under test, set its figures: a host that dropped
//! packets below TCP (its egress qdisc full, its softnet backlog full) or kept a CPU
//! saturated for a sustained part of the run measures the host. The sibling of
//! [`crate::run::starvation`] (an end the scheduler kept waiting), judged from `run.json`'s
//! `sampling`, which both ends' `host.csv` rows give. `/proc/stat` is the whole machine's:
//! in the lab the busiest CPU may be the emulator's (`oscil-link` runs on the same host),
//! which then counts too.

use crate::run::sampling::{Sampling, SideSampling};

/// A CPU at least this busy over an interval ran out (a data path on one core, softirq
/// included, tops out just short of 100 as the tick's accounting rounds).
pub const CPU_SATURATED_PCT: f64 = 98.0;

/// The share of a side's intervals with a saturated CPU that makes the CPU the limit: a
/// quarter of the run, not a moment.
pub const CPU_SATURATED_SHARE_MIN: f64 = 0.25;

/// How the run's hosts limited it, in words; `None` when neither dropped packets nor kept
/// a CPU saturated (or the rows do not say).
pub fn limited(sampling: &Sampling) -> Option<String> {
    let said: Vec<String> = [("reader", &sampling.reader), ("sender", &sampling.sender)]
        .into_iter()
        .filter_map(|(side, s)| side_limited(s).map(|why| format!("the {side}'s host {why}")))
        .collect();
    (!said.is_empty()).then(|| {
        format!(
            "{}: limited by the host, not by the setting",
            said.join("; ")
        )
    })
}

fn side_limited(side: &SideSampling) -> Option<String> {
    let mut why = Vec::new();
    if let Some(dropped) = side.host_dropped_packets.filter(|&d| d > 0) {
        why.push(format!(
            "dropped {dropped} packets below TCP (qdisc_drops + softnet_dropped)"
        ));
    }
    if let Some(share) = side
        .cpu_saturated_share
        .filter(|&s| s >= CPU_SATURATED_SHARE_MIN)
    {
        why.push(format!(
            "ran a CPU at {CPU_SATURATED_PCT:.0}% busy or more in {:.0}% of its intervals (the limit is {:.0}%)",
            share * 100.0,
            CPU_SATURATED_SHARE_MIN * 100.0
        ));
    }
    (!why.is_empty()).then(|| why.join(" and "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(dropped: Option<u64>, saturated: Option<f64>) -> SideSampling {
        SideSampling {
            host_dropped_packets: dropped,
            cpu_saturated_share: saturated,
            ..SideSampling::default()
        }
    }

    #[test]
    fn drops_or_a_sustained_saturated_cpu_on_either_end_limit_the_run() {
        let both = |reader, sender| Sampling { reader, sender };
        // Not said (a run before the columns), or nothing dropped and a CPU saturated in
        // under a quarter of the intervals: the setting set the figures.
        assert_eq!(limited(&both(side(None, None), side(None, None))), None);
        assert_eq!(
            limited(&both(side(Some(0), Some(0.24)), side(Some(0), Some(0.0)))),
            None
        );
        let dropped = limited(&both(side(Some(0), None), side(Some(17), None))).unwrap();
        assert!(
            dropped.starts_with("the sender's host dropped 17 packets")
                && dropped.ends_with("limited by the host, not by the setting"),
            "{dropped}"
        );
        assert!(!dropped.contains("reader"), "{dropped}");
        let cpu = limited(&both(side(None, Some(0.25)), side(None, None))).unwrap();
        assert!(
            cpu.starts_with(
                "the reader's host ran a CPU at 98% busy or more in 25% of its intervals"
            ),
            "{cpu}"
        );
        let both_said = limited(&both(side(Some(3), Some(0.9)), side(None, None))).unwrap();
        assert!(
            both_said.contains("dropped 3 packets") && both_said.contains(" and ran a CPU"),
            "{both_said}"
        );
    }
}

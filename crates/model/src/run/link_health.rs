//! Whether the lab's link emulator held the path it was asked for: the one rule that says a
//! run's link was spoiled, from the emulator's own counters in the run's `link.json`
//! (oscil-link's `emulator` figures per direction, kept apart from what the link did). A
//! spoiled run keeps its picture and its rows, but no configuration counts it (the report's
//! `configs::group`), so no mean, verdict or recommendation rests on it; the
//! report and the lab's end table say so in one line each. netem's `link.json` (its qdisc
//! statistics) has no such counters: its runs are never judged spoiled. It lives with the
//! record so the lab, which links no report, marks `campaign.json` by the same rule.

use serde::Deserialize;

/// The most packets (both directions) that may leave the emulator more than 1 ms after
/// their time: 0.1%, the goal the emulator was built to (issue 13, docs/PERFORMANCE.md).
pub const LATE_SHARE_MAX: f64 = 0.001;

/// Lateness a path of this round trip absorbs: a run whose worst late packet was within
/// 2% of the path's RTT (issue 13's goal for the idle RTT) is on time however many were
/// over 1 ms; on a long path a single stall of a few ms is otherwise a large share of the
/// few packets a short run sends (`scripts/lab --quick`: 1 of 754 packets 1.0 ms late at
/// 466 ms).
pub const LATE_RTT_SHARE_MAX: f64 = 0.02;

/// The most packets (both directions) the emulator itself may lose (not read from TUN in
/// time, not written, not cut as asked): the same 0.1%; drops the link's queue or its loss
/// make are the path's, and never count.
pub const EMULATOR_DROP_SHARE_MAX: f64 = 0.001;

/// The file beside a lab run's directory that holds the emulated link's own record.
pub const LINK_JSON: &str = "link.json";

/// What a run's `link.json` says of the emulator, when it is oscil-link's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkHealth {
    /// The emulator process's CPU over its life.
    pub cpu_s: Option<f64>,
    /// Why the run's link was spoiled, in words; `None` when it held, or cannot tell.
    pub spoiled: Option<String>,
}

#[derive(Deserialize)]
struct Stats {
    cpu: Option<Cpu>,
    /// The path's delays (ms), each direction; absent in older files.
    one_way_delay_ms: Option<f64>,
    reverse_delay_ms: Option<f64>,
    a_to_b: Option<Direction>,
    b_to_a: Option<Direction>,
}

#[derive(Deserialize)]
struct Cpu {
    user_s: f64,
    system_s: f64,
}

#[derive(Deserialize)]
struct Direction {
    link: LinkCounts,
    emulator: EmulatorCounts,
}

#[derive(Deserialize)]
struct LinkCounts {
    packets_in: u64,
}

#[derive(Deserialize)]
struct EmulatorCounts {
    packets_late_over_1ms: u64,
    max_late_us: u64,
    tun_tx_dropped: u64,
    write_errors: u64,
    #[serde(default)]
    truncate_failures: u64,
}

/// What `link.json`'s text says of the emulator; netem's file, or one that is not
/// oscil-link's, has nothing to say.
pub fn judge_json(text: &[u8]) -> LinkHealth {
    match serde_json::from_slice::<Stats>(text) {
        Ok(stats) => judge(&stats),
        Err(_) => LinkHealth::default(),
    }
}

/// Both directions together, as docs/PERFORMANCE.md counts the emulator's lateness: the
/// sparse ACK direction alone would pass the line on a single stall of a few packets. Late
/// packets spoil the run only when the worst was late by more than the path absorbs
/// ([`LATE_RTT_SHARE_MAX`]).
fn judge(stats: &Stats) -> LinkHealth {
    let directions: Vec<&Direction> = [&stats.a_to_b, &stats.b_to_a]
        .into_iter()
        .flatten()
        .collect();
    let sum = |f: fn(&Direction) -> u64| directions.iter().map(|d| f(d)).sum::<u64>();
    let packets = sum(|d| d.link.packets_in);
    let late = sum(|d| d.emulator.packets_late_over_1ms);
    let worst_ms = directions
        .iter()
        .map(|d| d.emulator.max_late_us)
        .max()
        .unwrap_or(0) as f64
        / 1000.0;
    let (tun, writes, cuts) = (
        sum(|d| d.emulator.tun_tx_dropped),
        sum(|d| d.emulator.write_errors),
        sum(|d| d.emulator.truncate_failures),
    );
    let share = |n: u64| n as f64 / packets.max(1) as f64;
    let rtt_ms = stats.one_way_delay_ms.unwrap_or(0.0) + stats.reverse_delay_ms.unwrap_or(0.0);
    let absorbed_ms = LATE_RTT_SHARE_MAX * rtt_ms;
    let mut why = Vec::new();
    if share(late) > LATE_SHARE_MAX && worst_ms > absorbed_ms {
        why.push(format!(
            "{late} of {packets} packets more than 1 ms late ({:.2}%, the worst {worst_ms:.1} ms, over {}% of the {rtt_ms:.0} ms RTT; at most {}% may be)",
            100.0 * share(late),
            100.0 * LATE_RTT_SHARE_MAX,
            100.0 * LATE_SHARE_MAX,
        ));
    }
    let lost = tun + writes + cuts;
    if share(lost) > EMULATOR_DROP_SHARE_MAX {
        why.push(format!(
            "{lost} of {packets} packets lost by the emulator itself ({tun} not read from TUN in time, {writes} not written, {cuts} not cut; at most {}% may be)",
            100.0 * EMULATOR_DROP_SHARE_MAX,
        ));
    }
    LinkHealth {
        cpu_s: stats.cpu.as_ref().map(|c| c.user_s + c.system_s),
        spoiled: (!why.is_empty()).then(|| {
            format!(
                "the link emulator fell behind ({}, both directions): not the path asked for",
                why.join("; ")
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health(json: &str) -> LinkHealth {
        judge(&serde_json::from_str(json).unwrap())
    }

    fn direction(packets_in: u64, late: u64, tun_dropped: u64) -> String {
        format!(
            r#"{{"link": {{"packets_in": {packets_in}}}, "emulator": {{"packets_late_over_1ms": {late}, "max_late_us": 7695, "tun_tx_dropped": {tun_dropped}, "write_errors": 0, "truncate_failures": 0}}}}"#
        )
    }

    #[test]
    fn a_tenth_of_a_percent_late_or_lost_by_the_emulator_spoils_the_run() {
        let link = |a: String, b: String| {
            health(&format!(
                r#"{{"cpu": {{"user_s": 0.5, "system_s": 0.25}}, "a_to_b": {a}, "b_to_a": {b}}}"#
            ))
        };
        let held = link(direction(100_000, 100, 0), direction(50_000, 50, 150));
        assert_eq!(held.spoiled, None, "exactly 0.1% is still on time");
        assert_eq!(held.cpu_s, Some(0.75));
        // A stall that makes 3 of 2,935 ACKs late is under 0.1% of both directions.
        let one_stall = link(direction(5370, 2, 0), direction(2935, 3, 0));
        assert_eq!(one_stall.spoiled, None);
        let late = link(direction(5370, 26, 0), direction(3018, 28, 0));
        let why = late.spoiled.unwrap();
        assert!(
            why.contains("54 of 8388 packets more than 1 ms late (0.64%, the worst 7.7 ms, over 2% of the 0 ms RTT"),
            "{why}"
        );
        let lost = link(direction(100_000, 0, 0), direction(50_000, 0, 151));
        let why = lost.spoiled.unwrap();
        assert!(
            why.contains(
                "151 of 150000 packets lost by the emulator itself (151 not read from TUN in time"
            ),
            "{why}"
        );
    }

    #[test]
    fn lateness_within_two_percent_of_the_rtt_is_on_time() {
        let on = |one_way_ms: f64, worst_us: u64| {
            let d = |n: u64, late: u64| {
                format!(
                    r#"{{"link": {{"packets_in": {n}}}, "emulator": {{"packets_late_over_1ms": {late}, "max_late_us": {worst_us}, "tun_tx_dropped": 0, "write_errors": 0}}}}"#
                )
            };
            health(&format!(
                r#"{{"one_way_delay_ms": {one_way_ms}, "reverse_delay_ms": {one_way_ms}, "a_to_b": {}, "b_to_a": {}}}"#,
                d(400, 20),
                d(285, 4)
            ))
            .spoiled
        };
        // scripts/lab --quick's 1gbit x 466 ms run: 24 of 685 packets late, the worst
        // 6.3 ms, within 9.3 ms.
        assert_eq!(on(233.0, 6_300), None);
        let why = on(233.0, 9_400).unwrap();
        assert!(
            why.contains("the worst 9.4 ms, over 2% of the 466 ms RTT"),
            "{why}"
        );
        // At 20 ms the same stall is far past 0.4 ms.
        assert!(on(10.0, 6_300).is_some());
    }

    #[test]
    fn netem_and_runs_without_a_link_are_not_judged() {
        let netem =
            r#"{"emulator": "netem", "qdisc": {"sender": [{"kind": "netem", "drops": 900}]}}"#;
        assert_eq!(judge_json(netem.as_bytes()), LinkHealth::default());
    }
}

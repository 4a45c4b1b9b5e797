//! Each group of a run's flows (`--group`) on its own: its settings in words, its phase
//! totals from its own rows (the one definition of `oscil_figures`), what TCP delivered to
//! each of its flows per span (for Jain's index across flows), and its goodput and not-sent
//! bytes per tick (the picture with the groups overlaid). Pure, like the rest of loading;
//! and its receive queues' memory per tick; a run of one group has none, so its report is what it was before groups.

use oscil_figures::{PhaseFigures, RunPhases};
use oscil_model::files::rows::ReaderSample;
use oscil_model::group::{group_by_flow, FlowGroup, Reading};
use oscil_model::pattern::{span_of_sample, PhaseSpan};
use oscil_rundir::Run;

use crate::human;
use crate::load::series;

/// One group of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunGroup {
    /// The group's own settings in words: `lowat 128 KiB, bbr`, or `default`.
    pub name: String,
    pub flows: u32,
    /// The group's rows alone: reader and sender rows of its flows, its markers. The
    /// namespace's memory and the idle probe belong to no group and are not in it.
    pub phases: RunPhases,
    /// Per flow of the group, in flow order, the bytes TCP delivered in each span of the
    /// schedule (the spans of `phases`).
    pub flow_delivered_bytes: Vec<Vec<u64>>,
    /// What TCP delivered to the group's flows per second, summed, per tick (bit/s).
    pub goodput_bps: Vec<(f64, f64)>,
    /// The group's not-sent bytes summed over its flows, per tick.
    pub notsent_bytes: Vec<(f64, f64)>,
    /// The reader's receive-queue memory (`rmem_alloc`) summed over the group's flows at
    /// each tick, per span of `phases`: the group's socket memory on the receiving side.
    pub rmem_by_span: Vec<TickStats>,
}

/// Mean and peak of a per-tick sum over some ticks, mergeable across spans and runs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TickStats {
    pub sum: f64,
    pub ticks: u64,
    pub peak: f64,
}

impl TickStats {
    pub fn merge(&mut self, other: &TickStats) {
        self.sum += other.sum;
        self.ticks += other.ticks;
        self.peak = self.peak.max(other.peak);
    }

    pub fn mean(&self) -> Option<f64> {
        (self.ticks > 0).then(|| self.sum / self.ticks as f64)
    }

    pub fn peak(&self) -> Option<f64> {
        (self.ticks > 0).then_some(self.peak)
    }
}

/// Each tick's value of `ticks` in the span of `schedule` its sample belongs to (the one
/// rule of `oscil_figures`, `pattern::span_of_sample`).
fn by_span(ticks: &[series::Tick], schedule: &[PhaseSpan], interval_s: f64) -> Vec<TickStats> {
    let mut spans = vec![TickStats::default(); schedule.len()];
    for tick in ticks {
        if let Some(i) = span_of_sample(schedule, tick.t_s, interval_s) {
            spans[i].merge(&TickStats {
                sum: tick.sum,
                ticks: 1,
                peak: tick.sum,
            });
        }
    }
    spans
}

/// The run's groups, each from its own rows; none for a run of one group. `interval_s`
/// and `end_s` as the run's summary takes them.
pub fn of_run(run: &Run, interval_s: f64, end_s: f64) -> Vec<RunGroup> {
    let groups = run.meta.config.flow_groups();
    if groups.len() < 2 {
        return Vec::new();
    }
    let by_flow = group_by_flow(&groups);
    // A row's group: its `group` column, else (a row of a daemon before groups) its
    // flow's place in the groups' order.
    let of = |group: Option<u32>, flow: u32| group.or_else(|| by_flow.get(flow as usize).copied());
    let schedule = &run.meta.schedule;
    let mut per_flow = delivered_per_flow(run, by_flow.len(), interval_s, end_s).into_iter();
    let names = names(&groups);
    let mut first_flow = 0u32;
    groups
        .iter()
        .zip(0u32..)
        .map(|(group, index)| {
            let flows = first_flow..first_flow.saturating_add(group.flows);
            first_flow = flows.end;
            let reader: Vec<_> = run
                .reader
                .iter()
                .filter(|r| of(r.group, r.flow) == Some(index))
                .collect();
            let sender: Vec<_> = run
                .sender
                .iter()
                .filter(|r| of(r.group, r.flow) == Some(index))
                .collect();
            let mut figures = PhaseFigures::new(schedule, interval_s);
            reader.iter().for_each(|r| figures.reader(r));
            sender.iter().for_each(|r| figures.sender(r));
            run.markers
                .iter()
                .filter(|m| flows.contains(&m.flow))
                .for_each(|m| figures.marker(m));
            let rate = |r: &&ReaderSample| {
                let bytes = r.delivered_bytes?;
                Some(bytes as f64 * 8.0 / r.span_or(interval_s))
            };
            let sums =
                |ticks: Vec<series::Tick>| ticks.into_iter().map(|t| (t.t_s, t.sum)).collect();
            RunGroup {
                name: names[index as usize].clone(),
                flows: group.flows,
                phases: figures.finish(end_s),
                flow_delivered_bytes: per_flow.by_ref().take(group.flows as usize).collect(),
                goodput_bps: sums(series::ticks(&reader, interval_s, |r| r.t_s, rate)),
                notsent_bytes: sums(series::ticks(
                    &sender,
                    interval_s,
                    |r| r.t_s,
                    |r| r.notsent_bytes.map(f64::from),
                )),
                rmem_by_span: by_span(
                    &series::ticks(
                        &reader,
                        interval_s,
                        |r| r.t_s,
                        |r| Some(f64::from(r.rmem_alloc)),
                    ),
                    schedule,
                    interval_s,
                ),
            }
        })
        .collect()
}

/// Each of the run's first `flows` flows' delivered bytes per span, in one pass over the
/// rows.
fn delivered_per_flow(run: &Run, flows: usize, interval_s: f64, end_s: f64) -> Vec<Vec<u64>> {
    let schedule = &run.meta.schedule;
    let mut per_flow: Vec<PhaseFigures> = (0..flows)
        .map(|_| PhaseFigures::new(schedule, interval_s))
        .collect();
    for row in &run.reader {
        if let Some(figures) = per_flow.get_mut(row.flow as usize) {
            figures.reader(row);
        }
    }
    per_flow
        .into_iter()
        .map(|figures| {
            let spans = figures.finish(end_s).spans;
            spans
                .iter()
                .map(|s| s.totals.bytes_delivered.unwrap_or(0))
                .collect()
        })
        .collect()
}

/// Each group's settings in words, only those that differ between the run's groups:
/// `lowat 128 KiB` beside `lowat default`, `cubic` beside `bbr`; `group N` (from 1) for
/// groups that differ in nothing but their place.
pub fn names(groups: &[FlowGroup]) -> Vec<String> {
    let parts: Vec<Vec<String>> = groups.iter().map(parts).collect();
    let differs = |k: usize| parts.iter().any(|p| p[k] != parts[0][k]);
    parts
        .iter()
        .zip(1..)
        .map(|(own, number)| {
            let shown: Vec<&str> = (0..own.len())
                .filter(|&k| differs(k) && !own[k].is_empty())
                .map(|k| own[k].as_str())
                .collect();
            match shown.is_empty() {
                true => format!("group {number}"),
                false => shown.join(", "),
            }
        })
        .collect()
}

/// Every setting of a group in words, in a fixed order (defaults said as defaults), so
/// two groups' parts compare one by one; empty where it does not apply.
fn parts(group: &FlowGroup) -> Vec<String> {
    let options = &group.sender;
    let size = |bytes: u32| human::size(f64::from(bytes));
    vec![
        match options.notsent_lowat_bytes.filter(|&b| b != 0) {
            Some(bytes) => format!("lowat {}", size(bytes)),
            None => "lowat default".into(),
        },
        options
            .sndbuf_bytes
            .map_or("sndbuf autotuned".into(), |b| format!("sndbuf {}", size(b))),
        options
            .congestion
            .as_ref()
            .filter(|c| !c.is_empty())
            .map_or("default congestion control".into(), |cc| {
                oscil_model::text::escape_stored(cc)
            }),
        options.max_pacing_rate_bps.map_or("unpaced".into(), |bps| {
            format!("paced {}", human::rate(bps as f64))
        }),
        format!("{} writer", group.write_mode),
        group.write_size_bytes.map_or("default writes".into(), |b| {
            format!("writes of {}", size(b))
        }),
        format!("{} reader", group.pattern),
        match (group.pattern, group.slow_rate_bps) {
            (Reading::FullSpeed, _) => String::new(),
            (Reading::Oscillating, Some(bps)) => format!("slow {}", human::rate(bps as f64)),
            (Reading::Oscillating, None) => format!("slow at {} of its peak", group.fraction),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use oscil_model::pattern::Fraction;
    use oscil_model::socket::{SocketOptions, WriteMode};

    fn group(sender: SocketOptions, pattern: Reading) -> FlowGroup {
        FlowGroup {
            flows: 4,
            sender,
            write_size_bytes: Some(262_144),
            write_mode: WriteMode::default(),
            pattern,
            fraction: Fraction::CLOUDFLARE,
            slow_rate_bps: Some(2_500_000),
        }
    }

    fn options(lowat: Option<u32>, congestion: &str) -> SocketOptions {
        SocketOptions {
            notsent_lowat_bytes: lowat,
            congestion: Some(congestion.into()),
            ..SocketOptions::default()
        }
    }

    #[test]
    fn receive_queues_count_in_the_span_of_their_sample() {
        let span = |cycle, phase, start_s, end_s| PhaseSpan {
            cycle,
            phase,
            start_s,
            end_s,
        };
        let schedule = [
            span(1, oscil_model::files::rows::Phase::Fast, 0.0, 1.0),
            span(1, oscil_model::files::rows::Phase::Slow, 1.0, 2.0),
        ];
        let tick = |t_s, sum| series::Tick {
            t_s,
            sum,
            min: 0.0,
            p10: 0.0,
            median: 0.0,
            p90: 0.0,
            max: 0.0,
            count: 1,
        };
        // The sample at 1.0 s closes the interval 0.5-1.0 s: the fast phase's.
        let ticks = [
            tick(0.5, 100.0),
            tick(1.0, 300.0),
            tick(1.5, 10.0),
            tick(2.0, 30.0),
        ];
        let spans = by_span(&ticks, &schedule, 0.5);
        assert_eq!(
            (spans[0].mean(), spans[0].peak()),
            (Some(200.0), Some(300.0))
        );
        assert_eq!((spans[1].mean(), spans[1].peak()), (Some(20.0), Some(30.0)));
        let mut both = spans[0];
        both.merge(&spans[1]);
        assert_eq!((both.mean(), both.peak()), (Some(110.0), Some(300.0)));
        assert_eq!(TickStats::default().mean(), None);
    }

    #[test]
    fn groups_are_named_by_what_sets_them_apart() {
        let lowat = group(options(Some(131_072), "cubic"), Reading::Oscillating);
        let plain = group(options(None, "cubic"), Reading::Oscillating);
        assert_eq!(
            names(&[lowat.clone(), plain.clone()]),
            ["lowat 128 KiB", "lowat default"]
        );
        let bbr = group(options(None, "bbr"), Reading::FullSpeed);
        assert_eq!(
            names(&[plain.clone(), bbr]),
            [
                "cubic, oscillating reader, slow 2.5 Mbit/s",
                "bbr, full-speed reader"
            ]
        );
        assert_eq!(names(&[plain.clone(), plain]), ["group 1", "group 2"]);
    }
}

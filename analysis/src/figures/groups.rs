//! The figures of each group of flows (`--group`) of a configuration on its one
//! bottleneck: its share of what TCP delivered (and of the path's rate where the lab set
//! it), Jain's fairness index across groups and across flows, its slow-phase queued and
//! not-sent bytes, send-queue residence, marker latency and what held it back. A group's
//! totals are its runs' windows merged (sums add, peaks take the larger, histograms merge),
//! so a configuration of several runs has one row per group.

use oscil_figures::{LimitedBy, Totals};
use oscil_model::files::rows::Phase;

use crate::load::configs::Configuration;
use crate::load::groups::TickStats;
use crate::load::summary::{RunSummary, Scope};

/// One group of one configuration, over the report's scope.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupFigures {
    /// The group's number in the session (`reader.csv` `group`), from 0.
    pub index: usize,
    /// Its own settings in words (`load::groups::settings_text`).
    pub name: String,
    pub flows: u32,
    pub fast: Totals,
    pub slow: Totals,
    /// Share of what TCP delivered to every group's flows, 0 to 1.
    pub delivered_share: Option<f64>,
    /// Its goodput over the path's rate, 0 to 1; `None` where the path's rate is not known.
    pub path_share: Option<f64>,
    /// The reader's receive-queue memory of its flows, summed per tick, over the slow
    /// phases' ticks.
    pub slow_rmem: TickStats,
}

impl GroupFigures {
    /// Bytes TCP delivered to the group's flows in both phases.
    pub fn delivered_bytes(&self) -> u64 {
        self.both().bytes_delivered.unwrap_or(0)
    }

    /// Both phases together.
    pub fn both(&self) -> Totals {
        let mut both = self.fast.clone();
        both.merge(&self.slow);
        both
    }

    /// What held the group's flows back over both phases.
    pub fn limited_by(&self) -> Option<LimitedBy> {
        self.both().limited_by
    }

    /// What held the group back most of its flow-time: `network` (cwnd, pacing), `rwnd`,
    /// `sndbuf` or `application` (the writer had nothing queued).
    pub fn limited_most(&self) -> Option<&'static str> {
        let l = self.limited_by()?;
        [
            ("network", l.network_share()),
            ("rwnd", l.rwnd_share()),
            ("sndbuf", l.sndbuf_share()),
            ("application", l.application_share()),
        ]
        .into_iter()
        .filter_map(|(name, share)| Some((name, share?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(name, _)| name)
    }
}

/// The groups of one configuration, and how fairly they shared.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigGroups {
    /// Index into the configurations.
    pub config: usize,
    pub runs: usize,
    pub groups: Vec<GroupFigures>,
    /// Bytes TCP delivered to every flow of the configuration's runs over the scope.
    pub delivered_bytes: u64,
    /// Jain's index over each group's goodput per flow (groups of unequal size compared
    /// per flow, so four flows against one is not unfair by itself).
    pub jain_groups: Option<f64>,
    /// Jain's index over every flow's delivered bytes.
    pub jain_flows: Option<f64>,
}

/// Jain's fairness index of `values`: (Σx)² / (n·Σx²), 1 when all are equal, 1/n when
/// one takes everything; `None` for no values or all zero.
pub fn jain_index(values: &[f64]) -> Option<f64> {
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|v| v * v).sum();
    (squares > 0.0).then(|| sum * sum / (values.len() as f64 * squares))
}

/// The group figures of every configuration whose runs had several groups.
pub fn of_configs(
    summaries: &[RunSummary],
    configs: &[Configuration],
    scope: Scope,
) -> Vec<ConfigGroups> {
    configs
        .iter()
        .enumerate()
        .filter_map(|(i, c)| of_config(summaries, i, c, scope))
        .collect()
}

/// One configuration's groups, the first run's groups naming them; `None` without groups.
fn of_config(
    summaries: &[RunSummary],
    index: usize,
    config: &Configuration,
    scope: Scope,
) -> Option<ConfigGroups> {
    let runs: Vec<&RunSummary> = config.runs.iter().map(|&r| &summaries[r]).collect();
    let first = runs.first().filter(|r| !r.groups.is_empty())?;
    let mut groups: Vec<GroupFigures> = Vec::new();
    let mut flow_bytes: Vec<f64> = Vec::new();
    for (g, named) in first.groups.iter().enumerate() {
        let mut fast = Totals::default();
        let mut slow = Totals::default();
        let mut slow_rmem = TickStats::default();
        let mut flows = vec![0.0; named.flows as usize];
        for run in &runs {
            let Some(group) = run.groups.get(g).filter(|x| x.name == named.name) else {
                continue;
            };
            let take = scope.takes(run.cycles());
            fast.merge(&group.phases.merged(Phase::Fast, take));
            slow.merge(&group.phases.merged(Phase::Slow, take));
            let spans = &group.phases.spans;
            let slow_spans = spans.iter().zip(&group.rmem_by_span);
            for (_, stats) in
                slow_spans.filter(|(s, _)| s.span.phase == Phase::Slow && take(s.span.cycle))
            {
                slow_rmem.merge(stats);
            }
            for (sum, per_span) in flows.iter_mut().zip(&group.flow_delivered_bytes) {
                let taken = spans
                    .iter()
                    .zip(per_span)
                    .filter(|(s, _)| take(s.span.cycle));
                *sum += taken.map(|(_, &bytes)| bytes as f64).sum::<f64>();
            }
        }
        flow_bytes.extend(&flows);
        groups.push(GroupFigures {
            index: g,
            name: named.name.clone(),
            flows: named.flows,
            fast,
            slow,
            delivered_share: None,
            path_share: None,
            slow_rmem,
        });
    }
    let delivered_bytes: u64 = groups.iter().map(GroupFigures::delivered_bytes).sum();
    let path_rate_bps = first.settings.path_rate_bps;
    for group in &mut groups {
        let bytes = group.delivered_bytes() as f64;
        group.delivered_share = (delivered_bytes > 0).then(|| bytes / delivered_bytes as f64);
        let goodput = group.both().net_goodput_bps();
        group.path_share = goodput.zip(path_rate_bps).map(|(bps, path)| bps / path);
    }
    let per_flow: Vec<f64> = groups
        .iter()
        .map(|g| g.delivered_bytes() as f64 / f64::from(g.flows.max(1)))
        .collect();
    Some(ConfigGroups {
        config: index,
        runs: runs.len(),
        jain_groups: jain_index(&per_flow),
        jain_flows: jain_index(&flow_bytes),
        delivered_bytes,
        groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::configs::tests::run;
    use crate::load::groups::RunGroup;
    use oscil_figures::{RunPhases, SpanTotals};
    use oscil_model::pattern::PhaseSpan;

    /// A group of one fast span (cycle 1, 0-10 s) whose flows TCP delivered `flows` bytes.
    fn group(name: &str, flows: &[u64]) -> RunGroup {
        let totals = Totals {
            seconds: 10.0,
            bytes_delivered: Some(flows.iter().sum()),
            ..Totals::default()
        };
        let span = PhaseSpan {
            cycle: 1,
            phase: Phase::Fast,
            start_s: 0.0,
            end_s: 10.0,
        };
        RunGroup {
            name: name.into(),
            flows: flows.len() as u32,
            phases: RunPhases {
                spans: vec![SpanTotals { span, totals }],
            },
            flow_delivered_bytes: flows.iter().map(|&b| vec![b]).collect(),
            goodput_bps: Vec::new(),
            notsent_bytes: Vec::new(),
            rmem_by_span: vec![TickStats::default()],
        }
    }

    #[test]
    fn two_runs_of_two_groups_share_what_tcp_delivered() {
        let mut runs = [run("a", None, Some(100.0)), run("b", None, Some(100.0))];
        for r in &mut runs {
            r.groups = vec![
                group("lowat 128 KiB", &[300, 100]),
                group("lowat default", &[200, 200]),
            ];
            r.settings.path_rate_bps = Some(1000.0);
        }
        let configs = crate::load::configs::group(&runs, None).unwrap();
        let [config] = &of_configs(&runs, &configs, Scope::Whole)[..] else {
            panic!("one configuration");
        };
        assert_eq!(config.runs, 2);
        // Each group 800 bytes over the two runs, of 1600.
        assert_eq!(config.delivered_bytes, 1600);
        let shares: Vec<_> = config.groups.iter().map(|g| g.delivered_share).collect();
        assert_eq!(shares, [Some(0.5), Some(0.5)]);
        // 800 bytes in 20 s is 320 bit/s, of a 1000 bit/s path.
        assert_eq!(config.groups[0].path_share, Some(0.32));
        // 200 bytes per flow in each group: equal.
        assert_eq!(config.jain_groups, Some(1.0));
        // Flows 600, 200, 400, 400: 1600² / (4 · (360000 + 40000 + 160000 + 160000)) = 8/9.
        let jain = config.jain_flows.unwrap();
        assert!((jain - 8.0 / 9.0).abs() < 1e-12, "{jain}");
        // A run of one group has no groups.
        let plain = [run("c", None, Some(100.0))];
        let configs = crate::load::configs::group(&plain, None).unwrap();
        assert!(of_configs(&plain, &configs, Scope::Whole).is_empty());
    }

    #[test]
    fn jain_is_one_for_equal_shares_and_one_over_n_for_one_taker() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0, 5.0]), Some(1.0));
        assert_eq!(jain_index(&[8.0, 0.0, 0.0, 0.0]), Some(0.25));
        // (3 + 1)² / (2 · (9 + 1)) = 16 / 20
        assert_eq!(jain_index(&[3.0, 1.0]), Some(0.8));
        // (10 + 20 + 30)² / (3 · (100 + 400 + 900)) = 3600 / 4200 = 6 / 7
        let index = jain_index(&[10.0, 20.0, 30.0]).unwrap();
        assert!((index - 6.0 / 7.0).abs() < 1e-12, "{index}");
        assert_eq!(jain_index(&[]), None);
        assert_eq!(jain_index(&[0.0, 0.0]), None);
    }
}

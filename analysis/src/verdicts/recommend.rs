//! The recommendation: per path, the configuration with the least sender memory whose
//! steady fast-phase goodput is not clearly below the best configuration's by more than a
//! tolerance, and whose memory saving over the default is clear at this number of runs.
//! With too little evidence it recommends nothing, and says why.
//!
//! Goodput intervals that overlap the best's are not thin evidence: "not clearly below" is
//! what lets a smaller setting win. Thin evidence is one run (no interval at all), or no
//! configuration whose saving over the default is clear.

use crate::figures::metrics::{metric, Metric};
use crate::figures::stats::{Change, Estimate};
use crate::load::configs::Configuration;
use crate::load::summary::{RunSummary, Scope};
use crate::verdicts::verdict::{self, Intervals};

/// Why a configuration was or was not chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum Standing {
    Chosen,
    /// Eligible: goodput not clearly below the best, memory saving clear.
    Eligible,
    OneRun,
    /// The default configuration every saving is measured against.
    Default,
    GoodputBelowBest(Change),
    /// Held back by a buffer (receive window plus send buffer, fast phases) more than the
    /// default was, by over [`MORE_LIMITED_POINTS`]: mean shares, 0 to 1.
    MoreLimited {
        share: f64,
        default_share: f64,
    },
    SavingNotClear(Option<Change>),
    NoFigures,
}

/// One path's recommendation.
#[derive(Debug, Clone)]
pub struct PathChoice {
    /// The path in words.
    pub path: String,
    /// The configurations' `path_key` this choice is for.
    pub path_key: String,
    pub default: Option<usize>,
    pub best: Option<usize>,
    pub chosen: Option<usize>,
    /// Config index and its standing, for every configuration on the path.
    pub standings: Vec<(usize, Standing)>,
    /// Why nothing was chosen.
    pub nothing_because: Option<String>,
}

/// How much more of the fast phases (percentage points of the flows' time) a setting may
/// spend held back by a buffer than the default before it cannot be recommended: it
/// would trade the default's queue for a buffer that binds.
pub const MORE_LIMITED_POINTS: f64 = 10.0;

/// The fast phases' shares of the flows' time held back by the receive window and by
/// the send buffer.
pub(crate) fn buffer_limits() -> [&'static Metric; 2] {
    [
        metric("fast_rwnd_limited_pct"),
        metric("fast_sndbuf_limited_pct"),
    ]
}

pub(crate) fn goodput() -> &'static Metric {
    metric("net_goodput_fast_mbps")
}

pub(crate) fn queued() -> &'static Metric {
    metric("slow_queued_mean_mib")
}

pub(crate) fn memory() -> &'static Metric {
    metric("tcp_mem_peak_sender_mib")
}

pub(crate) struct Evidence<'a> {
    pub(crate) summaries: &'a [RunSummary],
    pub(crate) configs: &'a [Configuration],
    pub(crate) scope: Scope,
}

impl Evidence<'_> {
    /// Whether the figures have intervals, or one run each says they have none, once.
    pub(crate) fn intervals(&self) -> Intervals {
        Intervals::of(self.configs)
    }

    pub(crate) fn estimate(&self, config: usize, m: &Metric) -> Option<Estimate> {
        Estimate::of(
            &verdict::values(self.summaries, &self.configs[config], m, self.scope),
            m.range(),
        )
    }

    pub(crate) fn change(&self, config: usize, against: usize, m: &Metric) -> Option<Change> {
        Change::between(&self.estimate(config, m)?, &self.estimate(against, m)?)
    }

    fn standing(&self, i: usize, best: usize, default: usize, tolerance: f64) -> Standing {
        if i == default {
            return Standing::Default;
        }
        let Some(e) = self.estimate(i, goodput()) else {
            return Standing::NoFigures;
        };
        if e.n < 2 {
            return Standing::OneRun;
        }
        if let Some(change) = self.change(i, best, goodput()) {
            if change
                .ci_percent
                .is_ok_and(|(_, hi)| hi < -tolerance * 100.0)
            {
                return Standing::GoodputBelowBest(change);
            }
        }
        if let (Some(share), Some(default_share)) =
            (self.buffer_share(i), self.buffer_share(default))
        {
            if share > default_share + MORE_LIMITED_POINTS / 100.0 {
                return Standing::MoreLimited {
                    share,
                    default_share,
                };
            }
        }
        let saving = self.change(i, default, queued());
        match saving {
            Some(c) if c.is_clear() && c.percent < 0.0 => Standing::Eligible,
            other => Standing::SavingNotClear(other),
        }
    }

    /// The mean share of the fast phases a configuration's flows were held back by either
    /// buffer; `None` for runs without the chrono columns.
    fn buffer_share(&self, i: usize) -> Option<f64> {
        buffer_limits()
            .iter()
            .map(|m| self.estimate(i, m).map(|e| e.mean))
            .sum()
    }

    /// The change of `config` against `against` in words; `itself` where they are one.
    pub(crate) fn versus(&self, config: usize, against: Option<usize>, m: &Metric) -> String {
        match against {
            Some(a) if a == config => "itself".into(),
            Some(a) => self.change(config, a, m).map_or("-".into(), |c| {
                verdict::change_text(m, &c, self.intervals())
            }),
            None => "-".into(),
        }
    }

    /// Memory to rank eligible configurations by: queued mean, then peak TCP memory.
    fn memory_rank(&self, i: usize) -> (f64, f64) {
        let mean = |m| self.estimate(i, m).map_or(f64::INFINITY, |e| e.mean);
        (mean(queued()), mean(memory()))
    }
}

/// The recommendation for every path, in order of first appearance.
pub fn recommend(
    summaries: &[RunSummary],
    configs: &[Configuration],
    scope: Scope,
    tolerance: f64,
) -> Vec<PathChoice> {
    let evidence = Evidence {
        summaries,
        configs,
        scope,
    };
    let mut paths: Vec<&str> = Vec::new();
    for c in configs {
        if !paths.contains(&c.path_key.as_str()) {
            paths.push(&c.path_key);
        }
    }
    paths
        .into_iter()
        .map(|path| choose(&evidence, path, tolerance))
        .collect()
}

fn choose(evidence: &Evidence, path: &str, tolerance: f64) -> PathChoice {
    let on_path: Vec<usize> = (0..evidence.configs.len())
        .filter(|&i| evidence.configs[i].path_key == path)
        .collect();
    let default = on_path.iter().copied().find(|&i| {
        evidence.configs[i]
            .settings(evidence.summaries)
            .lowat
            .is_none()
    });
    let best = on_path
        .iter()
        .copied()
        .filter_map(|i| Some((i, evidence.estimate(i, goodput())?.mean)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i);
    let first = &evidence.summaries[evidence.configs[on_path[0]].runs[0]];
    let path_text = first
        .settings
        .path_text()
        .or_else(|| crate::load::summary::pair_path_text(path, first.rtt_min_ms()))
        .unwrap_or_else(|| crate::load::paths::measured_text(first));
    let mut choice = PathChoice {
        path: path_text,
        path_key: path.to_string(),
        default,
        best,
        chosen: None,
        standings: Vec::new(),
        nothing_because: None,
    };
    let (Some(best), Some(default)) = (best, default) else {
        choice.nothing_because = Some(
            "no configuration with the kernel's default lowat on this path to measure a saving against"
                .into(),
        );
        return choice;
    };
    choice.standings = on_path
        .iter()
        .map(|&i| (i, evidence.standing(i, best, default, tolerance)))
        .collect();
    let chosen = choice
        .standings
        .iter()
        .filter(|(_, s)| *s == Standing::Eligible)
        .map(|&(i, _)| i)
        .min_by(|&a, &b| {
            let (x, y) = (evidence.memory_rank(a), evidence.memory_rank(b));
            x.0.total_cmp(&y.0).then(x.1.total_cmp(&y.1))
        });
    match chosen {
        Some(i) => {
            choice.chosen = Some(i);
            for (j, s) in &mut choice.standings {
                if *j == i {
                    *s = Standing::Chosen;
                }
            }
        }
        None => {
            let all_single = on_path.iter().all(|&i| evidence.configs[i].runs.len() < 2);
            choice.nothing_because = Some(if all_single {
                "one run per configuration: no interval, so no saving can be told from noise".into()
            } else {
                "no configuration's memory saving over the default is clear at this number of runs (with goodput not clearly below the best)".into()
            });
        }
    }
    choice
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::configs::group;
    use crate::load::settings::{LowatSource, Settings};
    use crate::verdicts::recommendation_text;
    use oscil_figures::{LimitedBy, RunPhases, SpanTotals, Totals};
    use oscil_model::files::rows::Phase;
    use oscil_model::pattern::PhaseSpan;
    use oscil_model::sysctl::SysctlValue;

    /// A one-cycle run: 1 s fast in which TCP delivered (and the reader read)
    /// `goodput_bps`, 1 s slow with one sender pass of `queued` bytes.
    fn run(name: &str, lowat: Option<u64>, goodput_bps: f64, queued: u64) -> RunSummary {
        let span = |phase, start_s| PhaseSpan {
            cycle: 1,
            phase,
            start_s,
            end_s: start_s + 1.0,
        };
        let fast = Totals {
            seconds: 1.0,
            bytes_read: (goodput_bps / 8.0) as u64,
            bytes_delivered: Some((goodput_bps / 8.0) as u64),
            ..Totals::default()
        };
        let slow = Totals {
            seconds: 1.0,
            sender_passes: 1,
            queued_sum_bytes: queued,
            queued_peak_bytes: queued,
            ..Totals::default()
        };
        RunSummary {
            label: format!("{name}-{goodput_bps}-{queued}"),
            dir: name.into(),
            settings: Settings {
                flows: 1,
                lowat: lowat.map(|b| (b, LowatSource::Sysctl)),
                sndbuf_bytes: None,
                congestion: None,
                path_rtt_ms: Some(100.0),
                path_rate_bps: Some(1e8),
                full_speed: false,
                write_mode: Default::default(),
                lab_settings: Vec::new(),
                sender_tcp_wmem: Some(SysctlValue::Triple([4096, 16384, 4194304])),
                reader_tcp_rmem: Some(SysctlValue::Triple([4096, 131072, 6291456])),
                groups: Vec::new(),
            },
            partial: None,
            holes: None,
            link_spoiled: None,
            host_limited: None,
            duration_s: 2.0,
            phases: RunPhases {
                spans: vec![
                    SpanTotals {
                        span: span(Phase::Fast, 0.0),
                        totals: fast,
                    },
                    SpanTotals {
                        span: span(Phase::Slow, 1.0),
                        totals: slow,
                    },
                ],
            },
            sender_page_bytes: 4096.0,
            reader_page_bytes: 4096.0,
            run_facts: Default::default(),
            config_key: name.into(),
            path_key: "lab".into(),
            shared_namespace: false,
            campaign_label: Some(name.into()),
            repetition: None,
            not_given: Vec::new(),
            groups: Vec::new(),
        }
    }

    fn three(
        name: &str,
        lowat: Option<u64>,
        goodputs: [f64; 3],
        queued: [u64; 3],
    ) -> Vec<RunSummary> {
        (0..3)
            .map(|k| run(name, lowat, goodputs[k], queued[k]))
            .collect()
    }

    #[test]
    fn the_least_memory_not_clearly_slower_with_a_clear_saving_wins() {
        let mut runs = three("default", None, [100e6, 101e6, 99e6], [1000, 1020, 980]);
        // Noise in goodput overlapping the best's: that does not disqualify.
        runs.extend(three(
            "a",
            Some(131072),
            [97e6, 103e6, 100e6],
            [100, 110, 90],
        ));
        // Clearly slower by far more than 1%: out, however little memory it needs.
        runs.extend(three("b", Some(4096), [50e6, 51e6, 49e6], [10, 11, 9]));
        // Less memory on average, but too noisy to tell from the default's.
        runs.extend(three(
            "c",
            Some(16384),
            [100e6, 100e6, 100e6],
            [10, 1500, 40],
        ));
        let configs = group(&runs, None).unwrap();
        let choices = recommend(&runs, &configs, Scope::Steady, 0.01);
        assert_eq!(choices.len(), 1);
        let choice = &choices[0];
        let name = |i: usize| configs[i].name.as_str();
        assert_eq!(choice.chosen.map(name), Some("a"));
        let standing = |n: &str| {
            choice
                .standings
                .iter()
                .find(|(i, _)| name(*i) == n)
                .map(|(_, s)| s.clone())
                .unwrap()
        };
        assert!(matches!(standing("b"), Standing::GoodputBelowBest(_)));
        assert!(matches!(standing("c"), Standing::SavingNotClear(Some(_))));
        assert_eq!(standing("default"), Standing::Default);
        let conf =
            recommendation_text::sysctl_conf(&runs, &configs, choice, Scope::Steady).unwrap();
        assert!(
            conf.contains("\nnet.ipv4.tcp_notsent_lowat = 131072\n"),
            "{conf}"
        );
        assert!(
            conf.contains("\nnet.ipv4.tcp_wmem = 4096 16384 4194304\n"),
            "{conf}"
        );
        let md = recommendation_text::markdown(&runs, &configs, &choices, Scope::Steady, 0.01);
        assert!(md.contains("**Choice: a** (3 runs)"), "{md}");
        assert!(md.contains("lost: goodput clearly below the best"), "{md}");
    }

    /// The runs with their fast phase held back by the receive window and the send buffer
    /// these shares of its flow-time.
    fn limited(runs: Vec<RunSummary>, rwnd: f64, sndbuf: f64) -> Vec<RunSummary> {
        let us = |share: f64| (share * 1e6) as u64;
        runs.into_iter()
            .map(|mut r| {
                r.phases.spans[0].totals.limited_by = Some(LimitedBy {
                    flow_us: 1_000_000,
                    busy_us: 1_000_000,
                    rwnd_limited_us: us(rwnd),
                    sndbuf_limited_us: us(sndbuf),
                });
                r
            })
            .collect()
    }

    #[test]
    fn a_setting_that_makes_a_buffer_bind_is_never_chosen_and_the_binding_knob_is_named() {
        let default = three("default", None, [100e6, 101e6, 99e6], [1000, 1020, 980]);
        let mut runs = limited(default, 0.05, 0.0);
        // The least memory, but the send buffer holds its flows back 60% of the time.
        let tight = three("tight", Some(4096), [99e6, 101e6, 100e6], [10, 11, 9]);
        runs.extend(limited(tight, 0.05, 0.6));
        // A clear saving, held back a little more than the default: within the margin.
        let fair = three("fair", Some(131072), [99e6, 101e6, 100e6], [100, 110, 90]);
        runs.extend(limited(fair, 0.3, 0.0));
        let configs = group(&runs, None).unwrap();
        let choices = recommend(&runs, &configs, Scope::Steady, 0.01);
        let choice = &choices[0];
        let name = |i: usize| configs[i].name.as_str();
        assert_eq!(
            choice.chosen.map(name),
            None,
            "fair is 25 points over the default"
        );
        let tight_standing = choice
            .standings
            .iter()
            .find(|(i, _)| name(*i) == "tight")
            .map(|(_, s)| s.clone());
        assert!(
            matches!(tight_standing, Some(Standing::MoreLimited { share, default_share })
                if (share - 0.65).abs() < 1e-9 && (default_share - 0.05).abs() < 1e-9),
            "{tight_standing:?}"
        );

        let mut runs = limited(
            three("default", None, [100e6, 101e6, 99e6], [1000, 1020, 980]),
            0.25,
            0.0,
        );
        let fair = three("fair", Some(131072), [99e6, 101e6, 100e6], [100, 110, 90]);
        runs.extend(limited(fair, 0.3, 0.0));
        let configs = group(&runs, None).unwrap();
        let choices = recommend(&runs, &configs, Scope::Steady, 0.01);
        assert_eq!(
            choices[0].chosen.map(|i| configs[i].name.as_str()),
            Some("fair")
        );
        let md = recommendation_text::markdown(&runs, &configs, &choices, Scope::Steady, 0.01);
        assert!(
            md.contains("What limits the flows of fair: receive-window limited 30%"),
            "{md}"
        );
        assert!(
            md.contains("`tcp_rmem` max or `tcp_adv_win_scale` binds"),
            "{md}"
        );
    }

    #[test]
    fn without_a_default_nothing_is_recommended() {
        let runs = three("a", Some(131072), [97e6, 103e6, 100e6], [100, 110, 90]);
        let configs = group(&runs, None).unwrap();
        let choice = &recommend(&runs, &configs, Scope::Steady, 0.01)[0];
        assert_eq!(choice.chosen, None);
        assert!(choice
            .nothing_because
            .as_deref()
            .unwrap()
            .contains("default lowat"));
        let conf = recommendation_text::sysctl_conf(&runs, &configs, choice, Scope::Steady);
        assert!(conf.is_none());
    }
}

//! Each configuration's figures over its runs (mean, n, 95% interval), its change against
//! its baseline configuration (an interval for the ratio of the means, `stats::METHOD`),
//! and the verdict in words.

use crate::figures::metrics::{lower_bound, metric, Better, Metric, MBPS, METRICS};
use crate::figures::stats::{Change, Estimate, NoInterval};
use crate::human;
use crate::load::configs::Configuration;
use crate::load::summary::{RunSummary, Scope};
use oscil_model::pattern::{slow_rates_agree, SLOW_RATE_TOLERANCE};

/// One figure of one configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    /// None where no run has the figure.
    pub estimate: Option<Estimate>,
    /// Against the baseline configuration; none for the baseline itself or without one.
    pub change: Option<Change>,
    /// The slow rates (bit/s) of this configuration and its baseline when they differ by
    /// more than `SLOW_RATE_TOLERANCE`: the two ran different workloads.
    pub workload_differs: Option<(f64, f64)>,
    /// The baseline measured 0 in every run and this configuration more: no percentage.
    pub from_zero: bool,
}

/// For each configuration, one cell per entry of `METRICS`, over `scope`.
pub fn evaluate(
    summaries: &[RunSummary],
    configs: &[Configuration],
    scope: Scope,
) -> Vec<Vec<Cell>> {
    let estimates: Vec<Vec<Option<Estimate>>> = configs
        .iter()
        .map(|c| {
            METRICS
                .iter()
                .map(|m| Estimate::of(&values(summaries, c, m, scope), m.range()))
                .collect()
        })
        .collect();
    let slow = metric("slow_rate_mbps");
    configs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let workload_differs = c
                .baseline
                .filter(|&b| b != i)
                .and_then(|b| slow_rates_differ(summaries, &[c, &configs[b]], slow, scope));
            (0..METRICS.len())
                .map(|m| {
                    let estimate = estimates[i][m];
                    let base = c.baseline.filter(|&b| b != i).and_then(|b| estimates[b][m]);
                    let change = estimate
                        .zip(base)
                        .and_then(|(e, b)| Change::between(&e, &b));
                    Cell {
                        estimate,
                        change,
                        workload_differs,
                        from_zero: change.is_none() && base.is_some_and(|b| b.mean == 0.0),
                    }
                })
                .collect()
        })
        .collect()
}

/// The mean slow rates of two configurations when they do not agree
/// (`oscil_model::pattern::slow_rates_agree`); `None` when they do or one has none.
fn slow_rates_differ(
    summaries: &[RunSummary],
    pair: &[&Configuration; 2],
    slow: &Metric,
    scope: Scope,
) -> Option<(f64, f64)> {
    let mean = |c: &Configuration| {
        Estimate::of(&values(summaries, c, slow, scope), slow.range()).map(|e| e.mean)
    };
    let (ours, base) = (mean(pair[0])?, mean(pair[1])?);
    (!slow_rates_agree(&[ours, base])).then_some((ours, base))
}

/// The warning, in words, that a configuration and its baseline read their slow phases at
/// different rates: `(ours, baseline)` in bit/s.
pub fn workload_warning(rates_bps: (f64, f64)) -> String {
    let mbps = |bps: f64| MBPS.text(bps);
    format!(
        "WARNING: not one workload: the slow phases read at {} here and {} in the baseline, more than {:.0}% apart, so the difference is not the setting's alone",
        mbps(rates_bps.0),
        mbps(rates_bps.1),
        SLOW_RATE_TOLERANCE * 100.0
    )
}

/// Every configuration whose baseline ran another workload, as lines for the summary.
pub fn workload_warnings(configs: &[Configuration], cells: &[Vec<Cell>]) -> Vec<String> {
    configs
        .iter()
        .zip(cells)
        .filter_map(|(c, row)| {
            let rates = row.first()?.workload_differs?;
            Some(format!("{}: {}", c.name, workload_warning(rates)))
        })
        .collect()
}

/// What `≥` before a figure means.
pub const LOWER_BOUND_NOTE: &str = "≥: at least; some write or marker was still waiting when its run ended, and its wait so far counts as a lower bound";

/// `LOWER_BOUND_NOTE` with its full stop, where some configuration's figure among those
/// shown (`metrics`) carries a `≥`; none where none does (a legend for a sign nobody sees
/// misleads).
pub fn lower_bound_note(
    summaries: &[RunSummary],
    configs: &[Configuration],
    metrics: &[&Metric],
    scope: Scope,
) -> Option<String> {
    let any = configs.iter().any(|c| {
        metrics
            .iter()
            .any(|m| is_lower_bound(summaries, c, m, scope))
    });
    any.then(|| format!("{LOWER_BOUND_NOTE}."))
}

/// Whether a configuration's figure is only a lower bound: some run's is
/// (`metrics::lower_bound`: a wait still running when the run ended).
pub fn is_lower_bound(
    summaries: &[RunSummary],
    config: &Configuration,
    metric: &Metric,
    scope: Scope,
) -> bool {
    config
        .runs
        .iter()
        .any(|&r| lower_bound(metric, &summaries[r].window(scope)) == Some(true))
}

/// `estimate_text` of a configuration's figure, `≥` before it where it is only a lower
/// bound (`LOWER_BOUND_NOTE` says what that means, once per page or picture).
pub fn estimate_text_of(
    summaries: &[RunSummary],
    config: &Configuration,
    (metric, cell): (&Metric, &Cell),
    scope: Scope,
    intervals: Intervals,
) -> String {
    let text = estimate_text(metric, cell.estimate.as_ref(), intervals);
    if cell.estimate.is_some() && is_lower_bound(summaries, config, metric, scope) {
        format!("≥ {text}")
    } else {
        text
    }
}

/// Why a change has no interval when a side has one run.
const TOO_FEW_RUNS: &str = "too few runs for an interval";

/// Whether figures have intervals. With one run in every configuration none has: the
/// report says so once, beside its run count (`Intervals::once`), and shows each figure
/// plainly rather than followed by the same caveat (issue 37: twelve times on one page).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intervals {
    /// Some configuration has two runs or more: a figure without an interval says why.
    PerFigure,
    /// One run in every configuration: said once.
    NoneOneRunEach,
}

impl Intervals {
    pub fn of(configs: &[Configuration]) -> Self {
        match configs.iter().all(|c| c.runs.len() < 2) {
            true => Self::NoneOneRunEach,
            false => Self::PerFigure,
        }
    }

    /// The caveat said once beside the run count, where it holds for every figure.
    pub fn once(self) -> Option<String> {
        (self == Self::NoneOneRunEach).then(|| {
            format!("one run each: {TOO_FEW_RUNS}, so each figure is one run's and each change one run against another")
        })
    }

    /// Whether `why` is said once rather than after the figure.
    fn said_once(self, why: NoInterval) -> bool {
        self == Self::NoneOneRunEach && why == NoInterval::TooFewRuns
    }
}

/// The figure of each run of a configuration that has it.
pub fn values(
    summaries: &[RunSummary],
    config: &Configuration,
    metric: &Metric,
    scope: Scope,
) -> Vec<f64> {
    config
        .runs
        .iter()
        .filter_map(|&r| summaries[r].value(metric, scope))
        .collect()
}

/// `803.9 Mbit/s [790.1, 817.7]` over several runs, `803.9 Mbit/s (1 run: too few for an
/// interval)` over one, `803.9 Mbit/s` where `intervals` says that once.
pub fn estimate_text(metric: &Metric, estimate: Option<&Estimate>, intervals: Intervals) -> String {
    let Some(e) = estimate else {
        return "n/a".into();
    };
    match e.ci {
        Some((lo, hi)) => format!(
            "{} [{}, {}]",
            metric.unit.text(e.mean),
            metric.unit.number(lo),
            metric.unit.number(hi)
        ),
        None if intervals == Intervals::NoneOneRunEach => metric.unit.text(e.mean),
        None => format!(
            "{} (1 run: too few for an interval)",
            metric.unit.text(e.mean)
        ),
    }
}

fn percent(p: f64) -> String {
    human::change(p)
}

/// Why a change has no interval, in a few words.
fn no_interval_words(why: NoInterval) -> &'static str {
    match why {
        NoInterval::TooFewRuns => TOO_FEW_RUNS,
        NoInterval::NoisyBaseline => "no interval: a baseline too noisy to tell from zero",
        NoInterval::ZeroInBoth => "0 in both",
    }
}

/// The change in words: a clear change, or noise at this number of runs.
pub fn change_text(metric: &Metric, change: &Change, intervals: Intervals) -> String {
    let (lo, hi) = match change.ci_percent {
        Ok(ci) => ci,
        Err(NoInterval::ZeroInBoth) => return no_interval_words(NoInterval::ZeroInBoth).into(),
        Err(why) if intervals.said_once(why) => return percent(change.percent),
        Err(why) => {
            return format!(
                "{} ({}; more runs would tell)",
                percent(change.percent),
                no_interval_words(why)
            )
        }
    };
    let figures = format!(
        "{} [{}, {}]",
        percent(change.percent),
        percent(lo),
        percent(hi)
    );
    if !change.is_clear() {
        return format!("{figures}: no clear change; more runs would tell");
    }
    let direction = if change.percent > 0.0 {
        "higher"
    } else {
        "lower"
    };
    let judgement = match (metric.better, change.percent > 0.0) {
        (Better::Neither, _) => "",
        (Better::Higher, true) | (Better::Lower, false) => " (better)",
        _ => " (worse)",
    };
    format!("{figures}: clearly {direction}{judgement}")
}

/// The change in a few words, for a sentence or a table cell: `-88% [-90%, -86%]` when
/// clear, `no clear change (+1% [-4%, +6%])` when not, and what is missing otherwise.
pub fn brief_change(change: &Change, intervals: Intervals) -> String {
    let (lo, hi) = match change.ci_percent {
        Ok(ci) => ci,
        Err(NoInterval::ZeroInBoth) => return no_interval_words(NoInterval::ZeroInBoth).into(),
        Err(why) if intervals.said_once(why) => return percent(change.percent),
        Err(why) => return format!("{} ({})", percent(change.percent), no_interval_words(why)),
    };
    let figures = format!(
        "{} [{}, {}]",
        percent(change.percent),
        percent(lo),
        percent(hi)
    );
    if change.is_clear() {
        figures
    } else {
        format!("no clear change ({figures})")
    }
}

/// The verdict of one cell for a configuration: `baseline`, the change in words, or why
/// there is none.
pub fn verdict_text(
    (metric, cell): (&Metric, &Cell),
    is_baseline: bool,
    has_baseline: bool,
    intervals: Intervals,
) -> String {
    let words = verdict_words(metric, cell, is_baseline, has_baseline, intervals);
    match cell.workload_differs {
        Some(rates) if !is_baseline => format!("{words}; {}", workload_warning(rates)),
        _ => words,
    }
}

fn verdict_words(
    metric: &Metric,
    cell: &Cell,
    is_baseline: bool,
    has_baseline: bool,
    intervals: Intervals,
) -> String {
    match (&cell.change, is_baseline) {
        (_, true) => "baseline".into(),
        (Some(change), false) => change_text(metric, change, intervals),
        (None, false) if cell.estimate.is_none() => "n/a".into(),
        (None, false) if cell.from_zero => {
            "0 in every run of the baseline: no change in percent".into()
        }
        (None, false) if has_baseline => "no figure in the baseline to compare with".into(),
        (None, false) => "no baseline (no configuration with the kernel's default lowat)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::metrics::metric;
    use Intervals::{NoneOneRunEach, PerFigure};

    #[test]
    fn verdicts_in_words() {
        let goodput = metric("net_goodput_fast_mbps");
        let clear = Change {
            percent: -85.2,
            ci_percent: Ok((-88.0, -82.4)),
        };
        assert_eq!(
            change_text(goodput, &clear, PerFigure),
            "-85% [-88%, -82%]: clearly lower (worse)"
        );
        let queued = metric("slow_queued_mean_mib");
        assert!(change_text(queued, &clear, PerFigure).ends_with("clearly lower (better)"));
        let noise = Change {
            percent: -10.0,
            ci_percent: Ok((-31.0, 11.0)),
        };
        assert_eq!(
            change_text(goodput, &noise, PerFigure),
            "-10% [-31%, +11%]: no clear change; more runs would tell"
        );
        let one = Estimate::of(&[2e6], goodput.range()).unwrap();
        assert_eq!(
            estimate_text(goodput, Some(&one), PerFigure),
            "2.0 Mbit/s (1 run: too few for an interval)"
        );
        let two = Estimate::of(&[1e6, 3e6], goodput.range()).unwrap();
        assert!(estimate_text(goodput, Some(&two), PerFigure).starts_with("2.0 Mbit/s ["));
        let few = Change {
            percent: 50.0,
            ci_percent: Err(NoInterval::TooFewRuns),
        };
        assert_eq!(
            change_text(goodput, &few, PerFigure),
            "+50% (too few runs for an interval; more runs would tell)"
        );
        assert_eq!(
            brief_change(&few, PerFigure),
            "+50% (too few runs for an interval)"
        );
        let zero = Change {
            percent: 0.0,
            ci_percent: Err(NoInterval::ZeroInBoth),
        };
        assert_eq!(change_text(goodput, &zero, PerFigure), "0 in both");
        assert_eq!(brief_change(&zero, PerFigure), "0 in both");
        // One run in every configuration: said once, and each figure plain.
        assert_eq!(brief_change(&few, NoneOneRunEach), "+50%");
        assert_eq!(change_text(goodput, &few, NoneOneRunEach), "+50%");
        assert_eq!(
            estimate_text(goodput, Some(&one), NoneOneRunEach),
            "2.0 Mbit/s"
        );
        assert_eq!(brief_change(&zero, NoneOneRunEach), "0 in both");
        assert!(NoneOneRunEach.once().unwrap().contains("too few runs"));
        assert_eq!(PerFigure.once(), None);
    }
}

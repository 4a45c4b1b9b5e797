//! Whether a run's fast phases were long enough for its path to leave slow start, judged on
//! the run's own figures (never on the flags that made it): a fast phase of fewer round
//! trips than slow start needs, and a network goodput far below the path's rate. On the
//! lab's default 466 ms, 1 Gbit/s path a 2 s fast phase is four round trips, the window
//! never opens, and the run shows the mechanics, not the effect: the end table and the
//! report say so, and what to run instead.

use oscil_model::files::rows::Phase;

use crate::human;
use crate::load::summary::{RunSummary, Scope};

/// Round trips a fast phase needs at least: slow start doubles the window once per round
/// trip from ten segments, so filling a path of N segments takes log2(N / 10) of them
/// (twelve on the default path, seven on 100 ms at 100 Mbit/s).
const MIN_FAST_ROUND_TRIPS: f64 = 10.0;

/// Below this share of the path's rate, the fast phases never filled the path.
const FILLED_SHARE: f64 = 0.25;

/// What the run's figures say of a fast phase too short for its path.
#[derive(Debug, Clone, PartialEq)]
pub struct TooShort {
    pub fast_s: f64,
    pub rtt_ms: f64,
    pub goodput_bps: f64,
    pub rate_bps: f64,
}

/// The figures that show `run`'s fast phases too short, where they were; `None` where
/// they were long enough, or where the path's rate is not known (a run made by hand).
pub fn too_short(run: &RunSummary) -> Option<TooShort> {
    let rate_bps = run.settings.path_rate_bps?;
    let rtt_ms = run.path_rtt_ms().filter(|&ms| ms > 0.0)?;
    let fast_s = run
        .phases
        .spans
        .iter()
        .filter(|s| s.span.phase == Phase::Fast)
        .map(|s| s.span.end_s - s.span.start_s)
        .fold(0.0, f64::max);
    let goodput_bps = run.window(Scope::Steady).fast.net_goodput_bps()?;
    let few_round_trips = fast_s * 1000.0 / rtt_ms < MIN_FAST_ROUND_TRIPS;
    let unfilled = goodput_bps < FILLED_SHARE * rate_bps;
    (few_round_trips && unfilled).then_some(TooShort {
        fast_s,
        rtt_ms,
        goodput_bps,
        rate_bps,
    })
}

/// One line for a path's answer or an end table over `runs`: which runs were too short, the
/// first one's figures, and what to run instead; `None` where none was.
pub fn warning<'a>(runs: impl IntoIterator<Item = &'a RunSummary>) -> Option<String> {
    let short: Vec<(&RunSummary, TooShort)> = runs
        .into_iter()
        .filter_map(|r| Some((r, too_short(r)?)))
        .collect();
    let (_, first) = short.first()?;
    let names: Vec<String> = short.iter().map(|(r, _)| r.name()).collect();
    Some(format!(
        "The fast phases were too short for the path to leave slow start ({}): a {:.1} s fast phase is {:.0} round trips of {} (slow start needs about {MIN_FAST_ROUND_TRIPS:.0}), and the fast phases' network goodput was {} on a {} path. These runs show the mechanics, not the effect of a setting: run scripts/lab --rtt 100ms --rate 100mbit --quick, or the full pattern (without --quick).",
        names.join(", "),
        first.fast_s,
        (first.fast_s * 1000.0 / first.rtt_ms).floor(),
        human::ms(first.rtt_ms),
        human::rate(first.goodput_bps),
        human::rate(first.rate_bps),
    ))
}

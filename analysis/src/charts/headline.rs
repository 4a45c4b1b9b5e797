//! The answer first: per path, each configuration against its baseline in one sentence
//! with the figures a person came for and their intervals, then the recommendation or why
//! there is none. Everything here is words over what `verdict` and `recommend` decided;
//! nothing is judged twice.

use crate::charts::draw::Emphasis;
use crate::figures::metrics::{Metric, METRICS};
use crate::human;
use crate::load::configs::Configuration;
use crate::load::summary::{RunSummary, Scope};
use crate::verdicts::recommend::{self, PathChoice};
use crate::verdicts::recommendation_text;
use crate::verdicts::slow_start;
use crate::verdicts::verdict::{self, brief_change, Cell, Intervals};

/// One path's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PathHeadline {
    /// The path in words: `RTT 466.0 ms, 1 Gbit/s`.
    pub path: String,
    /// Said before anything else: the configurations did not run one workload.
    pub warning: Option<String>,
    /// One sentence per configuration compared with its baseline.
    pub sentences: Vec<String>,
    /// The recommendation, or why there is none.
    pub recommendation: String,
}

/// Said once on a path whose ends shared one namespace (loopback): why its answer's memory
/// is the sender's own sockets and not the namespace's.
const OWN_SOCKETS_LINE: &str = "Both ends ran in one network namespace (loopback): the memory in this answer is the sender's own sockets (its queued bytes, wmem_queued, and of them those not yet sent, notsent_bytes); the namespace's TCP memory holds the reader's receive queue too: it is both ends' memory, never the sender's.";

/// How a figure is put in a sentence.
enum Said {
    /// `the sender's slow-phase queue -88% [-90%, -86%]`
    Change,
    /// `a write's median wait 1.4 s → 1.6 ms`
    Before(fn(f64) -> String),
}

/// The figures of a headline, in the order of the questions. Where both ends `shared` one
/// namespace its memory is theirs, so the sender's own not-sent bytes stand in for it.
fn figures(shared: bool) -> Vec<(&'static str, &'static Metric, Said)> {
    let by = |column: &str| METRICS.iter().find(|m| m.column == column);
    let mut list = vec![(
        "the sender's slow-phase queue",
        recommend::queued(),
        Said::Change,
    )];
    let memory = match shared {
        true => ("its not-sent bytes", by("slow_notsent_mean_mib")),
        false => (
            "its namespace's peak TCP memory",
            by("tcp_mem_ns_peak_sender_mib"),
        ),
    };
    if let (words, Some(m)) = memory {
        list.push((words, m, Said::Change));
    }
    if let Some(m) = by("residence_p50_ms") {
        list.push(("a write's median wait", m, Said::Before(human::wait)));
    }
    if let Some(m) = by("marker_p50_ms") {
        list.push(("a marker's median latency", m, Said::Before(human::wait)));
    }
    list.push(("network goodput", recommend::goodput(), Said::Change));
    list
}

fn index(metric: &Metric) -> usize {
    METRICS
        .iter()
        .position(|m| m.column == metric.column)
        .expect("a metric of the registry")
}

/// What a sentence is built from.
struct Evidence<'a> {
    summaries: &'a [RunSummary],
    configs: &'a [Configuration],
    cells: &'a [Vec<Cell>],
    scope: Scope,
    intervals: Intervals,
}

impl Evidence<'_> {
    /// A configuration's mean of a figure in words, `≥` before it where it is only a lower
    /// bound (a wait still running when a run ended).
    fn mean_text(&self, config: usize, metric: &Metric, text: fn(f64) -> String) -> Option<String> {
        let mean = self.cells[config][index(metric)].estimate?.mean;
        let at_least =
            verdict::is_lower_bound(self.summaries, &self.configs[config], metric, self.scope);
        let bound = if at_least { "≥ " } else { "" };
        Some(format!("{bound}{}", text(mean / metric.unit.scale)))
    }

    /// `words figure` for one figure of configuration `i` against its baseline `b`, or
    /// `None` where either lacks it.
    fn phrase(
        &self,
        (words, metric, said): &(&str, &Metric, Said),
        i: usize,
        b: usize,
    ) -> Option<String> {
        let cell = &self.cells[i][index(metric)];
        match said {
            Said::Change => Some(format!(
                "{words} {}",
                brief_change(cell.change.as_ref()?, self.intervals)
            )),
            Said::Before(text) => {
                let before = self.mean_text(b, metric, *text)?;
                let arrow = format!("{words} {before} → {}", self.mean_text(i, metric, *text)?);
                Some(match cell.change.filter(|c| !c.is_clear()) {
                    Some(c) => format!("{arrow}, {}", brief_change(&c, self.intervals)),
                    None => arrow,
                })
            }
        }
    }

    /// Whether both ends of any run of configuration `i` shared one namespace.
    fn shared(&self, i: usize) -> bool {
        let runs = &self.configs[i].runs;
        runs.iter().any(|&r| self.summaries[r].shared_namespace)
    }

    /// `lowat 128 KiB against default: ... (n = 3 each)`; without the run count where
    /// every configuration has one run (the title says it, once).
    fn sentence(&self, i: usize, b: usize) -> String {
        let configs = self.configs;
        let phrases: Vec<String> = figures(self.shared(i) || self.shared(b))
            .iter()
            .filter_map(|figure| self.phrase(figure, i, b))
            .collect();
        let (n, nb) = (configs[i].runs.len(), configs[b].runs.len());
        let runs = match (self.intervals, n == nb) {
            (Intervals::NoneOneRunEach, _) => String::new(),
            (_, true) => format!(" (n = {n} each)"),
            (_, false) => format!(" (n = {n} and {nb})"),
        };
        let body = if phrases.is_empty() {
            "no figure measured in both".to_string()
        } else {
            phrases.join(", ")
        };
        format!(
            "{} against {}: {body}{runs}.",
            configs[i].name, configs[b].name
        )
    }
}

/// Every path's answer, in the order `recommend::recommend` gives the paths.
pub fn headlines(
    summaries: &[RunSummary],
    configs: &[Configuration],
    cells: &[Vec<Cell>],
    choices: &[PathChoice],
    scope: Scope,
) -> Vec<PathHeadline> {
    let evidence = Evidence {
        summaries,
        configs,
        cells,
        scope,
        intervals: Intervals::of(configs),
    };
    choices
        .iter()
        .map(|choice| {
            let on_path: Vec<usize> = (0..configs.len())
                .filter(|&i| configs[i].path_key == choice.path_key)
                .collect();
            let mut sentences = on_path
                .iter()
                .filter_map(|&i| Some((i, configs[i].baseline.filter(|&b| b != i)?)))
                .map(|(i, b)| evidence.sentence(i, b))
                .collect::<Vec<_>>();
            if !sentences.is_empty() && on_path.iter().any(|&i| evidence.shared(i)) {
                sentences.push(OWN_SOCKETS_LINE.into());
            }
            PathHeadline {
                path: choice.path.clone(),
                warning: path_warning(summaries, configs, cells, &on_path),
                sentences: if sentences.is_empty() {
                    vec!["No baseline to compare with: no configuration on this path has the kernel's default lowat (pass --baseline NAME).".into()]
                } else {
                    sentences
                },
                recommendation: recommendation_text::one_line(summaries, configs, choice, scope),
            }
        })
        .collect()
}

/// What the path's answer says before anything else: the workload's warning, and that
/// its fast phases were too short to leave slow start, where either holds.
fn path_warning(
    summaries: &[RunSummary],
    configs: &[Configuration],
    cells: &[Vec<Cell>],
    on_path: &[usize],
) -> Option<String> {
    let runs = on_path
        .iter()
        .flat_map(|&i| configs[i].runs.iter().map(|&r| &summaries[r]));
    let said: Vec<String> = [
        workload_warning(configs, cells, on_path),
        slow_start::warning(runs),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!said.is_empty()).then(|| said.join(" "))
}

/// `verdict`'s warning for the first configuration of the path whose baseline ran another
/// workload (slow phases read at rates too far apart), with the pair named.
fn workload_warning(
    configs: &[Configuration],
    cells: &[Vec<Cell>],
    on_path: &[usize],
) -> Option<String> {
    on_path.iter().find_map(|&i| {
        let rates = cells[i].first()?.workload_differs?;
        let base = &configs[configs[i].baseline?].name;
        Some(format!(
            "{} ({} against {base}).",
            verdict::workload_warning(rates),
            configs[i].name
        ))
    })
}

/// The answer's title after "The answer: ": which figures, and their intervals or why
/// there are none (said here once for every sentence under it).
pub fn title(figures: &str, intervals: Intervals) -> String {
    let intervals = intervals.once().unwrap_or_else(|| "95% intervals".into());
    format!("each configuration against its baseline ({figures}; {intervals})")
}

/// The paragraphs of `headline.png`: the title, then per path a heading, its sentences
/// and its recommendation.
pub fn paragraphs(headlines: &[PathHeadline], title: String) -> Vec<(String, Emphasis)> {
    let mut out = vec![(format!("The answer: {title}"), Emphasis::Title)];
    for h in headlines {
        out.push((format!("Path: {}", h.path), Emphasis::Heading));
        if let Some(warning) = &h.warning {
            out.push((warning.clone(), Emphasis::Warning));
        }
        out.extend(h.sentences.iter().map(|s| (s.clone(), Emphasis::Text)));
        out.push((h.recommendation.clone(), Emphasis::Text));
    }
    out
}

//! The figures of one run, as a pure function of its loaded run directory: its settings,
//! and the per-span totals of `oscil_figures` (the definition the reader's
//! own summary uses) from which every figure of `figures::metrics` is computed over the whole run,
//! the steady cycles, or one cycle. Nothing here draws or writes.

use std::path::PathBuf;

use oscil_figures::{PhaseFigures, RunPhases};
use oscil_model::files::rows::Phase;
use oscil_model::run::RunStatus;
use oscil_rundir::Run;

use crate::load::groups::{self, RunGroup};
use crate::load::input::RunInput;
use crate::load::settings::{configuration_key, path_key, shared_namespace, Settings};
use crate::load::window::{RunFacts, Window};

/// Which cycles a figure covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Whole,
    /// Cycles 2 and later, when the run has more than one; else the whole run. A long path
    /// spends its first fast phase in slow start, so these are the default for verdicts.
    Steady,
    Cycle(u32),
}

impl Scope {
    /// The scope in words for a run of `cycles` cycles: `steady (cycles 2-3)`.
    pub fn text(self, cycles: u32) -> String {
        match self {
            Scope::Whole => "whole run".into(),
            Scope::Steady if cycles > 2 => format!("steady (cycles 2-{cycles})"),
            Scope::Steady if cycles == 2 => "steady (cycle 2)".into(),
            Scope::Steady => "whole run (one cycle: no steady cycles)".into(),
            Scope::Cycle(c) => format!("cycle {c}"),
        }
    }

    /// Which cycles of a run of `cycles` cycles the scope covers.
    pub fn takes(self, cycles: u32) -> impl Fn(u32) -> bool + Copy {
        move |cycle| match self {
            Scope::Whole => true,
            Scope::Steady => cycles < 2 || cycle >= 2,
            Scope::Cycle(c) => cycle == c,
        }
    }
}

/// The figures of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub label: String,
    pub dir: PathBuf,
    pub settings: Settings,
    /// Why the run was cut short, if it was.
    pub partial: Option<String>,
    /// What the run's record lacks though its pattern ran (`run.json` status `holes`:
    /// intervals or rows missing on a side, a trace cut short), escaped; it still counts.
    pub holes: Option<String>,
    /// Why the lab's link emulator spoiled the run, if it did (`link_health`): no
    /// configuration counts it.
    pub link_spoiled: Option<String>,
    /// How the run's hosts limited it, if they did (`host_limit`: packets dropped below
    /// TCP, a CPU saturated for a quarter of the run): named beside the run, still counted,
    /// since `/proc/stat` is the whole machine's and a shared machine's other work would
    /// otherwise leave every run out.
    pub host_limited: Option<String>,
    pub duration_s: f64,
    pub phases: RunPhases,
    pub sender_page_bytes: f64,
    pub reader_page_bytes: f64,
    pub run_facts: RunFacts,
    /// Runs with equal keys are repetitions of one configuration (`settings`).
    pub config_key: String,
    /// Runs with equal keys share a path (`settings::path_key`).
    pub path_key: String,
    /// Both ends ran in one namespace of one host (loopback): a namespace figure holds
    /// the reader's queues too, so it is both ends', never the sender's.
    pub shared_namespace: bool,
    /// From a campaign: the configuration's name and this run's repetition.
    pub campaign_label: Option<String>,
    pub repetition: Option<u32>,
    /// What the run's kernels could not give, in words (`RunMeta::not_given`).
    pub not_given: Vec<String>,
    /// Each group of its flows on its own (`--group`); none in a run of one group.
    pub groups: Vec<RunGroup>,
}

impl RunSummary {
    /// The phase totals over `scope`.
    pub fn window(&self, scope: Scope) -> Window {
        let take = scope.takes(self.phases.cycles());
        Window {
            fast: self.phases.merged(Phase::Fast, take),
            slow: self.phases.merged(Phase::Slow, take),
            sender_page_bytes: self.sender_page_bytes,
            reader_page_bytes: self.reader_page_bytes,
            run: self.run_facts.clone(),
        }
    }

    pub fn cycles(&self) -> u32 {
        self.phases.cycles()
    }

    /// The lowest RTT measured over the whole run, in ms.
    pub fn rtt_min_ms(&self) -> Option<f64> {
        let both = self.window(Scope::Whole).both();
        both.rtt_min_us.map(|us| f64::from(us) / 1000.0)
    }

    /// The run by its configuration and repetition where the lab made it, else its label.
    pub fn name(&self) -> String {
        let name = self.campaign_label.as_ref().unwrap_or(&self.label);
        match self.repetition {
            Some(k) => format!("{name} rep {k}"),
            None => name.clone(),
        }
    }

    /// The path RTT the lab set, else the lowest RTT measured.
    pub fn path_rtt_ms(&self) -> Option<f64> {
        self.settings.path_rtt_ms.or_else(|| self.rtt_min_ms())
    }
}

/// The summary of a loaded run; `input` says where it came from (a campaign or not).
pub fn summarize(run: &Run, input: &RunInput) -> RunSummary {
    let meta = &run.meta;
    let interval_s = match meta.config.interval_us {
        0 => 0.1,
        us => us as f64 / 1e6,
    };
    let mut figures = PhaseFigures::new(&meta.schedule, interval_s);
    run.reader.iter().for_each(|r| figures.reader(r));
    run.sender.iter().for_each(|r| figures.sender(r));
    run.host.iter().for_each(|r| figures.host(r));
    run.markers.iter().for_each(|r| figures.marker(r));
    run.probe.iter().for_each(|r| figures.probe(r));
    // A reader that was killed never wrote its duration: its last row is the end.
    let end_s = if meta.ending.duration_s > 0.0 {
        meta.ending.duration_s
    } else {
        run.reader.iter().map(|r| r.t_s).fold(0.0, f64::max)
    };
    let campaign = input.campaign.as_ref();
    let settings = Settings::from_meta(meta, campaign.map(|c| &c.settings));
    let link = oscil_rundir::lab::link_health(&run.dir);
    RunSummary {
        label: run.label(),
        dir: run.dir.clone(),
        // A many-host campaign's pairs are its paths, whatever the hosts call themselves.
        path_key: match campaign.and_then(|c| c.pair.as_ref()) {
            Some(pair) => format!("{PAIR_PREFIX}{pair}"),
            None => path_key(&settings, meta),
        },
        shared_namespace: shared_namespace(meta),
        settings,
        partial: partial_reason(run),
        holes: (meta.ending.status == RunStatus::Holes)
            .then(|| oscil_model::text::escape_stored(&meta.ending.reason)),
        link_spoiled: spoiled(meta, link.spoiled.clone()),
        host_limited: meta
            .sampling
            .as_ref()
            .and_then(oscil_model::run::host_limit::limited),
        duration_s: meta.ending.duration_s,
        phases: figures.finish(end_s),
        sender_page_bytes: meta
            .sender_host
            .as_ref()
            .unwrap_or(&meta.reader_host)
            .page_size_bytes as f64,
        reader_page_bytes: meta.reader_host.page_size_bytes as f64,
        run_facts: RunFacts {
            bytes_read: run
                .reader
                .iter()
                .map(|r| r.bytes)
                .fold(0, u64::saturating_add),
            cost: meta.cost.clone(),
            pollout_notsent_max_bytes: meta
                .wakeups
                .iter()
                .filter_map(|w| w.notsent_max_bytes)
                .max(),
            link_cpu_s: link.cpu_s,
            clock_uncertainty_us: meta.clock.map(|c| c.uncertainty_us),
            slow_rate_bps: meta
                .config
                .slow_rate
                .as_ref()
                .and_then(|r| r.mean_bytes_per_s())
                .map(|b| b * 8.0),
        },
        config_key: configuration_key(meta, campaign.map(|c| &c.settings))
            + &campaign
                .and_then(|c| c.pair.as_ref())
                .map_or_else(String::new, |pair| format!(" pair {pair}")),
        campaign_label: campaign
            .map(|c| c.label.clone())
            .or_else(|| Some(meta.lab.as_ref()?.configuration.clone())),
        repetition: campaign
            .map(|c| c.repetition)
            .or_else(|| Some(meta.lab.as_ref()?.repetition)),
        not_given: meta.not_given(),
        groups: groups::of_run(run, interval_s, end_s),
    }
}

/// The lab's rule, the same two parts: a late link (`link_late`, from `link.json`), or a
/// starved reader or sender, judged on the lab's runs only (which the lab redoes; a run
/// made by hand is counted).
fn spoiled(meta: &oscil_model::run::RunMeta, link_late: Option<String>) -> Option<String> {
    link_late.or_else(|| {
        meta.lab.as_ref()?;
        oscil_model::run::starvation::starved(meta.sampling.as_ref()?, meta.config.interval_us)
    })
}

/// Why the run is not whole, escaped: `run.json`'s reason when it ended partial, and each
/// file cut mid-row with what was dropped.
fn partial_reason(run: &Run) -> Option<String> {
    let ending = &run.meta.ending;
    let mut reasons: Vec<String> = Vec::new();
    if ending.status == RunStatus::Partial {
        reasons.push(oscil_model::text::escape_stored(&ending.reason));
    }
    reasons.extend(run.cut.iter().map(ToString::to_string));
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

/// A many-host campaign's path keys: `pair <sender>-to-<receiver>`.
const PAIR_PREFIX: &str = "pair ";

/// The pair a path key names, in a many-host campaign.
pub fn pair_of(path_key: &str) -> Option<&str> {
    path_key.strip_prefix(PAIR_PREFIX)
}

/// How a recommendation names a many-host path: the pair and its measured RTT.
pub fn pair_path_text(path_key: &str, rtt_ms: Option<f64>) -> Option<String> {
    let pair = pair_of(path_key)?;
    Some(match rtt_ms {
        Some(ms) => format!("{pair} (measured, {ms:.1} ms min RTT)"),
        None => format!("{pair} (measured)"),
    })
}

//! The recommendation in words: `recommendation.md` (the choice, the evidence with its
//! intervals, why each other configuration lost, what was not tested) and the sysctl.d
//! file, each line commented with its evidence.

use std::fmt::Write as _;

use oscil_model::sysctl::{Sysctl, NOTSENT_LOWAT_UNLIMITED};

use crate::figures::metrics::Metric;
use crate::load::configs::Configuration;
use crate::load::summary::{RunSummary, Scope};
use crate::verdicts::recommend::{
    buffer_limits, goodput, memory, queued, Evidence, PathChoice, Standing,
};
use crate::verdicts::verdict::{self, estimate_text, Intervals};

/// The sysctl file of each path with a choice: `99-oscil-tcp.conf` when one path has
/// one, `99-oscil-tcp-pathN.conf` (N counting such paths) when several do.
pub fn conf_names(choices: &[PathChoice]) -> Vec<Option<String>> {
    let chosen = choices.iter().filter(|c| c.chosen.is_some()).count();
    let mut n = 0;
    choices
        .iter()
        .map(|c| {
            c.chosen?;
            n += 1;
            Some(match chosen {
                1 => "99-oscil-tcp.conf".to_string(),
                _ => format!("99-oscil-tcp-path{n}.conf"),
            })
        })
        .collect()
}

/// `recommendation.md`.
pub fn markdown(
    summaries: &[RunSummary],
    configs: &[Configuration],
    choices: &[PathChoice],
    scope: Scope,
    tolerance: f64,
) -> String {
    let evidence = Evidence {
        summaries,
        configs,
        scope,
    };
    let cycles = summaries.iter().map(RunSummary::cycles).max().unwrap_or(0);
    let mut md = String::from("# oscil recommendation\n\n");
    // One run each: no interval to explain; each path's "No recommendation" says why.
    let method = match evidence.intervals() {
        Intervals::PerFigure => crate::figures::stats::METHOD,
        Intervals::NoneOneRunEach => "",
    };
    let _ = writeln!(
        md,
        "Per path: the configuration with the least sender memory (slow-phase queued mean, then peak TCP memory) whose fast-phase goodput is not clearly below the best configuration's by more than {:.1}%, and whose memory saving over the default is clear. Figures: {}. {method}\n",
        tolerance * 100.0,
        scope.text(cycles),
    );
    for (choice, conf) in choices.iter().zip(conf_names(choices)) {
        path_section(&mut md, &evidence, choice, conf.as_deref());
    }
    md
}

fn path_section(md: &mut String, evidence: &Evidence, choice: &PathChoice, conf: Option<&str>) {
    let configs = evidence.configs;
    let _ = writeln!(md, "## Path: {}\n", choice.path);
    match (choice.chosen, &choice.nothing_because) {
        (Some(i), _) => {
            let _ = writeln!(
                md,
                "**Choice: {}** ({} runs). {} The sysctl.d file: `{}`.\n",
                configs[i].name,
                configs[i].runs.len(),
                conf_summary(evidence, i),
                conf.unwrap_or_default()
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(md, "**No recommendation**: {why}. Nothing is recommended rather than a guess; run more repetitions (`oscil-lab --repeat`).\n");
        }
        (None, None) => {}
    }
    let _ = writeln!(
        md,
        "| configuration | runs | fast goodput | vs best | slow queued mean | vs default | peak TCP memory (sender) | standing |\n|---|---|---|---|---|---|---|---|"
    );
    let intervals = evidence.intervals();
    let estimate =
        |i: usize, m: &Metric| estimate_text(m, evidence.estimate(i, m).as_ref(), intervals);
    for (i, standing) in &choice.standings {
        let change = |against: Option<usize>, m: &Metric| evidence.versus(*i, against, m);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            configs[*i].name,
            configs[*i].runs.len(),
            estimate(*i, goodput()),
            change(choice.best, goodput()),
            estimate(*i, queued()),
            change(choice.default, queued()),
            estimate(*i, memory()),
            standing_text(standing, intervals),
        );
    }
    md.push('\n');
    what_binds(md, evidence, choice);
    not_tested(md, evidence, choice);
}

fn standing_text(standing: &Standing, intervals: Intervals) -> String {
    match standing {
        Standing::Chosen => "**chosen**".into(),
        Standing::Eligible => "lost: more memory than the choice".into(),
        Standing::OneRun => "lost: one run, no interval".into(),
        Standing::Default => "the default (savings are measured against it)".into(),
        Standing::GoodputBelowBest(c) => format!(
            "lost: goodput clearly below the best ({})",
            verdict::change_text(goodput(), c, intervals)
        ),
        Standing::SavingNotClear(Some(c)) => format!(
            "lost: memory saving over the default not clear ({})",
            verdict::change_text(queued(), c, intervals)
        ),
        Standing::SavingNotClear(None) => "lost: no memory figure to compare".into(),
        Standing::MoreLimited {
            share,
            default_share,
        } => format!(
            "lost: held back by a buffer {:.0}% of the fast phases against the default's {:.0}%",
            share * 100.0,
            default_share * 100.0
        ),
        Standing::NoFigures => "lost: no goodput figure".into(),
    }
}

/// A share of the fast phases from which a buffer is said to bind.
const BINDS_SHARE: f64 = 0.2;

/// Which knob holds the flows back, from the kernel's limited-by counters of the chosen
/// configuration (or the best, without a choice); nothing where the evidence is thin.
fn what_binds(md: &mut String, evidence: &Evidence, choice: &PathChoice) {
    let Some(i) = choice.chosen.or(choice.best) else {
        return;
    };
    let name = &evidence.configs[i].name;
    let [rwnd, sndbuf] = buffer_limits();
    let (Some(r), Some(s)) = (evidence.estimate(i, rwnd), evidence.estimate(i, sndbuf)) else {
        return;
    };
    if r.n < 2 {
        let _ = writeln!(
            md,
            "What limits the flows of {name}: one run, too little to say.\n"
        );
        return;
    }
    let mut binds = Vec::new();
    if r.mean >= BINDS_SHARE {
        binds.push(format!(
            "receive-window limited {} of the fast phases: the receiver's `tcp_rmem` max or `tcp_adv_win_scale` binds; lowat does not",
            estimate_text(rwnd, Some(&r), Intervals::PerFigure)
        ));
    }
    if s.mean >= BINDS_SHARE {
        binds.push(format!(
            "send-buffer limited {} of the fast phases: `SO_SNDBUF` or the `tcp_wmem` max binds",
            estimate_text(sndbuf, Some(&s), Intervals::PerFigure)
        ));
    }
    let said = match binds.is_empty() {
        true => format!(
            "no buffer binds (receive window {}, send buffer {} of the fast phases): the network (cwnd, pacing) or the writer sets the pace",
            estimate_text(rwnd, Some(&r), Intervals::PerFigure),
            estimate_text(sndbuf, Some(&s), Intervals::PerFigure)
        ),
        false => binds.join("; "),
    };
    let _ = writeln!(md, "What limits the flows of {name}: {said}.\n");
}

/// Settings that were the same in every configuration on the path: the recommendation
/// says nothing about other values of them.
fn not_tested(md: &mut String, evidence: &Evidence, choice: &PathChoice) {
    let settings: Vec<_> = choice
        .standings
        .iter()
        .map(|(i, _)| evidence.configs[*i].settings(evidence.summaries))
        .collect();
    let Some(first) = settings.first() else {
        return;
    };
    let fixed: Vec<String> = first
        .parts()
        .into_iter()
        .filter(|part| settings.iter().all(|s| s.parts().contains(part)))
        .map(|(_, text)| text)
        .collect();
    let _ = writeln!(
        md,
        "**Not tested:** values other than those above for every setting held fixed on this path ({}); lowat values between the ones tried; other paths, other reading patterns, and other kernels.\n",
        if fixed.is_empty() { "none".into() } else { fixed.join("; ") }
    );
}

/// The recommendation for one path in a sentence, for the top of the report: the choice
/// and the sysctl it sets, or why there is none.
pub fn one_line(
    summaries: &[RunSummary],
    configs: &[Configuration],
    choice: &PathChoice,
    scope: Scope,
) -> String {
    let evidence = Evidence {
        summaries,
        configs,
        scope,
    };
    match (choice.chosen, &choice.nothing_because) {
        (Some(i), _) => {
            let (lowat, _, _) = sysctls(&evidence, i);
            format!(
                "Recommendation: {} ({} = {lowat}): the least sender memory whose network goodput is not clearly below the best, with a clear saving over the default.",
                configs[i].name,
                Sysctl::TcpNotsentLowat,
            )
        }
        (None, Some(why)) => format!("No recommendation: {why}."),
        (None, None) => "No recommendation.".into(),
    }
}

fn conf_summary(evidence: &Evidence, i: usize) -> String {
    let (lowat, wmem, rmem) = sysctls(evidence, i);
    format!(
        "It sets `{} = {lowat}`, `{} = {wmem}`, `{} = {rmem}`.",
        Sysctl::TcpNotsentLowat,
        Sysctl::TcpWmem,
        Sysctl::TcpRmem
    )
}

/// The chosen configuration's sysctl values: lowat as set (the socket option's value
/// where runs set it per socket), the buffers as recorded during its runs.
fn sysctls(evidence: &Evidence, i: usize) -> (u64, String, String) {
    let s = evidence.configs[i].settings(evidence.summaries);
    let lowat = s.lowat.map_or(NOTSENT_LOWAT_UNLIMITED, |(bytes, _)| bytes);
    let text = |value: &Option<oscil_model::sysctl::SysctlValue>| {
        value
            .as_ref()
            .map_or_else(|| "(not recorded)".to_string(), ToString::to_string)
    };
    (lowat, text(&s.sender_tcp_wmem), text(&s.reader_tcp_rmem))
}

/// `99-oscil-tcp.conf` for a path with a choice: the sysctl.d lines, each commented with
/// its evidence. None without a choice.
pub fn sysctl_conf(
    summaries: &[RunSummary],
    configs: &[Configuration],
    choice: &PathChoice,
    scope: Scope,
) -> Option<String> {
    let i = choice.chosen?;
    let evidence = Evidence {
        summaries,
        configs,
        scope,
    };
    let (lowat, wmem, rmem) = sysctls(&evidence, i);
    let text =
        |m: &Metric| estimate_text(m, evidence.estimate(i, m).as_ref(), evidence.intervals());
    let vs = |against: Option<usize>, m: &Metric| evidence.versus(i, against, m);
    let cycles = summaries.iter().map(RunSummary::cycles).max().unwrap_or(0);
    let mut conf = String::new();
    let _ = writeln!(
        conf,
        "# Written by oscil-report --recommend for the path {}.",
        choice.path
    );
    let _ = writeln!(
        conf,
        "# Chosen configuration: {} ({} runs; figures {}; 95% intervals).",
        configs[i].name,
        configs[i].runs.len(),
        scope.text(cycles)
    );
    let _ = writeln!(
        conf,
        "# Slow-phase queued mean {}, against the default: {}.",
        text(queued()),
        vs(choice.default, queued())
    );
    let _ = writeln!(
        conf,
        "# Fast-phase goodput {}, against the best configuration: {}.",
        text(goodput()),
        vs(choice.best, goodput())
    );
    let _ = writeln!(conf, "{} = {lowat}", Sysctl::TcpNotsentLowat);
    let _ = writeln!(
        conf,
        "# The send buffer in force during these runs (sender); the evidence holds for it only."
    );
    let _ = writeln!(conf, "{} = {wmem}", Sysctl::TcpWmem);
    let _ = writeln!(
        conf,
        "# The receive buffer in force during these runs (receiver host: set it there)."
    );
    let _ = writeln!(conf, "{} = {rmem}", Sysctl::TcpRmem);
    Some(conf)
}

//! `summary.md`, answer first (issue 37 item 6): the warnings and each path's answer, as
//! `index.html` opens; then one compact table of the figures a reader decides on, one row
//! per configuration, with the change against its baseline; then one definition per
//! column, made from the same words as its header; then the runs. Every figure of every
//! run is in `summary.csv`.

use std::fmt::Write as _;

use crate::charts::headline::PathHeadline;
use crate::figures::metrics::{metric, Metric, METRICS};
use crate::load::configs::Configuration;
use crate::load::summary::{RunSummary, Scope};
use crate::verdicts::shown_figures::shown;
use crate::verdicts::verdict::{self, brief_change, Cell, Intervals};
use crate::write::html::escape_markdown;
use crate::write::table;

/// A column of the compact table: one registry figure, the short name its header and its
/// definition both say, and what the definition adds (after " — ") to the figure's
/// registry title, the name `index.html` gives it.
struct Column {
    column: &'static str,
    name: &'static str,
    means: &'static str,
}

/// The figures a reader decides on, in the order of their questions: how much the sender
/// queues and holds, what the network delivered, how long a byte waits. The host-wide
/// memory stands in where the namespace's was not measured (`shown_figures::shown`).
const COLUMNS: &[Column] = &[
    Column {
        column: "slow_queued_mean_mib",
        name: "slow-phase queue",
        means: "the sender's send-queue memory, summed over its flows at each sample and averaged over the slow phases' samples",
    },
    Column {
        column: "slow_notsent_mean_mib",
        name: "slow-phase not sent",
        means: "the part of the slow-phase queue not yet sent, summed and averaged the same way: the part lowat trims",
    },
    Column {
        column: "tcp_mem_ns_peak_sender_mib",
        name: "peak TCP memory",
        means: "the most memory charged to every TCP socket of the sender's network namespace (send queue, receive queue, forward allocation)",
    },
    Column {
        column: "tcp_mem_peak_sender_mib",
        name: "host TCP memory",
        means: "the most TCP memory of the whole sender host (`/proc/net/sockstat` pages times the page size), shown where the sender's namespace was not measured",
    },
    Column {
        column: "net_goodput_fast_mbps",
        name: "fast-phase goodput",
        means: "the bytes TCP delivered to the reader's receive queues in the fast phases over their length, never above the path's rate",
    },
    Column {
        column: "residence_p50_ms",
        name: "median write wait",
        means: "from a tagged write to its transmit timestamp",
    },
    Column {
        column: "marker_p50_ms",
        name: "median marker latency",
        means: "from the daemon's write of a marker to the reader's read of it",
    },
];

/// The namespace's memory where both ends ran in it (loopback): both ends', never the
/// sender's (the answer's memory is then the sender's own sockets, `headline`).
const BOTH_ENDS_MEMORY: Column = Column {
    column: "tcp_mem_ns_peak_sender_mib",
    name: "both ends' peak TCP memory",
    means: "the most memory charged to every TCP socket of the one network namespace both ends ran in: the sender's send queues and the reader's receive queues together, never the sender's alone",
};

/// What held the flows back: one column of three shares, for the fast phases.
const LIMITS: [&str; 3] = [
    "fast_rwnd_limited_pct",
    "fast_sndbuf_limited_pct",
    "fast_network_limited_pct",
];
const LIMITS_NAME: &str = "rwnd / sndbuf / network limited";
const LIMITS_MEANS: &str = "the shares of the fast phases the kernel counted the flows held back by the receive window, by the send buffer, and by the network (cwnd, pacing)";

/// A header: the short name and its unit.
fn header(name: &str, metric: &Metric) -> String {
    format!("{name} ({})", metric.unit.name)
}

/// Everything `summary.md` says, already computed.
pub struct Summary<'a> {
    pub summaries: &'a [RunSummary],
    pub configs: &'a [Configuration],
    pub cells: &'a [Vec<Cell>],
    pub scope: Scope,
    pub headlines: &'a [PathHeadline],
    /// The answer's title, as `headline.png` has it after "The answer: ".
    pub title: String,
    /// What the report says about groups of flows (`verdicts::groups`); none without them.
    pub groups: &'a [String],
    /// For each run, the run its changes are against.
    pub run_baselines: &'a [Option<usize>],
}

impl Summary<'_> {
    pub fn markdown(&self) -> String {
        let mut md = String::from("# oscil report\n\n");
        self.answer(&mut md);
        if !self.groups.is_empty() {
            md.push_str("## Groups of flows\n\n");
            for line in self.groups {
                let _ = writeln!(md, "- {}", escape_markdown(line));
            }
            md.push_str("\nEach group's figures: `groups.csv`.\n\n");
        }
        self.figures(&mut md);
        md.push_str("## Runs\n\n");
        md.push_str(&table::runs_markdown(self.summaries, self.run_baselines));
        md
    }

    /// The warnings, then each path's answer.
    fn answer(&self, md: &mut String) {
        let warnings = verdict::workload_warnings(self.configs, self.cells);
        for w in &warnings {
            let _ = writeln!(md, "- **{}**", escape_markdown(w));
        }
        if !warnings.is_empty() {
            md.push('\n');
        }
        let _ = writeln!(md, "## The answer: {}\n", escape_markdown(&self.title));
        for h in self.headlines {
            let _ = writeln!(md, "### Path: {}\n", escape_markdown(&h.path));
            if let Some(warning) = &h.warning {
                let _ = writeln!(md, "**{}**\n", escape_markdown(warning));
            }
            for sentence in &h.sentences {
                let _ = writeln!(md, "{}\n", escape_markdown(sentence));
            }
            let _ = writeln!(md, "**{}**\n", escape_markdown(&h.recommendation));
        }
    }

    /// The columns shown: those of `COLUMNS` whose figure `shown_figures` shows, the
    /// namespace's memory as both ends' where they shared it.
    fn columns(&self) -> Vec<(&'static Column, &'static Metric)> {
        let shown = shown(self.cells);
        let shared = self.summaries.iter().any(|s| s.shared_namespace);
        COLUMNS
            .iter()
            .map(|c| match c.column == BOTH_ENDS_MEMORY.column && shared {
                true => &BOTH_ENDS_MEMORY,
                false => c,
            })
            .map(|c| (c, metric(c.column)))
            .filter(|(_, m)| shown.metrics.iter().any(|&i| METRICS[i].column == m.column))
            .collect()
    }

    /// The compact table, then one definition per column and a line per figure left out.
    fn figures(&self, md: &mut String) {
        let columns = self.columns();
        let limits = LIMITS.map(metric);
        let has_limits = self.measured(limits[0]);
        let intervals = Intervals::of(self.configs);
        let _ = writeln!(
            md,
            "## Figures\n\nOne row per configuration: the mean over its runs, over the answer's cycles; after the comma, the change against its baseline{}.\n",
            match intervals {
                Intervals::PerFigure => " with its 95% interval",
                Intervals::NoneOneRunEach => "",
            }
        );
        let mut headers = vec!["configuration".to_string(), "runs".to_string()];
        headers.extend(columns.iter().map(|(c, m)| header(c.name, m)));
        if has_limits {
            headers.push(header(LIMITS_NAME, limits[0]));
        }
        let _ = writeln!(md, "| {} |", headers.join(" | "));
        let _ = writeln!(md, "|{}", "---|".repeat(headers.len()));
        for (i, c) in self.configs.iter().enumerate() {
            let name = match c.is_baseline(i) {
                true => format!("{} (baseline)", c.name),
                false => c.name.clone(),
            };
            let mut cells = vec![escape_markdown(&name), c.runs.len().to_string()];
            cells.extend(columns.iter().map(|(_, m)| self.cell(i, m, intervals)));
            if has_limits {
                let shares = limits.map(|m| self.mean(i, m));
                cells.push(shares.join(" / "));
            }
            let _ = writeln!(md, "| {} |", cells.join(" | "));
        }
        md.push('\n');
        self.definitions(md, &columns, has_limits.then_some(&limits));
    }

    /// One definition per column, in its header's words, then the `≥` legend where a `≥`
    /// is in the table and a line per figure left out.
    fn definitions(
        &self,
        md: &mut String,
        columns: &[(&'static Column, &'static Metric)],
        limits: Option<&[&'static Metric; 3]>,
    ) {
        for (c, m) in columns {
            let _ = writeln!(
                md,
                "- **{}**: {} — {}.",
                header(c.name, m),
                m.title,
                c.means
            );
        }
        if let Some(limits) = limits {
            let titles: Vec<&str> = limits.iter().map(|m| m.title).collect();
            let _ = writeln!(
                md,
                "- **{}**: {} — {LIMITS_MEANS}.",
                header(LIMITS_NAME, limits[0]),
                titles.join(" / ")
            );
        }
        let in_table: Vec<&Metric> = columns.iter().map(|(_, m)| *m).collect();
        let note = verdict::lower_bound_note(self.summaries, self.configs, &in_table, self.scope);
        if let Some(note) = note {
            let _ = writeln!(md, "- {note}");
        }
        for line in shown(self.cells).left_out {
            if COLUMNS
                .iter()
                .any(|c| line.starts_with(metric(c.column).title))
            {
                let _ = writeln!(md, "- {}", escape_markdown(&line));
            }
        }
        md.push('\n');
    }

    fn measured(&self, m: &Metric) -> bool {
        let i = index(m);
        self.cells.iter().any(|row| row[i].estimate.is_some())
    }

    /// A configuration's mean in the column's unit, `≥` before a lower bound; `n/a`.
    fn mean(&self, config: usize, m: &Metric) -> String {
        let Some(estimate) = self.cells[config][index(m)].estimate else {
            return "n/a".into();
        };
        let c = &self.configs[config];
        let bound = verdict::is_lower_bound(self.summaries, c, m, self.scope);
        let at_least = if bound { "≥ " } else { "" };
        format!("{at_least}{}", m.unit.number(estimate.mean))
    }

    /// The mean, then the change against the baseline where there is one.
    fn cell(&self, config: usize, m: &Metric, intervals: Intervals) -> String {
        let mean = self.mean(config, m);
        match self.cells[config][index(m)].change {
            Some(change) if !self.configs[config].is_baseline(config) => {
                format!("{mean}, {}", brief_change(&change, intervals))
            }
            _ => mean,
        }
    }
}

fn index(m: &Metric) -> usize {
    METRICS
        .iter()
        .position(|x| x.column == m.column)
        .expect("a figure of the registry")
}

//! The per-phase summary printed at the end of a run, built from the rows as they are
//! recorded so nothing is kept in memory but running totals. The figures are
//! `oscil_figures`, the same definition the report uses.

pub(crate) mod adjusted;
pub(crate) mod progress;

use std::collections::BTreeMap;
use std::path::Path;

use oscil_cli::units::mib;
use oscil_figures::{PhaseFigures, Totals, WakeSpread};
use oscil_model::files::markers::MarkerRow;
use oscil_model::files::rows::{HostSample, Phase, ReaderSample, SenderSample};
use oscil_model::pattern::PhaseSpan;
use oscil_model::run::{RunMeta, RunStatus};
use serde::Serialize;

use crate::stream::lines::Line;
use crate::stream::STDOUT_CLOSED;

/// Figures for all spans of one phase kind (fast or slow) together.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PhaseSummary {
    /// Seconds of this phase that ran.
    pub seconds: f64,
    pub bytes_read: u64,
    /// What the application read, bit/s: after a slow phase, a fast phase's reads drain the
    /// receive buffer, so this can exceed the path's rate.
    pub read_bps: f64,
    /// Network goodput: what TCP delivered to the receive queues, bit/s.
    pub net_goodput_bps: f64,
    /// Sender totals across flows, per sample interval.
    pub notsent_peak_bytes: u64,
    pub notsent_mean_bytes: f64,
    pub wmem_queued_peak_bytes: u64,
    pub wmem_queued_mean_bytes: f64,
    /// Over sender rows with an RTT estimate.
    pub sender_rtt_mean_us: f64,
    /// Peak /proc/net/sockstat TCP memory on the sender's host.
    pub sender_tcp_mem_peak_bytes: u64,
    /// Send-queue residence of the tagged writes, ms: p50, p90, p99, max; empty when none
    /// completed.
    pub residence_ms: Option<[f64; 4]>,
    /// End-to-end latency of the markers sent in the phase, ms: p50, p99, max; empty when
    /// none was read (or the run had no markers). Accurate to run.json's
    /// `clock.uncertainty_us`.
    pub marker_ms: Option<[f64; 3]>,
    /// Some of the residences are censored: writes still queued counted at their age so
    /// far (`pending_write_age_us`), so figures at or above them are lower bounds.
    pub residence_censored: bool,
    /// Some of the markers were unread at the end, counted at their wait so far likewise.
    pub marker_censored: bool,
    /// The daemon writers' POLLOUT wake-ups.
    pub wakeups: u64,
    /// Not-sent bytes at a wake-up, `[p50, max]`; empty without wake-ups.
    pub wake_notsent_bytes: Option<[u64; 2]>,
    /// From a wake-up to the end of the write, us, `[p50, max]`; empty likewise.
    pub wake_to_write_us: Option<[u64; 2]>,
    /// What held the sender's flows back, percent of their time (sender.csv's chrono
    /// columns); empty where the kernel did not count it.
    pub limited_by_pct: Option<LimitedShares>,
    /// The idle probe's round trip, ms: p50, p99, max; empty without the probe.
    pub probe_rtt_ms: Option<[f64; 3]>,
}

/// Shares of the flows' time, percent, adding up to 100.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LimitedShares {
    /// Held back by the receiver's window.
    pub rwnd: f64,
    /// Held back by the send buffer.
    pub sndbuf: f64,
    /// Busy, held by neither buffer: the congestion window or pacing.
    pub network: f64,
    /// Nothing to send.
    pub app: f64,
}

impl LimitedShares {
    fn of(totals: &Totals) -> Option<Self> {
        let limited = totals.limited_by?;
        let pct = |share: Option<f64>| share.map(|s| s * 100.0);
        Some(LimitedShares {
            rwnd: pct(limited.rwnd_share())?,
            sndbuf: pct(limited.sndbuf_share())?,
            network: pct(limited.network_share())?,
            app: pct(limited.application_share())?,
        })
    }
}

impl PhaseSummary {
    fn new(totals: &Totals, page_size_bytes: u64) -> Self {
        PhaseSummary {
            seconds: totals.seconds,
            bytes_read: totals.bytes_read,
            read_bps: totals.read_bps().unwrap_or(0.0),
            net_goodput_bps: totals.net_goodput_bps().unwrap_or(0.0),
            notsent_peak_bytes: totals.notsent_peak_bytes,
            notsent_mean_bytes: totals.notsent_mean_bytes().unwrap_or(0.0),
            wmem_queued_peak_bytes: totals.queued_peak_bytes,
            wmem_queued_mean_bytes: totals.queued_mean_bytes().unwrap_or(0.0),
            sender_rtt_mean_us: totals.rtt_mean_us().unwrap_or(0.0),
            sender_tcp_mem_peak_bytes: totals
                .sender_tcp_mem_peak_pages
                .unwrap_or(0)
                .saturating_mul(page_size_bytes),
            residence_ms: totals
                .residence_us
                .as_ref()
                .map(|h| [0.5, 0.9, 0.99, 1.0].map(|q| h.value_at_quantile(q) as f64 / 1000.0)),
            marker_ms: totals
                .marker_latency_us
                .as_ref()
                .map(|h| [0.5, 0.99, 1.0].map(|q| h.value_at_quantile(q) as f64 / 1000.0)),
            residence_censored: totals.residence_censored_us.is_some(),
            marker_censored: totals.marker_censored_us.is_some(),
            wakeups: totals.wakeups,
            wake_notsent_bytes: totals
                .wake_notsent_bytes
                .as_ref()
                .map(|w| [w.p50(), w.max()]),
            wake_to_write_us: totals.wake_to_write_us.as_ref().map(|w| [w.p50(), w.max()]),
            limited_by_pct: LimitedShares::of(totals),
            probe_rtt_ms: totals
                .probe_rtt_us
                .as_ref()
                .map(|h| [0.5, 0.99, 1.0].map(|q| h.value_at_quantile(q) as f64 / 1000.0)),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub phases: BTreeMap<Phase, PhaseSummary>,
    /// The same figures for each phase of each cycle, in the order they ran.
    pub cycles: Vec<CycleSummary>,
    /// The fast phases' smallest safe lowat (`Totals::safe_lowat_bytes`), `[at the median
    /// wake-to-write, at the largest]`; empty without wake-ups in them.
    pub safe_lowat_bytes: Option<[f64; 2]>,
}

/// One phase of one cycle.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CycleSummary {
    pub cycle: u32,
    pub phase: Phase,
    #[serde(flatten)]
    pub figures: PhaseSummary,
}

/// Running totals per span of the schedule.
pub struct SummaryBuilder {
    figures: PhaseFigures,
    schedule: Vec<PhaseSpan>,
    page_size_bytes: u64,
}

impl SummaryBuilder {
    pub fn new(schedule: Vec<PhaseSpan>, interval_s: f64, page_size_bytes: u64) -> Self {
        SummaryBuilder {
            figures: PhaseFigures::new(&schedule, interval_s),
            schedule,
            page_size_bytes,
        }
    }

    pub fn reader(&mut self, row: &ReaderSample) {
        self.figures.reader(row);
    }

    /// One interval's rows of every flow, as the daemon sends them.
    pub fn sender(&mut self, rows: &[SenderSample]) {
        for row in rows {
            self.figures.sender(row);
        }
    }

    pub fn host(&mut self, row: &HostSample) {
        self.figures.host(row);
    }

    pub fn marker(&mut self, row: &MarkerRow) {
        self.figures.marker(row);
    }

    pub fn probe(&mut self, row: &oscil_model::files::probe::ProbeRow) {
        self.figures.probe(row);
    }

    /// The summary of what ran until `end_s`.
    pub fn finish(self, end_s: f64) -> Summary {
        let phases = self.figures.finish(end_s);
        let mut summary = Summary {
            cycles: phases
                .spans
                .iter()
                .filter(|s| s.totals.seconds > 0.0)
                .map(|s| CycleSummary {
                    cycle: s.span.cycle,
                    phase: s.span.phase,
                    figures: PhaseSummary::new(&s.totals, self.page_size_bytes),
                })
                .collect(),
            ..Summary::default()
        };
        let fast = phases.merged(Phase::Fast, |_| true);
        summary.safe_lowat_bytes = fast
            .safe_lowat_bytes(WakeSpread::p50)
            .zip(fast.safe_lowat_bytes(WakeSpread::max))
            .map(|(p50, max)| [p50, max]);
        for phase in [Phase::Fast, Phase::Slow] {
            if self.schedule.iter().any(|s| s.phase == phase) {
                let totals = phases.merged(phase, |_| true);
                summary
                    .phases
                    .insert(phase, PhaseSummary::new(&totals, self.page_size_bytes));
            }
        }
        summary
    }
}

/// Fits 80 columns: units go in the two header lines, not beside every number; the
/// residence of the tagged writes and the writer's wake-ups get small tables of their own
/// below, when there were any.
impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:<5} {:>6} {:>9} {:>8} {:>16} {:>10} {:>7} {:>9}",
            "", "", "network", "read", "not sent (MiB)", "queued", "rtt", "tcp mem"
        )?;
        writeln!(
            f,
            "{:<5} {:>6} {:>9} {:>8} {:>8} {:>7} {:>10} {:>7} {:>9}",
            "phase", "secs", "Mbit/s", "Mbit/s", "peak", "mean", "peak MiB", "ms", "peak MiB"
        )?;
        for (phase, s) in &self.phases {
            writeln!(
                f,
                "{:<5} {:>6.1} {:>9.1} {:>8.1} {:>8.2} {:>7.2} {:>10.2} {:>7.1} {:>9.2}",
                phase.as_str(),
                s.seconds,
                s.net_goodput_bps / 1e6,
                s.read_bps / 1e6,
                mib(s.notsent_peak_bytes as f64),
                mib(s.notsent_mean_bytes),
                mib(s.wmem_queued_peak_bytes as f64),
                s.sender_rtt_mean_us / 1000.0,
                mib(s.sender_tcp_mem_peak_bytes as f64),
            )?;
        }
        if self.phases.values().any(|s| s.residence_ms.is_some()) {
            writeln!(f)?;
            writeln!(f, "{:<5} {:>35}", "", "send-queue residence (ms)")?;
            writeln!(
                f,
                "{:<5} {:>8} {:>8} {:>8} {:>8}",
                "phase", "p50", "p90", "p99", "max"
            )?;
            for (phase, s) in &self.phases {
                match s.residence_ms {
                    Some([p50, p90, p99, max]) => writeln!(
                        f,
                        "{:<5} {:>8.2} {:>8.2} {:>8.2} {:>8}",
                        phase.as_str(),
                        p50,
                        p90,
                        p99,
                        at_least(max, s.residence_censored)
                    )?,
                    None => writeln!(f, "{:<5} {:>8}", phase.as_str(), "n/a")?,
                }
            }
            if self.phases.values().any(|s| s.residence_censored) {
                writeln!(f, "{CENSORED_NOTE} (writes still queued at the end)")?;
            }
        }
        self.write_latency(f, "marker latency (ms)", |s| {
            s.marker_ms.map(|ms| (ms, s.marker_censored))
        })?;
        if self.phases.values().any(|s| s.marker_censored) {
            writeln!(f, "{CENSORED_NOTE} (markers unread at the end)")?;
        }
        // The path without the send queue, beside the markers.
        self.write_latency(f, "idle probe round trip (ms)", |s| {
            s.probe_rtt_ms.map(|ms| (ms, false))
        })?;
        self.write_limits(f)?;
        self.write_wakeups(f)
    }
}

impl Summary {
    /// A latency's `[p50, p99, max]` per phase, ms (the markers', the idle probe's round
    /// trip), with whether its max is only a lower bound; nothing when no phase has it.
    fn write_latency(
        &self,
        f: &mut std::fmt::Formatter<'_>,
        title: &str,
        figures: fn(&PhaseSummary) -> Option<Latency>,
    ) -> std::fmt::Result {
        if self.phases.values().all(|s| figures(s).is_none()) {
            return Ok(());
        }
        writeln!(f)?;
        writeln!(f, "{:<5} {title:>26}", "")?;
        writeln!(f, "{:<5} {:>8} {:>8} {:>8}", "phase", "p50", "p99", "max")?;
        for (phase, s) in &self.phases {
            match figures(s) {
                Some(([p50, p99, max], censored)) => writeln!(
                    f,
                    "{:<5} {p50:>8.2} {p99:>8.2} {:>8}",
                    phase.as_str(),
                    at_least(max, censored)
                )?,
                None => writeln!(f, "{:<5} {:>8}", phase.as_str(), "n/a")?,
            }
        }
        Ok(())
    }

    /// What held the sender's flows back per phase, as the kernel counted it.
    fn write_limits(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.phases.values().all(|s| s.limited_by_pct.is_none()) {
            return Ok(());
        }
        writeln!(f)?;
        writeln!(f, "{:<5} {:>39}", "", "limited by (% of the flows' time)")?;
        writeln!(
            f,
            "{:<5} {:>10} {:>10} {:>10} {:>10}",
            "phase", "rcv window", "send buf", "network", "no data"
        )?;
        for (phase, s) in &self.phases {
            match s.limited_by_pct {
                Some(l) => writeln!(
                    f,
                    "{:<5} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                    phase.as_str(),
                    l.rwnd,
                    l.sndbuf,
                    l.network,
                    l.app
                )?,
                None => writeln!(f, "{:<5} {:>10}", phase.as_str(), "n/a")?,
            }
        }
        Ok(())
    }

    /// The POLLOUT wake-ups per phase and the wake-up yardstick they give (docs/report.md:
    /// a diagnostic of the writer's wake-ups, not a lowat to set).
    fn write_wakeups(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.phases.values().all(|s| s.wake_notsent_bytes.is_none()) {
            return Ok(());
        }
        writeln!(f)?;
        writeln!(
            f,
            "{:<5} {:>12} {:>25} {:>25}",
            "", "POLLOUT", "not sent at wake (bytes)", "wake to write (us)"
        )?;
        writeln!(
            f,
            "{:<5} {:>12} {:>12} {:>12} {:>12} {:>12}",
            "phase", "wake-ups", "p50", "max", "p50", "max"
        )?;
        for (phase, s) in &self.phases {
            let pair = |v: Option<[u64; 2]>| match v {
                Some([p50, max]) => format!("{p50:>12} {max:>12}"),
                None => format!("{:>12} {:>12}", "n/a", ""),
            };
            let line = format!(
                "{:<5} {:>12} {} {}",
                phase.as_str(),
                s.wakeups,
                pair(s.wake_notsent_bytes),
                pair(s.wake_to_write_us)
            );
            writeln!(f, "{}", line.trim_end())?;
        }
        if let Some([p50, max]) = self.safe_lowat_bytes {
            // Under the wake-to-write columns it is made of.
            writeln!(
                f,
                "{:<44} {p50:>12.0} {max:>12.0}",
                "wake-up yardstick (bytes): 2 x fast rate x"
            )?;
        }
        Ok(())
    }
}

/// A latency's `[p50, p99, max]` in ms, and whether its max is only a lower bound.
type Latency = ([f64; 3], bool);

/// A table's max in ms, `≥` before it where a wait was cut by the end (so the legend
/// below the table explains a mark that is there).
fn at_least(max_ms: f64, censored: bool) -> String {
    let mark = if censored { "≥" } else { "" };
    format!("{mark}{max_ms:.2}")
}

/// Under a latency table with censored waits: they count at their wait so far.
const CENSORED_NOTE: &str = "≥ where at or above a wait cut by the end";

/// How the end of a run goes to stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The tables.
    Text,
    /// One JSON object (`-J`, docs/json.md).
    Json,
    /// The end line of `--json-stream`: the same object on one line, `"type": "end"`.
    JsonStream,
}

/// The object `-J` prints, documented field by field in docs/json.md.
fn json_summary(out: &Path, meta: &RunMeta, summary: &Summary, code: u8) -> serde_json::Value {
    let ending = &meta.ending;
    serde_json::json!({
        "status": ending.status,
        "exit_code": code,
        "reason": ending.reason,
        "duration_s": ending.duration_s,
        "label": meta.label.clone().unwrap_or_else(|| dir_name(out)),
        "out": out,
        "config": meta.config,
        "versions": { "reader": meta.reader_software, "daemon": meta.daemon_software },
        "sender_options": meta.sender_options,
        "phases": summary.phases,
        "cycles": summary.cycles,
        "clock": meta.clock,
        "markers": meta.markers,
        "probe": meta.probe,
        "trace": meta.trace,
        "absent": meta.absent,
        "safe_lowat_bytes": summary.safe_lowat_bytes,
    })
}

/// Prints a JSON object in the form `output` asks: pretty for `-J`, an end line for
/// `--json-stream`.
fn print_json(value: &serde_json::Value, output: Output) {
    match output {
        Output::JsonStream => oscil_cli::out!("{}", Line::End(value).text()),
        _ => oscil_cli::outln!(
            "{}",
            serde_json::to_string_pretty(value).expect("a JSON value serializes")
        ),
    }
}

/// With `-J` or `--json-stream`, the error object of a run that could not start (or
/// whose flags were wrong) on stdout; nothing otherwise.
pub fn print_error(code: u8, line: &str, output: Output) {
    if output != Output::Text {
        print_json(&oscil_cli::json_error_object(code, line), output);
    }
}

/// Prints the end of a run, as text or (`--json`, `--json-stream`) one JSON object
/// documented field by field in docs/json.md, says on stderr when the run was cut short
/// (unless by stdout's reader leaving, which wants no answer) or has holes, and returns
/// the exit code the run earned.
pub fn print(out: &Path, meta: &RunMeta, summary: &Summary, output: Output) -> u8 {
    let ending = &meta.ending;
    let code = match ending.status {
        // The pattern ran; what either side's record lacks (intervals merged or missing,
        // rows missing, a trace cut short) is counted in run.json: the run exits 0 with a
        // line and a status that say so.
        RunStatus::Complete | RunStatus::Holes => oscil_cli::exit::OK,
        RunStatus::Partial => oscil_cli::exit::CUT_SHORT,
    };
    if output == Output::Text {
        oscil_cli::out!("{}", summary);
        if let (Some(clock), Some(markers)) = (&meta.clock, &meta.markers) {
            // The uncertainty of the clocks' offset is that of every marker latency.
            oscil_cli::outln!(
                "markers: {} of {} read; daemon clock offset {:+.3} ms ± {:.3} ms",
                markers.resolved,
                markers.announced,
                clock.offset_us / 1000.0,
                clock.uncertainty_us / 1000.0,
            );
        }
        for line in meta.trace.iter().flat_map(|t| t.lines()) {
            oscil_cli::outln!("{line}");
        }
        for absent in &meta.absent {
            oscil_cli::outln!("not given: {}", absent.note);
        }
    } else {
        print_json(&json_summary(out, meta, summary, code), output);
    }
    match ending.status {
        RunStatus::Partial if ending.reason.starts_with(STDOUT_CLOSED) => {}
        RunStatus::Partial => eprintln!(
            "oscil-reader: run cut short after {:.1} s: {} (the run directory holds everything up to then)",
            ending.duration_s, ending.reason
        ),
        RunStatus::Holes => eprintln!(
            "oscil-reader: run has holes: {} (run.json \"sampling\" and \"trace\" count them)",
            ending.reason
        ),
        RunStatus::Complete => {}
    }
    code
}

fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_summary_with_residence_and_wakeups_fits_80_columns() {
        let wide = PhaseSummary {
            seconds: 12345.6,
            bytes_read: u64::MAX,
            read_bps: 99_999e6,
            net_goodput_bps: 99_999e6,
            notsent_peak_bytes: 9_999 << 20,
            notsent_mean_bytes: 999.0 * 1048576.0,
            wmem_queued_peak_bytes: 99_999 << 20,
            wmem_queued_mean_bytes: 0.0,
            sender_rtt_mean_us: 9_999_000.0,
            sender_tcp_mem_peak_bytes: 99_999 << 20,
            residence_ms: Some([1.5, 20.25, 999.0, 99_999.0]),
            marker_ms: Some([2.5, 999.0, 99_999.0]),
            residence_censored: true,
            marker_censored: true,
            wakeups: 999_999_999_999,
            wake_notsent_bytes: Some([u64::from(u32::MAX), u64::from(u32::MAX)]),
            wake_to_write_us: Some([3_600_000_000; 2]),
            limited_by_pct: Some(LimitedShares {
                rwnd: 100.0,
                sndbuf: 0.0,
                network: 99.95,
                app: 0.05,
            }),
            probe_rtt_ms: Some([466.25, 99_999.0, 99_999.0]),
        };
        let summary = Summary {
            phases: [
                (Phase::Fast, wide.clone()),
                (
                    Phase::Slow,
                    PhaseSummary {
                        residence_ms: None,
                        marker_ms: None,
                        wake_to_write_us: None,
                        ..wide
                    },
                ),
            ]
            .into(),
            cycles: Vec::new(),
            safe_lowat_bytes: Some([999_999_999.0, 99_999_999_999.0]),
        };
        let text = summary.to_string();
        assert!(text.contains("residence"), "{text}");
        assert!(text.contains("marker latency"), "{text}");
        assert!(text.contains("(markers unread at the end)"), "{text}");
        assert!(text.contains("idle probe round trip"), "{text}");
        assert!(
            text.contains("fast       100.0        0.0      100.0        0.1"),
            "{text}"
        );
        assert!(text.contains("99999.00"), "{text}");
        assert!(text.contains("4294967295   3600000000"), "{text}");
        assert!(
            text.contains("yardstick (bytes): 2 x fast rate x"),
            "{text}"
        );
        assert!(text.contains("   999999999  99999999999"), "{text}");
        assert!(!text.contains("smallest safe lowat"), "{text}");
        // The legend explains a mark the table shows.
        assert!(text.contains("≥99999.00"), "{text}");
        for line in text.lines() {
            assert!(
                line.chars().count() <= 80,
                "{} columns: {line:?}",
                line.len()
            );
        }
    }
}

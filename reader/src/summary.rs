//! The per-phase summary printed at the end of a run, built from the rows as they are
//! recorded so nothing is kept in memory but running totals. The figures are
//! `oscil_protocol::phase_figures`, the same definition the report uses.

use std::collections::BTreeMap;

use oscil_protocol::phase_figures::{PhaseFigures, Totals};
use oscil_protocol::{HostSample, Phase, PhaseSpan, ReaderSample, SenderSample};
use serde::Serialize;

/// Figures for all spans of one phase kind (fast or slow) together.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PhaseSummary {
    /// Seconds of this phase that ran.
    pub seconds: f64,
    pub bytes_read: u64,
    pub goodput_bps: f64,
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
}

impl PhaseSummary {
    fn new(totals: &Totals, page_size_bytes: u64) -> Self {
        PhaseSummary {
            seconds: totals.seconds,
            bytes_read: totals.bytes_read,
            goodput_bps: totals.goodput_bps().unwrap_or(0.0),
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
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub phases: BTreeMap<Phase, PhaseSummary>,
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

    /// The summary of what ran until `end_s`.
    pub fn finish(self, end_s: f64) -> Summary {
        let phases = self.figures.finish(end_s);
        let mut summary = Summary::default();
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

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:<6} {:>8} {:>16} {:>14} {:>14} {:>16} {:>10} {:>14}  residence p50/p90/p99/max",
            "phase",
            "seconds",
            "goodput",
            "notsent peak",
            "notsent mean",
            "wmem_queued pk",
            "rtt mean",
            "tcp mem peak",
        )?;
        for (phase, s) in &self.phases {
            writeln!(
                f,
                "{:<6} {:>8.1} {:>16} {:>14} {:>14} {:>16} {:>10} {:>14}  {}",
                phase.as_str(),
                s.seconds,
                format!("{:.1} Mbit/s", s.goodput_bps / 1e6),
                mib(s.notsent_peak_bytes as f64),
                mib(s.notsent_mean_bytes),
                mib(s.wmem_queued_peak_bytes as f64),
                format!("{:.1} ms", s.sender_rtt_mean_us / 1000.0),
                mib(s.sender_tcp_mem_peak_bytes as f64),
                s.residence_ms.map_or("n/a".into(), |q| format!(
                    "{:.1}/{:.1}/{:.1}/{:.1} ms",
                    q[0], q[1], q[2], q[3]
                )),
            )?;
        }
        Ok(())
    }
}

fn mib(bytes: f64) -> String {
    format!("{:.2} MiB", bytes / (1024.0 * 1024.0))
}

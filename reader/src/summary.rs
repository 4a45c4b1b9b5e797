//! The per-phase summary printed at the end of a run, built from the rows as they are
//! recorded so nothing is kept in memory but running totals.

use std::collections::BTreeMap;

use oscil_protocol::pattern::phase_of_sample;
use oscil_protocol::{HostSample, Phase, PhaseSpan, ReaderSample, SenderSample, Side};
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
    pub sender_rtt_mean_us: f64,
    /// Peak /proc/net/sockstat TCP memory on the sender's host.
    pub sender_tcp_mem_peak_bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub phases: BTreeMap<Phase, PhaseSummary>,
}

#[derive(Default)]
struct SenderTick {
    notsent_bytes: u64,
    wmem_queued_bytes: u64,
    rtt_sum_us: u64,
    flows: u64,
}

/// Running totals per phase.
pub struct SummaryBuilder {
    schedule: Vec<PhaseSpan>,
    interval_s: f64,
    page_size_bytes: u64,
    phases: BTreeMap<Phase, PhaseTotals>,
}

#[derive(Default)]
struct PhaseTotals {
    bytes_read: u64,
    sender_ticks: u64,
    notsent_sum: u64,
    notsent_peak: u64,
    wmem_sum: u64,
    wmem_peak: u64,
    rtt_sum_us: u64,
    rtt_count: u64,
    tcp_mem_peak_pages: u64,
}

impl SummaryBuilder {
    pub fn new(schedule: Vec<PhaseSpan>, interval_s: f64, page_size_bytes: u64) -> Self {
        SummaryBuilder {
            schedule,
            interval_s,
            page_size_bytes,
            phases: BTreeMap::new(),
        }
    }

    fn totals(&mut self, t_s: f64) -> Option<&mut PhaseTotals> {
        let phase = phase_of_sample(&self.schedule, t_s, self.interval_s)?;
        Some(self.phases.entry(phase).or_default())
    }

    /// A reader row counts under the phase it names, as the report counts it.
    pub fn reader(&mut self, row: &ReaderSample) {
        self.phases.entry(row.phase).or_default().bytes_read += row.bytes;
    }

    /// One interval's rows of every flow, as the daemon sends them.
    pub fn sender(&mut self, rows: &[SenderSample]) {
        let Some(first) = rows.first() else { return };
        let tick = rows.iter().fold(SenderTick::default(), |mut tick, row| {
            tick.notsent_bytes += u64::from(row.notsent_bytes);
            tick.wmem_queued_bytes += u64::from(row.wmem_queued);
            tick.rtt_sum_us += u64::from(row.rtt_us);
            tick.flows += 1;
            tick
        });
        if let Some(totals) = self.totals(first.t_s) {
            totals.sender_ticks += 1;
            totals.notsent_sum += tick.notsent_bytes;
            totals.notsent_peak = totals.notsent_peak.max(tick.notsent_bytes);
            totals.wmem_sum += tick.wmem_queued_bytes;
            totals.wmem_peak = totals.wmem_peak.max(tick.wmem_queued_bytes);
            totals.rtt_sum_us += tick.rtt_sum_us;
            totals.rtt_count += tick.flows;
        }
    }

    pub fn host(&mut self, row: &HostSample) {
        if row.side != Side::Sender {
            return;
        }
        if let Some(totals) = self.totals(row.t_s) {
            totals.tcp_mem_peak_pages = totals.tcp_mem_peak_pages.max(row.tcp_mem_pages);
        }
    }

    /// The summary of what ran until `end_s`.
    pub fn finish(&self, end_s: f64) -> Summary {
        let mut phases = BTreeMap::new();
        for (&phase, totals) in &self.phases {
            let seconds: f64 = self
                .schedule
                .iter()
                .filter(|s| s.phase == phase)
                .map(|s| (s.end_s.min(end_s) - s.start_s).max(0.0))
                .sum();
            let mean = |sum: u64, count: u64| {
                if count == 0 {
                    0.0
                } else {
                    sum as f64 / count as f64
                }
            };
            phases.insert(
                phase,
                PhaseSummary {
                    seconds,
                    bytes_read: totals.bytes_read,
                    goodput_bps: if seconds > 0.0 {
                        totals.bytes_read as f64 * 8.0 / seconds
                    } else {
                        0.0
                    },
                    notsent_peak_bytes: totals.notsent_peak,
                    notsent_mean_bytes: mean(totals.notsent_sum, totals.sender_ticks),
                    wmem_queued_peak_bytes: totals.wmem_peak,
                    wmem_queued_mean_bytes: mean(totals.wmem_sum, totals.sender_ticks),
                    sender_rtt_mean_us: mean(totals.rtt_sum_us, totals.rtt_count),
                    sender_tcp_mem_peak_bytes: totals.tcp_mem_peak_pages * self.page_size_bytes,
                },
            );
        }
        Summary { phases }
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:<6} {:>8} {:>16} {:>14} {:>14} {:>16} {:>10} {:>14}",
            "phase",
            "seconds",
            "goodput",
            "notsent peak",
            "notsent mean",
            "wmem_queued pk",
            "rtt mean",
            "tcp mem peak"
        )?;
        for (phase, s) in &self.phases {
            writeln!(
                f,
                "{:<6} {:>8.1} {:>16} {:>14} {:>14} {:>16} {:>10} {:>14}",
                phase.as_str(),
                s.seconds,
                format!("{:.1} Mbit/s", s.goodput_bps / 1e6),
                mib(s.notsent_peak_bytes as f64),
                mib(s.notsent_mean_bytes),
                mib(s.wmem_queued_peak_bytes as f64),
                format!("{:.1} ms", s.sender_rtt_mean_us / 1000.0),
                mib(s.sender_tcp_mem_peak_bytes as f64),
            )?;
        }
        Ok(())
    }
}

fn mib(bytes: f64) -> String {
    format!("{:.2} MiB", bytes / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oscil_protocol::PatternConfig;

    fn reader_row(t_s: f64, phase: Phase, bytes: u64) -> ReaderSample {
        ReaderSample {
            t_s,
            flow: 0,
            phase,
            bytes,
            rcv_wnd: None,
            rcv_ssthresh: 0,
            rcv_space: 0,
            rtt_us: 0,
            rmem_alloc: 0,
            rcvbuf: 0,
            rcv_rtt_us: 0,
            budget_bytes: 0,
        }
    }

    fn sender_row(t_s: f64, flow: u32, notsent_bytes: u32) -> SenderSample {
        SenderSample {
            t_s,
            flow,
            bytes: 0,
            cwnd: 10,
            unacked: 10,
            notsent_bytes,
            snd_wnd: None,
            rtt_us: 1000,
            delivery_rate_bps: 0,
            wmem_queued: notsent_bytes * 2,
            sndbuf: 0,
            snd_mss_bytes: 1448,
            inflight_bytes: 14480,
            total_retrans: 0,
            pacing_rate_bps: 0,
        }
    }

    #[test]
    fn goodput_and_queue_figures_per_phase() {
        let config = PatternConfig {
            fast_ms: 1000,
            slow_ms: 2000,
            fraction: 0.05,
            cycles: 1,
            full_speed: false,
        };
        let mut builder = SummaryBuilder::new(config.schedule(), 0.1, 4096);
        builder.reader(&reader_row(0.5, Phase::Fast, 1_000_000));
        builder.reader(&reader_row(1.0, Phase::Fast, 1_500_000));
        builder.reader(&reader_row(2.0, Phase::Slow, 100_000));
        builder.sender(&[sender_row(1.5, 0, 1000), sender_row(1.5, 1, 3000)]);
        builder.sender(&[sender_row(2.5, 0, 0), sender_row(2.5, 1, 0)]);
        let summary = builder.finish(3.0);
        let fast = &summary.phases[&Phase::Fast];
        assert_eq!(fast.bytes_read, 2_500_000);
        assert_eq!(fast.goodput_bps, 20_000_000.0);
        let slow = &summary.phases[&Phase::Slow];
        assert_eq!(slow.seconds, 2.0);
        assert_eq!(slow.goodput_bps, 400_000.0);
        assert_eq!(slow.notsent_peak_bytes, 4000);
        assert_eq!(slow.notsent_mean_bytes, 2000.0);
        assert_eq!(slow.wmem_queued_peak_bytes, 8000);
    }
}

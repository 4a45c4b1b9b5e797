//! The registry of summary figures: every figure the tables, charts, verdicts and the HTML
//! page show is one entry of [`METRICS`], and every one of those reads this table, so a
//! figure is defined once.
//!
//! To add a figure (issue 11's `residence_p50_ms`, `marker_p99_ms`, CPU per GB, ...):
//! 1. make the per-span quantity a field of `oscil_figures::Totals`, fed
//!    by `PhaseFigures` and merged by `Totals::merge` (a percentile needs a mergeable
//!    histogram there, not a mean of percentiles);
//! 2. add one [`Metric`] here with its column name (unit in the name), unit, direction
//!    and `value` over a [`Window`]; return `None` where the run did not measure it, and
//!    the tables leave the cell empty and the charts say "n/a".
//!
//! Nothing else changes: `summary.csv`, `configurations.csv`, `cycles.csv`,
//! `comparison.png`, the verdicts and the page pick the entry up. New entries go at the
//! end, so `summary.csv`'s existing columns keep their order.

use oscil_figures::WakeSpread;
use oscil_model::host::ProcessCost;
use oscil_model::run::RunCost;

use crate::figures::stats::Range;
use crate::human::{MBIT, MIB};
use crate::load::summary::{RunSummary, Scope};
use crate::load::window::{RunFacts, Window};

/// Which way a figure is better, for the words of a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
    /// A fact of the path, not a result to improve.
    Neither,
}

/// How a figure is shown: values in base units are divided by `scale`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unit {
    pub scale: f64,
    pub name: &'static str,
    /// Decimals in the CSV tables.
    pub decimals: usize,
    /// Decimals shown to a person.
    pub shown: usize,
}

pub const MBPS: Unit = Unit {
    scale: MBIT,
    name: "Mbit/s",
    decimals: 3,
    shown: 1,
};
pub const MIBS: Unit = Unit {
    scale: MIB,
    name: "MiB",
    decimals: 4,
    shown: 2,
};
pub const MS: Unit = Unit {
    scale: 1.0,
    name: "ms",
    decimals: 3,
    shown: 1,
};

pub const BYTES: Unit = Unit {
    scale: 1.0,
    name: "bytes",
    decimals: 0,
    shown: 0,
};
/// A share, stored 0 to 1, shown as a percentage.
pub const PCT: Unit = Unit {
    scale: 0.01,
    name: "%",
    decimals: 2,
    shown: 0,
};
pub const COUNT: Unit = Unit {
    scale: 1.0,
    name: "",
    decimals: 0,
    shown: 0,
};
/// Per 10^9 bytes read (CPU seconds, context switches).
pub const PER_GB: Unit = Unit {
    scale: 1.0,
    name: "per GB",
    decimals: 3,
    shown: 2,
};

impl Unit {
    /// A value in this unit for a person: `803.9 Mbit/s`, `1.25 MiB`, `466.2 ms`.
    pub fn text(&self, base: f64) -> String {
        match self.name {
            "" => self.number(base),
            "%" => format!("{}%", self.number(base)),
            name => format!("{} {name}", self.number(base)),
        }
    }

    /// The number alone, with the decimals a person needs.
    pub fn number(&self, base: f64) -> String {
        format!("{:.*}", self.shown, base / self.scale)
    }
}

/// The least CPU time a CPU figure is shown for: the kernel counts a process's CPU in
/// ticks of 10 ms (USER_HZ 100), so below 50 ticks one tick is more than 2% of the figure
/// and two runs' figures differ by the tick, not by the setting (a 2-run `--quick` spent
/// 0.01-0.02 s and showed 118.66 s per GB twice).
pub const MIN_CPU_S: f64 = 0.5;

impl RunFacts {
    /// `per_run` of one side's cost, per GB (10^9 bytes) read.
    fn per_gb(
        &self,
        side: fn(&RunCost) -> Option<ProcessCost>,
        per_run: fn(&ProcessCost) -> f64,
    ) -> Option<f64> {
        let cost = side(self.cost.as_ref()?)?;
        (self.bytes_read > 0).then(|| per_run(&cost) / (self.bytes_read as f64 / 1e9))
    }

    /// CPU seconds of one side per GB read, where it spent enough to count (`MIN_CPU_S`).
    fn cpu_per_gb(&self, side: fn(&RunCost) -> Option<ProcessCost>) -> Option<f64> {
        let spent = side(self.cost.as_ref()?)?.cpu_s();
        self.per_gb(side, ProcessCost::cpu_s)
            .filter(|_| spent >= MIN_CPU_S)
    }
}

impl RunSummary {
    /// One figure over `scope`, in base units.
    pub fn value(&self, metric: &Metric, scope: Scope) -> Option<f64> {
        (metric.value)(&self.window(scope))
    }
}

/// One summary figure.
#[derive(Debug)]
pub struct Metric {
    /// The column name in `summary.csv` and the stem of `configurations.csv`'s columns.
    pub column: &'static str,
    /// A title for charts and verdicts.
    pub title: &'static str,
    pub unit: Unit,
    pub better: Better,
    /// The figure in base units (bit/s, bytes, ms); `None` where it does not exist.
    pub value: fn(&Window) -> Option<f64>,
    /// Shown in `comparison.png`, judged in the verdicts and compared in `summary.md`.
    pub compared: bool,
}

fn mem_bytes(pages: Option<u64>, page_bytes: f64) -> Option<f64> {
    pages.map(|p| p as f64 * page_bytes)
}

pub const METRICS: &[Metric] = &[
    // Network goodput: what TCP delivered to the reader's receive queues, never above the
    // path's rate. The verdicts and the recommendation judge these.
    Metric {
        column: "net_goodput_fast_mbps",
        title: "Network goodput, fast phases (what TCP delivered)",
        unit: MBPS,
        better: Better::Higher,
        value: |w| w.fast.net_goodput_bps(),
        compared: true,
    },
    Metric {
        column: "net_goodput_slow_mbps",
        title: "Network goodput, slow phases (what TCP delivered)",
        unit: MBPS,
        better: Better::Higher,
        value: |w| w.slow.net_goodput_bps(),
        compared: true,
    },
    Metric {
        column: "slow_queued_peak_mib",
        title: "Peak sender queued bytes (wmem_queued), slow phases",
        unit: MIBS,
        better: Better::Lower,
        value: |w| w.slow.queued_peak().map(|b| b as f64),
        compared: true,
    },
    Metric {
        column: "slow_queued_mean_mib",
        title: "Mean sender queued bytes (wmem_queued), slow phases",
        unit: MIBS,
        better: Better::Lower,
        value: |w| w.slow.queued_mean_bytes(),
        compared: true,
    },
    // Not sent apart from queued: lowat trims only what is not yet sent, so these show
    // whether a run's memory is waiting data or data in flight.
    Metric {
        column: "slow_notsent_peak_mib",
        title: "Peak not-sent bytes (notsent_bytes), slow phases",
        unit: MIBS,
        better: Better::Lower,
        value: |w| w.slow.notsent_peak().map(|b| b as f64),
        compared: true,
    },
    Metric {
        column: "slow_notsent_mean_mib",
        title: "Mean not-sent bytes (notsent_bytes), slow phases",
        unit: MIBS,
        better: Better::Lower,
        value: |w| w.slow.notsent_mean_bytes(),
        compared: true,
    },
    Metric {
        column: "tcp_mem_peak_sender_mib",
        title: "Peak TCP memory of the whole sender host (sockstat, host-wide)",
        unit: MIBS,
        better: Better::Lower,
        value: |w| mem_bytes(w.both().sender_tcp_mem_peak_pages, w.sender_page_bytes),
        compared: true,
    },
    Metric {
        column: "tcp_mem_peak_reader_mib",
        title: "Peak TCP memory of the whole reader host (sockstat, host-wide)",
        unit: MIBS,
        better: Better::Lower,
        value: |w| mem_bytes(w.both().reader_tcp_mem_peak_pages, w.reader_page_bytes),
        compared: false,
    },
    Metric {
        column: "rtt_slow_mean_ms",
        title: "Mean RTT, slow phases",
        unit: MS,
        better: Better::Lower,
        value: |w| w.slow.rtt_mean_us().map(|us| us / 1000.0),
        compared: true,
    },
    Metric {
        column: "rtt_min_ms",
        title: "Lowest RTT",
        unit: MS,
        better: Better::Neither,
        value: |w| w.both().rtt_min_us.map(|us| f64::from(us) / 1000.0),
        compared: false,
    },
    // How long a byte waits behind the send queue: the tagged writes' TX timestamps.
    Metric {
        column: "residence_p50_ms",
        title: "Median send-queue residence of a write (a write still queued at the end counts at its age: then a lower bound)",
        unit: MS,
        better: Better::Lower,
        value: |w| ms_of_us(w.both().residence_quantile_us(0.5)),
        compared: true,
    },
    Metric {
        column: "residence_p99_ms",
        title: "99th percentile send-queue residence of a write (lower bound where writes were still queued)",
        unit: MS,
        better: Better::Lower,
        value: |w| ms_of_us(w.both().residence_quantile_us(0.99)),
        compared: true,
    },
    // From sender.csv's per-interval wake-up columns; a run recorded before them has only
    // run.json's whole-session figure, which stands in whatever the window.
    Metric {
        column: "pollout_notsent_max_bytes",
        title: "Most not-sent bytes at a POLLOUT wake-up",
        unit: BYTES,
        better: Better::Neither,
        value: |w| {
            let rows = w.both().wake_notsent_bytes.map(|n| n.max());
            rows.or(w.run.pollout_notsent_max_bytes).map(|b| b as f64)
        },
        compared: false,
    },
    // What each setting costs: over the whole session, per GB read.
    Metric {
        column: "sender_cpu_s_per_gb",
        title: "Sender CPU seconds per GB (whole run)",
        unit: PER_GB,
        better: Better::Lower,
        value: |w| w.run.cpu_per_gb(|c| c.sender),
        compared: true,
    },
    Metric {
        column: "reader_cpu_s_per_gb",
        title: "Reader CPU seconds per GB (whole run)",
        unit: PER_GB,
        better: Better::Lower,
        value: |w| w.run.cpu_per_gb(|c| c.reader),
        compared: false,
    },
    Metric {
        column: "sender_ctx_per_gb",
        title: "Sender context switches per GB (whole run)",
        unit: PER_GB,
        better: Better::Lower,
        value: |w| w.run.per_gb(|c| c.sender, |c| c.ctx() as f64),
        compared: false,
    },
    Metric {
        column: "reader_ctx_per_gb",
        title: "Reader context switches per GB (whole run)",
        unit: PER_GB,
        better: Better::Lower,
        value: |w| w.run.per_gb(|c| c.reader, |c| c.ctx() as f64),
        compared: false,
    },
    Metric {
        column: "link_cpu_s_per_gb",
        title: "Link emulator CPU seconds per GB (whole run, lab)",
        unit: PER_GB,
        better: Better::Neither,
        value: |w| {
            let gb = w.run.bytes_read as f64 / 1e9;
            w.run.link_cpu_s.filter(|_| gb > 0.0).map(|s| s / gb)
        },
        compared: false,
    },
    Metric {
        column: "tcp_mem_ns_peak_sender_mib",
        title: "Peak TCP memory, sender namespace",
        unit: MIBS,
        better: Better::Lower,
        value: |w| w.both().sender_tcp_mem_ns_peak_bytes.map(|b| b as f64),
        compared: true,
    },
    Metric {
        column: "tcp_mem_ns_peak_reader_mib",
        title: "Peak TCP memory, reader namespace",
        unit: MIBS,
        better: Better::Lower,
        value: |w| w.both().reader_tcp_mem_ns_peak_bytes.map(|b| b as f64),
        compared: false,
    },
    // What held the sender's flows back, as shares of their time (sender.csv's chrono
    // columns): the receiver's window, the send buffer, the network (cwnd, pacing), or
    // nothing to send. The fast phases' buffer shares are judged: a setting that holds the
    // flows back by a buffer more than the baseline did is worse.
    Metric {
        column: "fast_rwnd_limited_pct",
        title: "Receive-window limited, fast phases",
        unit: PCT,
        better: Better::Lower,
        value: |w| w.fast.limited_by?.rwnd_share(),
        compared: true,
    },
    Metric {
        column: "fast_sndbuf_limited_pct",
        title: "Send-buffer limited, fast phases",
        unit: PCT,
        better: Better::Lower,
        value: |w| w.fast.limited_by?.sndbuf_share(),
        compared: true,
    },
    Metric {
        column: "fast_network_limited_pct",
        title: "Network limited (cwnd, pacing), fast phases",
        unit: PCT,
        better: Better::Neither,
        value: |w| w.fast.limited_by?.network_share(),
        compared: false,
    },
    Metric {
        column: "fast_app_limited_pct",
        title: "Nothing to send (the writer behind), fast phases",
        unit: PCT,
        better: Better::Lower,
        value: |w| w.fast.limited_by?.application_share(),
        compared: false,
    },
    Metric {
        column: "slow_rwnd_limited_pct",
        title: "Receive-window limited, slow phases",
        unit: PCT,
        better: Better::Neither,
        value: |w| w.slow.limited_by?.rwnd_share(),
        compared: false,
    },
    Metric {
        column: "slow_sndbuf_limited_pct",
        title: "Send-buffer limited, slow phases",
        unit: PCT,
        better: Better::Neither,
        value: |w| w.slow.limited_by?.sndbuf_share(),
        compared: false,
    },
    // The receiver's side of Cloudflare's story: a reader that slows down after autotuning
    // opened the window fills its queue, and the kernel collapses, prunes, then drops.
    Metric {
        column: "reader_collapsed_count",
        title: "Segments collapsed in the receiver's namespace (TCPRcvCollapsed)",
        unit: COUNT,
        better: Better::Lower,
        value: |w| w.both().reader_collapsed.map(|n| n as f64),
        compared: false,
    },
    Metric {
        column: "reader_prune_count",
        title: "Receive-queue prunes in the receiver's namespace (PruneCalled)",
        unit: COUNT,
        better: Better::Lower,
        value: |w| w.both().reader_prunes.map(|n| n as f64),
        compared: false,
    },
    Metric {
        column: "reader_drop_count",
        title: "Segments the receiver dropped for want of room (pruned or refused)",
        unit: COUNT,
        better: Better::Lower,
        value: |w| w.both().reader_drops.map(|n| n as f64),
        compared: false,
    },
    // The seed's urgent line: from the daemon's write of a marker to the reader's read of
    // it (markers.csv), each give or take the clock uncertainty beside them.
    Metric {
        column: "marker_p50_ms",
        title: "Median marker latency, write to read (give or take the clock uncertainty; a marker unread at the end counts at its wait: then a lower bound)",
        unit: MS,
        better: Better::Lower,
        value: |w| ms_of_us(w.both().marker_quantile_us(0.5)),
        compared: true,
    },
    Metric {
        column: "marker_p99_ms",
        title: "99th percentile marker latency, write to read (give or take the clock uncertainty; lower bound where markers were unread)",
        unit: MS,
        better: Better::Lower,
        value: |w| ms_of_us(w.both().marker_quantile_us(0.99)),
        compared: true,
    },
    Metric {
        column: "clock_uncertainty_ms",
        title: "Clock uncertainty of the marker latencies (half the best exchange's round trip)",
        unit: MS,
        better: Better::Neither,
        value: |w| w.run.clock_uncertainty_us.map(|us| us / 1000.0),
        compared: false,
    },
    // The seed's yardstick for the smallest TCP_NOTSENT_LOWAT that does not starve the
    // link (`Totals::safe_lowat_bytes`): at the slowest wake-up, and at the median one.
    // Kept in the CSV tables as a diagnostic of the writer's wake-ups, never shown as a
    // setting to use: from a writer that answers in microseconds it gives a few bytes
    // (below one segment, where lowat means nothing), and one late wake-up makes it
    // megabytes where 128 KiB lost nothing; the comparison of measured lowats answers
    // the question instead.
    Metric {
        column: "safe_lowat_bytes",
        title: "Wake-up diagnostic: 2 x fast goodput x slowest POLLOUT wake-to-write (not a lowat to set)",
        unit: BYTES,
        better: Better::Neither,
        value: |w| w.fast.safe_lowat_bytes(WakeSpread::max),
        compared: false,
    },
    Metric {
        column: "safe_lowat_p50_bytes",
        title: "Wake-up diagnostic: 2 x fast goodput x median wake-to-write (not a lowat to set)",
        unit: BYTES,
        better: Better::Neither,
        value: |w| w.fast.safe_lowat_bytes(WakeSpread::p50),
        compared: false,
    },
    // What the application read: the workload, not a result. After a slow phase the fast
    // phase's reads drain the receive buffer at memory speed, so this can exceed the
    // path's rate; the slow phases read what the pattern set.
    Metric {
        column: "read_fast_mbps",
        title: "Application read rate, fast phases (drains the receive buffer: may exceed the path's rate)",
        unit: MBPS,
        better: Better::Neither,
        value: |w| w.fast.read_bps(),
        compared: false,
    },
    Metric {
        column: "read_slow_mbps",
        title: "Application read rate, slow phases (the workload's slow rate)",
        unit: MBPS,
        better: Better::Neither,
        value: |w| w.slow.read_bps(),
        compared: false,
    },
    // The workload's slow rate: configurations compared must share it
    // (`oscil_model::pattern::slow_rates_agree`), or they ran different workloads.
    Metric {
        column: "slow_rate_mbps",
        title: "Slow phases' reading rate set by the pattern (recorded; else what was read)",
        unit: MBPS,
        better: Better::Neither,
        value: |w| w.run.slow_rate_bps.or_else(|| w.slow.read_bps()),
        compared: false,
    },
    // The idle probe's round trip beside the markers (probe.csv): the path and both hosts'
    // stacks without the send queue, so the markers' excess over it is the sender host's
    // queue. A fact of the path, shown, not judged.
    Metric {
        column: "probe_rtt_p50_ms",
        title: "Median round trip of the idle probe (the path without the send queue)",
        unit: MS,
        better: Better::Neither,
        value: |w| ms_of_us(w.both().probe_quantile_us(0.5)),
        compared: false,
    },
    Metric {
        column: "probe_rtt_p99_ms",
        title: "99th percentile round trip of the idle probe",
        unit: MS,
        better: Better::Neither,
        value: |w| ms_of_us(w.both().probe_quantile_us(0.99)),
        compared: false,
    },
    // The receiver's queue events per phase (the whole run's are `reader_*_count`): a
    // receiver that slows after autotuning opened its window collapses and prunes in the
    // slow phases; one whose buffer is too small for the path does so in the fast ones.
    Metric {
        column: "fast_reader_collapsed_count",
        title: "Segments collapsed in the receiver's namespace, fast phases",
        unit: COUNT,
        better: Better::Lower,
        value: |w| w.fast.reader_collapsed.map(|n| n as f64),
        compared: false,
    },
    Metric {
        column: "slow_reader_collapsed_count",
        title: "Segments collapsed in the receiver's namespace, slow phases",
        unit: COUNT,
        better: Better::Lower,
        value: |w| w.slow.reader_collapsed.map(|n| n as f64),
        compared: false,
    },
    Metric {
        column: "fast_reader_prune_count",
        title: "Receive-queue prunes in the receiver's namespace, fast phases",
        unit: COUNT,
        better: Better::Lower,
        value: |w| w.fast.reader_prunes.map(|n| n as f64),
        compared: false,
    },
    Metric {
        column: "slow_reader_prune_count",
        title: "Receive-queue prunes in the receiver's namespace, slow phases",
        unit: COUNT,
        better: Better::Lower,
        value: |w| w.slow.reader_prunes.map(|n| n as f64),
        compared: false,
    },
    Metric {
        column: "fast_reader_drop_count",
        title: "Segments the receiver dropped for want of room, fast phases",
        unit: COUNT,
        better: Better::Lower,
        value: |w| w.fast.reader_drops.map(|n| n as f64),
        compared: false,
    },
    Metric {
        column: "slow_reader_drop_count",
        title: "Segments the receiver dropped for want of room, slow phases",
        unit: COUNT,
        better: Better::Lower,
        value: |w| w.slow.reader_drops.map(|n| n as f64),
        compared: false,
    },
];

/// Whether a figure of `w` is only a lower bound ("≥"): a percentile of waits at or above
/// a censored one (a write still queued, a marker still unread, when the run ended; see
/// `oscil_figures`). `None` for figures that are never censored.
pub fn lower_bound(metric: &Metric, w: &Window) -> Option<bool> {
    let both = || w.both();
    match metric.column {
        "residence_p50_ms" => Some(both().residence_at_least(0.5)),
        "residence_p99_ms" => Some(both().residence_at_least(0.99)),
        "marker_p50_ms" => Some(both().marker_at_least(0.5)),
        "marker_p99_ms" => Some(both().marker_at_least(0.99)),
        _ => None,
    }
}

fn ms_of_us(us: Option<u64>) -> Option<f64> {
    us.map(|us| us as f64 / 1000.0)
}

/// The entry with `column`; the registry is static, so a wrong name is a bug.
impl Metric {
    /// What values the figure can take: a share in %, any other figure at least 0.
    pub fn range(&self) -> Range {
        if self.unit == PCT {
            Range::Share
        } else {
            Range::NonNegative
        }
    }
}

pub fn metric(column: &str) -> &'static Metric {
    METRICS
        .iter()
        .find(|m| m.column == column)
        .unwrap_or_else(|| panic!("no figure {column:?} in the registry"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_names_are_unique_and_carry_their_unit() {
        for (i, m) in METRICS.iter().enumerate() {
            assert!(
                METRICS[..i].iter().all(|o| o.column != m.column),
                "{}",
                m.column
            );
            let suffix = match m.unit.name {
                "Mbit/s" => "_mbps",
                "MiB" => "_mib",
                "bytes" => "_bytes",
                "per GB" => "_per_gb",
                "" => "_count",
                "%" => "_pct",
                _ => "_ms",
            };
            assert!(m.column.ends_with(suffix), "{}", m.column);
        }
    }

    #[test]
    fn a_window_without_sender_samples_has_no_queue_figures() {
        let window = Window {
            sender_page_bytes: 4096.0,
            ..Window::default()
        };
        assert_eq!((metric("slow_queued_peak_mib").value)(&window), None);
        assert_eq!((metric("tcp_mem_peak_sender_mib").value)(&window), None);
        let mut with_memory = window.clone();
        with_memory.fast.sender_tcp_mem_peak_pages = Some(2);
        assert_eq!(
            (metric("tcp_mem_peak_sender_mib").value)(&with_memory),
            Some(8192.0)
        );
    }

    #[test]
    fn cost_is_per_gb_read_and_absent_where_a_side_did_not_tell() {
        let spent = ProcessCost {
            user_s: 1.0,
            system_s: 2.0,
            voluntary_ctx: 900,
            involuntary_ctx: 100,
        };
        let window = Window {
            run: RunFacts {
                bytes_read: 2_000_000_000,
                cost: Some(RunCost {
                    reader: None,
                    sender: Some(spent),
                }),
                pollout_notsent_max_bytes: None,
                link_cpu_s: None,
                clock_uncertainty_us: None,
                slow_rate_bps: None,
            },
            ..Window::default()
        };
        assert_eq!((metric("sender_cpu_s_per_gb").value)(&window), Some(1.5));
        // 0.3 s of CPU is 30 ticks: too coarse to show.
        let mut brief = window.clone();
        brief.run.cost = Some(RunCost {
            reader: None,
            sender: Some(ProcessCost {
                user_s: 0.1,
                system_s: 0.2,
                ..spent
            }),
        });
        assert_eq!((metric("sender_cpu_s_per_gb").value)(&brief), None);
        assert_eq!((metric("sender_ctx_per_gb").value)(&brief), Some(500.0));
        assert_eq!((metric("sender_ctx_per_gb").value)(&window), Some(500.0));
        assert_eq!((metric("reader_cpu_s_per_gb").value)(&window), None);
        assert_eq!((metric("residence_p50_ms").value)(&window), None);
        assert_eq!((metric("marker_p50_ms").value)(&window), None);
        assert_eq!((metric("clock_uncertainty_ms").value)(&window), None);
    }
}

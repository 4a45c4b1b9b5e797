//! Per-phase figures of a run: the one definition behind the reader's end-of-run summary
//! and the report's tables, fed rows one at a time so the reader can build it as it
//! records and the report from a loaded run directory.
//!
//! Each span of the schedule (cycle `c`, fast or slow) gets its own [`Totals`]; totals
//! merge, so a phase over the whole run, over the steady cycles (2 and later) or over one
//! cycle is the merge of the spans it covers. Definitions:
//! - a sample belongs to the span holding the middle of the interval that ends at it
//!   (`pattern::span_of_sample`); a reader sample after the schedule's end belongs to the
//!   last span (the sampler labels it so), a sender or host sample there to none;
//! - read rate: bytes the application read in the span's reader rows (`bytes`), times 8,
//!   over the span's length. After a slow phase it includes the drain of the receive
//!   buffer, so it can exceed the path's rate: it measures the reader, not the network;
//! - network goodput: bytes TCP delivered to the receive queues in the span's reader rows
//!   (`delivered_bytes`), times 8, over the span's length: at most the path's rate; none in
//!   runs recorded before the column;
//! - queued and not-sent bytes: `wmem_queued` and `notsent_bytes` summed over the flows of
//!   one sampling pass (the rows the daemon sent for one tick), then peak and mean over
//!   passes;
//! - RTT: the sender's smoothed `rtt_us` over rows that have an estimate (0 means none);
//! - TCP memory: the peak of sockstat `tcp_mem_pages` per side (pages; times the side's
//!   page size for bytes);
//! - residence: the `residence_us` of the rows in the span, in one histogram per span
//!   (all flows), so percentiles over merged spans are percentiles of the writes; a row
//!   where no tagged write completed but one is still queued counts its
//!   `pending_write_age_us` instead, a censored value (a lower bound): a queue that holds
//!   writes longer than the run still shows, and a percentile at or above a censored value
//!   is itself a lower bound ("≥", [`Totals::residence_at_least`]);
//! - marker latency: the `latency_us` of the markers (`markers.csv`) sent in the span, one
//!   histogram per span likewise; a latency below zero (within the clock's uncertainty)
//!   counts as zero; a marker unread at the end counts at its lower bound (`censored`), with
//!   the same "≥" rule ([`Totals::marker_at_least`]).
//! - probe round trip: the `rtt_us` of the idle probes (`probe.csv`) sent in the span, one
//!   histogram per span; a lost probe counts for nothing.
//! - POLLOUT wake-ups: the rows' `wakeups` summed; of not-sent bytes at a wake-up and of
//!   wake-to-write time, the largest of the rows' maxima, and the median of the rows'
//!   medians each counted once per wake-up of its row (see [`WakeSpread`]);
//! - the smallest safe lowat: see [`Totals::safe_lowat_bytes`].
//!
//! All arithmetic saturates: a hostile or broken peer's rows cannot overflow a total.

use hdrhistogram::Histogram;

use oscil_model::pattern::{span_of_sample, PhaseSpan};

use oscil_model::files::rows::{HostSample, Phase, ReaderSample, SenderSample, Side};

/// The histograms' top: an hour; a longer wait is counted there.
const MAX_RESIDENCE_US: u64 = 3_600_000_000;
use oscil_model::files::markers::MarkerRow;

/// Running totals of one span, or of several merged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Seconds of the schedule these totals cover.
    pub seconds: f64,
    pub bytes_read: u64,
    /// Bytes TCP delivered (reader.csv `delivered_bytes`); `None` where no row had it.
    pub bytes_delivered: Option<u64>,
    /// Sampling passes of the sender (one sum over flows each).
    pub sender_passes: u64,
    /// Of those, the passes whose rows had `notsent_bytes` (the kernel gives it from 4.6).
    pub notsent_passes: u64,
    pub notsent_sum_bytes: u64,
    pub notsent_peak_bytes: u64,
    pub queued_sum_bytes: u64,
    pub queued_peak_bytes: u64,
    pub rtt_sum_us: u64,
    pub rtt_count: u64,
    pub rtt_min_us: Option<u32>,
    pub sender_tcp_mem_peak_pages: Option<u64>,
    pub reader_tcp_mem_peak_pages: Option<u64>,
    /// Send-queue residence of the tagged writes (`residence_us`), and of rows where none
    /// completed the censored wait of the oldest still queued, mergeable; `None` where
    /// there was neither.
    pub residence_us: Option<Histogram<u64>>,
    /// End-to-end latency of the markers sent in the span, µs, censored ones (unread at the
    /// run's end) at their lower bound; `None` where there was none.
    pub marker_latency_us: Option<Histogram<u64>>,
    /// Of those, the censored ones: lower bounds, not latencies.
    pub marker_censored_us: Option<Histogram<u64>>,
    /// Rows with no tagged write completed but one still queued: the oldest one's age
    /// (`pending_write_age_us`), a lower bound of its residence. Also in `residence_us`.
    pub residence_censored_us: Option<Histogram<u64>>,
    /// Peak TCP memory of each side's own network namespace (host.csv `tcp_mem_ns_bytes`);
    /// none in runs recorded before it was.
    pub sender_tcp_mem_ns_peak_bytes: Option<u64>,
    pub reader_tcp_mem_ns_peak_bytes: Option<u64>,
    /// POLLOUT wake-ups of the daemon's writers (sender.csv `wakeups`).
    pub wakeups: u64,
    /// Not-sent bytes at a wake-up (`wake_notsent_p50_bytes`, `wake_notsent_max_bytes`);
    /// `None` where no row had a wake-up (or the run predates the columns).
    pub wake_notsent_bytes: Option<WakeSpread>,
    /// Microseconds from a wake-up to the end of the write (`wake_to_write_p50_us`,
    /// `wake_to_write_max_us`); `None` likewise.
    pub wake_to_write_us: Option<WakeSpread>,
    /// The receiver's namespace over the span (host.csv's `TcpExt` columns): segments
    /// collapsed, prune passes, and segments dropped (pruned from the receive or the
    /// out-of-order queue, or refused by a full receive queue or backlog). `None` where
    /// no row carried the counters.
    pub reader_collapsed: Option<u64>,
    pub reader_prunes: Option<u64>,
    pub reader_drops: Option<u64>,
    /// Where the sender's flows spent their time (sender.csv's chrono columns); `None`
    /// where no row carried them.
    pub limited_by: Option<LimitedBy>,
    /// Round trips of the idle probes sent in the span (`probe.csv`), µs; `None` where
    /// there was none.
    pub probe_rtt_us: Option<Histogram<u64>>,
}

/// Flow-time summed over the sender's rows, and what held the flows back in it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LimitedBy {
    pub flow_us: u64,
    pub busy_us: u64,
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
}

impl LimitedBy {
    fn add(self, other: LimitedBy) -> LimitedBy {
        LimitedBy {
            flow_us: self.flow_us.saturating_add(other.flow_us),
            busy_us: self.busy_us.saturating_add(other.busy_us),
            rwnd_limited_us: self.rwnd_limited_us.saturating_add(other.rwnd_limited_us),
            sndbuf_limited_us: self
                .sndbuf_limited_us
                .saturating_add(other.sndbuf_limited_us),
        }
    }

    /// `part_us` as a share of the flow-time, 0 to 1 (the counters tick in jiffies, so a
    /// row's busy time can pass its span by one).
    fn share(&self, part_us: u64) -> Option<f64> {
        (self.flow_us > 0).then(|| (part_us as f64 / self.flow_us as f64).clamp(0.0, 1.0))
    }

    /// Held back by the receiver's advertised window.
    pub fn rwnd_share(&self) -> Option<f64> {
        self.share(self.rwnd_limited_us)
    }

    /// Held back by the send buffer (`SO_SNDBUF`, `tcp_wmem`).
    pub fn sndbuf_share(&self) -> Option<f64> {
        self.share(self.sndbuf_limited_us)
    }

    /// Busy and held back by neither buffer: the congestion window or pacing.
    pub fn network_share(&self) -> Option<f64> {
        let buffers = self.rwnd_limited_us.saturating_add(self.sndbuf_limited_us);
        self.share(self.busy_us.saturating_sub(buffers))
    }

    /// Nothing to send: the application (here, the daemon's writer) did not keep up.
    pub fn application_share(&self) -> Option<f64> {
        self.share(self.flow_us.saturating_sub(self.busy_us))
    }
}

/// One wake-up figure over the rows of some spans. A row carries its interval's median and
/// largest value, not each wake-up, so the median here is the median of the rows' medians,
/// each counted as many times as its row had wake-ups: the median of the wake-ups
/// themselves when the intervals' values do not overlap, an estimate when they do (all
/// medians to 1%). The largest is exact.
#[derive(Debug, Clone, PartialEq)]
pub struct WakeSpread {
    medians: Histogram<u64>,
    max: u64,
}

impl WakeSpread {
    fn new() -> Self {
        WakeSpread {
            medians: Histogram::new_with_bounds(1, 1 << 40, 2).expect("valid bounds"),
            max: 0,
        }
    }

    fn record(&mut self, p50: u64, max: u64, wakeups: u64) {
        self.medians.saturating_record_n(p50, wakeups);
        self.max = self.max.max(max);
    }

    fn merge(&mut self, other: &WakeSpread) {
        self.medians
            .add(&other.medians)
            .expect("histograms of one shape");
        self.max = self.max.max(other.max);
    }

    /// The median (see the type's note): its bucket's top, never above the largest.
    pub fn p50(&self) -> u64 {
        self.medians.value_at_quantile(0.5).min(self.max)
    }

    pub fn max(&self) -> u64 {
        self.max
    }
}

/// Adds `theirs` into `ours`, taking it whole where `ours` has nothing yet.
fn merge_into<T: Clone>(ours: &mut Option<T>, theirs: &Option<T>, add: impl FnOnce(&mut T, &T)) {
    match (ours.as_mut(), theirs) {
        (Some(ours), Some(theirs)) => add(ours, theirs),
        (None, Some(theirs)) => *ours = Some(theirs.clone()),
        (_, None) => {}
    }
}

fn max_opt<T: Ord + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    a.max(b)
}

fn add_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    }
}

fn min_opt<T: Ord + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Adds `theirs` into `ours`, making it where there was none.
fn merge_histogram(ours: &mut Option<Histogram<u64>>, theirs: &Option<Histogram<u64>>) {
    merge_into(ours, theirs, |ours, theirs| {
        ours.add(theirs).expect("histograms of one shape")
    });
}

/// Records `us` in a histogram of waits up to `MAX_RESIDENCE_US`, making it where there was
/// none.
fn record_wait(histogram: &mut Option<Histogram<u64>>, us: u64) {
    histogram
        .get_or_insert_with(|| {
            Histogram::new_with_bounds(1, MAX_RESIDENCE_US, 3).expect("valid bounds")
        })
        .saturating_record(us);
}

/// A quantile of `all` (completed and censored values) is a lower bound when a censored
/// value is at or below it: that value's truth may lie above and carry the quantile up. A
/// censored value above the quantile cannot move it, however far above its truth lies.
/// Compared at the histograms' precision (values in one bucket are equal).
fn at_least(
    all: &Option<Histogram<u64>>,
    censored: &Option<Histogram<u64>>,
    quantile: f64,
) -> bool {
    let (Some(all), Some(censored)) = (all, censored) else {
        return false;
    };
    let q = all.value_at_quantile(quantile);
    !censored.is_empty() && (censored.min() <= q || censored.equivalent(censored.min(), q))
}

fn ratio(sum: u64, count: u64) -> Option<f64> {
    (count > 0).then(|| sum as f64 / count as f64)
}

impl Totals {
    /// Adds `other` to these totals: sums add, peaks take the larger.
    pub fn merge(&mut self, other: &Totals) {
        self.seconds += other.seconds;
        self.bytes_read = self.bytes_read.saturating_add(other.bytes_read);
        merge_into(&mut self.bytes_delivered, &other.bytes_delivered, |a, b| {
            *a = a.saturating_add(*b)
        });
        self.sender_passes = self.sender_passes.saturating_add(other.sender_passes);
        self.notsent_passes = self.notsent_passes.saturating_add(other.notsent_passes);
        self.notsent_sum_bytes = self
            .notsent_sum_bytes
            .saturating_add(other.notsent_sum_bytes);
        self.notsent_peak_bytes = self.notsent_peak_bytes.max(other.notsent_peak_bytes);
        self.queued_sum_bytes = self.queued_sum_bytes.saturating_add(other.queued_sum_bytes);
        self.queued_peak_bytes = self.queued_peak_bytes.max(other.queued_peak_bytes);
        self.rtt_sum_us = self.rtt_sum_us.saturating_add(other.rtt_sum_us);
        self.rtt_count = self.rtt_count.saturating_add(other.rtt_count);
        self.rtt_min_us = min_opt(self.rtt_min_us, other.rtt_min_us);
        self.sender_tcp_mem_peak_pages = max_opt(
            self.sender_tcp_mem_peak_pages,
            other.sender_tcp_mem_peak_pages,
        );
        self.reader_tcp_mem_peak_pages = max_opt(
            self.reader_tcp_mem_peak_pages,
            other.reader_tcp_mem_peak_pages,
        );
        self.sender_tcp_mem_ns_peak_bytes = max_opt(
            self.sender_tcp_mem_ns_peak_bytes,
            other.sender_tcp_mem_ns_peak_bytes,
        );
        self.reader_tcp_mem_ns_peak_bytes = max_opt(
            self.reader_tcp_mem_ns_peak_bytes,
            other.reader_tcp_mem_ns_peak_bytes,
        );
        merge_histogram(&mut self.residence_us, &other.residence_us);
        merge_histogram(&mut self.marker_latency_us, &other.marker_latency_us);
        merge_histogram(&mut self.marker_censored_us, &other.marker_censored_us);
        merge_histogram(&mut self.probe_rtt_us, &other.probe_rtt_us);
        merge_histogram(
            &mut self.residence_censored_us,
            &other.residence_censored_us,
        );
        self.wakeups = self.wakeups.saturating_add(other.wakeups);
        merge_into(
            &mut self.wake_notsent_bytes,
            &other.wake_notsent_bytes,
            WakeSpread::merge,
        );
        merge_into(
            &mut self.wake_to_write_us,
            &other.wake_to_write_us,
            WakeSpread::merge,
        );
        self.reader_collapsed = add_opt(self.reader_collapsed, other.reader_collapsed);
        self.reader_prunes = add_opt(self.reader_prunes, other.reader_prunes);
        self.reader_drops = add_opt(self.reader_drops, other.reader_drops);
        self.limited_by = match (self.limited_by, other.limited_by) {
            (Some(a), Some(b)) => Some(a.add(b)),
            (a, b) => a.or(b),
        };
    }

    /// The smallest `TCP_NOTSENT_LOWAT` that keeps the not-sent queue from running dry at
    /// these totals' goodput when the writer answers POLLOUT in the wake-to-write time
    /// `figure` picks (`WakeSpread::max`, `WakeSpread::p50`), in bytes. The seed's yardstick
    /// is the link's rate times the time the writer takes to answer; the kernel wakes the
    /// writer only once fewer than L/2 bytes are left to send, which last L/2 / rate
    /// seconds, hence L = 2 x goodput (bytes/s) x wake-to-write. At the largest wake-to-write
    /// no wake-up of the run would have let the link idle; at the median, the slower half
    /// would have. Callers take the fast phases' totals (the full-speed rate): network
    /// goodput, or in runs before it was recorded the read rate; `None` without either or
    /// without wake-ups.
    pub fn safe_lowat_bytes(&self, figure: fn(&WakeSpread) -> u64) -> Option<f64> {
        let rate_bytes_per_s = self.net_goodput_bps().or(self.read_bps())? / 8.0;
        let answer_s = figure(self.wake_to_write_us.as_ref()?) as f64 / 1e6;
        Some(2.0 * rate_bytes_per_s * answer_s)
    }

    /// The residence below which a share `quantile` (0.5, 0.99) of the tagged writes left,
    /// censored waits counted at their lower bound (see [`Totals::residence_at_least`]).
    pub fn residence_quantile_us(&self, quantile: f64) -> Option<u64> {
        let h = self.residence_us.as_ref()?;
        Some(h.value_at_quantile(quantile))
    }

    /// Whether `residence_quantile_us(quantile)` is only a lower bound ("≥"): a censored
    /// wait is at or below it, and its true value may lie above.
    pub fn residence_at_least(&self, quantile: f64) -> bool {
        at_least(&self.residence_us, &self.residence_censored_us, quantile)
    }

    /// Whether `marker_quantile_us(quantile)` is only a lower bound, likewise.
    pub fn marker_at_least(&self, quantile: f64) -> bool {
        at_least(&self.marker_latency_us, &self.marker_censored_us, quantile)
    }

    /// A sender row's wake-ups, when it had any.
    fn record_wakeups(&mut self, row: &SenderSample) {
        let wakeups = row.wakeups.unwrap_or(0);
        if wakeups == 0 {
            return;
        }
        self.wakeups = self.wakeups.saturating_add(wakeups);
        for (spread, p50, max) in [
            (
                &mut self.wake_notsent_bytes,
                row.wake_notsent_p50_bytes,
                row.wake_notsent_max_bytes,
            ),
            (
                &mut self.wake_to_write_us,
                row.wake_to_write_p50_us,
                row.wake_to_write_max_us,
            ),
        ] {
            if let (Some(p50), Some(max)) = (p50, max) {
                spread
                    .get_or_insert_with(WakeSpread::new)
                    .record(p50, max, wakeups);
            }
        }
    }

    /// A sender row's flow-time and what held it back, when the row has the columns.
    fn record_limits(&mut self, row: &SenderSample, interval_s: f64) {
        let (Some(busy_us), Some(rwnd_limited_us), Some(sndbuf_limited_us)) =
            (row.busy_us, row.rwnd_limited_us, row.sndbuf_limited_us)
        else {
            return;
        };
        let row = LimitedBy {
            flow_us: (row.span_or(interval_s) * 1e6).round() as u64,
            busy_us,
            rwnd_limited_us,
            sndbuf_limited_us,
        };
        self.limited_by = Some(self.limited_by.unwrap_or_default().add(row));
    }

    /// The round trip below which a share `quantile` of the idle probes came back.
    pub fn probe_quantile_us(&self, quantile: f64) -> Option<u64> {
        let h = self.probe_rtt_us.as_ref()?;
        Some(h.value_at_quantile(quantile))
    }

    /// The latency below which a share `quantile` (0.5, 0.99, 1.0) of the markers arrived.
    pub fn marker_quantile_us(&self, quantile: f64) -> Option<u64> {
        let h = self.marker_latency_us.as_ref()?;
        Some(h.value_at_quantile(quantile))
    }

    /// Bits per second the application read; none for a span that did not run.
    pub fn read_bps(&self) -> Option<f64> {
        (self.seconds > 0.0).then(|| self.bytes_read as f64 * 8.0 / self.seconds)
    }

    /// Network goodput: bits per second TCP delivered to the receive queues; none for a
    /// span that did not run or a run recorded before `delivered_bytes`.
    pub fn net_goodput_bps(&self) -> Option<f64> {
        let bytes = self.bytes_delivered?;
        (self.seconds > 0.0).then(|| bytes as f64 * 8.0 / self.seconds)
    }

    pub fn notsent_mean_bytes(&self) -> Option<f64> {
        ratio(self.notsent_sum_bytes, self.notsent_passes)
    }

    pub fn queued_mean_bytes(&self) -> Option<f64> {
        ratio(self.queued_sum_bytes, self.sender_passes)
    }

    /// Peaks exist only where the sender was sampled.
    pub fn notsent_peak(&self) -> Option<u64> {
        (self.notsent_passes > 0).then_some(self.notsent_peak_bytes)
    }

    pub fn queued_peak(&self) -> Option<u64> {
        (self.sender_passes > 0).then_some(self.queued_peak_bytes)
    }

    pub fn rtt_mean_us(&self) -> Option<f64> {
        ratio(self.rtt_sum_us, self.rtt_count)
    }
}

/// One sampling pass of the sender: the rows of every flow at one tick.
#[derive(Debug, Default)]
struct Pass {
    t_s: f64,
    last_flow: u32,
    /// `None` until a row of the pass had it.
    notsent_bytes: Option<u64>,
    queued_bytes: u64,
    rtt_sum_us: u64,
    rtt_count: u64,
    rtt_min_us: Option<u32>,
}

/// One span of the schedule with its totals.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanTotals {
    pub span: PhaseSpan,
    pub totals: Totals,
}

/// Builds the totals of every span from rows fed in the order they were recorded.
#[derive(Debug)]
pub struct PhaseFigures {
    schedule: Vec<PhaseSpan>,
    /// One per span of `schedule`.
    totals: Vec<Totals>,
    interval_s: f64,
    pass: Option<Pass>,
}

impl Pass {
    /// The pass as totals of its own, to merge into its span's.
    fn totals(&self) -> Totals {
        Totals {
            sender_passes: 1,
            notsent_passes: u64::from(self.notsent_bytes.is_some()),
            notsent_sum_bytes: self.notsent_bytes.unwrap_or(0),
            notsent_peak_bytes: self.notsent_bytes.unwrap_or(0),
            queued_sum_bytes: self.queued_bytes,
            queued_peak_bytes: self.queued_bytes,
            rtt_sum_us: self.rtt_sum_us,
            rtt_count: self.rtt_count,
            rtt_min_us: self.rtt_min_us,
            ..Totals::default()
        }
    }
}

impl PhaseFigures {
    pub fn new(schedule: &[PhaseSpan], interval_s: f64) -> Self {
        PhaseFigures {
            schedule: schedule.to_vec(),
            totals: vec![Totals::default(); schedule.len()],
            interval_s,
            pass: None,
        }
    }

    fn span_index(&self, t_s: f64) -> Option<usize> {
        span_of_sample(&self.schedule, t_s, self.interval_s)
    }

    pub fn reader(&mut self, row: &ReaderSample) {
        let index = self.span_index(row.t_s).or_else(|| {
            let last = self.schedule.len().checked_sub(1)?;
            (row.t_s >= self.schedule[last].end_s).then_some(last)
        });
        if let Some(i) = index {
            let totals = &mut self.totals[i];
            totals.bytes_read = totals.bytes_read.saturating_add(row.bytes);
            if let Some(delivered) = row.delivered_bytes {
                let sum = totals.bytes_delivered.get_or_insert(0);
                *sum = sum.saturating_add(delivered);
            }
        }
    }

    /// A sender row; a row of a flow not after the previous row's, or of another tick,
    /// starts a new pass.
    pub fn sender(&mut self, row: &SenderSample) {
        if let Some(i) = self.span_index(row.t_s) {
            let totals = &mut self.totals[i];
            match (row.residence_us, row.pending_write_age_us) {
                (Some(us), _) => record_wait(&mut totals.residence_us, us),
                (None, Some(us)) => {
                    record_wait(&mut totals.residence_us, us);
                    record_wait(&mut totals.residence_censored_us, us);
                }
                (None, None) => {}
            }
            self.totals[i].record_wakeups(row);
            self.totals[i].record_limits(row, self.interval_s);
        }
        let tick = |t_s: f64| (t_s / self.interval_s).round() as i64;
        let same_pass = self
            .pass
            .as_ref()
            .is_some_and(|p| row.flow > p.last_flow && tick(p.t_s) == tick(row.t_s));
        if !same_pass {
            self.close_pass();
        }
        let pass = self.pass.get_or_insert_with(|| Pass {
            t_s: row.t_s,
            ..Pass::default()
        });
        pass.last_flow = row.flow;
        if let Some(notsent) = row.notsent_bytes {
            let sum = pass.notsent_bytes.get_or_insert(0);
            *sum = sum.saturating_add(u64::from(notsent));
        }
        pass.queued_bytes = pass.queued_bytes.saturating_add(u64::from(row.wmem_queued));
        if row.rtt_us > 0 {
            pass.rtt_sum_us = pass.rtt_sum_us.saturating_add(u64::from(row.rtt_us));
            pass.rtt_count += 1;
            pass.rtt_min_us = min_opt(pass.rtt_min_us, Some(row.rtt_us));
        }
    }

    fn close_pass(&mut self) {
        let Some(pass) = self.pass.take() else { return };
        if let Some(i) = self.span_index(pass.t_s) {
            self.totals[i].merge(&pass.totals());
        }
    }

    /// A marker, in the span in which it was sent; a censored one (unread at the end)
    /// counts at its lower bound and says so; one whose read time is not known counts for
    /// nothing.
    pub fn marker(&mut self, row: &MarkerRow) {
        let Some(latency_us) = row.latency_us else {
            return;
        };
        if let Some(i) = self.schedule.iter().position(|s| s.contains(row.sent_t_s)) {
            let us = latency_us.max(0.0).round() as u64;
            record_wait(&mut self.totals[i].marker_latency_us, us);
            if row.censored {
                record_wait(&mut self.totals[i].marker_censored_us, us);
            }
        }
    }

    /// An idle probe, in the span in which it was sent; a lost one counts for nothing.
    pub fn probe(&mut self, row: &oscil_model::files::probe::ProbeRow) {
        let Some(rtt_us) = row.rtt_us else { return };
        if let Some(i) = self.schedule.iter().position(|s| s.contains(row.t_s)) {
            record_wait(&mut self.totals[i].probe_rtt_us, rtt_us);
        }
    }

    pub fn host(&mut self, row: &HostSample) {
        let Some(i) = self.span_index(row.t_s) else {
            return;
        };
        let totals = &mut self.totals[i];
        let (peak, ns_peak) = match row.side {
            Side::Sender => (
                &mut totals.sender_tcp_mem_peak_pages,
                &mut totals.sender_tcp_mem_ns_peak_bytes,
            ),
            Side::Reader => (
                &mut totals.reader_tcp_mem_peak_pages,
                &mut totals.reader_tcp_mem_ns_peak_bytes,
            ),
        };
        *peak = max_opt(*peak, Some(row.tcp_mem_pages));
        *ns_peak = max_opt(*ns_peak, row.tcp_mem_ns_bytes);
        if row.side == Side::Reader {
            totals.reader_collapsed = add_opt(totals.reader_collapsed, row.tcp_collapsed);
            totals.reader_prunes = add_opt(totals.reader_prunes, row.tcp_prune_called);
            let drops = [
                row.tcp_rcv_pruned,
                row.tcp_ofo_pruned,
                row.tcp_rcvq_drop,
                row.tcp_backlog_drop,
            ];
            let dropped = drops.into_iter().reduce(add_opt).flatten();
            totals.reader_drops = add_opt(totals.reader_drops, dropped);
        }
    }

    /// Every span's totals, with each span's length cut at `end_s` (the run's end).
    pub fn finish(mut self, end_s: f64) -> RunPhases {
        self.close_pass();
        let spans = self
            .schedule
            .into_iter()
            .zip(self.totals)
            .map(|(span, mut totals)| {
                totals.seconds = (span.end_s.min(end_s) - span.start_s).max(0.0);
                SpanTotals { span, totals }
            })
            .collect();
        RunPhases { spans }
    }
}

/// The totals of every span of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunPhases {
    pub spans: Vec<SpanTotals>,
}

impl RunPhases {
    /// `phase` merged over the spans of the cycles `cycles` accepts.
    pub fn merged(&self, phase: Phase, cycles: impl Fn(u32) -> bool) -> Totals {
        let mut merged = Totals::default();
        for s in self
            .spans
            .iter()
            .filter(|s| s.span.phase == phase && cycles(s.span.cycle))
        {
            merged.merge(&s.totals);
        }
        merged
    }

    /// The highest cycle number of the schedule (0 for an empty one).
    pub fn cycles(&self) -> u32 {
        self.spans.iter().map(|s| s.span.cycle).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oscil_model::pattern::PatternConfig;

    fn reader_row(t_s: f64, bytes: u64) -> ReaderSample {
        ReaderSample {
            t_s,
            flow: 0,
            phase: Phase::Fast,
            bytes,
            rcv_wnd: None,
            rcv_ssthresh: 0,
            rcv_space: 0,
            rtt_us: 0,
            rmem_alloc: 0,
            rcvbuf: 0,
            rcv_rtt_us: 0,
            budget_bytes: 0,
            span_s: 0.1,
            delivered_bytes: None,
            group: None,
        }
    }

    fn sender_row(t_s: f64, flow: u32, notsent_bytes: u32, rtt_us: u32) -> SenderSample {
        SenderSample {
            t_s,
            flow,
            bytes: 0,
            cwnd: 10,
            unacked: 10,
            notsent_bytes: Some(notsent_bytes),
            snd_wnd: None,
            rtt_us,
            delivery_rate_bps: Some(0),
            wmem_queued: notsent_bytes.saturating_mul(2),
            sndbuf: 0,
            snd_mss_bytes: 1448,
            inflight_bytes: 0,
            total_retrans: 0,
            pacing_rate_bps: Some(0),
            span_s: 0.1,
            ..SenderSample::default()
        }
    }

    fn host_row(t_s: f64, side: Side, pages: u64) -> HostSample {
        HostSample {
            tcp_mem_pages: pages,
            ..HostSample::empty(t_s, side)
        }
    }

    /// 1 s fast, 2 s slow, two cycles: spans at 0-1, 1-3, 3-4, 4-6.
    fn figures() -> PhaseFigures {
        let pattern = PatternConfig {
            fast_ms: 1000,
            slow_ms: 2000,
            fraction: oscil_model::pattern::Fraction::CLOUDFLARE,
            cycles: 2,
            full_speed: false,
        };
        PhaseFigures::new(&pattern.schedule(), 0.1)
    }

    #[test]
    fn network_goodput_counts_what_tcp_delivered_and_the_read_rate_the_drain() {
        let mut f = figures();
        let row = |t_s, read, delivered| ReaderSample {
            delivered_bytes: delivered,
            ..reader_row(t_s, read)
        };
        // Cycle 2's fast second drains 3 MB that queued in the slow phase while the network
        // delivers 1 MB in it: read rate 24 Mbit/s, network goodput 8.
        f.reader(&row(0.5, 1_000_000, Some(1_000_000)));
        f.reader(&row(2.0, 10_000, Some(3_010_000)));
        f.reader(&row(3.5, 3_000_000, Some(1_000_000)));
        let phases = f.finish(6.0);
        let steady = phases.merged(Phase::Fast, |c| c >= 2);
        assert_eq!(steady.read_bps(), Some(24_000_000.0));
        assert_eq!(steady.net_goodput_bps(), Some(8_000_000.0));
        let slow = phases.merged(Phase::Slow, |_| true);
        assert_eq!(slow.bytes_delivered, Some(3_010_000));
        // Rows from before the column: no network goodput, never a zero.
        let mut old = figures();
        old.reader(&reader_row(0.5, 1_000_000));
        let old = old.finish(6.0).merged(Phase::Fast, |_| true);
        assert_eq!(old.net_goodput_bps(), None);
        assert_eq!(old.read_bps(), Some(4_000_000.0));
    }

    #[test]
    fn spans_get_their_own_rows_and_merge_by_phase_and_cycle() {
        let mut f = figures();
        f.reader(&reader_row(0.5, 1_000_000));
        f.reader(&reader_row(1.0, 250_000)); // the middle, 0.95 s, is still fast
        f.reader(&reader_row(3.5, 500_000));
        f.reader(&reader_row(6.02, 7)); // after the end: the last span's
                                        // Two passes in cycle 1's slow span, one in cycle 2's; a rowless RTT is left out.
        f.sender(&sender_row(1.5, 0, 1000, 2000));
        f.sender(&sender_row(1.5, 1, 3000, 0));
        f.sender(&sender_row(1.6, 0, 0, 4000));
        f.sender(&sender_row(1.6, 1, 0, 6000));
        f.sender(&sender_row(5.0, 0, 10_000, 1000));
        f.sender(&sender_row(7.0, 0, 99_999, 1)); // after the end: no span
        f.host(&host_row(1.5, Side::Sender, 30));
        f.host(&host_row(5.0, Side::Sender, 20));
        f.host(&host_row(5.0, Side::Reader, 40));
        let phases = f.finish(6.0);

        let fast = phases.merged(Phase::Fast, |_| true);
        assert_eq!((fast.seconds, fast.bytes_read), (2.0, 1_750_000));
        assert_eq!(fast.read_bps(), Some(7_000_000.0));
        assert_eq!(phases.merged(Phase::Fast, |c| c >= 2).bytes_read, 500_000);

        let slow = phases.merged(Phase::Slow, |_| true);
        assert_eq!(slow.bytes_read, 7);
        assert_eq!(slow.sender_passes, 3);
        assert_eq!(slow.notsent_peak(), Some(10_000));
        assert_eq!(slow.notsent_mean_bytes(), Some(14_000.0 / 3.0));
        assert_eq!(slow.queued_peak(), Some(20_000));
        assert_eq!(slow.rtt_mean_us(), Some(13_000.0 / 4.0));
        assert_eq!(slow.rtt_min_us, Some(1000));
        assert_eq!(slow.sender_tcp_mem_peak_pages, Some(30));
        assert_eq!(slow.reader_tcp_mem_peak_pages, Some(40));

        let steady = phases.merged(Phase::Slow, |c| c >= 2);
        assert_eq!(steady.notsent_mean_bytes(), Some(10_000.0));
        assert_eq!(steady.sender_tcp_mem_peak_pages, Some(20));
        assert_eq!(phases.cycles(), 2);
    }

    #[test]
    fn a_kernel_without_notsent_bytes_gives_no_notsent_figure_and_still_the_queue() {
        // A kernel before 4.6 leaves notsent_bytes empty: the figure is absent, not 0.
        let blind = |t_s, flow| SenderSample {
            notsent_bytes: None,
            ..sender_row(t_s, flow, 5000, 1000)
        };
        let mut f = figures();
        f.sender(&blind(1.5, 0));
        f.sender(&blind(1.5, 1));
        f.sender(&blind(1.6, 0));
        let slow = f.finish(6.0).merged(Phase::Slow, |_| true);
        assert_eq!(slow.sender_passes, 2);
        assert_eq!(
            (slow.notsent_peak(), slow.notsent_mean_bytes()),
            (None, None)
        );
        assert_eq!(slow.queued_peak(), Some(20_000));
        // Mixed passes: only those that had it count towards its mean.
        let mut f = figures();
        f.sender(&blind(1.5, 0));
        f.sender(&sender_row(1.6, 0, 3000, 1000));
        let slow = f.finish(6.0).merged(Phase::Slow, |_| true);
        assert_eq!(
            (slow.notsent_peak(), slow.notsent_mean_bytes()),
            (Some(3000), Some(3000.0))
        );
    }

    #[test]
    fn the_receivers_queue_events_add_up_per_phase() {
        let events = |t_s, side, collapsed, dropped| HostSample {
            tcp_collapsed: Some(collapsed),
            tcp_prune_called: Some(1),
            tcp_rcv_pruned: Some(dropped),
            tcp_ofo_pruned: Some(0),
            tcp_rcvq_drop: Some(dropped),
            tcp_backlog_drop: None,
            ..host_row(t_s, side, 0)
        };
        let mut f = figures();
        f.host(&events(0.5, Side::Reader, 0, 0));
        f.host(&events(1.5, Side::Reader, 30, 2));
        f.host(&events(2.5, Side::Reader, 12, 0));
        f.host(&events(4.5, Side::Reader, 5, 1));
        f.host(&events(4.5, Side::Sender, 1000, 1000)); // the sender's namespace: not counted
        f.host(&host_row(5.0, Side::Reader, 0)); // a row without counters adds nothing
        let phases = f.finish(6.0);
        let slow = phases.merged(Phase::Slow, |_| true);
        assert_eq!(slow.reader_collapsed, Some(47));
        assert_eq!(slow.reader_prunes, Some(3));
        assert_eq!(
            slow.reader_drops,
            Some(6),
            "pruned plus refused, both cycles"
        );
        let fast = phases.merged(Phase::Fast, |_| true);
        assert_eq!(
            (fast.reader_collapsed, fast.reader_drops),
            (Some(0), Some(0))
        );
        let none = figures().finish(6.0).merged(Phase::Slow, |_| true);
        assert_eq!(none.reader_collapsed, None, "no counters, no figure");
    }

    #[test]
    fn limited_by_shares_split_each_phases_flow_time() {
        let spent = |t_s, flow, busy_us, rwnd_limited_us, sndbuf_limited_us| SenderSample {
            busy_us: Some(busy_us),
            rwnd_limited_us: Some(rwnd_limited_us),
            sndbuf_limited_us: Some(sndbuf_limited_us),
            ..sender_row(t_s, flow, 0, 0)
        };
        let mut f = figures();
        // Fast: two flows, 100 ms rows; one held by the window 60 ms, the other by its
        // send buffer 100 ms (a jiffy over, clamped in the share, not in the sums).
        f.sender(&spent(0.5, 0, 100_000, 60_000, 0));
        f.sender(&spent(0.5, 1, 104_000, 0, 104_000));
        // Slow: busy 20 ms of 100, all of it the network.
        f.sender(&spent(1.5, 0, 20_000, 0, 0));
        f.sender(&sender_row(1.6, 0, 0, 0)); // no chrono columns: not counted
        let phases = f.finish(6.0);
        let fast = phases.merged(Phase::Fast, |_| true).limited_by.unwrap();
        assert_eq!(fast.flow_us, 200_000);
        assert_eq!(fast.rwnd_share(), Some(0.3));
        assert_eq!(fast.sndbuf_share(), Some(0.52));
        assert_eq!(fast.network_share(), Some(0.2));
        assert_eq!(fast.application_share(), Some(0.0));
        let slow = phases.merged(Phase::Slow, |_| true).limited_by.unwrap();
        assert_eq!((slow.flow_us, slow.busy_us), (100_000, 20_000));
        assert_eq!(slow.application_share(), Some(0.8));
        assert_eq!(slow.network_share(), Some(0.2));
        assert_eq!(
            figures()
                .finish(6.0)
                .merged(Phase::Fast, |_| true)
                .limited_by,
            None
        );
    }

    #[test]
    fn a_run_cut_short_counts_only_the_seconds_that_ran() {
        let mut f = figures();
        f.reader(&reader_row(0.5, 800));
        let phases = f.finish(0.5);
        let fast = phases.merged(Phase::Fast, |_| true);
        assert_eq!(fast.seconds, 0.5);
        assert_eq!(fast.read_bps(), Some(12_800.0));
        let slow = phases.merged(Phase::Slow, |_| true);
        assert_eq!((slow.seconds, slow.read_bps()), (0.0, None));
        assert_eq!(slow.queued_peak(), None, "never sampled");
    }

    #[test]
    fn totals_saturate_instead_of_overflowing() {
        let mut f = figures();
        for flow in 0..3 {
            f.sender(&sender_row(1.5, flow, u32::MAX, u32::MAX));
        }
        f.reader(&reader_row(0.5, u64::MAX));
        f.reader(&reader_row(0.6, u64::MAX));
        let phases = f.finish(6.0);
        assert_eq!(phases.merged(Phase::Fast, |_| true).bytes_read, u64::MAX);
        let slow = phases.merged(Phase::Slow, |_| true);
        assert_eq!(slow.notsent_peak(), Some(3 * u64::from(u32::MAX)));
    }

    /// 1 s fast, 1 s slow, one cycle.
    fn one_cycle() -> PhaseFigures {
        let pattern = PatternConfig {
            fast_ms: 1000,
            slow_ms: 1000,
            fraction: oscil_model::pattern::Fraction::CLOUDFLARE,
            cycles: 1,
            full_speed: false,
        };
        PhaseFigures::new(&pattern.schedule(), 0.1)
    }

    #[test]
    fn residence_percentiles_are_over_the_writes_of_merged_spans() {
        let mut figures = one_cycle();
        // Flow 0 completes a write every interval, flow 1 in the first nine; two writes of
        // the slow phase waited 500 ms, the rest 2 ms. Rows without one count for nothing.
        for k in 1..=20 {
            let t_s = f64::from(k) * 0.1;
            let mut row = sender_row(t_s, 0, 0, 0);
            row.residence_us = Some(if k >= 19 { 500_000 } else { 2000 });
            figures.sender(&row);
            figures.sender(&SenderSample {
                flow: 1,
                residence_us: (k <= 9).then_some(2000),
                ..sender_row(t_s, 1, 0, 0)
            });
        }
        let phases = figures.finish(2.0);
        let fast = phases.merged(Phase::Fast, |_| true);
        assert_eq!(fast.residence_us.as_ref().unwrap().len(), 19);
        let mut both = fast.clone();
        both.merge(&phases.merged(Phase::Slow, |_| true));
        assert_eq!(both.residence_us.as_ref().unwrap().len(), 29);
        let near = |got: Option<u64>, want: u64| got.unwrap().abs_diff(want) * 1000 <= want;
        assert!(near(both.residence_quantile_us(0.5), 2000));
        assert!(near(both.residence_quantile_us(0.99), 500_000));
        assert_eq!(Totals::default().residence_quantile_us(0.5), None);
    }

    #[test]
    fn marker_latency_is_per_span_of_sending_and_merges_as_markers() {
        let mut f = figures();
        let marker = |sent_t_s: f64, latency_us: Option<f64>| MarkerRow {
            flow: 0,
            k: 1,
            offset_bytes: 0,
            sent_t_s,
            read_t_s: latency_us.map(|us| sent_t_s + us / 1e6),
            latency_us,
            censored: false,
        };
        // Fast spans: 0-1 and 3-4; a marker sent at 0.9 s read at 1.4 s is the fast one's.
        f.marker(&marker(0.9, Some(500_000.0)));
        f.marker(&marker(3.5, Some(-20.0)));
        f.marker(&marker(3.6, Some(1_000.0)));
        f.marker(&marker(3.7, None));
        f.marker(&marker(2.0, Some(90_000.0)));
        let phases = f.finish(6.0);
        let fast = phases.merged(Phase::Fast, |_| true);
        assert_eq!(fast.marker_latency_us.as_ref().unwrap().len(), 3);
        assert_eq!(
            fast.marker_quantile_us(0.0),
            Some(0),
            "below zero counts as 0"
        );
        let near = |got: Option<u64>, want: u64| got.unwrap().abs_diff(want) * 1000 <= want;
        assert!(near(fast.marker_quantile_us(0.5), 1_000));
        assert!(near(fast.marker_quantile_us(1.0), 500_000));
        let slow = phases.merged(Phase::Slow, |_| true);
        assert!(near(slow.marker_quantile_us(0.5), 90_000));
        assert_eq!(
            phases
                .merged(Phase::Slow, |c| c >= 2)
                .marker_quantile_us(0.5),
            None
        );
    }

    #[test]
    fn censored_waits_count_as_lower_bounds_and_say_so() {
        let mut f = figures();
        let marker = |sent_t_s: f64, latency_us: f64, censored: bool| MarkerRow {
            flow: 0,
            k: 1,
            offset_bytes: 0,
            sent_t_s,
            read_t_s: (!censored).then_some(sent_t_s + latency_us / 1e6),
            latency_us: Some(latency_us),
            censored,
        };
        // Slow spans 1-3 and 4-6: two markers read after 2 ms, three unread at the end
        // after at least 800 ms to 2 s.
        f.marker(&marker(1.5, 2_000.0, false));
        f.marker(&marker(1.6, 2_000.0, false));
        for (t, us) in [(4.2, 1_800_000.0), (4.5, 1_500_000.0), (5.2, 800_000.0)] {
            f.marker(&marker(t, us, true));
        }
        // Sender rows in the slow span 4-6: no tagged write left, the oldest queued one
        // 0.9 s, then 1.0 s old; in span 1-3 every write completed within 3 ms.
        let queued = |t_s: f64, residence_us: Option<u64>, pending_write_age_us| SenderSample {
            residence_us,
            pending_write_age_us,
            ..sender_row(t_s, 0, 0, 0)
        };
        f.sender(&queued(1.5, Some(3_000), Some(10)));
        f.sender(&queued(4.5, None, Some(900_000)));
        f.sender(&queued(4.6, None, Some(1_000_000)));
        let phases = f.finish(6.0);
        let slow = phases.merged(Phase::Slow, |_| true);
        let near = |got: Option<u64>, want: u64| got.unwrap().abs_diff(want) * 1000 <= want;
        // The median of 2 ms, 2 ms, >= 0.8 s, >= 1.5 s, >= 1.8 s is >= 0.8 s.
        assert!(near(slow.marker_quantile_us(0.5), 800_000));
        assert!(slow.marker_at_least(0.5));
        assert!(near(slow.marker_quantile_us(0.0), 2_000));
        assert!(!slow.marker_at_least(0.0), "2 ms was read: a latency");
        // The completed write's row counts its residence, not the 10 us pending beside it.
        assert_eq!(slow.residence_us.as_ref().unwrap().len(), 3);
        assert!(near(slow.residence_quantile_us(0.99), 1_000_000));
        assert!(slow.residence_at_least(0.99));
        let early = phases.merged(Phase::Slow, |c| c == 1);
        assert!(near(early.residence_quantile_us(0.5), 3_000));
        assert!(!early.residence_at_least(0.5));
    }

    #[test]
    fn wakeups_add_up_per_phase_and_give_the_smallest_safe_lowat() {
        let mut figures = one_cycle();
        figures.reader(&reader_row(0.5, 1_000_000)); // 1 MB in the 1 s fast phase
        let woke = |t_s: f64, n: u64, notsent: (u64, u64), us: (u64, u64)| SenderSample {
            wakeups: Some(n),
            wake_notsent_p50_bytes: (n > 0).then_some(notsent.0),
            wake_notsent_max_bytes: (n > 0).then_some(notsent.1),
            wake_to_write_p50_us: (n > 0).then_some(us.0),
            wake_to_write_max_us: (n > 0).then_some(us.1),
            ..sender_row(t_s, 0, 0, 0)
        };
        figures.sender(&woke(0.2, 3, (30_000, 32_000), (50, 400)));
        figures.sender(&woke(0.3, 1, (10_000, 10_000), (20, 20)));
        figures.sender(&woke(0.4, 0, (0, 0), (0, 0)));
        figures.sender(&sender_row(0.5, 0, 0, 0)); // a run before the columns: nothing
        figures.sender(&woke(1.5, 2, (8_000, 8_100), (30, 5_000)));
        let phases = figures.finish(2.0);

        let fast = phases.merged(Phase::Fast, |_| true);
        assert_eq!(fast.wakeups, 4);
        let notsent = fast.wake_notsent_bytes.as_ref().unwrap();
        assert_eq!(notsent.max(), 32_000);
        // Three wake-ups around 30,000 and one at 10,000: the median is the former's.
        assert!(notsent.p50().abs_diff(30_000) <= 300, "{}", notsent.p50());
        assert_eq!(fast.wake_to_write_us.as_ref().unwrap().max(), 400);
        // 1,000,000 bytes/s for 400 us, twice (the wake-up comes at half the lowat); at the
        // median, 50 us (three wake-ups' interval) to 1%.
        assert_eq!(fast.safe_lowat_bytes(WakeSpread::max), Some(800.0));
        let typical = fast.safe_lowat_bytes(WakeSpread::p50).unwrap();
        assert!((99.0..=101.0).contains(&typical), "{typical}");

        let slow = phases.merged(Phase::Slow, |_| true);
        assert_eq!(slow.wakeups, 2);
        assert_eq!(slow.wake_notsent_bytes.as_ref().unwrap().max(), 8_100);
        let mut both = fast.clone();
        both.merge(&slow);
        assert_eq!(both.wakeups, 6);
        assert_eq!(both.wake_to_write_us.unwrap().max(), 5_000);
        assert_eq!(Totals::default().safe_lowat_bytes(WakeSpread::max), None);
    }
}

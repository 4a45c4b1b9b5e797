//! What a run directory may hold, from what its `run.json` declares: the most rows and
//! bytes of each file, and every time, flow and rate of a row in range. A file beyond its
//! bounds is refused, never read whole.

use oscil_model::files::columns::Row;
use oscil_model::files::markers::MarkerRow;
use oscil_model::files::probe::{ProbeRow, PROBE_EVERY};
use oscil_model::files::rows::{HostSample, ReaderSample, SenderSample};
use oscil_model::run::RunMeta;
use oscil_model::socket::is_congestion_name;

use crate::bounds::{
    CLOCK_RESOLUTION_S, MAX_BYTES_PER_S, MAX_FLOWS, MAX_META_BYTES, MAX_ROW_BYTES, MAX_RUN_S,
    SLACK_S,
};
use crate::error::{DeclarationError, RowError};

/// A row of a run directory's CSV (its file and columns from `oscil_model::files::columns::Row`)
/// with the bounds the loader holds it to.
pub trait Columns: Row {
    /// The most rows `run.json`'s declarations allow this file, before the margin.
    fn declared_rows(limits: &Limits) -> u64;
    /// Why a row read back is out of range (a time not finite or outside the run, a flow
    /// the run does not have), naming the column; `Ok` for a sound row.
    fn check(&self, limits: &Limits) -> Result<(), RowError>;
}

impl Columns for ReaderSample {
    fn declared_rows(limits: &Limits) -> u64 {
        limits.flow_intervals()
    }
    fn check(&self, limits: &Limits) -> Result<(), RowError> {
        limits.check_sample(self.flow, self.t_s, self.span_s)?;
        let span_s = self.span_or(limits.interval_s);
        limits.check_rate("bytes", Some(self.bytes), span_s)?;
        limits.check_rate("delivered_bytes", self.delivered_bytes, span_s)
    }
}

impl Columns for SenderSample {
    fn declared_rows(limits: &Limits) -> u64 {
        limits.flow_intervals()
    }
    fn check(&self, limits: &Limits) -> Result<(), RowError> {
        limits.check_sample(self.flow, self.t_s, self.span_s)?;
        let span_s = self.span_or(limits.interval_s);
        limits.check_rate("bytes", Some(self.bytes), span_s)?;
        limits.check_rate("acked_bytes", self.acked_bytes, span_s)?;
        match self.bbr_gain_out_of_range() {
            Some(gain) => Err(RowError::Gain { gain }),
            None => Ok(()),
        }
    }
}

impl Columns for HostSample {
    /// One row per side per interval.
    fn declared_rows(limits: &Limits) -> u64 {
        2 * limits.intervals
    }
    fn check(&self, limits: &Limits) -> Result<(), RowError> {
        limits.check_time("t_s", self.t_s)?;
        // No thread waits for a CPU longer than the run.
        if let Some(ms) = self.run_queue_wait_ms {
            limits.check_time("run_queue_wait_ms", ms / 1e3)?;
        }
        match self.cpu_busy_pct_out_of_range() {
            Some(pct) => Err(RowError::CpuBusy { pct }),
            None => Ok(()),
        }
    }
}

impl Columns for ProbeRow {
    /// One every [`PROBE_EVERY`] over the run.
    fn declared_rows(limits: &Limits) -> u64 {
        (limits.end_s / PROBE_EVERY.as_secs_f64()).ceil() as u64 + 1
    }
    fn check(&self, limits: &Limits) -> Result<(), RowError> {
        limits.check_time("t_s", self.t_s)?;
        match self.rtt_us {
            Some(us) => limits.check_time("rtt_us", us as f64 / 1e6),
            None => Ok(()),
        }
    }
}

impl Columns for MarkerRow {
    fn declared_rows(limits: &Limits) -> u64 {
        u64::from(limits.flows).saturating_mul(limits.markers_per_flow)
    }
    /// Marker times are mapped through the clock offset and may sit slightly before the
    /// session's start, and a latency slightly below zero (within the clock's uncertainty).
    fn check(&self, limits: &Limits) -> Result<(), RowError> {
        limits.check_flow(self.flow)?;
        limits.check_signed_time("sent_t_s", self.sent_t_s)?;
        if let Some(read) = self.read_t_s {
            limits.check_signed_time("read_t_s", read)?;
        }
        match self.latency_us {
            Some(us) => limits.check_signed_time("latency_us", us / 1e6),
            None => Ok(()),
        }
    }
}

/// What a run directory may hold, from what its `run.json` declares: rows per file (flows
/// × intervals, doubled and a little more for a margin), bytes per row, and the span every
/// time in it falls within. A file past these is damaged, however it came to be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub flows: u32,
    /// Sampling intervals the run can span.
    pub intervals: u64,
    /// Markers one flow can send over the run; 0 without markers.
    pub markers_per_flow: u64,
    /// Seconds since the session's start that every time in the run falls before.
    pub end_s: f64,
    /// The sampling interval, what a row without `span_s` covers.
    pub interval_s: f64,
}

impl Limits {
    /// From `run.json`, after checking that what it declares is finite and in range.
    pub fn of(meta: &RunMeta) -> Result<Limits, DeclarationError> {
        let config = &meta.config;
        if !(1..=MAX_FLOWS).contains(&config.flows) {
            return Err(DeclarationError::Flows(config.flows));
        }
        let interval_us = match config.interval_us {
            0 => 100_000,
            us @ 1..=60_000_000 => us,
            us => return Err(DeclarationError::IntervalUs(us)),
        };
        for cc in [
            &config.sender_request.congestion,
            &config.reader_request.congestion,
        ] {
            if let Some(name) = cc.as_deref().filter(|name| !is_congestion_name(name)) {
                let shown = oscil_model::text::escape_peer(name);
                return Err(DeclarationError::Congestion(shown));
            }
        }
        let pattern = &config.pattern;
        let planned_ms = pattern
            .fast_ms
            .saturating_add(pattern.slow_ms)
            .saturating_mul(u64::from(pattern.cycles));
        let mut end_s = planned_ms as f64 / 1000.0;
        let times = meta
            .schedule
            .iter()
            .flat_map(|span| {
                [
                    ("schedule start_s", span.start_s),
                    ("schedule end_s", span.end_s),
                ]
            })
            .chain([("ending duration_s", meta.ending.duration_s)]);
        for (name, t_s) in times {
            if !(t_s.is_finite() && (0.0..=MAX_RUN_S).contains(&t_s)) {
                return Err(DeclarationError::Time { name, t_s });
            }
            end_s = end_s.max(t_s);
        }
        if end_s > MAX_RUN_S {
            return Err(DeclarationError::TooLong { end_s });
        }
        Ok(Limits::declared(
            config.flows,
            interval_us,
            end_s,
            config.marker_every_us,
        ))
    }

    /// From what a run is to be: `flows` sampled every `interval_us` for
    /// `duration_s`, with markers every `marker_every_us`; the lab bounds what it copies
    /// from a remote host with these before any `run.json` exists.
    pub fn declared(
        flows: u32,
        interval_us: u64,
        duration_s: f64,
        marker_every_us: Option<u64>,
    ) -> Limits {
        let end_s = duration_s.clamp(0.0, MAX_RUN_S) + SLACK_S;
        let markers_per_flow = match marker_every_us {
            None => 0,
            Some(every_us) => (end_s * 1e6 / every_us.max(1) as f64) as u64 + 2,
        };
        Limits {
            flows,
            intervals: (end_s * 1e6 / interval_us.max(1) as f64).ceil() as u64 + 1,
            markers_per_flow,
            end_s,
            interval_s: interval_us.max(1) as f64 / 1e6,
        }
    }

    /// Bytes a whole run directory may hold: each CSV's bound and `run.json`'s.
    pub fn dir_bytes(&self) -> u64 {
        [
            self.bytes::<ReaderSample>(),
            self.bytes::<SenderSample>(),
            self.bytes::<HostSample>(),
            self.bytes::<MarkerRow>(),
            self.bytes::<oscil_model::files::probe::ProbeRow>(),
            MAX_META_BYTES,
        ]
        .iter()
        .fold(0, |sum, &b| sum.saturating_add(b))
    }

    /// Rows `R`'s file may hold: twice what `run.json` declares, and 64 more.
    pub fn rows<R: Columns>(&self) -> u64 {
        R::declared_rows(self).saturating_mul(2).saturating_add(64)
    }

    /// Bytes `R`'s file may hold.
    pub fn bytes<R: Columns>(&self) -> u64 {
        self.rows::<R>()
            .saturating_add(1)
            .saturating_mul(MAX_ROW_BYTES)
    }

    /// One row per flow per interval, as reader.csv and sender.csv have.
    fn flow_intervals(&self) -> u64 {
        u64::from(self.flows).saturating_mul(self.intervals)
    }

    /// A flow's sample: a flow the run has, a time and a span within the run.
    fn check_sample(&self, flow: u32, t_s: f64, span_s: f64) -> Result<(), RowError> {
        self.check_flow(flow)?;
        self.check_time("t_s", t_s)?;
        self.check_time("span_s", span_s)?;
        match span_s == 0.0 || span_s >= CLOCK_RESOLUTION_S {
            true => Ok(()),
            false => Err(RowError::SpanBelowResolution { span_s }),
        }
    }

    /// `bytes` of `column` over `span_s` (checked already): a finite rate no faster than
    /// [`MAX_BYTES_PER_S`].
    fn check_rate(
        &self,
        column: &'static str,
        bytes: Option<u64>,
        span_s: f64,
    ) -> Result<(), RowError> {
        let Some(bytes) = bytes else { return Ok(()) };
        let rate = bytes as f64 / span_s;
        match rate.is_finite() && rate <= MAX_BYTES_PER_S {
            true => Ok(()),
            false => Err(RowError::AbsurdRate {
                column,
                bytes,
                span_s,
                rate,
            }),
        }
    }

    pub(crate) fn check_flow(&self, flow: u32) -> Result<(), RowError> {
        match flow < self.flows {
            true => Ok(()),
            false => Err(RowError::NoSuchFlow {
                flow,
                flows: self.flows,
            }),
        }
    }

    /// A time since the session's start: finite, from 0 to the run's end.
    pub(crate) fn check_time(&self, column: &'static str, t_s: f64) -> Result<(), RowError> {
        self.check_time_from(column, 0.0, t_s)
    }

    /// A time that may fall a little before the session's start.
    pub(crate) fn check_signed_time(&self, column: &'static str, t_s: f64) -> Result<(), RowError> {
        self.check_time_from(column, -SLACK_S, t_s)
    }

    /// A time finite and from `start_s` to the run's end.
    fn check_time_from(
        &self,
        column: &'static str,
        start_s: f64,
        t_s: f64,
    ) -> Result<(), RowError> {
        match t_s.is_finite() && (start_s..=self.end_s).contains(&t_s) {
            true => Ok(()),
            false => Err(RowError::TimeOutOfRange {
                column,
                t_s,
                start_s,
                end_s: self.end_s,
            }),
        }
    }
}

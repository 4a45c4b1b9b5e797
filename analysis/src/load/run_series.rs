//! What of one run the pictures across runs need, kept small (one value per sampling tick,
//! whatever the number of flows) so every run of a report can stay in memory after its
//! rows are dropped: the answers to the questions over time, and where its cycles start.

use oscil_model::files::rows::{Phase, ReaderSample, SenderSample, Side};
use oscil_rundir::Run;

use crate::load::limit_shares::TickShares;
use crate::load::series::{self, Tick};

/// A question a picture across runs answers, one panel each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Question {
    /// The sender's TCP memory: its namespace's sum (every 0.1-0.5 s).
    SenderMemory,
    /// The send queues' memory (`wmem_queued`) summed over flows: the sender's memory in
    /// runs without the namespace sum.
    SendQueues,
    /// Bytes written but not yet sent, summed over flows.
    Unsent,
    /// The receive window the reader advertises, summed over flows.
    ReceiveWindow,
    /// The window the sender saw advertised (`snd_wnd`), summed over flows: the receive
    /// window in runs whose reader's kernel does not give `rcv_wnd` (before 6.2).
    AdvertisedWindow,
    /// What TCP delivered to the reader per second, summed over flows (network goodput).
    Goodput,
    /// What the reader read per second, summed over flows: in runs recorded before
    /// `delivered_bytes`, the nearest figure to goodput.
    ReadingRate,
    /// How long a tagged write waited in the send queue (median over flows).
    WriteWait,
    /// Lower bounds: the oldest tagged write still queued at a sample (median over flows).
    WriteWaitPending,
    /// The idle probe's round trip (probe.csv): drawn beside a write's wait.
    ProbeRtt,
    /// The share of the flows' time the receive window held them back (%).
    RwndLimited,
    /// The share of the flows' time the send buffer held them back (%).
    SndbufLimited,
}

pub const QUESTIONS: [Question; 7] = [
    Question::SenderMemory,
    Question::Unsent,
    Question::ReceiveWindow,
    Question::Goodput,
    Question::WriteWait,
    Question::RwndLimited,
    Question::SndbufLimited,
];

/// One run's series, in base units (bytes, bit/s, µs) against seconds since its start.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunSeries {
    pub interval_s: f64,
    /// Where each cycle's fast phase starts, and each cycle's length.
    pub cycles: Vec<(f64, f64)>,
    /// The slow phases, to shade.
    pub slow: Vec<(f64, f64)>,
    memory: Vec<(f64, f64)>,
    queues: Vec<(f64, f64)>,
    unsent: Vec<(f64, f64)>,
    window: Vec<(f64, f64)>,
    advertised: Vec<(f64, f64)>,
    goodput: Vec<(f64, f64)>,
    reading: Vec<(f64, f64)>,
    wait: Vec<(f64, f64)>,
    pending: Vec<(f64, f64)>,
    probe: Vec<(f64, f64)>,
    rwnd: Vec<(f64, f64)>,
    sndbuf: Vec<(f64, f64)>,
}

fn sums(ticks: Vec<Tick>) -> Vec<(f64, f64)> {
    ticks.into_iter().map(|t| (t.t_s, t.sum)).collect()
}

fn medians(ticks: Vec<Tick>) -> Vec<(f64, f64)> {
    ticks.into_iter().map(|t| (t.t_s, t.median)).collect()
}

/// Bytes TCP delivered to the receive queue over a row's span, where recorded.
pub fn delivered_bytes(row: &ReaderSample) -> Option<u64> {
    row.delivered_bytes
}

/// The age of the oldest tagged write not yet sent at a sample, where one was queued.
pub fn pending_age_us(row: &SenderSample) -> Option<u64> {
    row.pending_write_age_us
}

/// A marker still unread when the run ended: its latency is a lower bound.
pub fn marker_censored(row: &oscil_model::files::markers::MarkerRow) -> bool {
    row.censored
}

/// A sender row whose delivery rate is a fresh sample: bytes were acknowledged over its
/// span (rows of runs recorded before `acked_bytes` are taken as they are).
pub fn fresh_delivery(row: &SenderSample) -> bool {
    row.acked_bytes.is_none_or(|acked| acked > 0)
}

impl RunSeries {
    pub fn of(run: &Run) -> RunSeries {
        let interval_s = match run.meta.config.interval_us {
            0 => 0.1,
            us => us as f64 / 1e6,
        };
        let reader = |value: &dyn Fn(&ReaderSample) -> Option<f64>| {
            series::ticks(&run.reader, interval_s, |r| r.t_s, value)
        };
        let sender = |value: &dyn Fn(&SenderSample) -> Option<f64>| {
            series::ticks(&run.sender, interval_s, |r| r.t_s, value)
        };
        let namespace: Vec<(f64, f64)> = run
            .host
            .iter()
            .filter(|h| h.side == Side::Sender)
            .filter_map(|h| Some((h.t_s, h.tcp_mem_ns_bytes? as f64)))
            .collect();
        let rate = |bytes: u64, r: &ReaderSample| bytes as f64 * 8.0 / r.span_or(interval_s);
        let schedule = &run.meta.schedule;
        let shares = crate::load::limit_shares::tick_shares(&run.sender, interval_s);
        let share = |part: fn(&TickShares) -> f64| -> Vec<(f64, f64)> {
            shares.iter().map(|s| (s.t_s, part(s))).collect()
        };
        RunSeries {
            interval_s,
            cycles: cycle_starts(schedule),
            slow: schedule
                .iter()
                .filter(|s| s.phase == Phase::Slow)
                .map(|s| (s.start_s, s.end_s))
                .collect(),
            memory: namespace,
            queues: sums(sender(&|r| Some(f64::from(r.wmem_queued)))),
            unsent: sums(sender(&|r| r.notsent_bytes.map(f64::from))),
            window: sums(reader(&|r| r.rcv_wnd.map(f64::from))),
            advertised: sums(sender(&|r| r.snd_wnd.map(f64::from))),
            goodput: sums(reader(&|r| delivered_bytes(r).map(|b| rate(b, r)))),
            reading: sums(reader(&|r| Some(rate(r.bytes, r)))),
            wait: medians(sender(&|r| r.residence_us.map(|us| us as f64))),
            pending: medians(sender(&|r| pending_age_us(r).map(|us| us as f64))),
            probe: medians(series::ticks(
                &run.probe,
                interval_s,
                |p| p.t_s,
                |p| p.rtt_us.map(|us| us as f64),
            )),
            rwnd: share(|s| s.rwnd_pct),
            sndbuf: share(|s| s.sndbuf_pct),
        }
    }

    /// The series answering `question`.
    pub fn get(&self, question: Question) -> &[(f64, f64)] {
        match question {
            Question::SenderMemory => &self.memory,
            Question::SendQueues => &self.queues,
            Question::Unsent => &self.unsent,
            Question::ReceiveWindow => &self.window,
            Question::AdvertisedWindow => &self.advertised,
            Question::Goodput => &self.goodput,
            Question::ReadingRate => &self.reading,
            Question::WriteWait => &self.wait,
            Question::WriteWaitPending => &self.pending,
            Question::ProbeRtt => &self.probe,
            Question::RwndLimited => &self.rwnd,
            Question::SndbufLimited => &self.sndbuf,
        }
    }
}

impl Question {
    /// A series drawn as points: the namespace sums come every 0.1-0.5 s, whatever the
    /// sampling interval, and a line between them would invent the values between.
    pub fn is_sparse(self) -> bool {
        self == Question::SenderMemory
    }

    /// What stands in for this question in runs that did not record it.
    pub fn fallback(self) -> Option<Question> {
        match self {
            Question::SenderMemory => Some(Question::SendQueues),
            Question::Goodput => Some(Question::ReadingRate),
            Question::ReceiveWindow => Some(Question::AdvertisedWindow),
            _ => None,
        }
    }
}

/// Each cycle's fast-phase start and the cycle's length (to the next cycle's start, or the
/// end of its last phase).
fn cycle_starts(schedule: &[oscil_model::pattern::PhaseSpan]) -> Vec<(f64, f64)> {
    let mut cycles: Vec<(f64, f64)> = Vec::new();
    for span in schedule {
        match cycles.last_mut() {
            Some(last) if span.phase != Phase::Fast => last.1 = span.end_s - last.0,
            _ => cycles.push((span.start_s, span.end_s - span.start_s)),
        }
    }
    cycles
}

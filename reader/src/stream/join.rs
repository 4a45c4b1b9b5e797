//! Pairs the two ends' samples by interval. Each side samples on absolute deadlines from
//! its own start and hands out every interval once (`oscil_kernel::ticker`): a sample
//! covers the intervals after the side's previous one, one, or several when its sampler
//! woke late, so a running count of the intervals each side covered names the interval a
//! sample ends, whatever the clocks' offset. An interval's line goes out once both sides
//! have covered it, in order; what is left goes out at the end.

use std::collections::BTreeMap;

use oscil_model::files::rows::{HostSample, Phase, ReaderSample, SenderSample};
use oscil_model::pattern::{span_of_sample, PhaseSpan};

use super::lines::{GroupFigures, Interval, ReaderFigures, SenderFigures};
use super::sums::{self, Part};

/// What the pairing needs to know of the session.
pub struct Session {
    pub interval_s: f64,
    pub schedule: Vec<PhaseSpan>,
    pub groups: u32,
    pub reader_page_size_bytes: u64,
    pub sender_page_size_bytes: u64,
}

/// The intervals one side has covered so far.
#[derive(Default)]
struct Covered(u64);

impl Covered {
    /// Counts a sample spanning `span_s` and returns the interval it ends: a sample on a
    /// deadline spans whole intervals, the run's last one part of one.
    fn sample(&mut self, span_s: f64, interval_s: f64) -> u64 {
        let intervals = (span_s / interval_s).round().max(1.0) as u64;
        self.0 += intervals;
        self.0
    }
}

#[derive(Default)]
struct Pending {
    reader: Option<Part<ReaderFigures>>,
    sender: Option<Part<SenderFigures>>,
}

pub struct Joiner {
    session: Session,
    reader: Covered,
    sender: Covered,
    pending: BTreeMap<u64, Pending>,
}

impl Joiner {
    pub fn new(session: Session) -> Self {
        Joiner {
            session,
            reader: Covered::default(),
            sender: Covered::default(),
            pending: BTreeMap::new(),
        }
    }

    /// The reader's sample; the lines it completes.
    pub fn reader(&mut self, rows: &[ReaderSample], host: &HostSample) -> Vec<Interval> {
        let s = &self.session;
        let span_s = rows.first().map_or(0.0, |r| r.span_s);
        let interval = self.reader.sample(span_s, s.interval_s);
        let part = sums::reader(rows, host, s.groups, s.reader_page_size_bytes);
        self.pending.entry(interval).or_default().reader = part;
        self.ready()
    }

    /// The daemon's sample, as it arrived; the lines it completes.
    pub fn sender(&mut self, rows: &[SenderSample], host: &HostSample) -> Vec<Interval> {
        let s = &self.session;
        let span_s = rows.first().map_or(0.0, |r| r.span_s);
        let interval = self.sender.sample(span_s, s.interval_s);
        let part = sums::sender(rows, host, s.groups, s.sender_page_size_bytes);
        self.pending.entry(interval).or_default().sender = part;
        self.ready()
    }

    /// Every interval still waiting for a side, at the run's end.
    pub fn finish(mut self) -> Vec<Interval> {
        std::mem::take(&mut self.pending)
            .into_iter()
            .map(|(k, pending)| self.line(k, pending))
            .collect()
    }

    /// The oldest intervals both sides have covered, in order.
    fn ready(&mut self) -> Vec<Interval> {
        let mut lines = Vec::new();
        while let Some(entry) = self.pending.first_entry() {
            let k = *entry.key();
            if k > self.reader.0 || k > self.sender.0 {
                break;
            }
            let pending = entry.remove();
            lines.push(self.line(k, pending));
        }
        lines
    }

    fn line(&self, k: u64, pending: Pending) -> Interval {
        let s = &self.session;
        let t_s = k as f64 * s.interval_s;
        // The span that holds the interval's middle; after the timetable, its last.
        let span = span_of_sample(&s.schedule, t_s, s.interval_s)
            .map(|i| s.schedule[i])
            .or_else(|| s.schedule.last().copied());
        let (reader, reader_groups) = split(pending.reader);
        let (sender, sender_groups) = split(pending.sender);
        let groups = (0..s.groups.max(1))
            .map(|group| GroupFigures {
                group,
                reader: reader_groups.get(group as usize).cloned().flatten(),
                sender: sender_groups.get(group as usize).cloned().flatten(),
            })
            .collect();
        Interval {
            interval: k,
            t_s,
            cycle: span.map_or(1, |s| s.cycle),
            phase: span.map_or(Phase::Fast, |s| s.phase),
            reader,
            sender,
            groups,
        }
    }
}

type Split<F> = (Option<F>, Vec<Option<F>>);

fn split<F>(part: Option<Part<F>>) -> Split<F> {
    match part {
        Some(part) => (Some(part.total), part.groups),
        None => (None, Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oscil_model::files::rows::Side;
    use oscil_model::pattern::PatternConfig;

    fn host(t_s: f64, side: Side) -> HostSample {
        HostSample {
            tcp_mem_pages: 2,
            tcp_mem_ns_bytes: Some(100),
            ..HostSample::empty(t_s, side)
        }
    }

    fn reader_rows(t_s: f64, span_s: f64, bytes: [u64; 2]) -> Vec<ReaderSample> {
        (0..2)
            .map(|flow| ReaderSample {
                t_s,
                flow,
                phase: Phase::Fast,
                bytes: bytes[flow as usize],
                rcv_wnd: None,
                rcv_ssthresh: 0,
                rcv_space: 0,
                rtt_us: 0,
                rmem_alloc: 10,
                rcvbuf: 20,
                rcv_rtt_us: 0,
                budget_bytes: 0,
                span_s,
                delivered_bytes: Some(bytes[flow as usize]),
                group: Some(flow),
            })
            .collect()
    }

    fn sender_rows(t_s: f64, span_s: f64) -> Vec<SenderSample> {
        (0..2)
            .map(|flow| SenderSample {
                t_s,
                flow,
                span_s,
                notsent_bytes: Some(1000),
                rtt_us: 100 * (flow + 1),
                group: Some(flow),
                ..SenderSample::default()
            })
            .collect()
    }

    fn joiner() -> Joiner {
        Joiner::new(Session {
            interval_s: 0.1,
            schedule: PatternConfig {
                fast_ms: 1000,
                slow_ms: 1000,
                cycles: 1,
                ..PatternConfig::CLOUDFLARE
            }
            .schedule(),
            groups: 2,
            reader_page_size_bytes: 4096,
            sender_page_size_bytes: 4096,
        })
    }

    #[test]
    fn a_line_waits_for_both_ends_and_sums_flows_per_group() {
        let mut joiner = joiner();
        assert!(joiner
            .reader(
                &reader_rows(0.1002, 0.1, [100, 300]),
                &host(0.1, Side::Reader)
            )
            .is_empty());
        // The daemon's clock started later: its first sample still ends interval 1.
        let lines = joiner.sender(&sender_rows(0.0998, 0.1), &host(0.09, Side::Sender));
        assert_eq!(lines.len(), 1);
        let line = &lines[0];
        assert_eq!((line.interval, line.phase, line.cycle), (1, Phase::Fast, 1));
        let reader = line.reader.as_ref().unwrap();
        assert_eq!((reader.flows, reader.bytes), (2, 400));
        assert!((reader.read_bps - 400.0 * 8.0 / 0.1).abs() < 1e-6);
        assert_eq!(reader.host.as_ref().unwrap().tcp_mem_bytes, 8192);
        let sender = line.sender.as_ref().unwrap();
        assert_eq!(sender.notsent_bytes, Some(2000));
        assert_eq!(sender.rtt_mean_us, Some(150.0));
        assert_eq!(line.groups.len(), 2);
        assert_eq!(line.groups[1].reader.as_ref().unwrap().bytes, 300);
        assert_eq!(
            line.groups[1].sender.as_ref().unwrap().rtt_mean_us,
            Some(200.0)
        );
        assert!(line.groups[1].reader.as_ref().unwrap().host.is_none());
    }

    #[test]
    fn a_late_sample_covers_its_intervals_and_lines_stay_in_order() {
        let mut joiner = joiner();
        // The daemon runs ahead: its three samples wait for the reader's.
        for k in 1..=3 {
            let t_s = f64::from(k) * 0.1;
            assert!(joiner
                .sender(&sender_rows(t_s, 0.1), &host(t_s, Side::Sender))
                .is_empty());
        }
        // The reader woke late once: one sample for intervals 1 and 2.
        let lines = joiner.reader(&reader_rows(0.2004, 0.2, [1, 1]), &host(0.2, Side::Reader));
        let numbers: Vec<u64> = lines.iter().map(|l| l.interval).collect();
        assert_eq!(numbers, [1, 2]);
        assert!(lines[0].reader.is_none() && lines[0].sender.is_some());
        assert!(lines[1].reader.is_some());
        // The run's last, partial sample ends interval 3; the end flushes what is left.
        let lines = joiner.reader(&reader_rows(0.23, 0.03, [1, 1]), &host(0.23, Side::Reader));
        assert_eq!(lines.iter().map(|l| l.interval).collect::<Vec<_>>(), [3]);
        joiner.reader(&reader_rows(1.5, 0.1, [1, 1]), &host(1.5, Side::Reader));
        let rest = joiner.finish();
        assert_eq!(rest.len(), 1);
        assert_eq!((rest[0].interval, rest[0].phase), (4, Phase::Fast));
        assert!(rest[0].sender.is_none());
    }
}

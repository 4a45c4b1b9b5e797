//! The daemon's samples are checked against the session before they are written: a daemon
//! (or whoever answers in its place) cannot fill the disk or the run with rows that cannot
//! be. A sample that fails ends the run, partial, with the reason. Its words (the welcome's
//! and the end's every string) are escaped and bounded as they arrive, so nothing later can
//! print them raw.

use std::time::Duration;

use oscil_kernel::trace::tracer::SENDER_KINDS;
use oscil_model::files::rows::{HostSample, SenderSample, Side};
use oscil_model::files::trace::{SenderTrace, TraceRow};
use oscil_model::group::{group_by_flow, FlowGroup};
use oscil_model::host::ProcessCost;
use oscil_protocol::control::{Ended, Welcome};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Longer than any write waits in a session (the daemon's limit is far shorter): a figure
/// past it is forged, and would swamp the latency histograms.
const MAX_WAIT_US: u64 = 3_600_000_000;

/// How far a sample's time may run ahead of the reader's own clock: the daemon's clock
/// starts after the reader's (when the start message arrives), so only clock drift and
/// rounding can put it ahead.
const CLOCK_SLACK_S: f64 = 1.0;

/// More TCP memory than a host can have (4 PiB of 4 KiB pages): a figure past it is forged,
/// and would overflow the byte totals computed from it.
const MAX_TCP_MEM_PAGES: u64 = 1 << 40;

/// Why the daemon's welcome cannot be true ([`check_welcome`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WelcomeError {
    /// Not a power of two from 1 KiB to 1 MiB.
    #[error("a page size of {0} bytes")]
    PageSize(u64),
    /// Options in force for another number of groups than the session's.
    #[error("options in force for {said} groups of a session of {asked}")]
    Groups { said: usize, asked: usize },
    #[error(transparent)]
    Text(#[from] EscapeError),
}

/// A message whose strings, escaped and bounded, no longer make a message: a list of
/// names of a kind cut short, say. Only a forged message can be that long.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("its text, escaped and bounded, is no longer a message: {0}")]
pub struct EscapeError(String);

/// `message` with every string in it escaped and bounded
/// ([`oscil_model::text::escape_peer_value`]).
fn escaped<T: Serialize + DeserializeOwned>(message: &T) -> Result<T, EscapeError> {
    let text_error =
        |e: serde_json::Error| EscapeError(oscil_model::text::escape_peer(&e.to_string()));
    let mut value = serde_json::to_value(message).map_err(text_error)?;
    oscil_model::text::escape_peer_value(&mut value);
    serde_json::from_value(value).map_err(text_error)
}

/// Why one interval's samples cannot be the daemon's ([`SampleCheck::check`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SampleError {
    #[error("a host row for the {0:?} side")]
    HostSide(Side),
    #[error("{0} pages of TCP memory")]
    TcpMemPages(u64),
    #[error("{0} bytes of namespace TCP memory")]
    NamespaceTcpMem(u64),
    #[error("t_s {t_s} is outside the session (0 to {elapsed_s:.3} s so far)")]
    OutsideSession { t_s: f64, elapsed_s: f64 },
    #[error("a wait for a CPU of {wait_ms} ms {elapsed_s:.3} s into the session")]
    RunQueueWait { wait_ms: f64, elapsed_s: f64 },
    #[error("a CPU {pct}% busy, outside 0 to 100")]
    CpuBusy { pct: f64 },
    #[error("t_s {t_s} does not follow {last_t_s}")]
    NotAfter { t_s: f64, last_t_s: f64 },
    #[error("{messages} samples by t_s {t_s}, more than one per {interval_s} s interval")]
    TooOften {
        messages: u64,
        t_s: f64,
        interval_s: f64,
    },
    #[error("{rows} rows in one interval of a session of {flows} flows")]
    TooManyRows { rows: usize, flows: u32 },
    #[error("a row for flow {flow}; the session has flows 0 to {last_flow}")]
    NoSuchFlow { flow: u32, last_flow: u32 },
    #[error("a row of flow {flow} in group {said}; the session put it in group {asked}")]
    Group { flow: u32, said: u32, asked: u32 },
    #[error("two rows for flow {flow} at t_s {t_s}")]
    TwoRows { flow: u32, t_s: f64 },
    #[error("a row of flow {flow} covering {span_s} s at t_s {t_s}")]
    Span { flow: u32, span_s: f64, t_s: f64 },
    #[error("a row of flow {flow} at t_s {row_t_s} in the interval of t_s {t_s}")]
    RowTime { flow: u32, row_t_s: f64, t_s: f64 },
    #[error("flow {flow} waited {us} us for one write")]
    Wait { flow: u32, us: u64 },
    #[error("flow {flow}'s wake-ups with a median above their largest value")]
    MedianAboveMax { flow: u32 },
    #[error("flow {flow} with a BBR gain of {gain:?}, which no kernel gives")]
    Gain { flow: u32, gain: f64 },
}

/// Why the daemon's end of session cannot be true ([`SampleCheck::ended`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EndError {
    /// Of a flow the session does not have, or of one flow twice.
    #[error("wake-ups of flow {0} (or twice)")]
    Wakeups(u32),
    #[error("a CPU time of {0:?}")]
    Cost(ProcessCost),
    /// Trace events of a kind the daemon does not trace (the name escaped and bounded).
    #[error("trace events of kind \"{0}\", which a daemon does not trace")]
    TraceKind(String),
    #[error(transparent)]
    Text(#[from] EscapeError),
}

/// The welcome with its words escaped and bounded; refused when its host facts cannot be
/// true: today the page size, which turns `tcp_mem_pages` into bytes (a power of two from
/// 1 KiB to 1 MiB).
pub fn check_welcome(welcome: &Welcome, groups: usize) -> Result<Welcome, WelcomeError> {
    let page = welcome.host.page_size_bytes;
    if !page.is_power_of_two() || !(1 << 10..=1 << 20).contains(&page) {
        return Err(WelcomeError::PageSize(page));
    }
    // A session of one group speaks version 4, where the welcome has no groups.
    let said = welcome.groups_in_force.len();
    if groups > 1 && said != groups {
        return Err(WelcomeError::Groups {
            said,
            asked: groups,
        });
    }
    Ok(escaped(welcome)?)
}

/// What the daemon has sent so far in a session of `flows` flows.
pub struct SampleCheck {
    flows: u32,
    /// Each flow's group; a row that names one must name its flow's.
    group_by_flow: Vec<u32>,
    interval_s: f64,
    messages: u64,
    last_t_s: f64,
}

impl SampleCheck {
    pub fn new(groups: &[FlowGroup], interval: Duration) -> Self {
        let group_by_flow = group_by_flow(groups);
        SampleCheck {
            flows: group_by_flow.len() as u32,
            group_by_flow,
            interval_s: interval.as_secs_f64(),
            messages: 0,
            last_t_s: f64::NEG_INFINITY,
        }
    }

    /// `Ok` when one interval's samples fit the session `elapsed_s` seconds after its start
    /// on the reader's clock; otherwise what is wrong with them.
    pub fn check(
        &mut self,
        host: &HostSample,
        rows: &[SenderSample],
        elapsed_s: f64,
    ) -> Result<(), SampleError> {
        let t_s = host.t_s;
        if host.side != Side::Sender {
            return Err(SampleError::HostSide(host.side));
        }
        if host.tcp_mem_pages > MAX_TCP_MEM_PAGES {
            return Err(SampleError::TcpMemPages(host.tcp_mem_pages));
        }
        if let Some(bytes) = host
            .tcp_mem_ns_bytes
            .filter(|&b| b > MAX_TCP_MEM_PAGES << 12)
        {
            return Err(SampleError::NamespaceTcpMem(bytes));
        }
        if !(0.0..=elapsed_s + CLOCK_SLACK_S).contains(&t_s) {
            return Err(SampleError::OutsideSession { t_s, elapsed_s });
        }
        // A thread cannot have waited longer than the session (its sampler counts from just
        // before the start).
        if let Some(wait_ms) = host
            .run_queue_wait_ms
            .filter(|w| !(0.0..=(elapsed_s + CLOCK_SLACK_S) * 1e3).contains(w))
        {
            return Err(SampleError::RunQueueWait { wait_ms, elapsed_s });
        }
        if let Some(pct) = host.cpu_busy_pct_out_of_range() {
            return Err(SampleError::CpuBusy { pct });
        }
        if t_s <= self.last_t_s {
            return Err(SampleError::NotAfter {
                t_s,
                last_t_s: self.last_t_s,
            });
        }
        // A tick waits for its deadline (k intervals after the start), and one last sample
        // covers the partial interval: n messages need at least (n - 1) intervals.
        self.messages += 1;
        if (self.messages - 1) as f64 * self.interval_s > t_s + self.interval_s {
            return Err(SampleError::TooOften {
                messages: self.messages,
                t_s,
                interval_s: self.interval_s,
            });
        }
        self.check_rows(rows, t_s)?;
        self.last_t_s = t_s;
        Ok(())
    }

    /// At most one row per flow, for a flow of the session, at the interval's time.
    fn check_rows(&self, rows: &[SenderSample], t_s: f64) -> Result<(), SampleError> {
        if rows.len() > self.flows as usize {
            return Err(SampleError::TooManyRows {
                rows: rows.len(),
                flows: self.flows,
            });
        }
        let mut seen = vec![false; self.flows as usize];
        for row in rows {
            let Some(slot) = seen.get_mut(row.flow as usize) else {
                return Err(SampleError::NoSuchFlow {
                    flow: row.flow,
                    last_flow: self.flows - 1,
                });
            };
            let flow = row.flow;
            let asked = self.group_by_flow[flow as usize];
            if let Some(said) = row.group.filter(|&said| said != asked) {
                return Err(SampleError::Group { flow, said, asked });
            }
            if std::mem::replace(slot, true) {
                return Err(SampleError::TwoRows { flow, t_s });
            }
            if !(0.0..=t_s).contains(&row.span_s) {
                let span_s = row.span_s;
                return Err(SampleError::Span { flow, span_s, t_s });
            }
            if row.t_s != t_s {
                let row_t_s = row.t_s;
                return Err(SampleError::RowTime { flow, row_t_s, t_s });
            }
            let waits = [
                row.residence_us,
                row.write_to_ack_us,
                row.wake_to_write_max_us,
            ];
            if let Some(us) = waits.into_iter().flatten().find(|&us| us > MAX_WAIT_US) {
                return Err(SampleError::Wait { flow, us });
            }
            let medians = [
                (row.wake_notsent_p50_bytes, row.wake_notsent_max_bytes),
                (row.wake_to_write_p50_us, row.wake_to_write_max_us),
            ];
            if medians.iter().any(|&(p50, max)| p50 > max) {
                return Err(SampleError::MedianAboveMax { flow });
            }
            if let Some(gain) = row.bbr_gain_out_of_range() {
                return Err(SampleError::Gain { flow, gain });
            }
        }
        Ok(())
    }

    /// The end of the session, its words escaped and bounded: wake-up figures for flows of
    /// the session, once each, and a cost that is a number of seconds.
    pub fn ended(&self, ended: &Ended) -> Result<Ended, EndError> {
        let mut seen = vec![false; self.flows as usize];
        for w in &ended.wakeups {
            let first = seen
                .get_mut(w.flow as usize)
                .is_some_and(|slot| !std::mem::replace(slot, true));
            if !first {
                return Err(EndError::Wakeups(w.flow));
            }
        }
        if let Some(cost) = &ended.cost {
            if ![cost.user_s, cost.system_s]
                .iter()
                .all(|s| s.is_finite() && *s >= 0.0)
            {
                return Err(EndError::Cost(*cost));
            }
        }
        let mut kinds = ended.trace.iter().flat_map(|t| t.events.keys());
        let sender_kind = |kind: &&String| SENDER_KINDS.iter().any(|k| k.as_str() == kind.as_str());
        if let Some(kind) = kinds.find(|kind| !sender_kind(kind)) {
            return Err(EndError::TraceKind(oscil_model::text::escape_peer(kind)));
        }
        Ok(escaped(ended)?)
    }
}

/// Why the daemon's trace rows cannot be recorded: not asked for, or of a flow the session
/// lacks, or at a time outside it (`elapsed_s` on the reader's clock, give or take
/// [`CLOCK_SLACK_S`]: the tracer starts with the flows, a moment before the start).
pub(crate) fn check_trace_rows(
    rows: &[TraceRow<SenderTrace>],
    asked: bool,
    flows: usize,
    elapsed_s: f64,
) -> Result<(), TraceRowError> {
    if !asked {
        return Err(TraceRowError::Unasked);
    }
    for row in rows {
        if row.flow as usize >= flows {
            return Err(TraceRowError::NoSuchFlow {
                flow: row.flow,
                flows,
            });
        }
        if !(row.t_s.is_finite() && (-CLOCK_SLACK_S..=elapsed_s + CLOCK_SLACK_S).contains(&row.t_s))
        {
            return Err(TraceRowError::OutsideSession {
                t_s: row.t_s,
                elapsed_s,
            });
        }
    }
    Ok(())
}

/// Why the daemon's trace rows cannot be believed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum TraceRowError {
    #[error("trace rows, but this reader asked for no trace")]
    Unasked,
    #[error("a trace row for flow {flow}; the session has {flows}")]
    NoSuchFlow { flow: u32, flows: usize },
    #[error("a trace row at t_s {t_s}, outside the session (0 to {elapsed_s:.3} s so far)")]
    OutsideSession { t_s: f64, elapsed_s: f64 },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(t_s: f64, side: Side) -> HostSample {
        HostSample {
            tcp_inuse: 1,
            tcp_alloc: 1,
            tcp_mem_pages: 1,
            tcp_mem_ns_bytes: Some(4096),
            ..HostSample::empty(t_s, side)
        }
    }

    fn row(t_s: f64, flow: u32) -> SenderSample {
        let json = serde_json::json!({
            "t_s": t_s, "flow": flow, "bytes": 1, "cwnd": 10, "unacked": 0, "notsent_bytes": 0,
            "snd_wnd": null, "rtt_us": 1, "delivery_rate_bps": 0, "pacing_rate_bps": 0,
            "wmem_queued": 0, "sndbuf": 0, "snd_mss_bytes": 0, "inflight_bytes": 0,
            "total_retrans": 0
        });
        serde_json::from_value(json).expect("a sender row")
    }

    /// Two flows in two groups, sampled every 100 ms.
    fn check() -> SampleCheck {
        let interval = Duration::from_millis(100);
        let one = oscil_protocol::request::SessionRequest::new(1, interval, None).flow_groups();
        SampleCheck::new(&[one.clone(), one].concat(), interval)
    }

    #[test]
    fn a_well_behaved_daemon_passes() {
        let mut c = check();
        for k in 1..=50 {
            let t = k as f64 * 0.1 + 0.0003;
            c.check(&host(t, Side::Sender), &[row(t, 0), row(t, 1)], t + 0.01)
                .unwrap();
        }
        // A late tick that covered two intervals, then the partial last interval.
        c.check(&host(5.2, Side::Sender), &[row(5.2, 1)], 5.3)
            .unwrap();
        c.check(&host(5.23, Side::Sender), &[], 5.3).unwrap();
    }

    #[test]
    fn impossible_samples_are_named() {
        let cases: Vec<(HostSample, Vec<SenderSample>, &str)> = vec![
            (
                host(0.1, Side::Sender),
                vec![row(0.1, 4_294_967_295)],
                "flow 4294967295",
            ),
            (host(1e308, Side::Sender), vec![], "outside the session"),
            (host(f64::NAN, Side::Sender), vec![], "outside the session"),
            (host(-1.0, Side::Sender), vec![], "outside the session"),
            (host(0.1, Side::Reader), vec![], "Reader side"),
            (
                HostSample {
                    tcp_mem_pages: u64::MAX,
                    ..host(0.1, Side::Sender)
                },
                vec![],
                "18446744073709551615 pages",
            ),
            (
                host(0.1, Side::Sender),
                vec![row(0.1, 0), row(0.1, 1), row(0.1, 1)],
                "3 rows",
            ),
            (
                host(0.1, Side::Sender),
                vec![row(0.1, 1), row(0.1, 1)],
                "two rows for flow 1",
            ),
            (host(0.1, Side::Sender), vec![row(0.7, 1)], "at t_s 0.7"),
            (
                HostSample {
                    tcp_mem_ns_bytes: Some(u64::MAX),
                    ..host(0.1, Side::Sender)
                },
                vec![],
                "bytes of namespace TCP memory",
            ),
            (
                HostSample {
                    run_queue_wait_ms: Some(f64::NAN),
                    ..host(0.1, Side::Sender)
                },
                vec![],
                "a wait for a CPU of NaN ms",
            ),
            (
                HostSample {
                    run_queue_wait_ms: Some(1e9),
                    ..host(0.1, Side::Sender)
                },
                vec![],
                "a wait for a CPU of 1000000000 ms",
            ),
            (
                HostSample {
                    cpu_busy_max_pct: Some(100.5),
                    ..host(0.1, Side::Sender)
                },
                vec![],
                "a CPU 100.5% busy",
            ),
            (
                HostSample {
                    cpu_busy_mean_pct: Some(f64::NAN),
                    ..host(0.1, Side::Sender)
                },
                vec![],
                "a CPU NaN% busy",
            ),
            (
                host(0.1, Side::Sender),
                vec![SenderSample {
                    span_s: f64::NAN,
                    ..row(0.1, 0)
                }],
                "covering NaN s",
            ),
            (
                host(0.1, Side::Sender),
                vec![SenderSample {
                    wake_to_write_max_us: Some(u64::MAX),
                    ..row(0.1, 0)
                }],
                "waited 18446744073709551615 us",
            ),
            (
                host(0.1, Side::Sender),
                vec![SenderSample {
                    wake_notsent_p50_bytes: Some(10),
                    ..row(0.1, 0)
                }],
                "median above",
            ),
            (
                host(0.1, Side::Sender),
                vec![SenderSample {
                    group: Some(0),
                    ..row(0.1, 1)
                }],
                "in group 0; the session put it in group 1",
            ),
            (
                host(0.1, Side::Sender),
                vec![SenderSample {
                    bbr_pacing_gain: Some(-1.0),
                    ..row(0.1, 0)
                }],
                "BBR gain of -1.0",
            ),
        ];
        for (h, rows, expected) in cases {
            let reason = check().check(&h, &rows, 1.0).unwrap_err().to_string();
            assert!(reason.contains(expected), "{reason} lacks {expected}");
        }
    }

    #[test]
    fn a_welcome_with_an_impossible_page_size_is_refused() {
        let mut welcome = oscil_protocol::control::Welcome {
            version: oscil_protocol::control::PROTOCOL_VERSION,
            software: "d".into(),
            session_id: oscil_protocol::proof::HexBytes([0; 16]),
            host: oscil_kernel::host::collect(),
            options_in_force: Default::default(),
            probe: false,
            write_mode: Default::default(),
            groups_in_force: Vec::new(),
        };
        assert_eq!(check_welcome(&welcome, 1), Ok(welcome.clone()));
        assert_eq!(
            check_welcome(&welcome, 2),
            Err(WelcomeError::Groups { said: 0, asked: 2 })
        );
        for bad in [0, 3000, 1 << 40, u64::MAX] {
            welcome.host.page_size_bytes = bad;
            let reason = check_welcome(&welcome, 1).unwrap_err();
            assert_eq!(reason, WelcomeError::PageSize(bad));
            assert!(reason.to_string().contains("page size"));
        }
    }

    #[test]
    fn an_end_is_escaped_and_its_trace_kinds_are_the_senders() {
        let mut ended = Ended {
            reason: "done\u{1b}[2J".into(),
            tcpext_delta: Default::default(),
            wakeups: Vec::new(),
            cost: None,
            trace: Some(oscil_model::files::trace::TraceSideFacts {
                events: [("probe".to_string(), 3)].into(),
                absent: vec!["why\n".into()],
                ..Default::default()
            }),
            sampled_by: None,
        };
        let escaped = check().ended(&ended).unwrap();
        assert_eq!(escaped.reason, "done\\u{1b}[2J");
        assert_eq!(escaped.trace.unwrap().absent, ["why\\n"]);
        let trace = ended.trace.as_mut().unwrap();
        trace.events.insert("x\u{1b}".repeat(1_000), 1);
        let reason = check().ended(&ended).unwrap_err().to_string();
        assert!(
            reason.starts_with("trace events of kind \"x\\u{1b}x"),
            "{reason}"
        );
        assert!(reason.contains("bytes more)"), "{reason}");
    }

    #[test]
    fn a_flood_of_samples_is_refused() {
        let mut c = check();
        c.check(&host(0.1, Side::Sender), &[], 0.2).unwrap();
        let reason = c
            .check(&host(0.1, Side::Sender), &[], 0.2)
            .unwrap_err()
            .to_string();
        assert!(reason.contains("does not follow"), "{reason}");
        // Times that creep forward by a microsecond: the count gives them away.
        let mut c = check();
        let reason = (1..100)
            .find_map(|k| {
                let t = 0.1 + k as f64 * 1e-6;
                c.check(&host(t, Side::Sender), &[], 0.2).err()
            })
            .unwrap()
            .to_string();
        assert!(reason.contains("more than one per"), "{reason}");
    }

    #[test]
    fn trace_rows_are_refused_unasked_for_another_flow_or_outside_the_session() {
        let row = |t_s, flow| {
            TraceRow::<SenderTrace>::new(t_s, oscil_model::files::trace::TraceKind::Probe, flow)
        };
        assert!(check_trace_rows(&[row(1.0, 0)], true, 1, 2.0).is_ok());
        let unasked = check_trace_rows(&[row(1.0, 0)], false, 1, 2.0).unwrap_err();
        assert!(
            unasked.to_string().contains("asked for no trace"),
            "{unasked}"
        );
        assert!(check_trace_rows(&[row(1.0, 1)], true, 1, 2.0)
            .unwrap_err()
            .to_string()
            .contains("flow 1"));
        for t_s in [f64::NAN, 9.0, -5.0] {
            assert!(
                check_trace_rows(&[row(t_s, 0)], true, 1, 2.0).is_err(),
                "{t_s}"
            );
        }
    }
}

//! The idle probe: the host's queue apart from the path's (the IETF responsiveness method's
//! "foreign" latency against the loaded flows' own).
//!
//! Beside the loaded flows the reader opens one more data connection to the daemon, with
//! the distinguished flow number [`PROBE_FLOW`] (authenticated like any data connection:
//! hello, challenge, proof), when its hello asked for it (`Hello::probe`). On it the reader
//! sends an 8-byte sequence number every [`PROBE_EVERY`]; the daemon echoes every byte at
//! once. The connection carries nothing else, so its round trip is the path's plus the
//! hosts' processing, never a send queue: the markers' latency minus this is the sender
//! host's queue. It is no flow: no sender or reader row, no flow count, no sample.
//!
//! [`ProbeBook`] keeps what was sent and answered; time is a parameter.

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::files::columns::Row;

/// The flow number a probe connection's data hello names: never a loaded flow's (a session
/// has at most `MAX_FLOWS`).
pub const PROBE_FLOW: u32 = u32::MAX;

/// How often the reader sends a probe (the responsiveness method's 100 ms).
pub const PROBE_EVERY: Duration = Duration::from_millis(100);

/// Bytes of one probe and of its echo: a big-endian sequence number.
pub const PROBE_BYTES: usize = 8;

pub const PROBE_CSV: &str = "probe.csv";

/// One probe as `probe.csv` keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProbeRow {
    /// When the probe was sent, seconds since the session's start.
    pub t_s: f64,
    /// Its round trip; empty when no echo came back before the run ended.
    pub rtt_us: Option<u64>,
    /// True when no echo came back before the run ended (lost or later than the run).
    pub lost: bool,
}

/// What `run.json` says of the probe.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeFacts {
    /// False when the run was made with `--no-probe`.
    pub on: bool,
    pub every_us: u64,
    pub sent: u64,
    pub answered: u64,
    /// Why the probe stopped early or never ran, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Why an echo does not answer the probe it should.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    #[error("the daemon echoed probe {got}, but probe {expected:?} was the next unanswered")]
    OutOfOrder { got: u64, expected: Option<u64> },
}

/// The probes sent and not yet answered, in order (TCP keeps the echoes in order), and
/// the rows of those answered.
#[derive(Debug, Default)]
pub struct ProbeBook {
    next_seq: u64,
    /// Sequence number and send time (µs since the session's start) of each probe in flight.
    pending: VecDeque<(u64, u64)>,
    rows: Vec<ProbeRow>,
}

impl ProbeBook {
    /// Notes a probe sent at `t_us`; returns the bytes to send.
    pub fn send(&mut self, t_us: u64) -> [u8; PROBE_BYTES] {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.pending.push_back((seq, t_us));
        seq.to_be_bytes()
    }

    /// Takes the echo of probe `seq`, come back at `t_us`: its round trip.
    pub fn echoed(&mut self, seq: u64, t_us: u64) -> Result<u64, ProbeError> {
        match self.pending.front() {
            Some(&(expected, sent_us)) if expected == seq => {
                self.pending.pop_front();
                let rtt_us = t_us.saturating_sub(sent_us);
                self.rows.push(ProbeRow {
                    t_s: sent_us as f64 / 1e6,
                    rtt_us: Some(rtt_us),
                    lost: false,
                });
                Ok(rtt_us)
            }
            front => Err(ProbeError::OutOfOrder {
                got: seq,
                expected: front.map(|&(s, _)| s),
            }),
        }
    }

    /// Probes sent so far.
    pub fn sent(&self) -> u64 {
        self.next_seq
    }

    /// Every probe in the order sent, those still unanswered marked lost.
    pub fn finish(mut self) -> Vec<ProbeRow> {
        self.rows
            .extend(self.pending.iter().map(|&(_, sent_us)| ProbeRow {
                t_s: sent_us as f64 / 1e6,
                rtt_us: None,
                lost: true,
            }));
        self.rows
    }
}

/// The `q` quantile (0..=1) of the answered probes' round trips, µs, by the nearest rank;
/// `None` when none was answered.
pub fn rtt_quantile_us(rows: &[ProbeRow], q: f64) -> Option<u64> {
    let mut rtts: Vec<u64> = rows.iter().filter_map(|r| r.rtt_us).collect();
    if rtts.is_empty() {
        return None;
    }
    rtts.sort_unstable();
    let rank = ((q.clamp(0.0, 1.0) * rtts.len() as f64).ceil() as usize).max(1);
    Some(rtts[rank - 1])
}

impl Row for ProbeRow {
    const FILE: &'static str = PROBE_CSV;
    const FIRST_COLUMNS: usize = 3;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_answer_probes_in_order_and_the_rest_are_lost() {
        let mut book = ProbeBook::default();
        let first = book.send(100_000);
        assert_eq!(first, 0u64.to_be_bytes());
        book.send(200_000);
        book.send(300_000);
        assert_eq!(book.echoed(0, 120_500), Ok(20_500));
        // An echo that skips one is refused, not matched to the wrong send time.
        assert_eq!(
            book.echoed(2, 330_000),
            Err(ProbeError::OutOfOrder {
                got: 2,
                expected: Some(1)
            })
        );
        assert_eq!(book.echoed(1, 1_200_000), Ok(1_000_000));
        assert_eq!(book.sent(), 3);
        let rows = book.finish();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].t_s, 0.1);
        assert_eq!(rows[1].rtt_us, Some(1_000_000));
        assert_eq!(
            rows[2],
            ProbeRow {
                t_s: 0.3,
                rtt_us: None,
                lost: true
            }
        );
    }

    #[test]
    fn quantiles_use_answered_probes_only() {
        let row = |rtt_us| ProbeRow {
            t_s: 1.0,
            rtt_us,
            lost: rtt_us.is_none(),
        };
        let rows: Vec<ProbeRow> = [Some(30), Some(10), None, Some(20), Some(40)]
            .into_iter()
            .map(row)
            .collect();
        assert_eq!(rtt_quantile_us(&rows, 0.5), Some(20));
        assert_eq!(rtt_quantile_us(&rows, 0.99), Some(40));
        assert_eq!(rtt_quantile_us(&rows, 0.0), Some(10));
        assert_eq!(rtt_quantile_us(&[row(None)], 0.5), None);
    }
}

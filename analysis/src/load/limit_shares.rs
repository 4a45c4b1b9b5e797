//! What held the sender's flows back, tick by tick: sender.csv's chrono columns summed over
//! flows as shares of the flows' time. The run picture's "limits" panel and the overlay's
//! rows read this one definition.

use std::collections::BTreeMap;

use oscil_model::files::rows::SenderSample;

use crate::load::series::tick_index;

/// One tick's shares of the flows' time, in percent (0 to 100 each, adding up to 100).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TickShares {
    pub t_s: f64,
    /// Held by the receiver's window.
    pub rwnd_pct: f64,
    /// Held by the send buffer.
    pub sndbuf_pct: f64,
    /// Busy, held by neither buffer: the congestion window or pacing.
    pub network_pct: f64,
    /// Not busy: nothing to send.
    pub app_pct: f64,
}

/// Sums of one tick over flows, µs: the flows' time, busy, receive window, send buffer.
#[derive(Default)]
struct Sums([f64; 4]);

/// Every tick with the chrono columns; empty for runs recorded before them.
pub fn tick_shares(rows: &[SenderSample], interval_s: f64) -> Vec<TickShares> {
    let mut ticks: BTreeMap<i64, Sums> = BTreeMap::new();
    for row in rows {
        let Some(busy) = row.busy_us else { continue };
        let sums = &mut ticks.entry(tick_index(row.t_s, interval_s)).or_default().0;
        let parts = [
            row.span_or(interval_s) * 1e6,
            busy as f64,
            row.rwnd_limited_us.unwrap_or(0) as f64,
            row.sndbuf_limited_us.unwrap_or(0) as f64,
        ];
        for (sum, part) in sums.iter_mut().zip(parts) {
            *sum += part;
        }
    }
    ticks
        .into_iter()
        .filter(|(_, s)| s.0[0] > 0.0)
        .map(|(index, Sums([flow, busy, rwnd, sndbuf]))| {
            let pct = |part: f64| (100.0 * part / flow).clamp(0.0, 100.0);
            TickShares {
                t_s: index as f64 * interval_s,
                rwnd_pct: pct(rwnd),
                sndbuf_pct: pct(sndbuf),
                network_pct: pct((busy - rwnd - sndbuf).max(0.0)),
                app_pct: pct((flow - busy).max(0.0)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t_s: f64, flow: u32, [busy, rwnd, sndbuf]: [u64; 3]) -> SenderSample {
        SenderSample {
            t_s,
            flow,
            span_s: 0.1,
            busy_us: Some(busy),
            rwnd_limited_us: Some(rwnd),
            sndbuf_limited_us: Some(sndbuf),
            ..SenderSample::default()
        }
    }

    #[test]
    fn shares_are_of_every_flow_time_together() {
        // Two flows of 100 ms: one busy all along, 60 ms of it held by the window; the
        // other busy half the time, 20 ms by its send buffer.
        let rows = [
            row(0.1, 0, [100_000, 60_000, 0]),
            row(0.1, 1, [50_000, 0, 20_000]),
        ];
        let shares = tick_shares(&rows, 0.1);
        assert_eq!(shares.len(), 1);
        let s = shares[0];
        assert!((s.rwnd_pct - 30.0).abs() < 1e-9, "{s:?}");
        assert!((s.sndbuf_pct - 10.0).abs() < 1e-9, "{s:?}");
        assert!((s.network_pct - 35.0).abs() < 1e-9, "{s:?}");
        assert!((s.app_pct - 25.0).abs() < 1e-9, "{s:?}");
        let older = SenderSample {
            t_s: 0.2,
            ..SenderSample::default()
        };
        assert!(tick_shares(&[older], 0.1).is_empty());
    }
}

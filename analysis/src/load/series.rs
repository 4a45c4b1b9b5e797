//! Per-flow rows folded into one point per sampling tick: the sum across flows and the
//! spread between them, so many flows draw as a line and a band rather than a tangle.

use std::collections::BTreeMap;

/// All flows' values at one sampling tick.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tick {
    /// The tick's nominal time: its index times the sampling interval, in seconds.
    pub t_s: f64,
    pub sum: f64,
    pub min: f64,
    pub p10: f64,
    pub median: f64,
    pub p90: f64,
    pub max: f64,
    /// How many rows (flows) the tick holds.
    pub count: usize,
}

/// The tick a sample taken at `t_s` belongs to. Flows are sampled one after another, so
/// their times differ by a little; rounding to the interval puts them together.
pub fn tick_index(t_s: f64, interval_s: f64) -> i64 {
    (t_s / interval_s).round() as i64
}

/// Breaks a series where the record has a hole: puts `gap(x)` between neighbours further
/// apart than 1.5 times the series' usual step (the smallest step between neighbours), so
/// a sampler that fell behind is drawn as a gap, not a straight line across.
pub fn with_gaps<P: Copy>(points: Vec<P>, x: impl Fn(&P) -> f64, gap: impl Fn(f64) -> P) -> Vec<P> {
    let step = points
        .windows(2)
        .map(|w| x(&w[1]) - x(&w[0]))
        .filter(|d| *d > 0.0)
        .fold(f64::INFINITY, f64::min);
    let mut out = Vec::with_capacity(points.len());
    for (i, point) in points.iter().enumerate() {
        if let Some(before) = i.checked_sub(1).map(|j| x(&points[j])) {
            if x(point) - before > step * 1.5 {
                out.push(gap((before + x(point)) / 2.0));
            }
        }
        out.push(*point);
    }
    out
}

/// Groups rows by tick and summarises each tick, in time order. Rows for which `value`
/// returns `None` (no measurement) are left out.
pub fn ticks<R>(
    rows: &[R],
    interval_s: f64,
    t_s: impl Fn(&R) -> f64,
    value: impl Fn(&R) -> Option<f64>,
) -> Vec<Tick> {
    let mut groups: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for row in rows {
        if let Some(v) = value(row) {
            groups
                .entry(tick_index(t_s(row), interval_s))
                .or_default()
                .push(v);
        }
    }
    groups
        .into_iter()
        .map(|(index, mut values)| {
            values.sort_by(f64::total_cmp);
            Tick {
                t_s: index as f64 * interval_s,
                sum: values.iter().sum(),
                min: values[0],
                p10: percentile(&values, 0.10),
                median: percentile(&values, 0.50),
                p90: percentile(&values, 0.90),
                max: values[values.len() - 1],
                count: values.len(),
            }
        })
        .collect()
}

/// Nearest-rank percentile of sorted, non-empty values.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hole_in_the_record_becomes_a_gap() {
        // Ticks every 100 ms with 0.3 to 0.6 missing (a sampler that fell behind).
        let points = vec![(0.1, 1.0), (0.2, 2.0), (0.3, 3.0), (0.7, 4.0), (0.8, 5.0)];
        let drawn = with_gaps(points, |p| p.0, |x| (x, f64::NAN));
        assert_eq!(drawn.len(), 6);
        assert!(
            drawn[3].1.is_nan() && (drawn[3].0 - 0.5).abs() < 1e-9,
            "{drawn:?}"
        );
        assert_eq!(drawn[4], (0.7, 4.0));
        // An even record is left alone.
        let even = vec![(0.1, 1.0), (0.2, 2.0), (0.3, 3.0)];
        assert_eq!(with_gaps(even.clone(), |p| p.0, |x| (x, f64::NAN)), even);
    }

    #[test]
    fn rows_sampled_a_little_apart_share_a_tick() {
        let rows = [
            (0.1001, 2.0),
            (0.0999, 4.0),
            (0.2, 1.0),
            (0.2004, 3.0),
            (0.3, 5.0),
        ];
        let ticks = ticks(&rows, 0.1, |r| r.0, |r| Some(r.1));
        assert_eq!(ticks.len(), 3);
        assert_eq!((ticks[0].sum, ticks[0].min, ticks[0].max), (6.0, 2.0, 4.0));
        assert_eq!(ticks[1].count, 2);
        assert_eq!(ticks[2].t_s, 0.30000000000000004);
        assert_eq!(ticks[2].median, 5.0);
    }

    #[test]
    fn percentiles_of_ten_values_pick_by_rank() {
        let rows: Vec<(f64, f64)> = (1..=10).map(|v| (1.0, f64::from(v))).collect();
        let tick = ticks(&rows, 0.1, |r| r.0, |r| Some(r.1))[0];
        assert_eq!((tick.p10, tick.median, tick.p90), (1.0, 5.0, 9.0));
        assert_eq!((tick.min, tick.max, tick.sum), (1.0, 10.0, 55.0));
    }

    #[test]
    fn missing_values_are_skipped() {
        let rows = [(0.1, 0.0), (0.1, 7.0)];
        let ticks = ticks(&rows, 0.1, |r| r.0, |r| (r.1 > 0.0).then_some(r.1));
        assert_eq!((ticks[0].count, ticks[0].sum), (1, 7.0));
    }
}

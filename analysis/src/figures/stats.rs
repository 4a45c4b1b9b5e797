//! Means, 95% intervals and changes against a baseline that respect what each figure can
//! be: every figure of the report is at least 0 (bytes, time, rates, counts) or a share of
//! time from 0 to 1, so no interval here goes below 0 (or above 100% for a share), and no
//! change below -100%. Small samples (two or three runs) are the rule, so each method is one
//! that holds its coverage there; [`METHOD`] says them in words, once per page. Without a
//! statistics crate: the t quantiles are a table plus an expansion.

/// The methods, in words, for the report's pages and pictures.
pub const METHOD: &str = "Intervals are 95%. A figure positive in every run: the mean's interval on the log scale (the modified Cox method for a log-normal mean, Olsson 2005), and a change's for the ratio of the two means on the log scale as well (the two samples' Cox statistics differenced, Satterthwaite's degrees of freedom), so neither reaches 0 or a fall of 100%. A share, or a figure some run measured as 0: Student's t, cut to the figure's range (0 to 100% for a share, 0 up otherwise), and for a change Fieller's interval for the ratio of the means with Welch's degrees of freedom, cut at -100%; cutting to where the true value must lie keeps the coverage. Below two runs on a side: too few runs for an interval. 0 in every run of both sides: 0 in both.";

/// The same in a line, for a picture.
pub const METHOD_BRIEF: &str = "95% intervals: on the log scale for a figure positive in every run, else Student's t (Fieller's for a change) cut to the figure's range; index.html says how";

/// Two-sided 95% quantiles of Student's t (the 0.975 quantile) for 1 to 30 degrees of
/// freedom, as printed in statistics tables.
const T_975: [f64; 30] = [
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010,
    2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687,
    2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
];

/// The 0.975 quantile of the standard normal distribution.
const Z_975: f64 = 1.959964;

/// The 0.975 quantile of Student's t with `df` degrees of freedom (not necessarily whole,
/// as Welch's are): the table up to 30, interpolated in 1/df between whole values; the
/// Cornish-Fisher expansion beyond (within 1e-4 of the exact value there).
pub fn t_975(df: f64) -> f64 {
    let df = df.max(1.0);
    if df > 30.0 {
        let z = Z_975;
        let (z3, z5, z7) = (z.powi(3), z.powi(5), z.powi(7));
        return z
            + (z3 + z) / (4.0 * df)
            + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * df * df)
            + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * df.powi(3));
    }
    let low = df.floor();
    let high = df.ceil();
    let at = |d: f64| T_975[d as usize - 1];
    if low == high {
        return at(low);
    }
    let w = (1.0 / low - 1.0 / df) / (1.0 / low - 1.0 / high);
    at(low) + w * (at(high) - at(low))
}

/// What values a figure can take: it decides the interval's method and where it is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    /// 0 or more: bytes, time, rates, counts.
    NonNegative,
    /// A share, 0 to 1.
    Share,
}

/// Why a change has no interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoInterval {
    /// One run on a side: a spread needs two.
    TooFewRuns,
    /// Fieller's interval is unbounded: the baseline's runs are too far apart to tell its
    /// mean from zero.
    NoisyBaseline,
    /// Every run on both sides measured 0: there is no change to bound.
    ZeroInBoth,
}

/// The mean and variance of a sample, over `n` values (variance with n - 1).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Moments {
    mean: f64,
    variance: f64,
}

impl Moments {
    fn of(values: impl Iterator<Item = f64> + Clone, n: usize) -> Moments {
        let mean = values.clone().sum::<f64>() / n as f64;
        let variance = values.map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        Moments { mean, variance }
    }
}

/// A mean over runs with its 95% interval; one run has none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub n: usize,
    pub mean: f64,
    pub ci: Option<(f64, f64)>,
    range: Range,
    /// The values' own moments; none for one run.
    moments: Option<Moments>,
    /// The moments of the values' logarithms, when every value is positive and the figure
    /// not a share: the log scale's statistics.
    logs: Option<Moments>,
}

impl Estimate {
    /// None for no values.
    pub fn of(values: &[f64], range: Range) -> Option<Estimate> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let mut estimate = Estimate {
            n,
            mean,
            ci: None,
            range,
            moments: None,
            logs: None,
        };
        if n == 1 {
            return Some(estimate);
        }
        let moments = Moments::of(values.iter().copied(), n);
        let positive = range == Range::NonNegative && values.iter().all(|&v| v > 0.0);
        estimate.logs = positive.then(|| Moments::of(values.iter().map(|v| v.ln()), n));
        estimate.moments = Some(moments);
        estimate.ci = Some(match estimate.logs {
            Some(logs) => {
                let (centre, variance) = cox(logs, n);
                let half = t_975((n - 1) as f64) * variance.sqrt();
                ((centre - half).exp(), (centre + half).exp())
            }
            None => {
                let half = t_975((n - 1) as f64) * (moments.variance / n as f64).sqrt();
                range.cut(mean - half, mean + half)
            }
        });
        Some(estimate)
    }
}

impl Range {
    /// An interval cut to where the figure can be.
    fn cut(self, lo: f64, hi: f64) -> (f64, f64) {
        match self {
            Range::NonNegative => (lo.max(0.0), hi.max(0.0)),
            Range::Share => (lo.clamp(0.0, 1.0), hi.clamp(0.0, 1.0)),
        }
    }
}

/// The modified Cox statistic of a log-normal sample from its logs' moments: the log of
/// the mean, `mean + variance/2`, and its variance, `variance/n + variance^2/(2(n-1))`.
fn cox(logs: Moments, n: usize) -> (f64, f64) {
    let s2 = logs.variance;
    (
        logs.mean + s2 / 2.0,
        s2 / n as f64 + s2 * s2 / (2.0 * (n - 1) as f64),
    )
}

/// A change against a baseline in percent of the baseline's mean, with a 95% interval for
/// the ratio of the two means (see [`METHOD`]): on the log scale when both sides are
/// positive in every run, else Fieller's with Welch's degrees of freedom, cut at -100%.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    pub percent: f64,
    pub ci_percent: Result<(f64, f64), NoInterval>,
}

impl Change {
    /// None when the baseline's mean is 0 and this one's is not: no percentage of 0.
    pub fn between(value: &Estimate, baseline: &Estimate) -> Option<Change> {
        if baseline.mean == 0.0 {
            return (value.mean == 0.0).then_some(Change {
                percent: 0.0,
                ci_percent: Err(NoInterval::ZeroInBoth),
            });
        }
        let ratio = value.mean / baseline.mean;
        let ci = match (value.moments, baseline.moments) {
            (Some(v1), Some(v2)) => match (value.logs, baseline.logs) {
                (Some(l1), Some(l2)) => Ok(log_ratio((l1, value.n), (l2, baseline.n))),
                _ => fieller(
                    ratio,
                    (v1.variance / value.n as f64, value.n),
                    (v2.variance / baseline.n as f64, baseline.n),
                    baseline.mean,
                )
                .map(|(lo, hi)| (lo.max(0.0), hi.max(0.0)))
                .ok_or(NoInterval::NoisyBaseline),
            },
            _ => Err(NoInterval::TooFewRuns),
        };
        Some(Change {
            percent: (ratio - 1.0) * 100.0,
            ci_percent: ci.map(|(lo, hi)| ((lo - 1.0) * 100.0, (hi - 1.0) * 100.0)),
        })
    }

    /// The interval lies wholly above or wholly below zero.
    pub fn is_clear(&self) -> bool {
        self.ci_percent.is_ok_and(|(lo, hi)| lo > 0.0 || hi < 0.0)
    }
}

/// The 95% interval of the ratio of two log-normal means, from each sample's logs'
/// moments and n: the difference of their Cox statistics, its variance the sum of theirs,
/// with Satterthwaite's degrees of freedom (each Cox variance counted with n - 1).
fn log_ratio((logs1, n1): (Moments, usize), (logs2, n2): (Moments, usize)) -> (f64, f64) {
    let (c1, v1) = cox(logs1, n1);
    let (c2, v2) = cox(logs2, n2);
    let variance = v1 + v2;
    if variance == 0.0 {
        return ((c1 - c2).exp(), (c1 - c2).exp());
    }
    let df = variance.powi(2) / (v1 * v1 / (n1 - 1) as f64 + v2 * v2 / (n2 - 1) as f64);
    let half = t_975(df) * variance.sqrt();
    ((c1 - c2 - half).exp(), (c1 - c2 + half).exp())
}

/// Fieller's 95% interval for `ratio` = mean1 / mean2, given each mean's variance
/// (variance / n) and n; None when the denominator's interval holds zero.
fn fieller(
    ratio: f64,
    (a, n1): (f64, usize),
    (b, n2): (f64, usize),
    mean2: f64,
) -> Option<(f64, f64)> {
    if a + b == 0.0 {
        return Some((ratio, ratio));
    }
    let df = (a + b).powi(2) / (a * a / (n1 - 1) as f64 + b * b / (n2 - 1) as f64);
    let t = t_975(df);
    let g = t * t * b / (mean2 * mean2);
    if g >= 1.0 {
        return None;
    }
    let half = t / mean2.abs() * (a * (1.0 - g) + ratio * ratio * b).sqrt();
    Some(((ratio - half) / (1.0 - g), (ratio + half) / (1.0 - g)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    const E: f64 = std::f64::consts::E;

    fn positive(values: &[f64]) -> Estimate {
        Estimate::of(values, Range::NonNegative).unwrap()
    }

    fn close(got: f64, want: f64, within: f64) -> bool {
        (got - want).abs() <= within
    }

    #[test]
    fn t_quantiles_match_printed_tables() {
        // Whole df from the table; 40, 60, 120 and 1000 as printed (2.021, 2.000, 1.980,
        // 1.962); 2.5 between 2 and 3.
        assert_eq!(t_975(4.0), 2.7764);
        for (df, printed) in [
            (40.0, 2.0211),
            (60.0, 2.0003),
            (120.0, 1.9799),
            (1000.0, 1.9623),
        ] {
            assert!((t_975(df) - printed).abs() < 2e-4, "df {df}: {}", t_975(df));
        }
        let mid = t_975(2.5);
        assert!(mid < 4.3027 && mid > 3.1824, "{mid}");
        assert_eq!(t_975(0.3), 12.7062, "df below one is one");
    }

    #[test]
    fn a_positive_figures_interval_is_coxs_on_the_log_scale() {
        // Worked by hand: values 1, e, e^2 have logs 0, 1, 2: mean 1, variance 1, n = 3.
        // Cox: centre 1 + 1/2 = 1.5, variance 1/3 + 1/(2 x 2) = 0.583333, t(0.975, 2) =
        // 4.3027, half-width 4.3027 x 0.763763 = 3.286241; interval exp(1.5 -+ 3.286241)
        // = [0.167589, 119.850053].
        let e = positive(&[1.0, E, E * E]);
        assert!(close(e.mean, (1.0 + E + E * E) / 3.0, 1e-12));
        let (lo, hi) = e.ci.unwrap();
        assert!(close(lo, 0.167589, 1e-5), "{lo}");
        assert!(close(hi, 119.850053, 1e-4), "{hi}");
        // The 2-run peak TCP memory, 2.41 MiB [-5.78, 10.60] by Student's t: two
        // runs 1.765 and 3.055 MiB. On the log scale it stays above 0.
        let memory = positive(&[1.765, 3.055]);
        assert!(memory.ci.unwrap().0 > 0.0, "{memory:?}");
    }

    /// Normal deviates by Box-Muller from a seeded generator.
    fn normals(seed: u64) -> impl FnMut() -> f64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        move || {
            let (u, v): (f64, f64) = (1.0 - rng.random::<f64>(), rng.random());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }
    }

    #[test]
    fn the_log_scale_intervals_cover_a_known_mean_95_times_in_100() {
        // Samples of 3 runs from a log-normal with mu = 0, sigma = 0.5: its mean is
        // exp(sigma^2 / 2) = 1.133148, the ratio of two such means with mu 0 and -1 is
        // e = 2.718282. 4000 samples: the share covered has a standard error of about 0.35
        // points, so 92.5% to 98% holds it with room for each method's own error at n = 3
        // (20,000 samples simulated apart: 94.6% to 94.8% for the mean, 96.9% for the
        // ratio, a little conservative).
        let mut normal = normals(29);
        let mut sample =
            |mu: f64| -> Vec<f64> { (0..3).map(|_| (mu + 0.5 * normal()).exp()).collect() };
        let (mean, ratio) = ((0.125_f64).exp(), E);
        let (mut means, mut ratios) = (0, 0);
        const SAMPLES: usize = 4000;
        for _ in 0..SAMPLES {
            let (a, b) = (positive(&sample(0.0)), positive(&sample(-1.0)));
            let (lo, hi) = a.ci.unwrap();
            means += usize::from(lo <= mean && mean <= hi);
            let (lo, hi) = Change::between(&a, &b).unwrap().ci_percent.unwrap();
            ratios += usize::from(lo <= (ratio - 1.0) * 100.0 && (ratio - 1.0) * 100.0 <= hi);
        }
        for covered in [means, ratios] {
            let share = covered as f64 / SAMPLES as f64;
            assert!((0.925..=0.98).contains(&share), "covered {share}");
        }
    }

    #[test]
    fn a_ratio_of_positive_figures_is_bounded_on_the_log_scale() {
        // Worked by hand: logs 0, 0.2 against 1, 1.2 (each side: mean, variance 0.02,
        // n = 2). Cox: 0.11 and 1.11, variances 0.01 + 0.0002 = 0.0102 each; Satterthwaite
        // df = 0.0204^2 / (2 x 0.0102^2) = 2, t = 4.3027, half-width 4.3027 x
        // sqrt(0.0204) = 0.614548 about the difference -1: ratio in exp(-1.614548) =
        // 0.198980 to exp(-0.385452) = 0.680143, -80.10% to -31.99%. The means' own ratio
        // is e^-1, -63.21%, each run of the value being the baseline's over e.
        let value = positive(&[1.0, 0.2_f64.exp()]);
        let base = positive(&[E, 1.2_f64.exp()]);
        let change = Change::between(&value, &base).unwrap();
        assert!(close(change.percent, (1.0 / E - 1.0) * 100.0, 1e-9));
        let (lo, hi) = change.ci_percent.unwrap();
        assert!(
            close(lo, -80.102, 0.01) && close(hi, -31.986, 0.01),
            "{lo} {hi}"
        );
        assert!(change.is_clear());
        // Identical runs: a zero-width interval at the ratio.
        let same = Change::between(&positive(&[5.0, 5.0]), &positive(&[10.0; 3])).unwrap();
        let (lo, hi) = same.ci_percent.unwrap();
        assert!(close(lo, -50.0, 1e-9) && close(hi, -50.0, 1e-9), "{same:?}");
        let (lo, hi) = positive(&[10.0; 3]).ci.unwrap();
        assert!(close(lo, 10.0, 1e-12) && close(hi, 10.0, 1e-12));
    }

    #[test]
    fn with_a_zero_it_is_fiellers_interval_cut_at_minus_100_percent() {
        // Worked by hand: value runs 0, 6 (mean 3, variance 18), baseline runs 9, 10, 11
        // (mean 10, variance 1). Mean variances a = 18/2 = 9, b = 1/3; Welch df =
        // (28/3)^2 / (81/1 + (1/9)/2) = 1.074709; t(0.975) interpolated in 1/df between
        // 12.7062 (df 1) and 4.3027 (df 2): w = (1 - 1/1.074709) / (1 - 1/2) = 0.139031,
        // t = 11.537856. g = t^2 b / 100 = 0.443740. Ratio 0.3; half-width t/10 x
        // sqrt(9 (1 - g) + 0.09/3) = 2.589301; bounds (0.3 -+ half) / (1 - g) = -4.1155
        // (below any ratio of figures that cannot be negative: cut to 0, -100%) and
        // 5.194159, +419.42%.
        let value = positive(&[0.0, 6.0]);
        // Student's t for the mean, cut at 0: 3 -+ 12.7062 x 3 = [-35.1, 41.1] -> [0, 41.1].
        assert_eq!(value.ci.unwrap().0, 0.0);
        assert!(close(value.ci.unwrap().1, 3.0 + 12.7062 * 3.0, 1e-9));
        let change = Change::between(&value, &positive(&[9.0, 10.0, 11.0])).unwrap();
        assert!(close(change.percent, -70.0, 1e-9));
        let (lo, hi) = change.ci_percent.unwrap();
        assert_eq!(lo, -100.0);
        assert!(close(hi, 419.416, 0.01), "{hi}");
        assert!(!change.is_clear());
        let noisy = Change::between(&positive(&[9.0, 10.0]), &positive(&[0.0, 20.0])).unwrap();
        assert_eq!(noisy.ci_percent, Err(NoInterval::NoisyBaseline));
    }

    #[test]
    fn a_share_is_cut_to_0_and_100_percent() {
        // Worked by hand: shares 0 and 0.02: mean 0.01, standard error sqrt(0.0002 / 2) =
        // 0.01, t(0.975, 1) = 12.7062: [-0.117062, 0.137062], cut to [0, 0.137062]; 0.98
        // and 1: [0.862938, 1.117062], cut to [0.862938, 1].
        let low = Estimate::of(&[0.0, 0.02], Range::Share)
            .unwrap()
            .ci
            .unwrap();
        assert!(low.0 == 0.0 && close(low.1, 0.137062, 1e-9), "{low:?}");
        let high = Estimate::of(&[0.98, 1.0], Range::Share)
            .unwrap()
            .ci
            .unwrap();
        assert!(close(high.0, 0.862938, 1e-9) && high.1 == 1.0, "{high:?}");
        // A share positive in every run is not taken to the log scale, which knows no 100%.
        let shares = Estimate::of(&[0.5, 0.9], Range::Share).unwrap();
        assert_eq!(shares.ci.unwrap().1, 1.0);
    }

    #[test]
    fn one_run_has_no_interval_and_zero_in_both_is_no_change() {
        let one = positive(&[3.0]);
        assert_eq!((one.n, one.mean, one.ci), (1, 3.0, None));
        let change = Change::between(&one, &positive(&[1.0, 3.0])).unwrap();
        assert_eq!(change.percent, 50.0);
        assert_eq!(change.ci_percent, Err(NoInterval::TooFewRuns));
        assert!(!change.is_clear());
        assert!(Estimate::of(&[], Range::NonNegative).is_none());
        let zeros = positive(&[0.0, 0.0]);
        assert_eq!(zeros.ci, Some((0.0, 0.0)));
        let both = Change::between(&positive(&[0.0, 0.0, 0.0]), &zeros).unwrap();
        assert_eq!(both.percent, 0.0);
        assert_eq!(both.ci_percent, Err(NoInterval::ZeroInBoth));
        assert!(
            Change::between(&one, &zeros).is_none(),
            "no percentage of 0"
        );
    }
}

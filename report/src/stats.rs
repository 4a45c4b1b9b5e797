//! Means, 95% confidence intervals (Student's t) and changes against a baseline with
//! Welch's interval: enough statistics to tell a setting's effect from run-to-run noise,
//! without a statistics crate (the t quantiles are a table plus an expansion).

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

/// A mean over runs with its 95% interval; one run has none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub n: usize,
    pub mean: f64,
    /// Sample variance (n - 1 in the denominator); none for one run.
    pub variance: Option<f64>,
    pub ci: Option<(f64, f64)>,
}

impl Estimate {
    /// None for no values.
    pub fn of(values: &[f64]) -> Option<Estimate> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        if n == 1 {
            return Some(Estimate {
                n,
                mean,
                variance: None,
                ci: None,
            });
        }
        let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = t_975((n - 1) as f64) * (variance / n as f64).sqrt();
        Some(Estimate {
            n,
            mean,
            variance: Some(variance),
            ci: Some((mean - half, mean + half)),
        })
    }
}

/// A change against a baseline in percent of the baseline's mean, with a 95% interval for
/// the ratio of the two means: Fieller's interval for independent samples, with Welch's
/// degrees of freedom (the variances are not assumed equal). Unlike "difference over the
/// baseline's mean" it accounts for the baseline's own noise and never claims a fall below
/// -100% for a positive figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    pub percent: f64,
    /// None unless both sides have two runs or more, and the baseline's mean is told from
    /// zero.
    pub ci_percent: Option<(f64, f64)>,
}

impl Change {
    /// None when the baseline's mean is zero.
    pub fn between(value: &Estimate, baseline: &Estimate) -> Option<Change> {
        if baseline.mean == 0.0 {
            return None;
        }
        let ratio = value.mean / baseline.mean;
        let ci_percent = match (value.variance, baseline.variance) {
            (Some(v1), Some(v2)) => fieller(
                ratio,
                (v1 / value.n as f64, value.n),
                (v2 / baseline.n as f64, baseline.n),
                baseline.mean,
            )
            .map(|(lo, hi)| ((lo - 1.0) * 100.0, (hi - 1.0) * 100.0)),
            _ => None,
        };
        Some(Change {
            percent: (ratio - 1.0) * 100.0,
            ci_percent,
        })
    }

    /// The interval lies wholly above or wholly below zero.
    pub fn is_clear(&self) -> bool {
        self.ci_percent.is_some_and(|(lo, hi)| lo > 0.0 || hi < 0.0)
    }
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
    fn identical_runs_give_a_zero_width_interval_and_a_clear_change() {
        let a = Estimate::of(&[10.0, 10.0, 10.0]).unwrap();
        let b = Estimate::of(&[5.0, 5.0]).unwrap();
        assert_eq!(a.ci, Some((10.0, 10.0)));
        let change = Change::between(&b, &a).unwrap();
        assert_eq!(change.percent, -50.0);
        assert_eq!(change.ci_percent, Some((-50.0, -50.0)));
        assert!(change.is_clear());
    }

    #[test]
    fn the_change_interval_is_fiellers_for_the_ratio_of_means() {
        // Worked by hand: value runs 2, 4 (mean 3, variance 2), baseline runs 9, 10, 11
        // (mean 10, variance 1). Mean variances a = 2/2 = 1, b = 1/3; Welch df =
        // (4/3)^2 / (1/1 + (1/9)/2) = 1.6842; t(0.975, 1.6842) interpolated in 1/df
        // between 12.7062 (df 1) and 4.3027 (df 2): w = (1 - 1/1.6842) / (1 - 1/2) =
        // 0.81250, t = 5.87835. g = t^2 b / 100 = 0.115184. Ratio 0.3; half-width
        // t/10 * sqrt(1 (1 - g) + 0.09 / 3) = 0.562241; bounds (0.3 -+ half) / (1 - g).
        let value = Estimate::of(&[2.0, 4.0]).unwrap();
        let base = Estimate::of(&[9.0, 10.0, 11.0]).unwrap();
        let change = Change::between(&value, &base).unwrap();
        assert!((change.percent - -70.0).abs() < 1e-9);
        let (lo, hi) = change.ci_percent.unwrap();
        let want_lo = ((0.3 - 0.562241) / (1.0 - 0.115184) - 1.0) * 100.0;
        let want_hi = ((0.3 + 0.562241) / (1.0 - 0.115184) - 1.0) * 100.0;
        assert!((lo - want_lo).abs() < 0.05, "{lo} vs {want_lo}");
        assert!((hi - want_hi).abs() < 0.05, "{hi} vs {want_hi}");
        // [-129.6%, -2.6%]: wide, but wholly below zero.
        assert!(change.is_clear());
        let noisy = Estimate::of(&[1.0, 9.0]).unwrap();
        assert!(!Change::between(&noisy, &base).unwrap().is_clear());
    }

    #[test]
    fn one_run_has_no_interval() {
        let one = Estimate::of(&[3.0]).unwrap();
        assert_eq!((one.n, one.mean, one.ci), (1, 3.0, None));
        let two = Estimate::of(&[1.0, 3.0]).unwrap();
        let change = Change::between(&one, &two).unwrap();
        assert_eq!((change.percent, change.ci_percent), (50.0, None));
        assert!(!change.is_clear());
        assert!(Estimate::of(&[]).is_none());
        let zero = Estimate::of(&[0.0, 0.0]).unwrap();
        assert!(Change::between(&one, &zero).is_none());
    }
}

//! One workload on real hosts: before a pair's first run, one calibration run measures its
//! path, and `--fraction` of that run's peak becomes the slow rate of every run of the pair,
//! whatever configuration it has. The calibration goes into `campaign.json`
//! (`calibrations`, and each run's `slow_rate_bps`), so `--resume` reuses it and a report
//! can tell how the rate was chosen. The namespace lab needs none: it knows its path's
//! rate (`plan::matrix::SlowRateChoice`). Here, what the calibration run is and what it
//! fixes; the campaign's loop makes it (`crate::backend::calibration::calibrate_before`).
//!
//! A run of its own rather than the baseline's first repetition: that repetition would
//! read its slow phases at its own peak before any rate was fixed (so the baseline would
//! hold one run of another workload), it would have to run first (breaking the shuffled
//! order), and its peak would carry the baseline's settings. The calibration sets nothing
//! (each host's own sysctls and socket options; the campaign's flows, interval and write
//! size) and reads at full speed as long as a run's fast phases together, so it gets at
//! least as far out of slow start as any run's last fast phase; then one sampling interval
//! of slow phase makes the reader fix its rate by its own peak rule (the most TCP delivered
//! to each flow in a one-second window, `--fraction` of it): one definition of the peak.

use std::path::{Path, PathBuf};

use oscil_model::campaign::{
    Calibration, Campaign, CampaignRun, CampaignRunStatus, RunSettings, SlowRateBasis,
};
use oscil_model::pattern::{BitRate, Fraction, PatternConfig};

/// The calibration's directory under the campaign's, and its label in logs.
pub const CALIBRATION: &str = "calibration";

/// True when `run` still waits for its pair's calibration to fix its slow rate.
pub fn awaits(run: &CampaignRun) -> bool {
    matches!(
        run.settings.slow_rate_basis,
        Some(SlowRateBasis::Calibration { peak_bps: None })
    )
}

/// The calibration run of `like`'s pair: `calibration` (`calibration/<pair>` in a
/// many-host campaign), full speed for `like`'s fast phases together, then one interval
/// slow, the reader's own peak rule, nothing set on the hosts.
pub fn plan(like: &CampaignRun) -> CampaignRun {
    let s = &like.settings;
    let p = s.pattern;
    let pattern = PatternConfig {
        fast_ms: p.fast_ms.saturating_mul(u64::from(p.cycles)),
        slow_ms: s.interval_us.div_ceil(1000).max(1),
        cycles: 1,
        fraction: p.fraction,
        full_speed: false,
    };
    let mut dir = PathBuf::from(CALIBRATION);
    dir.extend(&like.pair);
    CampaignRun {
        label: CALIBRATION.into(),
        repetition: 1,
        position: 0,
        dir,
        settings: RunSettings {
            write_size_bytes: s.write_size_bytes,
            no_probe: s.no_probe,
            slow_rate_basis: Some(SlowRateBasis::PerRun),
            ..RunSettings::unset(s.flows, s.interval_us, pattern)
        },
        status: CampaignRunStatus::Pending,
        reason: None,
        link_spoiled: None,
        pair: like.pair.clone(),
    }
}

/// What a finished calibration run measured: its reader's slow rate, which is `fraction`
/// x its peak, turned back into the peak. `None` when the run did not finish or no slow
/// phase began.
pub fn measured(run: &CampaignRun, run_dir: &Path, measured_unix_ms: u64) -> Option<Calibration> {
    let meta = oscil_rundir::load_meta(run_dir).ok()?;
    let chosen = meta.config.slow_rate?.cycles.first()?.bytes_per_s;
    let pattern = run.settings.pattern;
    Some(Calibration {
        pair: run.pair.clone(),
        dir: run.dir.clone(),
        full_speed_ms: pattern.fast_ms,
        peak_bps: pattern
            .fraction
            .peak_of(BitRate::from_bytes_per_s(chosen).bps()),
        measured_unix_ms,
    })
}

/// Fixes `run`'s slow rate from its pair's `calibration`, when it waits for one.
pub fn apply_to(run: &mut CampaignRun, calibration: &Calibration) {
    if !awaits(run) || run.pair != calibration.pair {
        return;
    }
    let s = &mut run.settings;
    s.slow_rate_bps = Some(
        s.pattern
            .fraction
            .of_rate(BitRate::from_bps(calibration.peak_bps)),
    );
    s.slow_rate_basis = Some(SlowRateBasis::Calibration {
        peak_bps: Some(calibration.peak_bps),
    });
}

/// Records `calibration` in the campaign (replacing an earlier one of its pair) and fixes
/// the slow rate of every run of its pair that waits for it.
pub fn apply(campaign: &mut Campaign, calibration: Calibration) {
    for run in &mut campaign.runs {
        apply_to(run, &calibration);
    }
    campaign.calibrations.retain(|c| c.pair != calibration.pair);
    campaign.calibrations.push(calibration);
}

/// A line for the terminal: what the calibration found and what it fixed.
pub fn describe(calibration: &Calibration, fraction: Fraction) -> String {
    let pair = calibration
        .pair
        .as_deref()
        .map_or(String::new(), |p| format!(" of {p}"));
    format!(
        "oscil-lab: calibration{pair}: at most {:.1} Mbit/s delivered in one second at full speed; every run's slow phases read {:.2} Mbit/s ({}% of it)",
        calibration.peak_bps as f64 / 1e6,
        fraction.of(calibration.peak_bps) as f64 / 1e6,
        fraction.percent()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::matrix::{configurations, plan_runs, AxisValue, Matrix, Setting};
    use oscil_model::campaign::Order;
    use oscil_protocol::request::SessionRequest;

    fn runs() -> Vec<CampaignRun> {
        let lowat = |bytes| AxisValue {
            label: Some(format!("lowat-{bytes:?}")),
            set: Setting::Lowat(bytes),
        };
        let matrix = Matrix {
            axes: vec![vec![lowat(None), lowat(Some(131072))]],
            flows: 2,
            write_size_bytes: Some(16384),
            ..Matrix::default()
        };
        plan_runs(&configurations(&matrix), 2, Order::Grouped, 0)
    }

    #[test]
    fn the_calibration_reads_at_full_speed_as_long_as_the_fast_phases_and_sets_nothing() {
        let mut like = runs()[3].clone();
        assert!(awaits(&like), "real hosts wait for their calibration");
        like.pair = Some("a-to-b".into());
        let run = plan(&like);
        // The Cloudflare pattern's three 5 s fast phases, then one 100 ms interval slow.
        let p = run.settings.pattern;
        assert_eq!((p.fast_ms, p.slow_ms, p.cycles), (15_000, 100, 1));
        assert_eq!(run.dir, Path::new("calibration/a-to-b"));
        assert_eq!(
            run.settings.lowat_bytes, None,
            "the setting under test is not set"
        );
        assert_eq!(
            (run.settings.flows, run.settings.write_size_bytes),
            (2, Some(16384))
        );
        assert_eq!(run.settings.slow_rate_basis, Some(SlowRateBasis::PerRun));
        assert!(SessionRequest::of_run(&run.settings).validate().is_ok());
    }

    #[test]
    fn one_calibration_fixes_every_run_of_its_pair_and_only_those() {
        let mut campaign_runs = runs();
        campaign_runs[0].pair = Some("b-to-a".into());
        let mut campaign = Campaign {
            format_version: oscil_model::campaign::CAMPAIGN_FORMAT_VERSION,
            software: "test".into(),
            created_unix_ms: 0,
            backend: oscil_model::campaign::Backend::Hosts,
            sender: "s".into(),
            receiver: "r".into(),
            order: Order::Grouped,
            seed: 0,
            repeat: 2,
            runs: campaign_runs,
            hosts: None,
            calibrations: Vec::new(),
        };
        let calibration = Calibration {
            pair: None,
            dir: "calibration".into(),
            full_speed_ms: 15_000,
            peak_bps: 94_000_000,
            measured_unix_ms: 1,
        };
        apply(&mut campaign, calibration.clone());
        // 5% of 94 Mbit/s is 4.7 Mbit/s, in every configuration of the pair.
        let rates: Vec<Option<u64>> = campaign
            .runs
            .iter()
            .map(|r| r.settings.slow_rate_bps.map(BitRate::bps))
            .collect();
        assert_eq!(
            rates,
            [None, Some(4_700_000), Some(4_700_000), Some(4_700_000)]
        );
        assert!(awaits(&campaign.runs[0]), "another pair's run still waits");
        assert_eq!(
            campaign.runs[1].settings.slow_rate_basis,
            Some(SlowRateBasis::Calibration {
                peak_bps: Some(94_000_000)
            })
        );
        // Again (a resumed campaign's later calibration of the same pair): one record.
        apply(&mut campaign, calibration);
        assert_eq!(campaign.calibrations.len(), 1);
        assert_eq!(
            campaign.runs[1].settings.slow_rate_bps,
            Some(BitRate::from_bps(4_700_000))
        );
    }
}

//! What the lab adds to its record of a run (`oscil_model::lab::LabRecord`, which each
//! run's `run.json` keeps as `lab`): the warnings that depend on the run's settings and the
//! receiver.

use oscil_model::campaign::{CampaignRun, RunSettings};
use oscil_model::lab::bdp_bytes;
use oscil_model::sysctl::{Sysctl, SysctlValues};

/// Warnings that depend on the run's settings and the receiver: a receive buffer too small
/// for the path, a sysctl the kernel ignores.
pub fn run_warnings(
    settings: &RunSettings,
    receiver: &SysctlValues,
    receiver_kernel: &str,
) -> Vec<String> {
    let mut warnings = Vec::new();
    if settings.adv_win_scale.is_some() && ignores_adv_win_scale(receiver_kernel) {
        warnings.push(format!(
            "tcp_adv_win_scale has no effect on Linux {receiver_kernel} (ignored since 6.6; \
             the window follows the measured skb scaling ratio)"
        ));
    }
    let Some(path) = &settings.path else {
        return warnings;
    };
    let bdp = bdp_bytes(path.rate_bps, path.rtt_us);
    if let Some([_, _, max]) = receiver.get(Sysctl::TcpRmem).and_then(|v| v.triple()) {
        if max < bdp {
            warnings.push(format!(
                "tcp_rmem max {max} is below the path's BDP ({bdp} bytes): the receive window will cap throughput"
            ));
        }
    }
    warnings
}

/// The plan's axes the receiver's kernel does not honour, said once before the campaign
/// spends time on them (each run's `run.json` says it again).
pub fn axis_warnings(runs: &[CampaignRun], receiver_kernel: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    let varied = runs.iter().any(|r| r.settings.adv_win_scale.is_some());
    if varied && ignores_adv_win_scale(receiver_kernel) {
        warnings.push(format!(
            "--adv-win-scale: the receiver's Linux {receiver_kernel} ignores tcp_adv_win_scale \
             (since 6.6): configurations that differ only in it measure the same thing"
        ));
    }
    warnings
}

/// Linux 6.6 and later ignore tcp_adv_win_scale.
pub fn ignores_adv_win_scale(kernel: &str) -> bool {
    let mut parts = kernel
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse::<u32>().ok());
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (6, 6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use oscil_model::campaign::PathSettings;
    use oscil_model::sysctl::SysctlValue;

    #[test]
    fn a_small_rmem_on_a_fat_path_is_warned_about() {
        let settings = RunSettings {
            path: Some(PathSettings {
                rate_bps: 1_000_000_000,
                rtt_us: 466_000,
                loss_pct: 0.0,
                queue_packets: None,
            }),
            ..RunSettings::default()
        };
        let rmem =
            |v: [u64; 3]| SysctlValues::from_iter([(Sysctl::TcpRmem, SysctlValue::Triple(v))]);
        let small = run_warnings(&settings, &rmem([4096, 131072, 6291456]), "6.1.0");
        assert_eq!(small.len(), 1, "{small:?}");
        assert!(run_warnings(&settings, &rmem([8192, 262144, 536870912]), "6.1.0").is_empty());
        let adv = RunSettings {
            adv_win_scale: Some(2),
            ..settings
        };
        let ignored = run_warnings(&adv, &rmem([8192, 262144, 536870912]), "6.18.0");
        assert!(
            ignored[0].contains("no effect on Linux 6.18.0"),
            "{ignored:?}"
        );
    }

    #[test]
    fn an_axis_the_receiver_ignores_is_warned_about_once_before_the_runs() {
        let run = |adv_win_scale| CampaignRun {
            label: "x".into(),
            repetition: 1,
            position: 1,
            dir: "runs/x/rep-1".into(),
            settings: RunSettings {
                adv_win_scale,
                ..RunSettings::default()
            },
            status: oscil_model::campaign::CampaignRunStatus::Pending,
            reason: None,
            link_spoiled: None,
            pair: None,
        };
        let plan = [run(None), run(Some(1)), run(Some(2))];
        let warned = axis_warnings(&plan, "6.12.117+deb13-cloud-amd64");
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(warned[0].starts_with("--adv-win-scale"), "{warned:?}");
        assert!(axis_warnings(&plan, "6.1.0-50-cloud-amd64").is_empty());
        assert!(axis_warnings(&[run(None)], "6.18.0").is_empty());
    }

    #[test]
    fn adv_win_scale_is_ignored_from_6_6() {
        assert!(ignores_adv_win_scale("6.6.0"));
        assert!(ignores_adv_win_scale("6.18.0-cloud-amd64"));
        assert!(!ignores_adv_win_scale("6.1.0-28-amd64"));
        assert!(!ignores_adv_win_scale("5.15.0"));
    }
}

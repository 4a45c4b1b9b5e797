//! Repetitions: a campaign directory of real loopback runs (two configurations, three
//! repetitions each, two cycles) reported as configurations with intervals, per-cycle
//! figures, a recommendation and a page that a real browser loads. Expected statistics
//! are computed here from the CSV text and textbook t-values.

mod util;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use oscil_model::campaign::{CampaignRun, CampaignRunStatus, PathSettings, RunSettings};
use oscil_model::pattern::PatternConfig;
use oscil_rundir::campaign;
use oscil_testkit::{number, Csv, Daemon};
use util::{assert_close, expected, plan, png_size, reader_run, report, Chromium};

const CONFIGS: [(&str, Option<u32>); 2] = [("default", None), ("lowat16k", Some(16384))];
const REPEAT: u32 = 3;
/// t(0.975) for 2 degrees of freedom, from a printed table.
const T_975_DF2: f64 = 4.303;

/// The plan's settings. The path is what a lab would have set (these runs are over
/// loopback): the report takes it from campaign.json, as run.json has no lab object.
fn settings(lowat: Option<u32>) -> RunSettings {
    RunSettings {
        path: Some(PathSettings {
            rate_bps: 100_000_000,
            rtt_us: 20_000,
            loss_pct: 0.0,
            queue_packets: None,
        }),
        lowat_bytes: lowat.map(u64::from),
        pattern: PatternConfig {
            fast_ms: 1000,
            slow_ms: 1000,
            fraction: oscil_model::pattern::Fraction::CLOUDFLARE,
            cycles: 2,
            full_speed: false,
        },
        ..RunSettings::default()
    }
}

/// The campaign directory, made once: `runs/<label>/rep-<k>/` for each configuration
/// (lowat set per socket by the reader), in shuffled-looking order, plus one failed run.
fn campaign_dir() -> &'static (tempfile::TempDir, PathBuf) {
    static CAMPAIGN: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    CAMPAIGN.get_or_init(|| {
        let daemon = Daemon::start(&[]);
        let scratch = tempfile::tempdir().expect("scratch dir");
        let root = scratch.path().join("campaign");
        let mut runs = Vec::new();
        for repetition in 1..=REPEAT {
            for (label, lowat) in CONFIGS {
                let dir = PathBuf::from(format!("runs/{label}/rep-{repetition}"));
                let lowat_arg = lowat.map(|l| l.to_string());
                let mut args = vec!["--fast", "1s", "--slow", "1s", "--cycles", "2"];
                if let Some(l) = &lowat_arg {
                    args.extend(["--notsent-lowat", l.as_str()]);
                }
                reader_run(&daemon, &root.join(&dir), label, &args);
                runs.push(CampaignRun {
                    label: label.into(),
                    repetition,
                    position: runs.len() as u32 + 1,
                    dir,
                    settings: settings(lowat),
                    status: CampaignRunStatus::Complete,
                    reason: None,
                    pair: None,
                    link_spoiled: None,
                });
            }
        }
        runs.push(CampaignRun {
            label: "default".into(),
            repetition: 4,
            position: runs.len() as u32 + 1,
            dir: "runs/default/rep-4".into(),
            settings: settings(None),
            status: CampaignRunStatus::Failed,
            reason: Some("the daemon did not listen".into()),
            pair: None,
            link_spoiled: None,
        });
        let plan = plan(runs, REPEAT);
        campaign::save(&root, &plan).expect("write campaign.json");
        (scratch, root)
    })
}

fn run_dirs(root: &Path, label: &str) -> Vec<PathBuf> {
    (1..=REPEAT)
        .map(|k| root.join(format!("runs/{label}/rep-{k}")))
        .collect()
}

/// The campaign's report, made once (default output: CAMPAIGN/report).
fn campaign_report() -> PathBuf {
    static DONE: OnceLock<PathBuf> = OnceLock::new();
    DONE.get_or_init(|| {
        let (_, root) = campaign_dir();
        let result = Command::new(env!("CARGO_BIN_EXE_oscil-report"))
            .arg(root)
            .arg("--recommend")
            .output()
            .expect("run oscil-report");
        assert!(result.status.success(), "{result:?}");
        root.join("report")
    })
    .clone()
}

/// The mean of `values`, its 95% interval, and the interval's half-width on its own scale
/// (to tell how far the printed t's three decimals move it). Positive values: the modified
/// Cox method (Olsson 2005: the logs' mean plus half their variance, give or take t(n - 1)
/// x sqrt(s^2/n + s^4/(2(n - 1))), exponentiated). With a 0 among them (a queue a loopback
/// run found empty at every sample): Student's t, cut at 0.
fn mean_and_interval(values: &[f64]) -> (f64, (f64, f64), f64) {
    let n = values.len() as f64;
    let moments = |values: &[f64]| {
        let mean = values.iter().sum::<f64>() / n;
        let s2 = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, s2)
    };
    let (mean, s2) = moments(values);
    if values.iter().any(|&v| v <= 0.0) {
        let half = T_975_DF2 * (s2 / n).sqrt();
        return (mean, ((mean - half).max(0.0), mean + half), half);
    }
    let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
    let (log_mean, s2) = moments(&logs);
    let half = T_975_DF2 * (s2 / n + s2 * s2 / (2.0 * (n - 1.0))).sqrt();
    let centre = log_mean + s2 / 2.0;
    (mean, ((centre - half).exp(), (centre + half).exp()), half)
}

#[test]
fn configurations_have_steady_means_with_log_scale_intervals() {
    let out = campaign_report();
    let (_, root) = campaign_dir();
    let rows = Csv::read(&out.join("configurations.csv")).rows;
    assert_eq!(rows.len(), 2, "{rows:?}");
    let mut means = Vec::new();
    for (row, (label, _)) in rows.iter().zip(CONFIGS) {
        assert_eq!(row["configuration"], label);
        assert_eq!(row["runs"], "3");
        assert_eq!(row["figures"], "steady (cycle 2)");
        assert_eq!(
            row["path"], "RTT 20.0 ms, 100.0 Mbit/s",
            "from campaign.json"
        );
        let steady: Vec<_> = run_dirs(root, label)
            .iter()
            .map(|d| expected(d, |c| c >= 2))
            .collect();
        for (column, values, decimals) in [
            (
                "net_goodput_fast_mbps",
                steady
                    .iter()
                    .map(|e| e.net_goodput_fast_mbps)
                    .collect::<Vec<_>>(),
                3,
            ),
            (
                "read_fast_mbps",
                steady.iter().map(|e| e.read_fast_mbps).collect(),
                3,
            ),
            (
                "slow_queued_mean_mib",
                steady.iter().map(|e| e.slow_queued_mean_mib).collect(),
                4,
            ),
        ] {
            let (mean, (want_low, want_high), half) = mean_and_interval(&values);
            // The table's t is exact to 4 decimals, the printed one to 3, which moves each
            // bound by 0.0005 / t x half (a factor exp of that on the log scale): allow for
            // that and the CSV's rounding.
            let moved = 0.0005 / T_975_DF2 * half;
            let slack =
                |bound: f64| bound.max(1.0) * (moved.exp() - 1.0) + 0.51 * 10f64.powi(-decimals);
            assert_close(label, column, number(row, column), mean, decimals);
            let low = number(row, &format!("{column}_ci_low"));
            let high = number(row, &format!("{column}_ci_high"));
            assert!(
                (low - want_low).abs() <= slack(want_low),
                "{label} {column}: {low} vs {want_low}"
            );
            assert!(
                (high - want_high).abs() <= slack(want_high),
                "{label} {column}: {high} vs {want_high}"
            );
            means.push((column, mean));
        }
    }
    // lowat16k against the default: the change of the means.
    let change = number(&rows[1], "slow_queued_mean_mib_change_pct");
    let queued: Vec<f64> = means
        .iter()
        .filter(|(column, _)| *column == "slow_queued_mean_mib")
        .map(|&(_, mean)| mean)
        .collect();
    let want = (queued[1] / queued[0] - 1.0) * 100.0;
    assert!((change - want).abs() < 0.01, "{change} vs {want}");
    assert_eq!(rows[1]["baseline"], "default");
    assert_eq!(
        rows[0]["slow_queued_mean_mib_change_pct"], "",
        "the baseline itself"
    );
}

#[test]
fn every_cycle_of_every_run_has_its_row() {
    let out = campaign_report();
    let (_, root) = campaign_dir();
    let rows = Csv::read(&out.join("cycles.csv")).rows;
    assert_eq!(rows.len(), 2 * REPEAT as usize * 2);
    for row in &rows {
        let dir = root.join(format!(
            "runs/{}/rep-{}",
            row["configuration"], row["repetition"]
        ));
        let cycle: u32 = row["cycle"].parse().unwrap();
        let want = expected(&dir, |c| c == cycle);
        let label = format!("{} cycle {cycle}", row["run"]);
        assert_close(
            &label,
            "net_goodput_fast_mbps",
            number(row, "net_goodput_fast_mbps"),
            want.net_goodput_fast_mbps,
            3,
        );
        assert_close(
            &label,
            "slow_queued_peak_mib",
            number(row, "slow_queued_peak_mib"),
            want.slow_queued_peak_mib,
            4,
        );
        assert_close(&label, "fast_s", number(row, "fast_s"), 1.0, 3);
    }
    assert_eq!(
        Csv::read(&out.join("summary.csv")).rows.len(),
        6,
        "one row per run"
    );
}

#[test]
fn the_recommendation_names_its_evidence_or_declines() {
    let out = campaign_report();
    let md = fs::read_to_string(out.join("recommendation.md")).unwrap();
    let conf = out.join("99-oscil-tcp.conf");
    assert!(md.contains("| lowat16k | 3 |"), "{md}");
    assert!(md.contains("## Path: RTT 20.0 ms, 100.0 Mbit/s"), "{md}");
    if md.contains("**Choice: lowat16k**") {
        let conf = fs::read_to_string(conf).unwrap();
        assert!(
            conf.contains("\nnet.ipv4.tcp_notsent_lowat = 16384\n"),
            "{conf}"
        );
        assert!(conf.contains("\nnet.ipv4.tcp_wmem = "), "{conf}");
        assert!(conf.contains("\nnet.ipv4.tcp_rmem = "), "{conf}");
        assert!(
            conf.lines().filter(|l| l.starts_with('#')).count() >= 4,
            "{conf}"
        );
    } else {
        assert!(md.contains("**No recommendation**"), "{md}");
        assert!(!conf.exists(), "nothing recommended, no sysctl file");
    }
}

#[test]
fn runs_given_separately_group_by_their_settings_and_one_run_each_recommends_nothing() {
    let (_, root) = campaign_dir();
    let all: Vec<PathBuf> = CONFIGS
        .iter()
        .flat_map(|(label, _)| run_dirs(root, label))
        .collect();
    let out = tempfile::tempdir().unwrap();
    let paths: Vec<&Path> = all.iter().map(PathBuf::as_path).collect();
    let result = report(&paths, out.path(), &["--whole-run"]);
    assert!(result.status.success(), "{result:?}");
    let rows = Csv::read(&out.path().join("configurations.csv")).rows;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows
        .iter()
        .all(|r| r["runs"] == "3" && r["figures"] == "whole run"));

    let single = tempfile::tempdir().unwrap();
    let result = report(&[&all[0], &all[3]], single.path(), &["--recommend"]);
    assert!(result.status.success(), "{result:?}");
    let md = fs::read_to_string(single.path().join("recommendation.md")).unwrap();
    assert!(
        md.contains("**No recommendation**: one run per configuration"),
        "{md}"
    );
    assert!(!single.path().join("99-oscil-tcp.conf").exists());
    let configs = Csv::read(&single.path().join("configurations.csv")).rows;
    assert_eq!(configs[0]["runs"], "1");
    assert_eq!(
        configs[0]["net_goodput_fast_mbps_ci_low"], "",
        "one run: no interval"
    );
}

/// The page's width once laid out, as its script wrote it into `body[data-scroll-width]`.
fn scroll_width(dom: &str) -> u32 {
    dom.split("data-scroll-width=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("the page did not measure itself: {dom:.300}"))
}

#[test]
fn the_page_loads_every_image_and_fits_1280_pixels_in_a_real_browser() {
    let Some(chromium) = Chromium::find("neither the images nor the 1280-pixel width are checked")
    else {
        return;
    };
    let out = campaign_report();
    let page = out.join("index.html");
    let html = fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "no network fetches"
    );
    let images = html.matches("<img ").count();
    // A run whose sender ran BBR (this kernel's default) has BBR's own picture as well.
    let root = out.parent().unwrap();
    let bbr_runs = (1..=REPEAT)
        .flat_map(|rep| CONFIGS.iter().map(move |(label, _)| (label, rep)))
        .filter(|(label, rep)| {
            let sender = root.join(format!("runs/{label}/rep-{rep}/sender.csv"));
            Csv::read(&sender)
                .rows
                .iter()
                .any(|row| !row["bbr_bw_bps"].is_empty())
        })
        .count();
    assert_eq!(
        images,
        3 + 6 + bbr_runs,
        "overlay.png, cycles.png, comparison.png, one picture per run and BBR's per BBR run"
    );
    assert!(html.contains("Not reported: default rep 4: failed (the daemon did not listen)"));

    let browse = |extra: &[&str]| chromium.output(&page, extra);
    let dom = browse(&["--dump-dom"]);
    assert!(
        dom.contains(&format!("data-images=\"{images}/{images}\"")),
        "not every image loaded: {}",
        dom.lines()
            .find(|l| l.contains("<body"))
            .unwrap_or("no body")
    );
    for id in [
        "verdicts-table",
        "configurations-table",
        "runs-table",
        "recommendation",
    ] {
        assert!(dom.contains(&format!("id=\"{id}\"")), "{id} missing");
    }
    // In a 1280-pixel window the page is no wider than the window: no horizontal scroll.
    let narrow = browse(&["--window-size=1280,2000", "--dump-dom"]);
    let width = scroll_width(&narrow);
    assert!(
        width <= 1280,
        "the page is {width} px wide in a 1280 px window"
    );
    let shot = out.join("screenshot.png");
    browse(&[
        &format!("--screenshot={}", shot.display()),
        "--window-size=1280,2400",
    ]);
    assert!(shot.exists(), "no screenshot");
    assert_eq!(png_size(&shot), (1280, 2400));
}

#[test]
fn a_campaign_with_no_complete_run_is_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let failed = CampaignRun {
        label: "default".into(),
        repetition: 1,
        position: 1,
        dir: "runs/default/rep-1".into(),
        settings: settings(None),
        status: CampaignRunStatus::Failed,
        reason: Some("the link did not start".into()),
        pair: None,
        link_spoiled: None,
    };
    let plan = plan(vec![failed], 1);
    campaign::save(dir.path(), &plan).unwrap();
    let out = tempfile::tempdir().unwrap();
    let stderr = util::one_line_error(&report(&[dir.path()], out.path(), &[]));
    assert!(
        stderr.contains("nothing to report: no complete run"),
        "{stderr}"
    );
    assert!(
        stderr.contains("default rep 1: failed (the link did not start)"),
        "{stderr}"
    );
}

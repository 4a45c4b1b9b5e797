//! Reports from real run directories: a daemon and a reader over loopback make the runs,
//! the report binary reads them, and the summary's figures are checked against figures
//! computed here straight from the CSV text.

mod util;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use oscil_testkit::{number, Csv};
use serde_json::Value;
use util::{assert_close, expected, one_line_error, png_size, real_runs, report};

/// Two real runs over loopback, made once for all tests: the kernel's default lowat and
/// lowat 16 KiB, the second with markers.
fn runs() -> &'static (tempfile::TempDir, Vec<PathBuf>) {
    static RUNS: OnceLock<(tempfile::TempDir, Vec<PathBuf>)> = OnceLock::new();
    RUNS.get_or_init(|| {
        let short = ["--fast", "1s", "--slow", "2s", "--cycles", "1"];
        let markers = ["--notsent-lowat", "16384", "--marker-every", "200ms"];
        let runs = [
            ("default".to_string(), short.to_vec()),
            ("lowat16k".to_string(), [&short[..], &markers[..]].concat()),
        ];
        real_runs(&runs, str::to_string)
    })
}

/// 1600 pixels wide: a header of at least two 30-pixel lines (name and settings, figures)
/// over seven 380-pixel panels (the sixth, latency, because real runs carry TX timestamps;
/// the seventh, what limits the sender, because they carry the kernel's chrono counters),
/// each 24 pixels taller for every line its title wraps onto. Returns the height.
fn assert_tall_run_picture(path: &Path) -> u32 {
    let (width, height) = png_size(path);
    assert_eq!(width, 1600, "{}", path.display());
    let header = height.checked_sub(7 * 380 + 20).expect("seven panels");
    assert!(
        header >= 60 && header % 6 == 0,
        "{}: {height} pixels tall",
        path.display()
    );
    height
}

/// How many lines of text drawn in `file`, and in `run-default.png`, start with `start`
/// (report.json's `texts`).
fn header_lines_with(report_dir: &Path, file: &str, start: &str) -> (usize, usize) {
    let text = fs::read_to_string(report_dir.join("report.json")).unwrap();
    let manifest: Value = serde_json::from_str(&text).unwrap();
    let count = |name: &str| {
        let figure = manifest["figures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["file"] == name)
            .unwrap_or_else(|| panic!("no {name} in report.json"));
        figure["texts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["text"].as_str().unwrap().starts_with(start))
            .count()
    };
    (count(file), count("run-default.png"))
}

#[test]
fn reports_real_runs_with_figures_matching_the_csvs() {
    let (_scratch, dirs) = runs();
    let out = tempfile::tempdir().unwrap();
    let paths: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    let result = report(&paths, out.path(), &[]);
    assert!(result.status.success(), "{result:?}");

    for name in ["run-default.png", "run-lowat16k.png"] {
        assert_tall_run_picture(&out.path().join(name));
    }
    let (width, height) = png_size(&out.path().join("comparison.png"));
    assert_eq!(width, 1600);
    assert!(height > 400, "comparison.png is {height} pixels tall");
    assert!(
        !out.path().join("path.png").exists(),
        "both runs share one path: no chart against RTT"
    );

    let rows = Csv::read(&out.path().join("summary.csv")).rows;
    assert_eq!(rows.len(), 2);
    for (row, dir) in rows.iter().zip(dirs) {
        let label = &row["label"];
        let want = expected(dir, |_| true);
        assert_eq!(row["status"], "complete", "{label}");
        assert!(
            want.tcp_mem_ns_peak_sender_mib > 0.0,
            "{label}: namespace memory recorded"
        );
        for (column, value, decimals) in [
            ("net_goodput_fast_mbps", want.net_goodput_fast_mbps, 3),
            ("net_goodput_slow_mbps", want.net_goodput_slow_mbps, 3),
            ("read_fast_mbps", want.read_fast_mbps, 3),
            ("read_slow_mbps", want.read_slow_mbps, 3),
            ("slow_queued_peak_mib", want.slow_queued_peak_mib, 4),
            ("slow_queued_mean_mib", want.slow_queued_mean_mib, 4),
            ("tcp_mem_peak_sender_mib", want.tcp_mem_peak_sender_mib, 4),
            (
                "tcp_mem_ns_peak_sender_mib",
                want.tcp_mem_ns_peak_sender_mib,
                4,
            ),
            ("rtt_slow_mean_ms", want.rtt_slow_mean_ms, 3),
            ("rtt_min_ms", want.rtt_min_ms, 3),
        ] {
            assert_close(label, column, number(row, column), value, decimals);
        }
        // The daemon's writer waits on a full socket, lowat or not: both runs woke it.
        for (column, value) in [
            ("safe_lowat_bytes", want.safe_lowat_bytes),
            ("pollout_notsent_max_bytes", want.pollout_notsent_max_bytes),
        ] {
            let value = value.unwrap_or_else(|| panic!("{label}: no wake-up in sender.csv"));
            assert_close(label, column, number(row, column), value, 0);
        }
    }
    // The run without --notsent-lowat has the kernel's default only where the host's
    // sysctl sets no threshold; then it is every run's baseline.
    let sysctl = fs::read_to_string("/proc/sys/net/ipv4/tcp_notsent_lowat").unwrap_or_default();
    if sysctl.trim() == "4294967295" {
        assert_eq!(rows[0]["lowat"], "lowat default");
        assert!(rows.iter().all(|r| r["baseline"] == "default"), "{rows:?}");
    } else {
        eprintln!("net.ipv4.tcp_notsent_lowat is {sysctl:?} here: default-lowat checks skipped");
    }
    assert_eq!(rows[1]["lowat"], "lowat 16 KiB");
    assert_eq!(rows[1]["lowat_bytes"], "16384");

    // Marker figures only where markers were set, each a latency of markers.csv; the
    // clock's uncertainty beside them is run.json's.
    assert_eq!(
        rows[0]["marker_p50_ms"], "",
        "no markers in the default run"
    );
    let mut latencies_ms: Vec<f64> = Csv::read(&dirs[1].join("markers.csv"))
        .rows
        .iter()
        .filter(|r| !r["latency_us"].is_empty())
        .map(|r| number(r, "latency_us").max(0.0) / 1000.0)
        .collect();
    latencies_ms.sort_by(f64::total_cmp);
    assert!(latencies_ms.len() >= 3, "{latencies_ms:?}");
    let n = latencies_ms.len();
    let p50 = number(&rows[1], "marker_p50_ms");
    let (low, high) = (latencies_ms[(n - 1) / 2], latencies_ms[n / 2]);
    assert!(
        p50 >= low * 0.998 - 0.002 && p50 <= high * 1.002 + 0.002,
        "marker_p50_ms {p50} against {latencies_ms:?}"
    );
    assert!(number(&rows[1], "marker_p99_ms") <= latencies_ms[n - 1] * 1.002 + 0.002);
    let meta: Value =
        serde_json::from_str(&fs::read_to_string(dirs[1].join("run.json")).unwrap()).unwrap();
    let uncertainty_ms = meta["clock"]["uncertainty_us"].as_f64().unwrap() / 1000.0;
    assert_close(
        "lowat16k",
        "clock_uncertainty_ms",
        number(&rows[1], "clock_uncertainty_ms"),
        uncertainty_ms,
        3,
    );

    let md = fs::read_to_string(out.path().join("summary.md")).unwrap();
    assert!(md.contains("| default | complete |"), "{md}");
    assert!(md.contains("| lowat16k | complete | lowat 16 KiB"), "{md}");
    // Issue 37 item 6: the answer comes before any table.
    let answer_at = md
        .find("## The answer")
        .unwrap_or_else(|| panic!("no answer:\n{md}"));
    let table_at = md.find("\n|").unwrap_or_else(|| panic!("no table:\n{md}"));
    assert!(
        answer_at < table_at,
        "the table comes before the answer:\n{md}"
    );
    assert!(md[answer_at..table_at].contains("### Path: "), "{md}");
}

#[test]
fn a_partial_run_still_reports_and_says_so() {
    let (_scratch, dirs) = runs();
    let copy = tempfile::tempdir().unwrap();
    for file in ["run.json", "reader.csv", "sender.csv", "host.csv"] {
        fs::copy(dirs[0].join(file), copy.path().join(file)).unwrap();
    }
    let meta_path = copy.path().join("run.json");
    let mut meta: Value = serde_json::from_str(&fs::read_to_string(&meta_path).unwrap()).unwrap();
    meta["ending"]["status"] = "partial".into();
    meta["ending"]["reason"] = "interrupted (Ctrl-C)".into();
    meta["label"] = "cut-short".into();
    // A run of its own beside the original, not a copy of it counted once.
    meta.as_object_mut().unwrap().remove("run_id");
    fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();

    let out = tempfile::tempdir().unwrap();
    let result = report(&[copy.path(), &dirs[0]], out.path(), &[]);
    assert!(result.status.success(), "{result:?}");
    // A header line the same run complete lacks, in red: "PARTIAL RUN: <reason>". (Not
    // told by the pictures' heights: a legend has a row more where samples were clipped.)
    assert_tall_run_picture(&out.path().join("run-default.png"));
    assert_tall_run_picture(&out.path().join("run-cut-short.png"));
    assert_eq!(
        header_lines_with(
            out.path(),
            "run-cut-short.png",
            "PARTIAL RUN: interrupted (Ctrl-C)"
        ),
        (1, 0)
    );
    let rows = Csv::read(&out.path().join("summary.csv")).rows;
    assert_eq!(rows[0]["status"], "partial");
    assert_eq!(rows[0]["partial_reason"], "interrupted (Ctrl-C)");
    let md = fs::read_to_string(out.path().join("summary.md")).unwrap();
    assert!(
        md.contains("**cut-short** is partial: interrupted (Ctrl-C)"),
        "{md}"
    );
}

/// A run whose pattern ran but whose record lacks intervals (`holes`) is counted, and
/// says so in every place a partial run does.
#[test]
fn a_run_with_holes_is_counted_and_says_so() {
    let (_scratch, dirs) = runs();
    let copy = tempfile::tempdir().unwrap();
    for file in ["run.json", "reader.csv", "sender.csv", "host.csv"] {
        fs::copy(dirs[0].join(file), copy.path().join(file)).unwrap();
    }
    let meta_path = copy.path().join("run.json");
    let mut meta: Value = serde_json::from_str(&fs::read_to_string(&meta_path).unwrap()).unwrap();
    let reason = "pattern complete, but the sender's record has no sample for 35 of the intervals the reader ran";
    meta["ending"]["status"] = "holes".into();
    meta["ending"]["reason"] = reason.into();
    meta["label"] = "holed".into();
    // Another run, not a copy of the same one (which the report counts once).
    meta.as_object_mut().unwrap().remove("run_id");
    fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();

    let out = tempfile::tempdir().unwrap();
    let result = report(&[copy.path(), &dirs[0]], out.path(), &[]);
    assert!(result.status.success(), "{result:?}");
    // A header line the same run complete lacks: "RUN WITH HOLES: <reason>".
    assert_tall_run_picture(&out.path().join("run-default.png"));
    assert_tall_run_picture(&out.path().join("run-holed.png"));
    assert_eq!(
        header_lines_with(
            out.path(),
            "run-holed.png",
            "RUN WITH HOLES: pattern complete"
        ),
        (1, 0)
    );
    let rows = Csv::read(&out.path().join("summary.csv")).rows;
    assert_eq!(rows[0]["status"], "holes");
    assert_eq!(rows[0]["partial_reason"], reason);
    let md = fs::read_to_string(out.path().join("summary.md")).unwrap();
    assert!(md.contains("| holed | holes |"), "{md}");
    assert!(
        md.contains(&format!("**holed** has holes (counted): {reason}")),
        "{md}"
    );
    let html = fs::read_to_string(out.path().join("index.html")).unwrap();
    assert!(
        html.contains(&format!("holes: {}", reason.replace('\'', "&#39;"))),
        "{html}"
    );
}

#[test]
fn a_directory_that_is_not_a_run_is_one_clear_line() {
    let empty = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let stderr = one_line_error(&report(&[empty.path()], out.path(), &[]));
    assert!(stderr.contains("not a run directory"), "{stderr}");
    assert!(
        stderr.contains(&empty.path().display().to_string()),
        "{stderr}"
    );
}

#[test]
fn a_csv_missing_a_column_names_file_and_column() {
    let (_scratch, dirs) = runs();
    let copy = tempfile::tempdir().unwrap();
    for file in ["run.json", "reader.csv", "host.csv"] {
        fs::copy(dirs[0].join(file), copy.path().join(file)).unwrap();
    }
    let sender = fs::read_to_string(dirs[0].join("sender.csv")).unwrap();
    fs::write(
        copy.path().join("sender.csv"),
        sender.replacen("notsent_bytes", "notsent", 1),
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let stderr = one_line_error(&report(&[copy.path()], out.path(), &[]));
    assert!(
        stderr.contains("sender.csv: missing column \"notsent_bytes\""),
        "{stderr}"
    );
}

#[test]
fn an_unknown_baseline_lists_the_labels() {
    let (_scratch, dirs) = runs();
    let out = tempfile::tempdir().unwrap();
    let stderr = one_line_error(&report(
        &[&dirs[0], &dirs[1]],
        out.path(),
        &["--baseline", "nope"],
    ));
    assert!(stderr.contains("\"nope\""), "{stderr}");
    assert!(stderr.contains("default, lowat16k"), "{stderr}");
}

/// A copy of the real default run with each sender row edited by `edit(t_s, fields,
/// column index by name)`.
fn with_sender_rows(
    run: &Path,
    edit: impl Fn(f64, &mut Vec<String>, &dyn Fn(&str) -> usize),
) -> tempfile::TempDir {
    with_rows(run, "sender.csv", edit)
}

/// A copy of the real default run with each row of `csv` edited as `with_sender_rows`
/// edits the sender's.
fn with_rows(
    run: &Path,
    csv: &str,
    edit: impl Fn(f64, &mut Vec<String>, &dyn Fn(&str) -> usize),
) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    for file in ["run.json", "reader.csv", "sender.csv", "host.csv"] {
        fs::copy(run.join(file), copy.path().join(file)).unwrap();
    }
    let text = fs::read_to_string(run.join(csv)).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let column = |name: &str| header.split(',').position(|c| c == name).unwrap();
    let mut out = vec![header.to_string()];
    for line in lines {
        let mut fields: Vec<String> = line.split(',').map(str::to_string).collect();
        let t_s = fields[column("t_s")].parse::<f64>().unwrap();
        edit(t_s, &mut fields, &column);
        out.push(fields.join(","));
    }
    fs::write(copy.path().join(csv), out.join("\n") + "\n").unwrap();
    copy
}

/// The real default run with every sender row's residence set to `fast_us` in the fast
/// phase (the first second) and `slow_us` after it, its time to acknowledgement half as
/// long again, and no write still queued at a sample.
fn with_residence(run: &Path, fast_us: u64, slow_us: u64) -> tempfile::TempDir {
    with_sender_rows(run, |t_s, fields, column| {
        let us = if t_s - 0.05 < 1.0 { fast_us } else { slow_us };
        fields[column("residence_us")] = us.to_string();
        fields[column("write_to_ack_us")] = (us * 3 / 2).to_string();
        fields[column("pending_write_age_us")] = String::new();
    })
}

fn summarized(dir: &Path) -> (oscil_rundir::Run, oscil_report::load::summary::RunSummary) {
    let run = oscil_rundir::load(dir).unwrap();
    let input = oscil_report::load::input::RunInput {
        dir: dir.to_owned(),
        campaign: None,
    };
    let summary = oscil_report::load::summary::summarize(&run, &input);
    (run, summary)
}

/// The default run as the 1 Gbit/s x 466 ms default run looked: no tagged write
/// left the send queue, every sample found one queued since the session began.
#[test]
fn writes_still_queued_are_drawn_as_lower_bounds_never_an_empty_panel() {
    use oscil_report::charts::chart::Weight;
    let (_scratch, dirs) = runs();
    let copy = with_sender_rows(&dirs[0], |t_s, fields, column| {
        fields[column("residence_us")] = String::new();
        fields[column("write_to_ack_us")] = String::new();
        fields[column("pending_write_age_us")] = ((t_s * 1e6) as u64).to_string();
    });
    let (run, summary) = summarized(copy.path());
    let figure = oscil_report::charts::run_chart::run_figure(&run, &summary, &[]);
    let latency = figure
        .panels
        .iter()
        .find(|p| p.key == "latency")
        .expect("a latency panel though no write completed");
    let bounds = latency
        .left
        .lines
        .iter()
        .find(|l| l.weight == Weight::Hollow)
        .expect("the waits still running, drawn hollow");
    assert!(bounds.label.contains("at least"), "{}", bounds.label);
    let longest_ms = bounds.points.iter().map(|p| p.1).fold(0.0, f64::max);
    let last_row_ms = run.sender.iter().map(|r| r.t_s).fold(0.0, f64::max) * 1000.0;
    assert!(
        (longest_ms - last_row_ms).abs() < 1.0,
        "{longest_ms} ms drawn, the last row waited {last_row_ms} ms"
    );
    // The report's overlay has the question's panel too, with the lower bounds in it.
    let wait = overlay_panel(copy.path(), "WriteWait");
    assert!(
        wait["keys"].to_string().contains("still queued, at least"),
        "{wait}"
    );
}

#[test]
fn a_latency_spanning_decades_is_drawn_on_a_log_scale() {
    use oscil_report::charts::chart::Scale;
    let (_scratch, dirs) = runs();
    // 0.3 ms to 900 ms spans more than three decades; 0.3 ms to 2.25 ms less than one.
    for (fast_us, slow_us, scale, label) in [
        (300, 900_000, Scale::Log, "time (ms), log scale"),
        (300, 1_500, Scale::Linear, "time (ms), linear scale"),
    ] {
        let copy = with_residence(&dirs[0], fast_us, slow_us);
        let (run, summary) = summarized(copy.path());
        let figure = oscil_report::charts::run_chart::run_figure(&run, &summary, &[]);
        let latency = figure
            .panels
            .iter()
            .find(|p| p.title.starts_with("Latency"))
            .expect("a latency panel");
        assert_eq!(
            (latency.left.scale, latency.left.label.as_str()),
            (scale, label),
            "{fast_us} to {slow_us} us"
        );
        // Drawn, log or not, as the sixth panel of the picture.
        let out = tempfile::tempdir().unwrap();
        let result = report(&[copy.path()], out.path(), &[]);
        assert!(result.status.success(), "{result:?}");
        let picture = oscil_testkit::report_figure(out.path(), "run");
        assert_tall_run_picture(&out.path().join(picture["file"].as_str().unwrap()));
    }
}

#[test]
fn a_comparison_of_different_slow_rates_is_flagged_as_not_one_workload() {
    let pattern = ["--fast", "1s", "--slow", "1s", "--cycles", "1"];
    let args = |rate: &'static str, lowat: Option<&'static str>| {
        let mut args = pattern.to_vec();
        args.extend(["--slow-rate", rate]);
        args.extend(lowat.map(|l| ["--notsent-lowat", l]).into_iter().flatten());
        args
    };
    let runs = [
        ("default".to_string(), args("16mbit", None)),
        ("lowat".to_string(), args("4mbit", Some("16384"))),
    ];
    let (dir, dirs) = real_runs(&runs, str::to_string);
    let (default, lowat) = (&dirs[0], &dirs[1]);
    let meta: Value =
        serde_json::from_str(&fs::read_to_string(lowat.join("run.json")).unwrap()).unwrap();
    assert_eq!(
        meta["config"]["slow_rate"]["chosen_by"],
        serde_json::json!({"by": "absolute", "bytes_per_s": 500_000}),
    );
    assert_eq!(
        meta["config"]["slow_rate"]["cycles"][0]["bytes_per_s"],
        500_000
    );

    let out = dir.path().join("report");
    let output = report(&[default, lowat], &out, &[]);
    assert!(output.status.success(), "{output:?}");
    let configs = Csv::read(&out.join("configurations.csv")).rows;
    let mut rates: Vec<f64> = configs
        .iter()
        .map(|r| number(r, "slow_rate_mbps"))
        .collect();
    rates.sort_by(f64::total_cmp);
    assert_eq!(rates, [4.0, 16.0], "{configs:?}");
    let summary = fs::read_to_string(out.join("summary.md")).unwrap();
    let warning = summary
        .lines()
        .find(|l| l.contains("WARNING: not one workload"))
        .unwrap_or_else(|| panic!("no warning in summary.md:\n{summary}"));
    assert!(
        warning.contains("4.0 Mbit/s") && warning.contains("16.0 Mbit/s"),
        "{warning}"
    );
    let page = fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        page.contains("WARNING: not one workload"),
        "verdicts say it too"
    );
    // The answer on top says it first, before any figure of the pair.
    let answer = &page[page.find("id=\"answer\"").unwrap()..page.find("id=\"verdicts\"").unwrap()];
    let warned = answer.find("not one workload").expect("the answer warns");
    assert!(
        warned < answer.find("against default:").expect("the sentence"),
        "{answer}"
    );
}

/// The default run as Debian 12's 6.1 records it: the reader's kernel has no
/// `tcpi_rcv_wnd` (6.2), so reader.csv's `rcv_wnd` is empty in every row.
#[test]
fn without_rcv_wnd_the_window_panels_draw_snd_wnd_and_say_so() {
    let (_scratch, dirs) = runs();
    let copy = with_rows(&dirs[0], "reader.csv", |_, fields, column| {
        fields[column("rcv_wnd")] = String::new();
    });
    let (run, summary) = summarized(copy.path());
    let figure = oscil_report::charts::run_chart::run_figure(&run, &summary, &[]);
    let window = figure
        .panels
        .iter()
        .find(|p| p.key == "window")
        .expect("a window panel");
    assert!(window.title.contains("snd_wnd"), "{}", window.title);
    let labels: Vec<&str> = window.left.lines.iter().map(|l| l.label.as_str()).collect();
    let seen = window
        .left
        .lines
        .iter()
        .find(|l| l.label.contains("(snd_wnd)"))
        .unwrap_or_else(|| panic!("the sender's view of the window: {labels:?}"));
    // Drawn in bytes from sender.csv's snd_wnd: the largest sum over flows lies between
    // the largest row and that times the flows.
    let (unit, _) = window.left.unit.expect("a byte axis");
    let drawn_max = seen
        .points
        .iter()
        .map(|p| p.1)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        * unit.scale;
    let row_max = run
        .sender
        .iter()
        .filter_map(|r| r.snd_wnd)
        .max()
        .map(f64::from)
        .expect("6.18's sender records snd_wnd");
    let flows = run.sender.iter().map(|r| r.flow).max().unwrap() + 1;
    assert!(
        row_max * 0.999 <= drawn_max && drawn_max <= row_max * f64::from(flows) * 1.001,
        "{drawn_max} drawn, rows up to {row_max} over {flows} flows"
    );
    assert!(
        labels.iter().any(|l| l.contains("rcv_ssthresh")),
        "{labels:?}"
    );
    // The overlay answers the window question from snd_wnd too, labelled.
    let panel = overlay_panel(copy.path(), "AdvertisedWindow");
    assert!(panel.to_string().contains("snd_wnd"), "{panel}");
}

/// The panel `key` of the overlay in a report of the run in `dir`, from report.json.
fn overlay_panel(dir: &Path, key: &str) -> Value {
    let out = tempfile::tempdir().unwrap();
    let result = report(&[dir], out.path(), &[]);
    assert!(result.status.success(), "{result:?}");
    let manifest: Value =
        serde_json::from_str(&fs::read_to_string(out.path().join("report.json")).unwrap()).unwrap();
    let overlay = manifest["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["file"] == "overlay.png")
        .expect("overlay.png");
    overlay["panels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == key)
        .unwrap_or_else(|| panic!("no {key} panel in the overlay: {overlay}"))
        .clone()
}

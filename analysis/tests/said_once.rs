//! Issue 37 items 5 and 6 on a real report: two real runs over loopback, one per
//! configuration (as the lab's main job makes them). A caveat that holds for every figure
//! is said once, beside the run count; `summary.md` opens with the answer, then a compact
//! table whose every header has its unit and one definition in the same words.

mod util;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use oscil_model::campaign::{CampaignRun, CampaignRunStatus, RunSettings};
use oscil_rundir::campaign;
use serde_json::Value;
use util::{plan, real_runs, report};

/// The caveat of one run per configuration.
const TOO_FEW: &str = "too few runs for an interval";

const LABELS: [&str; 2] = ["default", "lowat16k"];

/// Two real runs (the kernel's default lowat, and 16 KiB with markers) as a campaign of
/// one repetition, as the lab lays it out, and their report, made once: the campaign's
/// directory and the report's.
fn reported() -> &'static (tempfile::TempDir, tempfile::TempDir) {
    static DONE: OnceLock<(tempfile::TempDir, tempfile::TempDir)> = OnceLock::new();
    DONE.get_or_init(|| {
        // One slow rate for both: one workload, so no warning comes before the answer.
        let short = "--fast 1s --slow 2s --cycles 1 --slow-rate 50mbit";
        let lowat = " --notsent-lowat 16384 --marker-every 200ms";
        let runs = LABELS.map(|label| {
            let args = match label {
                "default" => short.to_string(),
                _ => format!("{short}{lowat}"),
            };
            (format!("runs/{label}/rep-1"), args)
        });
        let runs: Vec<(String, Vec<&str>)> = runs
            .iter()
            .map(|(dir, args)| (dir.clone(), args.split(' ').collect()))
            .collect();
        let (scratch, dirs) = real_runs(&runs, |dir| dir.split('/').nth(1).unwrap().into());
        let planned = LABELS
            .iter()
            .zip(&runs)
            .enumerate()
            .map(|(i, (label, (dir, _)))| CampaignRun {
                label: label.to_string(),
                repetition: 1,
                position: i as u32 + 1,
                dir: dir.into(),
                // The plan's settings set the configurations apart, as the lab's do.
                settings: RunSettings {
                    lowat_bytes: (*label != "default").then_some(16384),
                    ..RunSettings::default()
                },
                status: CampaignRunStatus::Complete,
                reason: None,
                pair: None,
                link_spoiled: None,
            })
            .collect();
        campaign::save(scratch.path(), &plan(planned, 1)).expect("write campaign.json");
        let out = tempfile::tempdir().unwrap();
        let args: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
        let result = report(&args, out.path(), &["--recommend"]);
        assert!(result.status.success(), "{result:?}");
        (scratch, out)
    })
}

fn read(name: &str) -> String {
    fs::read_to_string(reported().1.path().join(name)).unwrap()
}

/// The lines drawn in a picture, from report.json.
fn drawn(file: &str) -> String {
    let manifest: Value = serde_json::from_str(&read("report.json")).unwrap();
    let figure = manifest["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["file"] == file)
        .unwrap_or_else(|| panic!("no {file} in report.json"));
    let texts = figure["texts"].as_array().unwrap().iter();
    let lines: Vec<String> = texts.map(|t| t["text"].as_str().unwrap().into()).collect();
    lines.join(" ")
}

#[test]
fn one_run_each_is_said_once_beside_the_run_count() {
    for (name, text) in [
        ("summary.md", read("summary.md")),
        ("index.html", read("index.html")),
        ("headline.png", drawn("headline.png")),
        ("comparison.png", drawn("comparison.png")),
    ] {
        assert_eq!(text.matches(TOO_FEW).count(), 1, "{name}:\n{text}");
        // Nor the figure alone's form of it, after each mean.
        assert!(!text.contains("too few for an interval"), "{name}:\n{text}");
    }
    let page = read("index.html");
    let count = page
        .lines()
        .find(|l| l.contains("2 runs in 2 configurations"))
        .expect("the run count");
    assert!(count.contains(TOO_FEW), "{count}");
    // recommendation.md says why there is no choice, and explains no interval it lacks.
    let recommendation = read("recommendation.md");
    assert!(!recommendation.contains(TOO_FEW), "{recommendation}");
    assert!(
        !recommendation.contains("Intervals are 95%"),
        "{recommendation}"
    );
}

/// The lab's end table (`oscil-report --end-table CAMPAIGN`) says it once too, under the
/// rows that count the runs.
#[test]
fn the_labs_end_table_says_it_once() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oscil-report"))
        .arg("--end-table")
        .arg(reported().0.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let table = String::from_utf8(out.stdout).unwrap();
    assert_eq!(table.matches(TOO_FEW).count(), 1, "{table}");
    for label in LABELS {
        let row = table
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no row {label}:\n{table}"));
        assert!(row.contains(" 1/1 "), "{row}");
    }
}

/// The `≥` legend is there where a `≥` is, and only there: in summary.md (under its
/// table) and on the page.
#[test]
fn the_at_least_legend_comes_with_an_at_least_sign() {
    for (name, text) in [
        ("summary.md", read("summary.md")),
        ("index.html", read("index.html")),
    ] {
        let legend = text.contains("≥: at least");
        let signs = text.matches('≥').count() - usize::from(legend);
        assert_eq!(legend, signs > 0, "{name}: {signs} signs:\n{text}");
    }
}

/// The cells of a Markdown table row.
fn cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split(" | ").map(|c| c.trim().to_string()).collect()
}

#[test]
fn summary_md_answers_first_then_a_compact_table_defined_in_its_own_words() {
    let md = read("summary.md");
    let mut lines = md.lines().filter(|l| !l.trim().is_empty());
    assert_eq!(lines.next(), Some("# oscil report"));
    // Only a warning may come before the answer (none here: one workload).
    let first = lines.find(|l| !l.starts_with("- **WARNING")).unwrap();
    assert!(first.starts_with("## The answer"), "{md}");
    assert!(!md.contains("WARNING"), "{md}");
    assert!(lines.next().unwrap().starts_with("### Path: "), "{md}");

    let header = cells(md.lines().find(|l| l.starts_with('|')).expect("a table"));
    assert!(header.len() <= 10, "{} columns: {header:?}", header.len());
    assert!(header.iter().any(|h| h.contains("queue")), "{header:?}");
    assert!(header.iter().any(|h| h.contains("goodput")), "{header:?}");
    // Over loopback both ends share one namespace: its memory is both ends'.
    assert!(
        header
            .iter()
            .any(|h| h.starts_with("both ends' peak TCP memory")),
        "{header:?}"
    );
    assert!(header.iter().any(|h| h.contains("latency")), "{header:?}");
    assert!(header.iter().any(|h| h.contains("limited")), "{header:?}");
    let units = ["MiB", "Mbit/s", "ms", "%"];
    let page = read("index.html").replace("&#39;", "'");
    for h in &header[1..] {
        if h == "runs" {
            continue; // a count
        }
        let (name, unit) = h
            .strip_suffix(')')
            .and_then(|h| h.rsplit_once(" ("))
            .unwrap_or_else(|| panic!("{h:?} has no unit"));
        assert!(units.contains(&unit), "{h:?}");
        assert!(!name.contains(unit), "{h:?} says its unit twice");
        let defined: Vec<&str> = md
            .lines()
            .filter(|l| l.starts_with(&format!("- **{h}**: ")))
            .collect();
        assert_eq!(defined.len(), 1, "{h:?}: {defined:?}\n{md}");
        // The figure's name in the definition is the one index.html gives its rows.
        let rest = &defined[0][format!("- **{h}**: ").len()..];
        let (titles, _) = rest
            .split_once(" — ")
            .expect("the title, then what it means");
        for title in titles.split(" / ") {
            assert!(
                page.contains(&format!("<tr><td>{title}</td>")),
                "{h:?} defined as {title:?}, which index.html does not name"
            );
        }
    }
    // Goodput is what TCP delivered, in every place summary.md says it.
    assert!(!md.contains("what the reader read"), "{md}");
    let goodput = md
        .lines()
        .find(|l| l.starts_with("- **") && l.contains("goodput"))
        .unwrap();
    assert!(goodput.contains("what TCP delivered"), "{goodput}");
    // The runs after it, one row each.
    let runs_at = md.find("## Runs").expect("the runs");
    assert!(md[runs_at..].contains("| default | complete |"), "{md}");
    assert!(md[runs_at..].contains("| lowat16k | complete |"), "{md}");
}

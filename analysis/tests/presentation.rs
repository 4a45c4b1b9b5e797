//! What a person sees, checked through `report.json` rather than pixels: real runs over
//! loopback (the kernel's default lowat and lowat 16 KiB, two repetitions each, two
//! cycles, markers on), reported once; the answer on top with changes computed here from
//! the CSV text, every configuration on each overlaid panel, one y-scale across the
//! runs' pictures, no text cut (the time-sequence picture of the one traced run too), every
//! file listed, and a run given twice counted once.

mod util;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use oscil_testkit::Csv;
use serde_json::Value;
use util::{expected, png_size, real_runs, report};

const LABELS: [&str; 2] = ["default", "lowat16k"];

/// Four real runs, made once: `<label>-<k>`.
fn runs() -> &'static (tempfile::TempDir, Vec<PathBuf>) {
    static RUNS: OnceLock<(tempfile::TempDir, Vec<PathBuf>)> = OnceLock::new();
    RUNS.get_or_init(|| {
        let mut runs = Vec::new();
        for k in 1..=2 {
            for label in LABELS {
                let mut args = vec!["--fast", "1s", "--slow", "1s", "--cycles", "2"];
                args.extend(["--marker-every", "300ms"]);
                if label == "lowat16k" {
                    args.extend(["--notsent-lowat", "16384"]);
                }
                // One traced run: its time-sequence picture is checked with the others.
                if label == "default" && k == 1 {
                    args.push("--trace");
                }
                runs.push((format!("{label}-{k}"), args));
            }
        }
        real_runs(&runs, |name| name[..name.len() - 2].to_string())
    })
}

/// The report of the four runs (the first given a second time, spelled differently),
/// made once; its directory, stderr and manifest.
fn reported() -> &'static (tempfile::TempDir, String, Value) {
    static DONE: OnceLock<(tempfile::TempDir, String, Value)> = OnceLock::new();
    DONE.get_or_init(|| {
        let (_, dirs) = runs();
        let out = tempfile::tempdir().unwrap();
        let again = dirs[0].join("..").join(dirs[0].file_name().unwrap());
        let mut args: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
        args.push(&again);
        let result = report(&args, out.path(), &["--recommend"]);
        assert!(result.status.success(), "{result:?}");
        let manifest: Value =
            serde_json::from_str(&fs::read_to_string(out.path().join("report.json")).unwrap())
                .expect("report.json is JSON");
        let stderr = String::from_utf8_lossy(&result.stderr).into_owned();
        (out, stderr, manifest)
    })
}

fn figures(manifest: &Value) -> &Vec<Value> {
    manifest["figures"].as_array().expect("figures")
}

fn figure<'a>(manifest: &'a Value, file: &str) -> &'a Value {
    figures(manifest)
        .iter()
        .find(|f| f["file"] == file)
        .unwrap_or_else(|| panic!("no {file} in report.json"))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// Every absence the runs' `run.json` name: the host's (`absent`) and each trace side's.
fn not_given_notes(dirs: &[PathBuf]) -> Vec<String> {
    let mut notes = Vec::new();
    for dir in dirs {
        let meta: Value =
            serde_json::from_str(&fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
        for absent in meta["absent"].as_array().into_iter().flatten() {
            notes.push(absent["note"].as_str().unwrap().to_string());
        }
        for side in ["sender", "reader"] {
            if let Some(absent) = meta["trace"][side]["absent"].as_array() {
                notes.extend(absent.iter().map(|a| a.as_str().unwrap().to_string()));
            }
        }
    }
    notes
}

#[test]
fn a_run_given_twice_counts_once_with_a_warning() {
    let (out, stderr, manifest) = reported();
    let rows = Csv::read(&out.path().join("summary.csv")).rows;
    assert_eq!(rows.len(), 4, "four runs, not five");
    assert!(
        stderr.contains("warning:") && stderr.contains("given more than once"),
        "{stderr}"
    );
    let warnings = strings(&manifest["warnings"]);
    let twice = warnings
        .iter()
        .filter(|w| w.contains("given more than once"))
        .count();
    assert_eq!(twice, 1, "{warnings:?}");
    // The others are what the runs' kernels could not give (here the traced run's collapse
    // probes, on a kernel without kprobe events), each said once.
    let not_given = not_given_notes(&runs().1);
    for warning in warnings
        .iter()
        .filter(|w| !w.contains("given more than once"))
    {
        assert!(
            not_given
                .iter()
                .any(|note| warning.ends_with(note.as_str())),
            "{warning:?} is not in any run.json: {not_given:?}"
        );
    }
    let distinct: BTreeSet<&String> = warnings.iter().collect();
    assert_eq!(distinct.len(), warnings.len(), "{warnings:?}");
    let page = fs::read_to_string(out.path().join("index.html")).unwrap();
    assert!(page.contains("given more than once: counted once"));
    let configs = Csv::read(&out.path().join("configurations.csv")).rows;
    assert!(configs.iter().all(|c| c["runs"] == "2"), "{configs:?}");
}

#[test]
fn the_manifest_lists_every_file_written_and_every_picture_exists() {
    let (out, _, manifest) = reported();
    let listed: BTreeSet<String> = strings(&manifest["files"]).into_iter().collect();
    let on_disk: BTreeSet<String> = fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(listed, on_disk);
    for f in figures(manifest) {
        let file = f["file"].as_str().unwrap();
        let (width, height) = png_size(&out.path().join(file));
        assert_eq!(width, 1600, "{file}");
        assert!(height > 100, "{file}");
    }
    for name in [
        "headline.png",
        "overlay.png",
        "cycles.png",
        "comparison.png",
    ] {
        assert!(listed.contains(name), "{name} missing: {listed:?}");
    }
}

#[test]
fn no_text_in_any_picture_is_cut() {
    let (_, _, manifest) = reported();
    let mut lines = 0;
    for f in figures(manifest) {
        for t in f["texts"].as_array().unwrap() {
            let text = t["text"].as_str().unwrap();
            assert!(!text.contains('…'), "{}: {text:?}", f["file"]);
            let (width, room) = (
                t["width_px"].as_u64().unwrap(),
                t["room_px"].as_u64().unwrap(),
            );
            assert!(
                width <= room,
                "{}: {text:?} is {width} px in {room}",
                f["file"]
            );
            lines += 1;
        }
    }
    assert!(lines > 100, "{lines} lines of text in all");
    // The comparison says each verdict whole: every configuration's row is there.
    let comparison = figure(manifest, "comparison.png");
    let texts: Vec<&str> = comparison["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["text"].as_str().unwrap())
        .collect();
    assert!(texts.iter().any(|t| t.contains("baseline")), "{texts:?}");
}

#[test]
fn the_answer_states_each_change_against_the_default_from_the_csvs() {
    let (out, _, manifest) = reported();
    let (_, dirs) = runs();
    // The slow-phase queue's mean over the steady cycle, per configuration, from the text.
    let mean = |label: &str| -> f64 {
        let values: Vec<f64> = dirs
            .iter()
            .filter(|d| d.file_name().unwrap().to_string_lossy().starts_with(label))
            .map(|d| expected(d, |c| c >= 2).slow_queued_mean_mib)
            .collect();
        values.iter().sum::<f64>() / values.len() as f64
    };
    let change = (mean("lowat16k") / mean("default") - 1.0) * 100.0;
    let headline: String = figure(manifest, "headline.png")["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["text"].as_str().unwrap())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        headline.contains("lowat16k against default: the sender's slow-phase queue"),
        "{headline}"
    );
    let percent = format!("{change:+.0}%");
    assert!(
        headline.contains(&percent),
        "{headline} should hold {percent}"
    );
    assert!(headline.contains("network goodput"), "{headline}");
    assert!(headline.contains("(n = 2 each)"), "{headline}");
    assert!(
        headline.contains("Recommendation:") || headline.contains("No recommendation:"),
        "{headline}"
    );
    // The page opens with the same answer.
    let page = fs::read_to_string(out.path().join("index.html")).unwrap();
    let answer = page.find("id=\"answer\"").expect("the answer on the page");
    assert!(answer < page.find("id=\"verdicts\"").unwrap());
    assert!(page.contains(&percent));
}

#[test]
fn each_question_has_one_panel_with_every_configuration_on_it() {
    let (_, _, manifest) = reported();
    for file in ["overlay.png", "cycles.png"] {
        let overlay = figure(manifest, file);
        let panels = overlay["panels"].as_array().unwrap();
        let keys: Vec<&str> = panels.iter().map(|p| p["key"].as_str().unwrap()).collect();
        // The runs recorded the namespace sum, so the sender's memory is that sum.
        for key in ["SenderMemory", "Unsent", "ReceiveWindow", "WriteWait"] {
            assert!(keys.contains(&key), "{file}: {keys:?}");
        }
        for p in panels {
            let configs = strings(&p["configurations"]);
            assert_eq!(configs, LABELS, "{file} {}", p["key"]);
            let legend = strings(&p["keys"]);
            for label in LABELS {
                assert!(
                    legend
                        .iter()
                        .any(|k| k == &format!("{label}: mean of 2 runs")),
                    "{file} {}: {legend:?}",
                    p["key"]
                );
            }
        }
    }
}

#[test]
fn the_runs_pictures_share_each_panels_scale() {
    let (_, _, manifest) = reported();
    let runs: Vec<&Value> = figures(manifest)
        .iter()
        .filter(|f| f["kind"] == "run")
        .collect();
    assert_eq!(runs.len(), 4);
    for key in ["window", "queue", "throughput", "memory"] {
        let axes: BTreeSet<String> = runs
            .iter()
            .map(|f| {
                let panel = f["panels"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|p| p["key"] == key)
                    .unwrap_or_else(|| panic!("{}: no {key} panel", f["file"]));
                panel["y_axis"].to_string()
            })
            .collect();
        assert_eq!(axes.len(), 1, "{key}: {axes:?}");
    }
}

#[test]
fn comparison_panels_follow_the_questions_and_name_what_is_left_out() {
    let (_, _, manifest) = reported();
    let comparison = figure(manifest, "comparison.png");
    let keys: Vec<String> = comparison["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["key"].as_str().unwrap().to_string())
        .collect();
    let at = |key: &str| keys.iter().position(|k| k == key);
    let memory = at("tcp_mem_ns_peak_sender_mib").expect("namespace memory");
    let queue = at("slow_queued_mean_mib").expect("queue");
    let goodput = keys
        .iter()
        .position(|k| k.contains("goodput_fast"))
        .expect("goodput");
    let wait = at("residence_p50_ms").expect("a write's wait");
    assert!(
        memory < queue && queue < goodput && goodput < wait,
        "{keys:?}"
    );
    // Host-wide sockstat is not offered as the setting's effect beside the namespace sum,
    // and the wake-up yardstick is not offered as a lowat to set.
    assert!(at("tcp_mem_peak_sender_mib").is_none(), "{keys:?}");
    assert!(at("safe_lowat_bytes").is_none(), "{keys:?}");
    let header: Vec<String> = comparison["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["text"].as_str().unwrap().to_string())
        .collect();
    assert!(header.iter().any(|t| t.contains("host-wide")), "{header:?}");
}

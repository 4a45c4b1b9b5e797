//! Reports over run directories that a crash, a remote host or another user shaped: a CSV
//! cut mid-row, a CSV that is a link to /dev/zero or a FIFO, a cell that is not a finite
//! time, labels of 300 characters, a megabyte, and terminal escapes. One real run over
//! loopback is made, then copied and damaged by hand.

mod util;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use oscil_testkit::{Csv, Daemon};
use serde_json::Value;
use util::{reader_run, report, Chromium};

/// One short real run, made once.
fn good_run() -> &'static (tempfile::TempDir, PathBuf) {
    static RUN: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    RUN.get_or_init(|| {
        let daemon = Daemon::start(&[]);
        let scratch = tempfile::tempdir().expect("scratch dir");
        let dir = scratch.path().join("good");
        let args = ["--fast", "1s", "--slow", "1s", "--cycles", "1"];
        reader_run(&daemon, &dir, "good", &args);
        (scratch, dir)
    })
}

/// A copy of the good run under `parent/name`, made a run of its own: without its
/// `run_id`, which would make the report count it as the good run once more.
fn copy_run(parent: &Path, name: &str) -> PathBuf {
    let (_, good) = good_run();
    let dir = parent.join(name);
    fs::create_dir(&dir).unwrap();
    for entry in fs::read_dir(good).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    let path = dir.join("run.json");
    let mut meta: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    meta.as_object_mut().unwrap().remove("run_id");
    fs::write(&path, serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
    dir
}

fn set_label(dir: &Path, label: &str) {
    let path = dir.join("run.json");
    let mut meta: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    meta["label"] = Value::String(label.into());
    fs::write(&path, serde_json::to_vec(&meta).unwrap()).unwrap();
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_csv_cut_mid_row_is_used_and_reported_as_cut() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = copy_run(scratch.path(), "cut");
    let reader = dir.join("reader.csv");
    let text = fs::read_to_string(&reader).unwrap();
    let complete_rows = text.lines().count() - 2;
    let cut_at = text.len() - 7;
    let dropped = cut_at - text[..cut_at].rfind('\n').unwrap() - 1;
    fs::write(&reader, &text[..cut_at]).unwrap();
    let out = scratch.path().join("report");
    let result = report(&[&dir], &out, &[]);
    assert!(result.status.success(), "{}", stderr(&result));
    let rows = Csv::read(&out.join("summary.csv")).rows;
    assert_eq!(rows[0]["status"], "partial");
    assert_eq!(
        rows[0]["partial_reason"],
        format!("reader.csv was cut mid-row: 1 incomplete row ({dropped} bytes) dropped")
    );
    assert!(complete_rows > 10, "the complete rows remain to be used");
    // Said on stderr too, not only inside the report.
    assert_eq!(
        stderr(&result),
        format!(
            "oscil-report: warning: {}: reader.csv was cut mid-row: 1 incomplete row ({dropped} bytes) dropped (its complete rows are used; the run counts as partial)\n",
            dir.display()
        )
    );
}

#[test]
fn links_fifos_and_bad_cells_leave_the_run_out_and_say_so_without_hanging() {
    let scratch = tempfile::tempdir().unwrap();
    let good = copy_run(scratch.path(), "good");
    let zero = copy_run(scratch.path(), "zero");
    fs::remove_file(zero.join("sender.csv")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero.join("sender.csv")).unwrap();
    let fifo = copy_run(scratch.path(), "fifo");
    fs::remove_file(fifo.join("reader.csv")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(fifo.join("reader.csv"))
        .status()
        .unwrap();
    assert!(made.success());
    let mut bad_cells = Vec::new();
    for cell in ["inf", "NaN", "-1", "1e308"] {
        let dir = copy_run(scratch.path(), &format!("cell-{cell}"));
        let path = dir.join("host.csv");
        let text = fs::read_to_string(&path).unwrap();
        let second_row = text.match_indices('\n').nth(1).unwrap().0 + 1;
        let comma = second_row + text[second_row..].find(',').unwrap();
        let damaged = format!("{}{cell}{}", &text[..second_row], &text[comma..]);
        fs::write(&path, damaged).unwrap();
        bad_cells.push(dir);
    }
    let out = scratch.path().join("report");
    let mut inputs: Vec<&Path> = vec![&good, &zero, &fifo];
    inputs.extend(bad_cells.iter().map(PathBuf::as_path));
    let started = Instant::now();
    let result = report(&inputs, &out, &[]);
    let took = started.elapsed();
    let stderr = stderr(&result);
    assert!(result.status.success(), "{stderr}");
    assert!(took < Duration::from_secs(60), "{took:?}");
    assert!(
        stderr.contains("zero/sender.csv: not a regular file but a symbolic link; refused"),
        "{stderr}"
    );
    assert!(
        stderr.contains("fifo/reader.csv: not a regular file but a FIFO; refused"),
        "{stderr}"
    );
    for (cell, shown) in [
        ("inf", "inf"),
        ("NaN", "NaN"),
        ("-1", "-1.0"),
        ("1e308", "1e308"),
    ] {
        let line = format!("cell-{cell}/host.csv: damaged: row 2: t_s {shown} is not within");
        assert!(stderr.contains(&line), "{line}\n{stderr}");
    }
    assert_eq!(Csv::read(&out.join("summary.csv")).rows.len(), 1);
    let html = fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("damaged, left out"), "the page says so too");
}

/// A span of 1e-300 s (or the least f64 above zero) passes as a time, but its rate does not:
/// before it was refused, the chart's scale spun until `--max-time`.
#[test]
fn a_span_below_the_clocks_resolution_leaves_the_run_out_at_once() {
    let scratch = tempfile::tempdir().unwrap();
    let good = copy_run(scratch.path(), "good");
    let mut inputs = vec![good];
    for span in ["1e-300", "5e-324"] {
        let dir = copy_run(scratch.path(), &format!("span-{span}"));
        let path = dir.join("reader.csv");
        let text = fs::read_to_string(&path).unwrap();
        let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
        let column = header.iter().position(|c| *c == "span_s").unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let mut cells: Vec<&str> = lines[2].split(',').collect();
        cells[column] = span;
        lines[2] = cells.join(",");
        fs::write(&path, lines.join("\n") + "\n").unwrap();
        inputs.push(dir);
    }
    let out = scratch.path().join("report");
    let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    // 60 s: far past the ~2 s this report takes, far below the 20 min it spun for.
    let result = report(&inputs, &out, &["--max-time", "60s"]);
    let stderr = stderr(&result);
    assert!(result.status.success(), "{stderr}");
    for span in ["1e-300", "5e-324"] {
        let line = format!("span-{span}/reader.csv: damaged: row 2: span_s {span} is shorter than the sampling clock's resolution");
        assert_eq!(stderr.matches(&line).count(), 1, "{line}\n{stderr}");
    }
    assert_eq!(Csv::read(&out.join("summary.csv")).rows.len(), 1);
}

/// Clicks every link of `index.html` beside it, each in a fresh frame whose `alert` is
/// replaced by one that notes the link's number in `body[data-alerted]`; then, as a
/// control that a script link would be noticed, a `javascript:` link of its own. Says
/// how many links it clicked in `body[data-clicked]`.
const CLICK_EVERY_LINK: &str = r#"<!DOCTYPE html><html><body><script>
function frame(then) {
  var f = document.createElement('iframe');
  f.src = 'index.html';
  f.onload = function () { f.onload = null; then(f); };
  document.body.appendChild(f);
}
function note(mark) {
  return function () { document.body.dataset.alerted = (document.body.dataset.alerted || '') + mark + ' '; };
}
function click(i) {
  frame(function (f) {
    var links = f.contentDocument.links;
    f.contentWindow.alert = note(i < links.length ? i : 'control');
    if (i >= links.length) {
      var control = f.contentDocument.createElement('a');
      control.href = 'javascript:alert(0)';
      f.contentDocument.body.appendChild(control);
      control.click();
      setTimeout(function () { document.body.dataset.clicked = i; }, 200);
      return;
    }
    links[i].click();
    setTimeout(function () { f.remove(); click(i + 1); }, 200);
  });
}
click(0);
</script></body></html>
"#;

/// A run directory named `javascript:alert(document.domain)` straight in `--out`: every
/// link and image the page writes is `./` and a percent-encoded path, and clicking each in
/// Chromium runs no script (before, the run's links were `javascript:` URLs and a click
/// opened the dialog). The browser half costs ~5 s.
#[test]
fn a_run_named_like_a_script_url_is_linked_as_a_file() {
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    fs::create_dir(&out).unwrap();
    let name = "javascript:alert(document.domain)";
    let run = copy_run(&out, name);
    let result = report(&[&run], &out, &["--force"]);
    assert!(result.status.success(), "{}", stderr(&result));
    let html = fs::read_to_string(out.join("index.html")).unwrap();
    let links: Vec<&str> = ["href=\"", "src=\""]
        .iter()
        .flat_map(|attr| html.split(attr).skip(1))
        .map(|rest| rest.split('"').next().unwrap())
        .collect();
    assert!(links.len() >= 7, "{links:?}");
    for link in &links {
        assert!(link.starts_with("./") && !link.contains(':'), "{link}");
    }
    assert!(
        links.contains(&"./javascript%3Aalert%28document.domain%29/run.json"),
        "{links:?}"
    );
    let Some(chromium) = Chromium::find("no link is clicked") else {
        return;
    };
    let page = out.join("click.html");
    fs::write(&page, CLICK_EVERY_LINK).unwrap();
    let dom = chromium.output(&page, &["--allow-file-access-from-files", "--dump-dom"]);
    let body = dom
        .lines()
        .find(|l| l.contains("<body"))
        .unwrap_or("no body");
    let clicked = format!("data-clicked=\"{}\"", html.matches("<a href=").count());
    assert!(body.contains(&clicked), "{clicked}: {body}");
    assert!(
        body.contains("data-alerted=\"control \""),
        "only the control link may run a script: {body}"
    );
}

#[test]
fn long_and_escape_laden_labels_are_escaped_bounded_and_quick() {
    let scratch = tempfile::tempdir().unwrap();
    let long = copy_run(scratch.path(), "long");
    set_label(&long, &format!("\u{1b}[31m{}", "l".repeat(300)));
    let huge = copy_run(scratch.path(), "huge");
    set_label(&huge, &"\u{1b}[2J\u{7}h".repeat(200_000));
    let out = scratch.path().join("report");
    let started = Instant::now();
    let result = report(&[&long, &huge], &out, &[]);
    let took = started.elapsed();
    assert!(result.status.success(), "{}", stderr(&result));
    assert!(took < Duration::from_secs(30), "{took:?}");
    let stdout = String::from_utf8_lossy(&result.stdout).into_owned();
    assert!(!stdout.contains('\u{1b}'));
    for name in ["summary.md", "summary.csv", "index.html"] {
        let text = fs::read_to_string(out.join(name)).unwrap();
        assert!(!text.contains('\u{1b}'), "{name} holds a raw escape");
        assert!(!text.contains('\u{7}'), "{name} holds a raw bell");
        assert!(text.len() < 500_000, "{name}: {} bytes", text.len());
    }
    let summary = fs::read_to_string(out.join("summary.csv")).unwrap();
    assert!(
        summary.contains(&format!("\\u{{1b}}[31m{}", "l".repeat(300))),
        "the whole 300-character label, escaped"
    );
    for entry in fs::read_dir(&out).unwrap() {
        let name = entry.unwrap().file_name();
        assert!(name.len() <= 120, "{name:?}");
    }
}

/// Labels made to be markup (an image whose error runs a script, a `javascript:` link, a
/// comment that hides every row after it, a cell break) are text in `summary.md`: no tag,
/// no link, no comment, one row per run, and the label still readable. Before, they went in
/// raw.
#[test]
fn labels_made_of_markup_are_text_in_summary_md() {
    let scratch = tempfile::tempdir().unwrap();
    let labels = [
        "<img src=x onerror=alert(1)>",
        "[x](javascript:alert(1))",
        "<!-- hidden",
        "a|b`c`*d*_e_\\",
    ];
    let runs: Vec<PathBuf> = labels
        .iter()
        .enumerate()
        .map(|(i, label)| {
            let run = copy_run(scratch.path(), &format!("r{i}"));
            set_label(&run, label);
            run
        })
        .collect();
    let out = scratch.path().join("report");
    let run_refs: Vec<&Path> = runs.iter().map(PathBuf::as_path).collect();
    let result = report(&run_refs, &out, &[]);
    assert!(result.status.success(), "{}", stderr(&result));
    let md = fs::read_to_string(out.join("summary.md")).unwrap();
    for raw in ["<img", "<!--", "[x]", "`c`", "*d*", "_e_"] {
        assert!(!md.contains(raw), "{raw} raw in summary.md:\n{md}");
    }
    let cells = |row: &str| row.matches('|').count() - row.matches("\\|").count();
    // Every table keeps its shape: each section's rows have as many cells as its header.
    for section in md.split("\n## ") {
        let rows: Vec<&str> = section.lines().filter(|l| l.starts_with("| ")).collect();
        assert!(rows.iter().all(|row| cells(row) == cells(rows[0])), "{md}");
    }
    let runs = md.split("\n## Runs").nth(1).expect("the runs");
    let rows = runs.lines().filter(|l| l.starts_with("| ")).count();
    assert_eq!(rows, 1 + labels.len(), "{md}");
    assert!(md.contains("&lt;img src=x onerror=alert(1)&gt;"), "{md}");
    assert!(md.contains("\\[x\\](javascript:alert(1))"), "{md}");
    assert!(md.contains("&lt;!-- hidden"), "{md}");
}

#[test]
fn the_report_stops_at_its_time_and_memory_bounds() {
    let (_, good) = good_run();
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("report");
    let started = Instant::now();
    let result = report(&[good], &out, &["--max-time", "1ms", "--force"]);
    assert_eq!(result.status.code(), Some(1));
    assert_eq!(
        stderr(&result),
        "oscil-report: stopped after 1ms, its time limit (--max-time)\n"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    // 8 MiB of address space is less than any report needs: refused before it starts.
    let result = report(&[good], &out, &["--max-memory", "8M", "--force"]);
    assert_eq!(result.status.code(), Some(2), "{}", stderr(&result));
    assert!(started.elapsed() < Duration::from_secs(20));
}

/// `oscil-report` started by `sh` after `ulimit` with `limit` (a shared host's limits).
fn report_under_ulimit(limit: &str, runs: &[&Path], out: &Path) -> std::process::Output {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit {limit} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_oscil-report"))
        .args(runs)
        .arg("--out")
        .arg(out)
        .arg("--force")
        .output()
        .expect("run oscil-report under ulimit")
}

/// A host's lower limits are taken, and said, rather than refused or raised: 4 GiB of
/// address space under the default `--max-memory 8G` reports; a CPU time limit ends the
/// report with a line (the kernel's SIGXCPU would say nothing). About 2 s.
#[test]
fn the_limits_it_was_started_with_bound_the_report_and_it_says_so() {
    let (_, good) = good_run();
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("report");
    let result = report_under_ulimit("-v 4194304", &[good], &out);
    assert!(result.status.success(), "{}", stderr(&result));
    assert_eq!(
        stderr(&result),
        "oscil-report: memory bound 4.0 GiB, the address space limit it was started with (below --max-memory 8.0 GiB)\n"
    );
    let limits = fs::read_to_string("/proc/self/limits").unwrap();
    assert!(!limits.contains("4294967296"), "this process kept its own");
    // 40 runs take ~5 s of CPU time to report (0.13 s each, measured), well past 1 s.
    let runs: Vec<PathBuf> = (0..40)
        .map(|i| copy_run(scratch.path(), &format!("run-{i}")))
        .collect();
    let runs: Vec<&Path> = runs.iter().map(PathBuf::as_path).collect();
    let result = report_under_ulimit("-S -t 1", &runs, &out);
    assert_eq!(result.status.code(), Some(1), "{}", stderr(&result));
    assert_eq!(
        stderr(&result),
        "oscil-report: time bound 1 s, the CPU time limit it was started with (below --max-time 20m)\n\
         oscil-report: stopped after 1 s of CPU time, the CPU time limit it was started with\n"
    );
}

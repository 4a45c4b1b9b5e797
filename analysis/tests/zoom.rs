//! `oscil-report --zoom FROM..TO`: a traced run's time-sequence picture shows the span
//! asked (one panel, its title naming it), and a span that is not one is refused in one
//! line with the usage exit code. The traced run needs root (tracefs); that part skips,
//! saying so, without it.

mod util;

use oscil_testkit::{lacks_root, report_figure};
use util::{real_runs, report};

#[test]
fn a_backwards_or_malformed_zoom_is_one_line_and_exit_2() {
    let out = tempfile::tempdir().unwrap();
    for bad in ["26s..20s", "20s", "a..b"] {
        let result = report(&[out.path()], &out.path().join("r"), &["--zoom", bad]);
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert_eq!(result.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("--zoom"), "{bad}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{bad}: {stderr}");
    }
}

#[test]
fn a_zoomed_time_sequence_shows_the_span_asked() {
    if lacks_root("tracefs") {
        return;
    }
    let runs = [(
        "traced".to_string(),
        vec!["--fast", "1s", "--slow", "1s", "--cycles", "1", "--trace"],
    )];
    let (_scratch, dirs) = real_runs(&runs, |name| name.to_string());
    let out = tempfile::tempdir().unwrap();
    let result = report(&[&dirs[0]], out.path(), &["--zoom", "200ms..1.5s"]);
    assert!(result.status.success(), "{result:?}");
    let picture = report_figure(out.path(), "time_sequence");
    let panels = picture["panels"].as_array().unwrap();
    assert_eq!(panels.len(), 1, "{panels:?}");
    assert_eq!(panels[0]["title"], "from 0.2 s to 1.5 s");
    let keys: Vec<&str> = panels[0]["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    for key in ["snd_una", "snd_nxt", "advertised window's right edge"] {
        assert!(keys.contains(&key), "{key} missing from {keys:?}");
    }
}

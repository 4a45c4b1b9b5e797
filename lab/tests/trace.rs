//! `--trace` in the lab, on the 100 Mbit/s x 100 ms path reading at full speed for
//! 10 s: the daemon's `snd_una` advances by the bytes the reader's TCP received (within one
//! advertised window), the kernel lost no event on either side, and the report draws the
//! time-sequence picture. Needs root (namespaces, TUN, tracefs); skips, saying so, without.

use std::path::{Path, PathBuf};
use std::process::Command;

use oscil_testkit::{
    assert_trace_complete_but_for_probes, bin_dir, lacks_root, report_figure, unique,
    TraceAgainstRecord,
};

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_traced_lab_run_follows_the_delivered_bytes_and_draws_its_time_sequence() {
    if lacks_root("network namespaces, TUN devices, tracefs") {
        return;
    }
    let out = std::env::temp_dir().join(unique("oscil-trace-"));
    let _cleanup = RemoveOnDrop(out.clone());
    let lab = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/lab");
    let status = Command::new(&lab)
        .args(["--rate", "100mbit", "--rtt", "100ms", "--lowat", "default"])
        .args(["--pattern", "full-speed", "--fast", "10s", "--slow", "0"])
        .args(["--cycles", "1", "--trace", "--out"])
        .arg(&out)
        .env("OSCIL_BIN_DIR", bin_dir())
        .status()
        .expect("run scripts/lab");
    assert!(status.success(), "scripts/lab failed: {status}");
    let run = std::fs::read_dir(out.join("runs"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path().join("rep-1")))
        .next()
        .expect("a run");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    assert_trace_complete_but_for_probes(&meta["trace"]);
    let traced = TraceAgainstRecord::of(&run);
    let (advanced, delivered) = (traced.una_advance_bytes, traced.delivered_bytes);
    eprintln!(
        "snd_una advanced {advanced} bytes over {} ACKs; delivered {delivered}; window {}",
        traced.acks, traced.window_bytes
    );
    // At 100 Mbit/s for 10 s: most of 125 MB.
    assert!(delivered > 80e6, "delivered {delivered}");
    assert!(
        traced.within_one_window(),
        "snd_una advanced {advanced} bytes, the reader's TCP received {delivered}, window {}",
        traced.window_bytes
    );
    let picture = report_figure(&out.join("report"), "time_sequence");
    assert_eq!(picture["panels"][0]["key"], "time_sequence");
}

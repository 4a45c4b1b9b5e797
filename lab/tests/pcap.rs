//! `oscil-lab --pcap`: a lab run keeps the link's capture of each direction in its
//! directory, and Debian's tshark reads there what the run's link.json counted, drops
//! marked. Needs root (namespaces, TUN) and tshark; skips, saying so, without them.

mod util;

use std::path::Path;
use std::process::Command;

use util::run_lab;

/// Each packet's comment in a capture, as tshark reads it.
fn comments(file: &Path) -> Vec<String> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args(["-T", "fields", "-e", "frame.comment"])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark -r {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("tshark prints UTF-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_lab_run_keeps_a_capture_that_agrees_with_its_link_counts() {
    if Command::new("tshark").arg("--version").output().is_err() {
        oscil_testkit::skip("needs tshark (apt-get install tshark)");
        return;
    }
    // A short queue, so the run has drops to mark.
    let Some(campaign) = run_lab(
        "oscil-pcap-",
        &[
            "--rate", "100mbit", "--rtt", "20ms", "--queue", "30", "--lowat", "default", "--fast",
            "2s", "--slow", "2s", "--cycles", "1", "--pcap",
        ],
    ) else {
        return;
    };
    let label = std::fs::read_dir(campaign.0.join("runs"))
        .unwrap()
        .next()
        .expect("one run");
    let run = label.unwrap().path().join("rep-1");
    let link: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("link.json")).unwrap()).unwrap();
    for direction in ["a_to_b", "b_to_a"] {
        let packets = comments(&run.join(format!("link-{direction}.pcapng")));
        let counted = &link[direction]["link"];
        let packets_in = counted["packets_in"].as_u64().unwrap();
        assert_eq!(packets.len() as u64, packets_in, "{direction}: {link}");
        let marked = |what: &str| packets.iter().filter(|c| c.starts_with(what)).count() as u64;
        let cut = counted["packets_truncated_queue"].as_u64().unwrap();
        assert_eq!(
            marked("dropped: queue full"),
            counted["packets_dropped_queue"].as_u64().unwrap()
        );
        assert_eq!(marked("forwarded its first"), cut);
        assert_eq!(
            marked("forwarded"),
            counted["packets_forwarded"].as_u64().unwrap()
        );
        if direction == "a_to_b" {
            assert!(
                marked("dropped") + cut > 0,
                "a 30-packet queue dropped nothing: {link}"
            );
        }
    }
}

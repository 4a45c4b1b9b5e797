//! Run directories written before the lab's record was typed still load: two real ones,
//! written by main at a445635 (the lab's `--quick` with one 1 s + 1 s cycle on a 100 Mbit/s
//! 20 ms path; a bare reader with a person's `--meta` over loopback), each CSV trimmed to
//! four rows. Milliseconds to run.

use std::path::{Path, PathBuf};

use oscil_model::lab::LinkKind;
use oscil_model::sysctl::{Sysctl, SysctlValue};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn a_lab_run_of_before_reads_as_the_typed_record() {
    let run = oscil_rundir::load(&fixture("lab-run")).expect("loads");
    let lab = run.meta.lab.as_ref().expect("the lab's record");
    assert_eq!(lab.configuration, "100mbit_20ms_cubic_lowat-128k");
    assert_eq!(lab.repetition, 1);
    assert_eq!(lab.settings.lowat_bytes, Some(131072));
    let path = lab.settings.path.as_ref().expect("a path");
    assert_eq!((path.rate_bps, path.rtt_us), (100_000_000, 20_000));
    let link = lab.link.as_ref().expect("a link");
    assert_eq!((link.kind, link.queue_limit), (LinkKind::Tun, 495));
    assert_eq!(
        lab.sysctls.sender.get(Sysctl::TcpNotsentLowat),
        Some(&SysctlValue::Integer(131072))
    );
    assert_eq!(
        lab.sysctls.receiver.get(Sysctl::TcpRmem),
        Some(&SysctlValue::Triple([8192, 262144, 536870912]))
    );
    assert!(lab.namespaces.is_some() && lab.hosts.is_none());
    assert_eq!(run.meta.meta, None);
    assert_eq!(run.reader.len(), 4);
}

#[test]
fn a_persons_meta_of_before_is_kept_as_meta() {
    let meta = oscil_rundir::load_meta(&fixture("reader-run-with-meta")).expect("loads");
    assert_eq!(meta.lab, None);
    let free = meta.meta.expect("the person's description");
    assert_eq!(free["site"], "lab bench 3");
    assert_eq!(free["rtt"], "80ms", "kept as written, not read as a path");
}

/// Today's run.json, written back, reads the same: the record and the free-form field
/// apart.
#[test]
fn todays_run_json_round_trips() {
    let mut meta = oscil_rundir::load_meta(&fixture("lab-run")).unwrap();
    meta.meta = Some(serde_json::json!({"note": "mine"}));
    let text = serde_json::to_vec(&meta).unwrap();
    let again: oscil_model::run::RunMeta = serde_json::from_slice(&text).unwrap();
    assert_eq!(again, meta);
}

/// A run from before groups is one group of all its flows, with the run's settings, and
/// its rows name none.
#[test]
fn a_run_of_before_groups_loads_as_one_group() {
    let run = oscil_rundir::load(&fixture("lab-run")).expect("loads");
    let config = &run.meta.config;
    assert!(config.groups.is_empty());
    let groups = config.flow_groups();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].flows, config.flows);
    assert_eq!(groups[0].sender, config.sender_request);
    assert_eq!(groups[0].fraction, config.pattern.fraction);
    assert!(run.meta.sender_options_by_group.is_empty());
    assert!(run.reader.iter().all(|row| row.group.is_none()));
    assert!(run.sender.iter().all(|row| row.group.is_none()));
}

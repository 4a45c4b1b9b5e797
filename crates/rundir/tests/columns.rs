//! Each CSV's columns are its row's fields, and the files a run directory has held since
//! the first format still load: the contract's columns (DESIGN.md, "The run directory")
//! lead each file in the contract's order, a header written by `RunWriter` is the struct's,
//! and a directory with only the first format's columns (checked in under
//! `tests/fixtures/first-columns`, the loopback fixture cut to them) reads with the later
//! columns empty.

use std::path::Path;

use oscil_model::files::columns::Row;
use oscil_model::files::markers::MarkerRow;
use oscil_model::files::probe::ProbeRow;
use oscil_model::files::rows::{HostSample, ReaderSample, SenderSample};
use oscil_model::files::trace::{ReaderTrace, SenderTrace, TraceRow};

/// The columns DESIGN.md promises, in its order.
const READER_CONTRACT: &[&str] = &[
    "t_s",
    "flow",
    "phase",
    "bytes",
    "rcv_wnd",
    "rcv_ssthresh",
    "rcv_space",
    "rtt_us",
    "rmem_alloc",
    "rcvbuf",
];
const SENDER_CONTRACT: &[&str] = &[
    "t_s",
    "flow",
    "bytes",
    "cwnd",
    "unacked",
    "notsent_bytes",
    "snd_wnd",
    "rtt_us",
    "delivery_rate_bps",
    "wmem_queued",
    "sndbuf",
];
const HOST_CONTRACT: &[&str] = &[
    "t_s",
    "side",
    "tcp_inuse",
    "tcp_orphan",
    "tcp_tw",
    "tcp_alloc",
    "tcp_mem_pages",
];

/// A row's file, its columns and how many it has had since the first format.
fn shape<R: Row>() -> (&'static str, &'static [&'static str], usize) {
    (R::FILE, R::columns(), R::FIRST_COLUMNS)
}

#[test]
fn the_contracts_columns_lead_each_file_in_order() {
    assert_eq!(
        &ReaderSample::columns()[..READER_CONTRACT.len()],
        READER_CONTRACT
    );
    assert_eq!(
        &SenderSample::columns()[..SENDER_CONTRACT.len()],
        SENDER_CONTRACT
    );
    assert_eq!(&HostSample::columns()[..HOST_CONTRACT.len()], HOST_CONTRACT);
}

#[test]
fn every_row_has_columns_and_the_first_ones_are_within_them() {
    let all = [
        shape::<ReaderSample>(),
        shape::<SenderSample>(),
        shape::<HostSample>(),
        shape::<MarkerRow>(),
        shape::<ProbeRow>(),
        shape::<TraceRow<SenderTrace>>(),
        shape::<TraceRow<ReaderTrace>>(),
    ];
    for (file, columns, first) in all {
        assert!(columns.len() >= first && first > 0, "{file}: {columns:?}");
        assert!(
            columns[0].ends_with("t_s") || columns[0] == "flow",
            "{file}"
        );
        let mut sorted = columns.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), columns.len(), "{file}: a column twice");
    }
}

#[test]
fn each_fixtures_header_names_known_columns_and_every_first_one() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for dir in std::fs::read_dir(&fixtures).unwrap() {
        let dir = dir.unwrap().path();
        for (file, columns, first) in [
            shape::<ReaderSample>(),
            shape::<SenderSample>(),
            shape::<HostSample>(),
        ] {
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
            assert!(header.iter().all(|c| columns.contains(c)), "{dir:?} {file}");
            assert!(
                columns[..first].iter().all(|c| header.contains(c)),
                "{dir:?} {file}"
            );
        }
    }
}

#[test]
fn a_directory_of_the_first_columns_loads_with_the_later_ones_empty() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/first-columns");
    let run = oscil_rundir::load(&dir).expect("loads");
    assert_eq!(run.reader.len(), 4);
    assert!(run.reader.iter().all(|r| r.delivered_bytes.is_none()));
    assert!(run
        .sender
        .iter()
        .all(|s| s.acked_bytes.is_none() && s.busy_us.is_none()));
    assert!(run.host.iter().all(|h| h.tcp_mem_ns_bytes.is_none()));
}

#[test]
fn a_header_written_before_is_the_rows_leading_columns() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lab-run/sender.csv"),
    )
    .unwrap();
    // Written by RunWriter at a445635, when the header was a hand list: the struct's
    // columns since then only grew at the end.
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    assert_eq!(&SenderSample::columns()[..header.len()], header.as_slice());
}

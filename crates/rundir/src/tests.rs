//! The run directory's writer and loader together: what one writes the other reads, and
//! what a damaged or hostile directory gets.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{Seek, SeekFrom};
use std::path::Path;

use oscil_model::files::columns::Row;
use oscil_model::files::markers::MarkerRow;
use oscil_model::files::rows::READER_CSV;
use oscil_model::files::rows::{HostSample, Phase, ReaderSample, SenderSample, Side};
use oscil_model::host::HostFacts;
use oscil_model::pattern::{PatternConfig, SlowRate, SlowRule};
use oscil_model::run::*;
use oscil_model::socket::SocketOptions;

use super::*;
use crate::bounds::SLACK_S;
use crate::safe_fs::SafeFsError;

fn host() -> HostFacts {
    HostFacts {
        hostname: "test".into(),
        kernel_release: "6.18.0".into(),
        page_size_bytes: 4096,
        sysctls: BTreeMap::from([("net.ipv4.tcp_notsent_lowat".into(), "4294967295".into())]),
        wall_clock_unix_ms: 1,
        clock: "CLOCK_MONOTONIC".into(),
        netns_inode: None,
        boot_id: None,
        tcp_info_bytes: None,
        tcp_info_absent: Vec::new(),
    }
}

fn meta() -> RunMeta {
    RunMeta {
        format_version: FORMAT_VERSION,
        run_id: None,
        label: Some("lowat-default".into()),
        reader_software: "oscil-reader test".into(),
        daemon_software: None,
        started_unix_ms: 1,
        config: RunConfig {
            connect: "127.0.0.1:5250".into(),
            flows: 1,
            interval_us: 100_000,
            pattern: PatternConfig::CLOUDFLARE,
            sender_request: SocketOptions::default(),
            reader_request: SocketOptions::default(),
            write_size_bytes: None,
            write_mode: Default::default(),
            marker_every_us: None,
            slow_rate: None,
            groups: Vec::new(),
        },
        schedule: PatternConfig::CLOUDFLARE.schedule(),
        reader_host: host(),
        sender_host: None,
        sender_options: None,
        reader_options: None,
        tcpext_delta: BTreeMap::new(),
        ending: Ending::in_progress(),
        lab: None,
        meta: None,
        cost: None,
        wakeups: Vec::new(),
        sampling: None,
        clock: None,
        markers: None,
        probe: None,
        trace: None,
        absent: Vec::new(),
        sender_options_by_group: Vec::new(),
    }
}

fn reader_row(t_s: f64) -> ReaderSample {
    ReaderSample {
        t_s,
        flow: 0,
        phase: Phase::Slow,
        bytes: 1 << 20,
        rcv_wnd: Some(65535),
        rcv_ssthresh: 65535,
        rcv_space: 14600,
        rtt_us: 50,
        rmem_alloc: 0,
        rcvbuf: 131072,
        rcv_rtt_us: 40,
        budget_bytes: 52428,
        span_s: 0.1,
        delivered_bytes: Some(1 << 19),
        group: None,
    }
}

#[test]
fn a_run_reads_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = RunWriter::create(dir.path(), false, meta()).unwrap();
    writer.reader_row(&reader_row(0.1)).unwrap();
    writer.reader_row(&reader_row(0.2)).unwrap();
    let host_row = HostSample {
        t_s: 0.1,
        side: Side::Sender,
        tcp_inuse: 3,
        tcp_orphan: 0,
        tcp_tw: 1,
        tcp_alloc: 5,
        tcp_mem_pages: 12,
        tcp_mem_ns_bytes: Some(49152),
        ..HostSample::empty(0.0, Side::Reader)
    };
    writer.host_row(&host_row).unwrap();
    let ending = Ending {
        status: RunStatus::Complete,
        reason: "pattern done".into(),
        duration_s: 60.0,
        ended_unix_ms: 2,
    };
    writer.finish(ending.clone()).unwrap();

    let run = load(dir.path()).unwrap();
    assert_eq!(run.reader, vec![reader_row(0.1), reader_row(0.2)]);
    assert!(run.sender.is_empty(), "header only");
    assert_eq!(run.host, vec![host_row]);
    assert_eq!(run.meta.ending, ending);
    assert_eq!(run.label(), "lowat-default");
}

#[test]
fn files_use_the_contract_column_names() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = RunWriter::create(dir.path(), false, meta()).unwrap();
    writer.reader_row(&reader_row(0.1)).unwrap();
    writer.flush().unwrap();
    let text = fs::read_to_string(dir.path().join("reader.csv")).unwrap();
    let header = text.lines().next().unwrap();
    assert!(header.starts_with(
        "t_s,flow,phase,bytes,rcv_wnd,rcv_ssthresh,rcv_space,rtt_us,rmem_alloc,rcvbuf"
    ));
    assert_eq!(text.lines().nth(1).unwrap().split(',').nth(2), Some("slow"));
    let sender = fs::read_to_string(dir.path().join("sender.csv")).unwrap();
    assert!(sender.starts_with("t_s,flow,bytes,cwnd,unacked,notsent_bytes,snd_wnd,rtt_us,delivery_rate_bps,wmem_queued,sndbuf"));
    let host = fs::read_to_string(dir.path().join("host.csv")).unwrap();
    assert!(host.starts_with("t_s,side,tcp_inuse,tcp_orphan,tcp_tw,tcp_alloc,tcp_mem_pages"));
}

#[test]
fn a_reader_csv_from_before_span_s_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    RunWriter::create(dir.path(), false, meta()).unwrap();
    fs::write(
        dir.path().join("reader.csv"),
        "t_s,flow,phase,bytes,rcv_wnd,rcv_ssthresh,rcv_space,rtt_us,rmem_alloc,rcvbuf,rcv_rtt_us,budget_bytes\n\
         0.1,0,fast,1000,,1,2,3,4,5,6,0\n",
    )
    .unwrap();
    let run = load(dir.path()).unwrap();
    assert_eq!(run.reader[0].span_s, 0.0, "not recorded");
    assert_eq!(run.reader[0].span_or(0.1), 0.1);
    assert_eq!(run.reader[0].rcv_wnd, None);
}

#[test]
fn marker_rows_read_back_and_runs_without_markers_load_without_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut with_markers = meta();
    with_markers.config.flows = 2;
    with_markers.config.marker_every_us = Some(1_000_000);
    let mut writer = RunWriter::create(dir.path(), false, with_markers).unwrap();
    let rows = [
        MarkerRow {
            flow: 0,
            k: 1,
            offset_bytes: 65536,
            sent_t_s: 1.0,
            read_t_s: Some(1.25),
            latency_us: Some(250_000.0),
            censored: false,
        },
        MarkerRow {
            flow: 1,
            k: 2,
            offset_bytes: 131072,
            sent_t_s: 2.0,
            read_t_s: None,
            latency_us: Some(4_000_000.0),
            censored: true,
        },
    ];
    rows.iter().for_each(|r| writer.marker_row(r).unwrap());
    writer.flush().unwrap();
    let text = fs::read_to_string(dir.path().join("markers.csv")).unwrap();
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        [
            "flow,k,offset_bytes,sent_t_s,read_t_s,latency_us,censored",
            "0,1,65536,1.0,1.25,250000.0,false",
            "1,2,131072,2.0,,4000000.0,true"
        ]
    );
    assert_eq!(load(dir.path()).unwrap().markers, rows);

    let without = tempfile::tempdir().unwrap();
    RunWriter::create(without.path(), false, meta()).unwrap();
    assert!(!without.path().join("markers.csv").exists());
    assert!(load(without.path()).unwrap().markers.is_empty());
}

#[test]
fn network_goodput_and_pending_writes_read_back_and_older_files_still_load() {
    let dir = tempfile::tempdir().unwrap();
    let mut with_rate = meta();
    with_rate.config.slow_rate = Some(SlowRate {
        chosen_by: SlowRule::PeakDelivered,
        cycles: vec![oscil_model::pattern::CycleSlowRate {
            cycle: 1,
            bytes_per_s: 62_500,
        }],
    });
    let mut writer = RunWriter::create(dir.path(), false, with_rate.clone()).unwrap();
    let sender = |acked_bytes, pending_write_age_us| SenderSample {
        t_s: 0.1,
        acked_bytes,
        pending_write_age_us,
        ..SenderSample::default()
    };
    let rows = [sender(Some(0), Some(1_500_000)), sender(Some(70_000), None)];
    rows.iter().for_each(|r| writer.sender_row(r).unwrap());
    writer.reader_row(&reader_row(0.1)).unwrap();
    writer.flush().unwrap();
    let header = |file: &str| {
        let text = fs::read_to_string(dir.path().join(file)).unwrap();
        text.lines().next().unwrap().to_owned()
    };
    assert!(header("sender.csv").contains(",acked_bytes,pending_write_age_us,"));
    assert!(header("reader.csv").ends_with(",span_s,delivered_bytes,group"));
    let run = load(dir.path()).unwrap();
    assert_eq!(run.sender, rows);
    assert_eq!(run.reader[0].delivered_bytes, Some(1 << 19));
    assert_eq!(run.meta.config.slow_rate, with_rate.config.slow_rate);

    // Files written before the columns: empty, never zero (a zero would say stale).
    fs::write(
        dir.path().join("sender.csv"),
        format!(
            "{}\n{}\n",
            SenderSample::columns()[..15].join(","),
            ["0"; 15].join(",")
        ),
    )
    .unwrap();
    fs::write(
        dir.path().join("markers.csv"),
        "flow,k,offset_bytes,sent_t_s,read_t_s,latency_us\n0,1,0,1.0,,\n",
    )
    .unwrap();
    let old = load(dir.path()).unwrap();
    assert_eq!(old.sender[0].acked_bytes, None);
    assert_eq!(old.sender[0].pending_write_age_us, None);
    assert!(!old.markers[0].censored);
}

#[test]
fn bbrs_state_and_ecn_read_back_and_a_gain_no_kernel_gives_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = RunWriter::create(dir.path(), false, meta()).unwrap();
    let bbr = SenderSample {
        t_s: 0.1,
        bbr_bw_bps: Some(9_600_000_000),
        bbr_min_rtt_us: Some(42),
        bbr_pacing_gain: Some(739.0 / 256.0),
        bbr_cwnd_gain: Some(2.0),
        ecn_negotiated: Some(true),
        delivered_ce_segs: Some(0),
        ..SenderSample::default()
    };
    let cubic = SenderSample {
        ecn_negotiated: Some(false),
        ..SenderSample::default()
    };
    writer.sender_row(&bbr).unwrap();
    writer.sender_row(&cubic).unwrap();
    writer.reader_row(&reader_row(0.1)).unwrap();
    writer.flush().unwrap();
    let text = fs::read_to_string(dir.path().join("sender.csv")).unwrap();
    // The cubic row: every BBR column and the CE count empty, never 0.
    assert!(
        text.lines().nth(2).unwrap().ends_with(",,,,,false,"),
        "{text}"
    );
    assert_eq!(load(dir.path()).unwrap().sender, [bbr, cubic]);

    let nan = text.replacen(&(739.0f64 / 256.0).to_string(), "NaN", 1);
    fs::write(dir.path().join("sender.csv"), nan).unwrap();
    let message = load(dir.path()).unwrap_err().to_string();
    assert!(message.contains("BBR gain of NaN"), "{message}");
}

#[test]
fn an_unfinished_run_says_partial() {
    let dir = tempfile::tempdir().unwrap();
    let writer = RunWriter::create(dir.path(), false, meta()).unwrap();
    drop(writer);
    let meta = load_meta(dir.path()).unwrap();
    assert_eq!(meta.ending.status, RunStatus::Partial);
}

#[test]
fn refuses_a_non_empty_directory_without_force() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let err = RunWriter::create(dir.path(), false, meta()).err().unwrap();
    assert!(matches!(err, RunDirError::NotEmpty(_)), "{err}");
    RunWriter::create(dir.path(), true, meta()).unwrap();
}

#[test]
fn errors_name_the_file_and_column() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(load(dir.path()), Err(RunDirError::NotARunDir(_))));
    let missing = dir.path().join("none");
    assert_eq!(
        load(&missing).unwrap_err().to_string(),
        format!("{}: no such directory", missing.display())
    );
    RunWriter::create(dir.path(), false, meta()).unwrap();
    fs::write(dir.path().join("sender.csv"), "t_s,flow,bytes\n0.1,0,5\n").unwrap();
    let message = load(dir.path()).unwrap_err().to_string();
    assert!(
        message.ends_with("sender.csv: missing column \"cwnd\""),
        "{message}"
    );
}

/// A run of `meta()` with two reader rows written, ended complete.
fn written_run() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = RunWriter::create(dir.path(), false, meta()).unwrap();
    writer.reader_row(&reader_row(0.1)).unwrap();
    writer.reader_row(&reader_row(0.2)).unwrap();
    let ending = Ending {
        status: RunStatus::Complete,
        reason: "pattern done".into(),
        duration_s: 60.0,
        ended_unix_ms: 2,
    };
    writer.finish(ending).unwrap();
    dir
}

#[test]
fn a_csv_that_is_a_link_to_dev_zero_or_a_fifo_is_refused_at_once() {
    let dir = written_run();
    let sender = dir.path().join("sender.csv");
    fs::remove_file(&sender).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &sender).unwrap();
    let err = load(dir.path()).unwrap_err();
    assert!(err.is_damaged());
    assert!(
        err.to_string()
            .ends_with("sender.csv: not a regular file but a symbolic link; refused"),
        "{err}"
    );
    fs::remove_file(&sender).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&sender)
        .status()
        .unwrap();
    assert!(made.success());
    // A load that opened the FIFO would wait for a writer that never comes: a minute
    // is thousands of times what the check takes, however loaded the machine.
    let (done, refused) = std::sync::mpsc::channel();
    let path = dir.path().to_owned();
    std::thread::spawn(move || done.send(load(&path).unwrap_err().to_string()));
    let err = refused
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("refused without opening it");
    assert!(err.contains("FIFO"), "{err}");
}

#[test]
fn a_cell_not_finite_or_out_of_range_makes_the_run_damaged() {
    let dir = written_run();
    let path = dir.path().join("reader.csv");
    let good = fs::read_to_string(&path).unwrap();
    for (cell, shown) in [
        ("inf", "inf"),
        ("NaN", "NaN"),
        ("-1", "-1.0"),
        ("1e308", "1e308"),
    ] {
        let message = damaged(
            dir.path(),
            &path,
            &good.replacen("\n0.2,", &format!("\n{cell},"), 1),
        );
        let expected = format!("reader.csv: damaged: row 2: t_s {shown} is not within 0..=");
        assert!(message.contains(&expected), "{message}");
    }
    let message = damaged(
        dir.path(),
        &path,
        &good.replacen(",0.1,524288,\n", ",inf,524288,\n", 1),
    );
    assert!(
        message.contains("row 1: span_s inf is not within"),
        "{message}"
    );
    // Spans the clock cannot measure: a rate of 1e308 bytes/s, or infinite.
    for span in ["1e-300", "5e-324"] {
        let text = good.replacen(",0.1,524288,\n", &format!(",{span},524288,\n"), 1);
        let message = damaged(dir.path(), &path, &text);
        let expected = format!(
            "row 1: span_s {span} is shorter than the sampling clock's resolution (0.000000001 s)"
        );
        assert!(message.contains(&expected), "{message}");
    }
    let text = good.replacen(",0.1,524288,\n", ",0.000001,18446744073709551615,\n", 1);
    let message = damaged(dir.path(), &path, &text);
    assert!(
        message.contains("row 1: delivered_bytes 18446744073709551615 over 0.000001 s is 1.8446744073709552e25 bytes/s, past any path's rate (1e13)"),
        "{message}"
    );
    let message = damaged(dir.path(), &path, &good.replacen("\n0.2,0,", "\n0.2,7,", 1));
    assert!(
        message.contains("row 2: flow 7, but the run has 1 flow(s)"),
        "{message}"
    );
}

/// Writes `text` into `path` and returns why loading the run in `dir` now fails.
fn damaged(dir: &Path, path: &Path, text: &str) -> String {
    fs::write(path, text).unwrap();
    let err = load(dir).unwrap_err();
    assert!(err.is_damaged(), "{err}");
    err.to_string()
}

#[test]
fn a_short_sampling_interval_allows_its_rows() {
    let mut fine = meta();
    fine.config.interval_us = 500;
    let limits = Limits::of(&fine).unwrap();
    // 60 s of pattern and 60 s of slack at 0.5 ms, one flow.
    assert_eq!(limits.rows::<ReaderSample>(), 2 * 240_001 + 64);
    fine.config.interval_us = 0;
    assert_eq!(
        Limits::of(&fine).unwrap().intervals,
        1201,
        "0: the default 100 ms"
    );
}

#[test]
fn row_errors_name_the_column_and_the_range() {
    let limits = Limits::of(&meta()).unwrap();
    let end = limits.end_s;
    let marker = MarkerRow {
        flow: 0,
        k: 1,
        offset_bytes: 0,
        sent_t_s: -61.0,
        read_t_s: None,
        latency_us: None,
        censored: false,
    };
    let err = marker.check(&limits).unwrap_err();
    assert_eq!(
        err,
        RowError::TimeOutOfRange {
            column: "sent_t_s",
            t_s: -61.0,
            start_s: -SLACK_S,
            end_s: end,
        }
    );
    assert_eq!(
        err.to_string(),
        format!("sent_t_s -61.0 is not within -60..={end} s")
    );
    let err = limits.check_time("t_s", f64::NAN).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("t_s NaN is not within 0..={end} s")
    );
    let err = limits.check_flow(3).unwrap_err();
    assert_eq!(err, RowError::NoSuchFlow { flow: 3, flows: 1 });
}

#[test]
fn run_json_declaring_a_time_not_finite_is_damaged() {
    let dir = written_run();
    let path = dir.path().join(RUN_JSON);
    let text = fs::read_to_string(&path).unwrap();
    let bad = text.replacen("\"duration_s\": 60.0", "\"duration_s\": -1.0", 1);
    assert_ne!(bad, text);
    let message = damaged(dir.path(), &path, &bad);
    let expected = "run.json: damaged: ending duration_s -1.0 is not within";
    assert!(message.contains(expected), "{message}");
}

#[test]
fn rows_beyond_what_run_json_declares_are_refused_without_reading_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let mut short = meta();
    short.config.flows = 2;
    short.config.pattern = PatternConfig {
        fast_ms: 1000,
        slow_ms: 2000,
        fraction: oscil_model::pattern::Fraction::CLOUDFLARE,
        cycles: 1,
        full_speed: false,
    };
    short.schedule = short.config.pattern.schedule();
    let mut writer = RunWriter::create(dir.path(), false, short).unwrap();
    for i in 0..10_000 {
        let mut row = reader_row(0.1);
        row.flow = i % 2;
        writer.reader_row(&row).unwrap();
    }
    writer.flush().unwrap();
    let limits = Limits::of(&load_meta(dir.path()).unwrap()).unwrap();
    // 2 flows over 3 s and the 60 s of slack, at 100 ms: 2 x 631, twice, and 64.
    assert_eq!(limits.rows::<ReaderSample>(), 2 * 2 * 631 + 64);
    let err = load(dir.path()).unwrap_err();
    assert!(
        matches!(
            err,
            RunDirError::TooManyRows {
                limit: 2588,
                flows: 2,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("beyond what run.json declares (2 flow(s)"),
        "{err}"
    );
    // Ten times as many: refused by its size before a row is read.
    for _ in 0..90_000 {
        writer.reader_row(&reader_row(0.1)).unwrap();
    }
    writer.flush().unwrap();
    let err = load(dir.path()).unwrap_err();
    assert!(
        matches!(err, RunDirError::File(SafeFsError::TooLarge { .. })),
        "{err}"
    );
}

#[test]
fn a_file_larger_than_its_rows_allow_or_with_an_endless_line_is_refused() {
    let dir = written_run();
    let path = dir.path().join("host.csv");
    let limits = Limits::of(&load_meta(dir.path()).unwrap()).unwrap();
    let file = File::options().append(true).open(&path).unwrap();
    file.set_len(limits.bytes::<HostSample>() + 1).unwrap();
    let err = load(dir.path()).unwrap_err();
    assert!(
        matches!(err, RunDirError::File(SafeFsError::TooLarge { .. })),
        "{err}"
    );
    // A sparse file of zeros within the byte bound: one endless line.
    fs::write(
        &path,
        "t_s,side,tcp_inuse,tcp_orphan,tcp_tw,tcp_alloc,tcp_mem_pages\n",
    )
    .unwrap();
    let mut file = File::options().write(true).open(&path).unwrap();
    file.set_len(limits.bytes::<HostSample>() - 1).unwrap();
    file.seek(SeekFrom::End(0)).unwrap();
    std::io::Write::write_all(&mut file, b"\n").unwrap();
    let err = load(dir.path()).unwrap_err();
    assert!(
        matches!(
            err,
            RunDirError::File(SafeFsError::LongLine {
                limit_bytes: MAX_ROW_BYTES,
                ..
            })
        ),
        "{err}"
    );
}

#[test]
fn a_csv_cut_mid_row_keeps_its_complete_rows_and_says_what_was_dropped() {
    let dir = written_run();
    let path = dir.path().join("reader.csv");
    let text = fs::read_to_string(&path).unwrap();
    let cut_at = text.len() - 20;
    fs::write(&path, &text[..cut_at]).unwrap();
    let run = load(dir.path()).unwrap();
    assert_eq!(run.reader, vec![reader_row(0.1)]);
    let dropped = (cut_at - text[..cut_at].rfind('\n').unwrap() - 1) as u64;
    assert_eq!(
        run.cut,
        vec![Cut {
            file: READER_CSV,
            rows: 1,
            bytes: dropped
        }]
    );
    assert_eq!(
        run.cut[0].to_string(),
        format!("reader.csv was cut mid-row: 1 incomplete row ({dropped} bytes) dropped")
    );
    // A broken row that is not the last is damage, not a cut.
    fs::write(&path, text.replacen("\n0.1,0,slow,", "\n0.1,0,", 1)).unwrap();
    assert!(load(dir.path()).unwrap_err().is_damaged());
}

#[test]
fn a_long_label_is_escaped_and_bounded() {
    let dir = written_run();
    let mut run = load(dir.path()).unwrap();
    run.meta.label = Some(format!("\u{1b}[31m{}", "x".repeat(2_000_000)));
    let label = run.label();
    assert!(label.starts_with("\\u{1b}[31m"), "{}", &label[..20]);
    assert!(label.len() < 2 * oscil_model::text::LABEL_CHARS);
}

//! Writes a synthetic run directory, for timing the report on a large run (not a test
//! oracle: the numbers follow a rough model of the pattern, not a kernel).
//!
//! `cargo run --release -p oscil-report --example synth_run -- DIR [FLOWS] [SECONDS] [LOWAT_BYTES] [RTT_MS]`

use std::collections::BTreeMap;
use std::path::PathBuf;

use oscil_model::campaign::{PathSettings, RunSettings};
use oscil_model::files::rows::{HostSample, Phase, ReaderSample, SenderSample, Side};
use oscil_model::host::HostFacts;
use oscil_model::lab::{LabRecord, Sides};
use oscil_model::pattern::PatternConfig;
use oscil_model::run::{Ending, RunConfig, RunMeta, RunStatus, FORMAT_VERSION};
use oscil_model::socket::{OptionsInForce, SocketOptions};
use oscil_model::sysctl::Sysctl;
use oscil_rundir::RunWriter;

fn host(name: &str) -> HostFacts {
    HostFacts {
        hostname: name.into(),
        kernel_release: "6.18.0".into(),
        page_size_bytes: 4096,
        sysctls: [
            (Sysctl::TcpNotsentLowat, "4294967295"),
            (Sysctl::TcpCongestionControl, "cubic"),
        ]
        .map(|(sysctl, value)| (sysctl.name().to_owned(), value.to_owned()))
        .into(),
        wall_clock_unix_ms: 1,
        clock: "CLOCK_MONOTONIC".into(),
        netns_inode: None,
        boot_id: None,
        tcp_info_bytes: None,
        tcp_info_absent: Vec::new(),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = PathBuf::from(
        args.first()
            .ok_or("usage: synth_run DIR [FLOWS] [SECONDS] [LOWAT] [RTT_MS]")?,
    );
    let arg = |i: usize, default: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (flows, seconds, lowat, rtt_ms) =
        (arg(1, 200) as u32, arg(2, 60), arg(3, 0) as u32, arg(4, 20));
    let cycles = (seconds / 20).max(1) as u32;
    let pattern = PatternConfig {
        cycles,
        ..PatternConfig::CLOUDFLARE
    };
    let label = format!("synth-{flows}f-lowat{lowat}-rtt{rtt_ms}");
    // As the lab records its runs: the path, and the lowat (here a socket option) apart.
    let lab = LabRecord {
        configuration: label.clone(),
        repetition: 1,
        settings: RunSettings {
            path: Some(PathSettings {
                rate_bps: 1_000_000_000,
                rtt_us: rtt_ms * 1000,
                loss_pct: 0.0,
                queue_packets: None,
            }),
            lowat_bytes: (lowat > 0).then_some(u64::from(lowat)),
            ..RunSettings::unset(flows, 100_000, pattern)
        },
        link: None,
        sysctls: Sides::default(),
        namespaces: None,
        hosts: None,
        kernel: "6.18.0".into(),
        warnings: Vec::new(),
    };
    let meta = RunMeta {
        format_version: FORMAT_VERSION,
        run_id: None,
        label: Some(label),
        reader_software: "synth_run".into(),
        daemon_software: Some("synth_run".into()),
        started_unix_ms: 1,
        config: RunConfig {
            connect: "synthetic".into(),
            flows,
            interval_us: 100_000,
            pattern,
            sender_request: SocketOptions {
                notsent_lowat_bytes: (lowat > 0).then_some(lowat),
                ..SocketOptions::default()
            },
            reader_request: SocketOptions::default(),
            write_size_bytes: None,
            write_mode: Default::default(),
            marker_every_us: None,
            slow_rate: None,
            groups: Vec::new(),
        },
        schedule: pattern.schedule(),
        reader_host: host("lab"),
        sender_host: Some(host("lab")),
        sender_options: Some(OptionsInForce {
            notsent_lowat_bytes: lowat,
            congestion: "cubic".into(),
            ..OptionsInForce::default()
        }),
        reader_options: None,
        tcpext_delta: BTreeMap::new(),
        ending: Ending::in_progress(),
        lab: Some(lab),
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
    };
    let schedule = meta.schedule.clone();
    let mut writer = RunWriter::create(&dir, true, meta)?;
    let ticks = seconds * 10;
    let mut state = 7u64;
    let mut noise = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        0.8 + 0.4 * ((state >> 33) as f64 / (1u64 << 31) as f64)
    };
    for tick in 1..=ticks {
        let t_s = tick as f64 / 10.0;
        let slow = schedule
            .iter()
            .any(|s| s.phase == Phase::Slow && s.contains(t_s));
        let phase = if slow { Phase::Slow } else { Phase::Fast };
        for flow in 0..flows {
            let n = noise();
            let bytes = if slow { 30_000.0 * n } else { 600_000.0 * n } as u64;
            let cap = if lowat > 0 { f64::from(lowat) } else { 4e6 };
            let notsent = if slow { cap * n } else { 0.2 * cap * n } as u32;
            let inflight = (bytes as f64 * 1.5 * n) as u64;
            writer.reader_row(&ReaderSample {
                t_s: t_s + f64::from(flow) * 1e-5,
                flow,
                phase,
                bytes,
                rcv_wnd: Some(if slow { 20_000 } else { 3_000_000 }),
                rcv_ssthresh: 3_000_000,
                rcv_space: 1_000_000,
                rtt_us: rtt_ms as u32 * 1000,
                rmem_alloc: 100_000,
                rcvbuf: 6_000_000,
                rcv_rtt_us: (rtt_ms as f64 * 1100.0 * n) as u32,
                budget_bytes: if slow { 300_000 } else { 0 },
                span_s: 0.1,
                delivered_bytes: Some(bytes),
                group: None,
            })?;
            writer.sender_row(&SenderSample {
                t_s: t_s + f64::from(flow) * 1e-5,
                flow,
                bytes,
                cwnd: 100,
                unacked: (inflight / 1448) as u32,
                notsent_bytes: Some(notsent),
                snd_wnd: Some(3_000_000),
                rtt_us: (rtt_ms as f64 * 1000.0 * n) as u32,
                delivery_rate_bps: Some(bytes * 80),
                wmem_queued: (f64::from(notsent) * 1.3) as u32 + inflight as u32,
                sndbuf: (cap * 2.0) as u32,
                snd_mss_bytes: 1448,
                inflight_bytes: inflight,
                total_retrans: 0,
                pacing_rate_bps: Some(0),
                span_s: 0.1,
                ..SenderSample::default()
            })?;
        }
        for side in [Side::Reader, Side::Sender] {
            writer.host_row(&HostSample {
                t_s,
                side,
                tcp_inuse: u64::from(flows) + 1,
                tcp_orphan: 0,
                tcp_tw: 0,
                tcp_alloc: u64::from(flows) + 1,
                tcp_mem_pages: (if slow { 100_000.0 } else { 40_000.0 } * noise()) as u64,
                tcp_mem_ns_bytes: None,
                ..HostSample::empty(0.0, Side::Reader)
            })?;
        }
    }
    writer.finish(Ending {
        status: RunStatus::Complete,
        reason: "pattern done".into(),
        duration_s: seconds as f64,
        ended_unix_ms: 2,
    })?;
    Ok(())
}

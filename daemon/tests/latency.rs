//! The writer's latency figures against a real daemon on loopback: TX timestamps of the
//! send queue and the POLLOUT wake-ups, paced so the queue behaves as behind a slow link.

mod util;

use std::time::Duration;

use oscil_daemon::DaemonConfig;
use oscil_model::files::rows::SenderSample;
use oscil_model::socket::{SocketOptions, WriteMode};
use oscil_protocol::control::Ended;
use util::{drain, hello, Client, Daemon};

const INTERVAL: Duration = Duration::from_millis(50);
const WRITE_BYTES: u32 = 16 << 10;
/// Loopback's own MSS is 64 KiB: the send queue would move in steps coarser than a lowat.
const MSS: u32 = 1448;
/// 8 Mbit/s of pacing: the queue drains at 1 byte per microsecond.
const RATE_BPS: u64 = 8_000_000;

/// A paced session with `lowat` and 16 KiB writes: the sender rows over two seconds and
/// the daemon's end message.
async fn paced_session(lowat: u32) -> (Vec<SenderSample>, Ended) {
    let options = SocketOptions {
        notsent_lowat_bytes: Some(lowat),
        // Paced, cwnd never grows, and autotuning would keep the buffer below the lowat.
        sndbuf_bytes: Some(1 << 20),
        ..Default::default()
    };
    paced_session_with(options, WriteMode::UntilEagain).await
}

/// A session paced at [`RATE_BPS`] with `options` and 16 KiB writes in `mode`.
async fn paced_session_with(options: SocketOptions, mode: WriteMode) -> (Vec<SenderSample>, Ended) {
    let daemon = Daemon::start(DaemonConfig::default()).await;
    let mut client = Client::connect(daemon.addr).await;
    let options = SocketOptions {
        max_pacing_rate_bps: Some(RATE_BPS),
        ..options
    };
    let mut h = hello(1, options, INTERVAL, Duration::from_secs(30));
    h.write_size_bytes = Some(WRITE_BYTES);
    h.write_mode = mode;
    let (_, flows) = client
        .start_session_with(h, |socket| {
            socket2::SockRef::from(socket).set_mss(MSS).unwrap();
        })
        .await;
    let readers: Vec<_> = flows.into_iter().map(drain).collect();
    let rows = client.samples_for(Duration::from_secs(2)).await;
    let ended = client.stop().await;
    readers.iter().for_each(|r| r.abort());
    daemon.shutdown().await;
    (rows.into_iter().flat_map(|(_, r)| r).collect(), ended)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pollout_wakes_the_writer_below_half_the_lowat() {
    for lowat in [65536, 16384] {
        let (rows, ended) = paced_session(lowat).await;
        let w = &ended.wakeups[0];
        assert!(w.wakeups > 10, "lowat {lowat}: {w:?}");
        // Between wake-ups the queue grows past half the threshold (a write may go in
        // while it is below the whole threshold)...
        let queued_max = rows.iter().filter_map(|r| r.notsent_bytes).max().unwrap();
        assert!(
            queued_max > lowat / 2,
            "lowat {lowat}: {queued_max} at most"
        );
        // ...but the kernel wakes the writer only once it fell below half (the seed
        // measured at most 32,760 at 65,536 and 8,184 at 16,384).
        let woke_max = w.notsent_max_bytes.unwrap();
        assert!(woke_max < u64::from(lowat) / 2, "lowat {lowat}: {w:?}");
        // So does every interval's row, and the session's figures are the rows' (and
        // those of wake-ups after the last sample, if any).
        let mut woke_rows = 0;
        for r in &rows {
            let woke = r.wakeups.expect("a wake-up count on every row");
            woke_rows += woke;
            assert_eq!(woke > 0, r.wake_notsent_max_bytes.is_some(), "{r:?}");
            if let Some(max) = r.wake_notsent_max_bytes {
                assert!(max < u64::from(lowat) / 2, "lowat {lowat}: {r:?}");
                assert!(r.wake_notsent_p50_bytes.unwrap() <= max, "{r:?}");
            }
        }
        assert!(
            woke_rows > 10 && woke_rows <= w.wakeups,
            "{woke_rows}: {w:?}"
        );
        let rows_max = rows.iter().filter_map(|r| r.wake_notsent_max_bytes).max();
        assert!(rows_max <= w.notsent_max_bytes, "{rows_max:?}: {w:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tagged_write_waits_for_the_bytes_queued_ahead_of_it() {
    let lowat = 65536;
    let (rows, _) = paced_session(lowat).await;
    let mut residence: Vec<u64> = rows.iter().filter_map(|r| r.residence_us).collect();
    assert!(
        residence.len() >= 10,
        "{} rows with residence",
        residence.len()
    );
    for r in &rows {
        if let (Some(queued), Some(acked)) = (r.residence_us, r.write_to_ack_us) {
            assert!(queued <= acked, "{r:?}");
        }
    }
    residence.sort_unstable();
    let median_us = residence[residence.len() / 2];
    // Ahead of a write sit between lowat/2 and lowat + one write + one segment of not-sent
    // bytes, which leave at 1 byte a microsecond.
    let fewest_us = u64::from(lowat) / 2;
    let most_us = u64::from(lowat + WRITE_BYTES + MSS);
    assert!(
        (fewest_us / 2..most_us * 2).contains(&median_us),
        "median residence {median_us} us, expected {fewest_us} to {most_us}: {residence:?}"
    );
}

/// The seed's writer: one write per POLLOUT. Every write is then a wake-up, each found the
/// unsent bytes under half the lowat, and with a small SO_SNDBUF the queue stays under the
/// buffer: `poll` says writable only at two thirds of it, and one 16 KiB write fits in the
/// last third (where writing until EAGAIN appends to an unsent skb past the buffer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_wake_writer_writes_once_per_pollout() {
    let lowat = 16384;
    let options = SocketOptions {
        notsent_lowat_bytes: Some(lowat),
        sndbuf_bytes: Some(1 << 20),
        ..Default::default()
    };
    let (rows, ended) = paced_session_with(options, WriteMode::PerWake).await;
    let w = &ended.wakeups[0];
    let written: u64 = rows.iter().map(|r| r.bytes).sum();
    assert!(written > 100_000, "{written} bytes written");
    assert!(
        w.wakeups * u64::from(WRITE_BYTES) >= written,
        "{written}: {w:?}"
    );
    assert!(w.notsent_max_bytes.unwrap() < u64::from(lowat) / 2, "{w:?}");

    let sndbuf = SocketOptions {
        sndbuf_bytes: Some(64 << 10),
        ..Default::default()
    };
    let (rows, _) = paced_session_with(sndbuf, WriteMode::PerWake).await;
    let in_force = rows.iter().map(|r| r.sndbuf).max().unwrap();
    assert_eq!(in_force, 128 << 10, "the kernel doubles SO_SNDBUF");
    let queued_max = rows.iter().map(|r| r.wmem_queued).max().unwrap();
    assert!(queued_max < in_force, "{queued_max} queued in {in_force}");
    assert!(
        queued_max > in_force / 2,
        "{queued_max}: the writer kept it full"
    );
}

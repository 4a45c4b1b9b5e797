//! oscil-link on real packets: two namespaces, the emulator binary between them.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use common::{spawn_in, LinkedPair, Netns, ADDR_A, ADDR_B};

fn addr_b(port: u16) -> SocketAddr {
    format!("{ADDR_B}:{port}").parse().unwrap()
}

/// A UDP receiver in B: counts datagrams for `listen` from the first one, returning the
/// arrival time of each (relative to the first).
fn udp_receiver(
    pair: &LinkedPair,
    port: u16,
    listen: Duration,
) -> std::thread::JoinHandle<Vec<Duration>> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let handle = spawn_in(&pair.b, move || {
        let sock = UdpSocket::bind(addr_b(port)).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        ready_tx.send(()).unwrap();
        let mut buf = [0u8; 2048];
        let mut arrivals = Vec::new();
        let mut first: Option<Instant> = None;
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(n) = sock.recv(&mut buf) {
                assert!(n > 0);
                let now = Instant::now();
                arrivals.push(now - *first.get_or_insert(now));
            }
            match first {
                Some(t) if t.elapsed() > listen => break,
                None if Instant::now() > give_up => break,
                _ => {}
            }
        }
        arrivals
    });
    ready_rx.recv().unwrap();
    handle
}

/// Sends `count` datagrams of `payload` bytes from A to B, `per_ms` of them each
/// millisecond on absolute deadlines (0: all at once).
fn udp_send(pair: &LinkedPair, port: u16, count: usize, payload: usize, per_ms: usize) {
    spawn_in(&pair.a, move || {
        let sock = UdpSocket::bind("0.0.0.0:0").unwrap();
        let buf = vec![7u8; payload];
        let start = Instant::now();
        for i in 0..count {
            if per_ms > 0 && i % per_ms == 0 {
                let due = start + Duration::from_millis((i / per_ms) as u64);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
            }
            sock.send_to(&buf, addr_b(port)).unwrap();
        }
    })
    .join()
    .unwrap();
}

fn link_stat(stats: &serde_json::Value, dir: &str, key: &str) -> u64 {
    stats[dir]["link"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("{dir}.link.{key} in {stats}"))
}

fn emulator_stat(stats: &serde_json::Value, dir: &str, key: &str) -> u64 {
    stats[dir]["emulator"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("{dir}.emulator.{key}"))
}

#[test]
fn round_trip_takes_twice_the_one_way_delay() {
    require_root!();
    let mut pair = LinkedPair::start(&["--rate", "20mbit", "--delay", "25ms"]);
    let listener = spawn_in(&pair.b, || TcpListener::bind(addr_b(5301)).unwrap())
        .join()
        .unwrap();
    let server = std::thread::spawn(move || {
        // Echo one byte per connection.
        for _ in 0..5 {
            let (mut s, _) = listener.accept().unwrap();
            let mut b = [0u8; 1];
            s.read_exact(&mut b).unwrap();
            s.write_all(&b).unwrap();
        }
    });
    let samples = spawn_in(&pair.a, || {
        (0..5)
            .map(|_| {
                // Connect (one RTT), then one byte there and back (another RTT).
                let start = Instant::now();
                let mut s = TcpStream::connect(addr_b(5301)).unwrap();
                let connect = start.elapsed();
                s.set_nodelay(true).unwrap();
                let start = Instant::now();
                s.write_all(&[1]).unwrap();
                let mut b = [0u8; 1];
                s.read_exact(&mut b).unwrap();
                (connect, start.elapsed())
            })
            .collect::<Vec<_>>()
    })
    .join()
    .unwrap();
    server.join().unwrap();
    let stats = pair.stop();
    let mut rtts: Vec<Duration> = samples.iter().flat_map(|&(c, e)| [c, e]).collect();
    rtts.sort();
    // Never early, and the fastest round trip took 50 ms of delay plus well under a
    // millisecond of serialization: a late wake-up on a busy host (CI runs many test
    // binaries at once) can only add to some round trips, never to all ten.
    assert!(
        rtts[0] >= Duration::from_millis(50) && rtts[0] < Duration::from_millis(52),
        "RTTs {rtts:?} for 2 x 25 ms"
    );
    assert_eq!(stats["one_way_delay_ms"].as_f64(), Some(25.0));
    assert_eq!(link_stat(&stats, "a_to_b", "packets_dropped_queue"), 0);
}

/// One-way delays, sorted, of 9 datagrams from namespace `from` to `to_addr:port` in `to`,
/// 20 ms apart: both ends read the same monotonic clock, so no synchronization is needed.
fn one_way_delays(from: &Netns, to: &Netns, to_addr: &str, port: u16) -> Vec<Duration> {
    let addr: SocketAddr = format!("{to_addr}:{port}").parse().unwrap();
    let socket = spawn_in(to, move || UdpSocket::bind(addr).unwrap())
        .join()
        .unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let arrivals = std::thread::spawn(move || {
        let mut buf = [0u8; 16];
        (0..9)
            .map(|_| {
                socket.recv(&mut buf).expect("a datagram within 2 s");
                (
                    u64::from_le_bytes(buf[..8].try_into().unwrap()),
                    Instant::now(),
                )
            })
            .collect::<Vec<_>>()
    });
    let sent = spawn_in(from, move || {
        let socket = UdpSocket::bind("0.0.0.0:0").unwrap();
        (0..9u64)
            .map(|i| {
                std::thread::sleep(Duration::from_millis(20));
                let at = Instant::now();
                socket.send_to(&i.to_le_bytes(), addr).unwrap();
                at
            })
            .collect::<Vec<_>>()
    })
    .join()
    .unwrap();
    let mut delays: Vec<Duration> = arrivals
        .join()
        .unwrap()
        .into_iter()
        .map(|(i, arrived)| arrived - sent[i as usize])
        .collect();
    delays.sort();
    delays
}

#[test]
fn each_direction_has_its_own_delay() {
    require_root!();
    let mut pair = LinkedPair::start(&[
        "--rate",
        "20mbit",
        "--delay",
        "40ms",
        "--reverse-delay",
        "10ms",
    ]);
    let a_to_b = one_way_delays(&pair.a, &pair.b, ADDR_B, 5310);
    let b_to_a = one_way_delays(&pair.b, &pair.a, ADDR_A, 5311);
    let stats = pair.stop();
    // Never early, and the fastest datagram took the delay and no more: a late wake-up of
    // the emulator on a busy host can only add to some datagrams, never to all nine.
    for (delays, configured_ms, way) in [(&a_to_b, 40, "A to B"), (&b_to_a, 10, "B to A")] {
        let configured = Duration::from_millis(configured_ms);
        assert!(
            delays[0] >= configured && delays[0] < configured + Duration::from_millis(2),
            "{way} took {delays:?}, configured {configured_ms} ms"
        );
    }
    assert_eq!(stats["one_way_delay_ms"].as_f64(), Some(40.0));
    assert_eq!(stats["reverse_delay_ms"].as_f64(), Some(10.0));
}

#[test]
fn udp_blast_is_delivered_at_the_link_rate() {
    require_root!();
    let mut pair = LinkedPair::start(&["--rate", "20mbit", "--delay", "10ms"]);
    let receiver = udp_receiver(&pair, 5302, Duration::from_millis(2500));
    // 1200-byte payloads cost 1200 + 8 + 20 + 14 = 1242 wire bytes: 2013 per second fit
    // in 20 Mbit/s. Offer 3000 per second for 3 s.
    udp_send(&pair, 5302, 9000, 1200, 3);
    let arrivals = receiver.join().unwrap();
    let stats = pair.stop();
    // Count arrivals between 0.5 s and 2.5 s after the first, once the queue is full.
    let window = arrivals
        .iter()
        .filter(|t| **t >= Duration::from_millis(500) && **t < Duration::from_millis(2500))
        .count();
    let wire_bps = window as f64 * 1242.0 * 8.0 / 2.0;
    assert!(
        (wire_bps / 20e6 - 1.0).abs() < 0.03,
        "delivered {wire_bps:.0} bit/s on the wire for 20 Mbit/s"
    );
    assert!(link_stat(&stats, "a_to_b", "packets_dropped_queue") > 1000);
    assert_eq!(emulator_stat(&stats, "a_to_b", "tun_tx_dropped"), 0);
}

/// Goodput of one TCP stream from A to B on `port`, between 1 s and 3 s after it starts.
fn tcp_goodput_bps(pair: &LinkedPair, port: u16) -> f64 {
    let listener = spawn_in(&pair.b, move || TcpListener::bind(addr_b(port)).unwrap())
        .join()
        .unwrap();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let start = Instant::now();
        let mut buf = vec![0u8; 1 << 16];
        let mut in_window = 0usize;
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            let t = start.elapsed();
            if t >= Duration::from_secs(1) && t < Duration::from_secs(3) {
                in_window += n;
            }
        }
        in_window
    });
    spawn_in(&pair.a, move || {
        let mut s = TcpStream::connect(addr_b(port)).unwrap();
        let chunk = vec![1u8; 1 << 16];
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(3200) {
            s.write_all(&chunk).unwrap();
        }
    })
    .join()
    .unwrap();
    reader.join().unwrap() as f64 * 8.0 / 2.0
}

#[test]
fn tcp_goodput_fills_the_link_and_never_exceeds_it() {
    require_root!();
    let mut pair = LinkedPair::start(&["--rate", "20mbit", "--delay", "10ms"]);
    // Full-sized segments carry 1448 payload bytes in 1514 wire bytes.
    let ceiling_bps = 20e6 * 1448.0 / 1514.0;
    // The ceiling holds on every try; the floor on the best of three, because a host busy
    // with other work can starve the emulator's thread for a while, and that slows the
    // link, which is not what this test judges.
    let mut tries_bps = Vec::new();
    for port in 5303..5306 {
        let goodput_bps = tcp_goodput_bps(&pair, port);
        assert!(
            goodput_bps < 1.005 * ceiling_bps,
            "goodput {goodput_bps:.0} bit/s above the ceiling {ceiling_bps:.0}"
        );
        tries_bps.push(goodput_bps);
        if goodput_bps > 0.93 * ceiling_bps {
            break;
        }
    }
    let stats = pair.stop();
    assert!(
        tries_bps.iter().any(|&bps| bps > 0.93 * ceiling_bps),
        "goodput {tries_bps:.0?} bit/s, ceiling {ceiling_bps:.0}"
    );
    assert!(
        link_stat(&stats, "a_to_b", "segments_in") > link_stat(&stats, "a_to_b", "packets_in"),
        "the kernel handed over GSO packets"
    );
}

#[test]
fn a_burst_beyond_the_queue_limit_is_dropped_at_the_tail() {
    require_root!();
    let mut pair = LinkedPair::start(&["--rate", "20mbit", "--delay", "10ms", "--queue", "20"]);
    let receiver = udp_receiver(&pair, 5304, Duration::from_millis(500));
    udp_send(&pair, 5304, 200, 1000, 0);
    let received = receiver.join().unwrap().len() as u64;
    let stats = pair.stop();
    assert_eq!(emulator_stat(&stats, "a_to_b", "tun_tx_dropped"), 0);
    let dropped = link_stat(&stats, "a_to_b", "packets_dropped_queue");
    // The queue holds 20; a few more leave while the burst is still arriving (each takes
    // 0.42 ms to serialize).
    assert!(
        (20..=40).contains(&received),
        "{received} of a 200-packet burst through a 20-packet queue"
    );
    assert_eq!(
        received + dropped,
        200,
        "every packet is either delivered or counted as dropped"
    );
    assert_eq!(link_stat(&stats, "a_to_b", "max_queue_segments"), 20);
}

#[test]
fn random_loss_drops_the_configured_fraction() {
    require_root!();
    let mut pair = LinkedPair::start(&[
        "--rate", "20mbit", "--delay", "5ms", "--loss", "10%", "--queue", "1000", "--seed", "42",
    ]);
    let receiver = udp_receiver(&pair, 5305, Duration::from_millis(1200));
    // 2000 datagrams at 2 per ms: 8.3 Mbit/s, well under the rate.
    udp_send(&pair, 5305, 2000, 500, 2);
    let received = receiver.join().unwrap().len() as u64;
    let stats = pair.stop();
    let lost = link_stat(&stats, "a_to_b", "packets_dropped_loss");
    // Binomial(2000, 0.1): mean 200, sd 13.4; allow 5 sd.
    assert!((133..=267).contains(&lost), "lost {lost} of 2000 at 10%");
    assert_eq!(received + lost, 2000);
    assert_eq!(link_stat(&stats, "a_to_b", "packets_dropped_queue"), 0);
}

/// A queue too short for whole GSO packets cuts them: the segments that fit go on, the
/// rest are dropped, and TCP recovers every byte in order from what went missing.
#[test]
fn tcp_survives_gso_packets_cut_at_the_tail() {
    require_root!();
    let mut pair = LinkedPair::start(&["--rate", "100mbit", "--delay", "5ms", "--queue", "30"]);
    const TOTAL: usize = 6 << 20;
    let listener = spawn_in(&pair.b, || TcpListener::bind(addr_b(5306)).unwrap())
        .join()
        .unwrap();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut got = Vec::with_capacity(TOTAL);
        s.read_to_end(&mut got).unwrap();
        got
    });
    let sent: Vec<u8> = (0..TOTAL).map(|i| (i % 251) as u8).collect();
    let to_send = sent.clone();
    spawn_in(&pair.a, move || {
        let mut s = TcpStream::connect(addr_b(5306)).unwrap();
        s.write_all(&to_send).unwrap();
    })
    .join()
    .unwrap();
    let got = reader.join().unwrap();
    let stats = pair.stop();
    assert!(
        got == sent,
        "received {} of {TOTAL} bytes, in order",
        got.len()
    );
    assert!(link_stat(&stats, "a_to_b", "packets_truncated_queue") > 0);
    assert_eq!(emulator_stat(&stats, "a_to_b", "truncate_failures"), 0);
}

#[test]
fn an_arrival_on_a_busy_line_is_read_at_once() {
    require_root!();
    // 20 datagrams fill the line (more than the few frames below which it polls), and all
    // are due 100 ms later; a probe sent 30 ms after them, when the queue has drained,
    // must leave at once. Were arrivals on a busy line only read at the next due frame,
    // or after the longest sleep, every probe would take tens of milliseconds more.
    const PROBES: usize = 3;
    let mut pair = LinkedPair::start(&["--rate", "10mbit", "--delay", "100ms"]);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let receiver = spawn_in(&pair.b, move || {
        let sock = UdpSocket::bind(addr_b(5306)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        ready_tx.send(()).unwrap();
        let mut buf = [0u8; 2048];
        let mut arrived = Vec::new();
        while arrived.len() < PROBES {
            let n = sock.recv(&mut buf).expect("each probe within 5 s");
            if buf[..n][0] == 1 {
                arrived.push(Instant::now());
            }
        }
        arrived
    });
    ready_rx.recv().unwrap();
    let sent = spawn_in(&pair.a, || {
        let sock = UdpSocket::bind("0.0.0.0:0").unwrap();
        (0..PROBES)
            .map(|_| {
                for _ in 0..20 {
                    sock.send_to(&[0u8; 1000], addr_b(5306)).unwrap();
                }
                std::thread::sleep(Duration::from_millis(30));
                let sent = Instant::now();
                sock.send_to(&[1u8; 100], addr_b(5306)).unwrap();
                // The line drains and the probe arrives before the next burst.
                std::thread::sleep(Duration::from_millis(150));
                sent
            })
            .collect::<Vec<_>>()
    })
    .join()
    .unwrap();
    let mut one_way: Vec<Duration> = (receiver.join().unwrap().into_iter())
        .zip(sent)
        .map(|(arrived, sent)| arrived - sent)
        .collect();
    one_way.sort();
    let stats = pair.stop();
    // (The namespace's own IPv6 chatter may add a packet or two.)
    assert!(link_stat(&stats, "a_to_b", "packets_forwarded") >= 21 * PROBES as u64);
    // 100 ms of delay and 0.1 ms of serialization: never early, and the fastest probe on
    // time (5 ms leaves room for a loaded machine; a late wake-up cannot delay all three).
    assert!(
        one_way[0] >= Duration::from_millis(100) && one_way[0] < Duration::from_millis(105),
        "probes took {one_way:?} over a 100 ms one-way delay"
    );
}

//! The seed's SO_SNDBUF experiment (issue 21) through oscil-link, against the kernel on a
//! path built from plain parts in the same test: 10 Mbit/s, 20 ms, one flow with SO_SNDBUF
//! 16 KiB and one with 64 KiB, written as the seed wrote them (16 KiB at a time, whenever
//! poll says the non-blocking socket is writable). The kernel doubles the value (tb 32768).
//!
//! The reference path: a delay line (oscil-link, no rate of its own to speak of) delaying
//! only the data direction by the whole 20 ms, and the bottleneck a `tbf` at 10 Mbit/s on an
//! `ifb` at the receiver's ingress with a 68-packet `pfifo`: the kernel's own rate limiter
//! and queue, after the delay. The bucket holds one packet (1600 bytes), the nearest a tbf
//! comes to a line's serializer: a 5000-byte bucket lets a flow that idles between bursts
//! (as a send-buffer-limited one does) send ~3 packets at once, and gave 16 KiB 4 points
//! more (65.6% against 61.4%). Even so a packet that finds tokens leaves at once, where a
//! line (and netem's rate, and the lab's serializer) first takes its serialization time,
//! 1.2 ms at 10 Mbit/s: a flow held by its send buffer sees a longer RTT in the lab and
//! carries a few points less (lab 53.8-60.3%, kernel path 59.9-63.6% in seven runs).
//! Root only (namespaces, TUN, tc); about 40 s, up to 2 min on a host too busy to fill a path.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{spawn_in, LinkedPair, ADDR_B};
use socket2::{Domain, Protocol, Socket, Type};

/// Each flow writes this long; goodput counts from `MEASURED_FROM` after its first byte.
const RUN: Duration = Duration::from_secs(7);
const MEASURED_FROM: Duration = Duration::from_secs(1);
const WRITE_BYTES: usize = 16 << 10;
const PORT: u16 = 5330;

fn tc(args: &[&str]) {
    let status = Command::new("tc").args(args).status().expect("run tc");
    assert!(status.success(), "tc {args:?} failed");
}

/// The lab's link: the RTT split in two, rate and a 50-packet queue in the emulator.
fn lab_path() -> LinkedPair {
    LinkedPair::start(&["--rate", "10mbit", "--delay", "10ms", "--queue", "50"])
}

/// The reference: the delay line delays only A to B (20 ms; 10 Gbit/s is no bottleneck),
/// and the bottleneck is the kernel's: tbf (one-packet bucket) + pfifo 68 on an ifb at B's
/// ingress.
fn kernel_path() -> LinkedPair {
    let pair = LinkedPair::start(&[
        "--rate",
        "10gbit",
        "--queue",
        "1000",
        "--delay",
        "20ms",
        "--reverse-delay",
        "0ms",
    ]);
    let b = pair.b.0.as_str();
    common::ip(&["-n", b, "link", "add", "ifb0", "type", "ifb"]);
    common::ip(&["-n", b, "link", "set", "ifb0", "up"]);
    tc(&[
        "-n", b, "qdisc", "add", "dev", "osl0", "handle", "ffff:", "ingress",
    ]);
    tc(&[
        "-n", b, "filter", "add", "dev", "osl0", "parent", "ffff:", "protocol", "ip", "u32",
        "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", "ifb0",
    ]);
    tc(&[
        "-n", b, "qdisc", "add", "dev", "ifb0", "root", "handle", "1:", "tbf", "rate", "10mbit",
        "burst", "1600", "latency", "1s",
    ]);
    tc(&[
        "-n", b, "qdisc", "add", "dev", "ifb0", "parent", "1:", "pfifo", "limit", "68",
    ]);
    pair
}

/// Goodput (bit/s at the receiver) of one bbr flow A -> B with SO_SNDBUF `sndbuf_bytes`.
fn goodput_bps(pair: &LinkedPair, sndbuf_bytes: usize) -> f64 {
    let addr: SocketAddr = format!("{ADDR_B}:{PORT}").parse().unwrap();
    let listener = spawn_in(&pair.b, move || TcpListener::bind(addr).unwrap())
        .join()
        .unwrap();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let (mut first, mut counted) = (None, 0usize);
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            let start = *first.get_or_insert_with(Instant::now);
            let t = start.elapsed();
            if t >= MEASURED_FROM && t < RUN {
                counted += n;
            }
        }
        counted as f64 * 8.0 / (RUN - MEASURED_FROM).as_secs_f64()
    });
    spawn_in(&pair.a, move || {
        let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
        socket
            .set_tcp_congestion(b"bbr")
            .expect("bbr congestion control (this kernel's namespace default)");
        socket.set_send_buffer_size(sndbuf_bytes).unwrap();
        socket.connect(&addr.into()).unwrap();
        let mut stream = TcpStream::from(socket);
        stream.set_nonblocking(true).unwrap();
        let chunk = vec![7u8; WRITE_BYTES];
        let start = Instant::now();
        while start.elapsed() < RUN + Duration::from_millis(200) {
            oscil_link::wait_writable(stream.as_fd(), Duration::from_millis(100)).unwrap();
            match stream.write(&chunk) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("write: {e}"),
            }
        }
    })
    .join()
    .unwrap();
    reader.join().unwrap()
}

/// 64 KiB fills the link (1448 payload bytes per 1514 on the wire) unless the host starves
/// the emulator; the ratio then measures what the small buffer lets through, not a slow path.
const FILLED_BPS: f64 = 0.95 * 10e6 * 1448.0 / 1514.0;

/// Measurements of one path before the test gives up on a host too busy to fill it.
const ATTEMPTS: usize = 3;

/// 16 KiB's goodput over 64 KiB's on a fresh path from `make` each (no cached metrics).
/// An attempt whose 64 KiB flow falls short of the link was spoiled by the host (CI once
/// read 8.96 Mbit/s on the kernel path while the test binaries ran beside it): it is
/// printed and measured again, both flows, so the two always share one host's moment.
fn ratio(name: &str, make: fn() -> LinkedPair) -> (f64, f64, f64) {
    let mut attempt = 1;
    loop {
        let small = goodput_bps(&make(), 16 << 10);
        let large = goodput_bps(&make(), 64 << 10);
        if large > FILLED_BPS || attempt == ATTEMPTS {
            return (small / large, small, large);
        }
        eprintln!(
            "{name} attempt {attempt}: 64 KiB carried {:.2} Mbit/s, short of the link; again",
            large / 1e6
        );
        attempt += 1;
    }
}

#[test]
fn a_16k_send_buffer_carries_what_the_kernel_path_lets_it() {
    require_root!();
    let (lab, lab_small, lab_large) = ratio("lab", lab_path);
    let (kernel, k_small, k_large) = ratio("kernel path", kernel_path);
    let figures = format!(
        "lab {:.1}% ({:.2} / {:.2} Mbit/s), kernel path {:.1}% ({:.2} / {:.2} Mbit/s)",
        lab * 100.0,
        lab_small / 1e6,
        lab_large / 1e6,
        kernel * 100.0,
        k_small / 1e6,
        k_large / 1e6
    );
    eprintln!("{figures}");
    assert!(lab_large > FILLED_BPS && k_large > FILLED_BPS, "{figures}");
    // The seed (netem, stock 6.8 kernel) measured 65%, the reference lab on this kernel 63%.
    assert!((0.50..=0.70).contains(&lab), "{figures}");
    // Never more generous than the kernel, and short of it by at most the serialization
    // time the tbf skips.
    assert!(lab <= kernel + 0.03, "{figures}");
    assert!(kernel - lab <= 0.12, "{figures}");
}

//! oscil-link's packet captures read back with Debian's tshark: what they hold agrees with the
//! link's own counters and with the bytes the test sent.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use common::{spawn_in, LinkedPair, ADDR_B};

fn addr_b(port: u16) -> SocketAddr {
    format!("{ADDR_B}:{port}").parse().unwrap()
}

/// True (after saying so, or failing under OSCIL_REQUIRE_ROOT) when tshark is not installed.
fn lacks_tshark() -> bool {
    let found = Command::new("tshark").arg("--version").output().is_ok();
    if !found {
        oscil_testkit::skip("needs tshark (apt-get install tshark)");
    }
    !found
}

/// One row per packet of the capture: the fields asked, as tshark prints them.
fn tshark_fields(file: &Path, fields: &[&str]) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r")
        .arg(file)
        .args(["-T", "fields", "-E", "separator=|"]);
    for field in fields {
        cmd.args(["-e", field]);
    }
    let out = cmd.output().expect("run tshark");
    assert!(
        out.status.success(),
        "tshark -r {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("tshark prints UTF-8")
        .lines()
        .map(|line| line.split('|').map(str::to_owned).collect())
        .collect()
}

fn stat(stats: &serde_json::Value, dir: &str, group: &str, key: &str) -> u64 {
    stats[dir][group][key]
        .as_u64()
        .unwrap_or_else(|| panic!("{dir}.{group}.{key} in {stats}"))
}

/// A number after `key=` in a packet comment.
fn comment_ns(comment: &str, key: &str) -> u64 {
    let at = comment
        .find(key)
        .unwrap_or_else(|| panic!("{key} in {comment:?}"))
        + key.len();
    let digits: String = comment[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("{key} in {comment:?}"))
}

fn unix_s() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A TCP transfer through a link with room in its queue: every packet that entered is in
/// the capture, stamped within the test's own time, and the data's sequence numbers rise
/// without a gap to exactly the bytes sent.
#[test]
fn a_tcp_transfer_is_captured_as_the_link_counted_it() {
    require_root!();
    if lacks_tshark() {
        return;
    }
    const TOTAL: usize = 3 << 20;
    const PORT: u16 = 5401;
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().display().to_string();
    let started_s = unix_s();
    // A queue of 5000 segments holds a 3 MB transfer whole: nothing dropped, all in order.
    let mut pair = LinkedPair::start(&[
        "--rate", "100mbit", "--delay", "5ms", "--queue", "5000", "--pcap", &pcap,
    ]);
    let listener = spawn_in(&pair.b, || TcpListener::bind(addr_b(PORT)).unwrap())
        .join()
        .unwrap();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut got = Vec::with_capacity(TOTAL);
        s.read_to_end(&mut got).unwrap();
        got.len()
    });
    spawn_in(&pair.a, || {
        let mut s = TcpStream::connect(addr_b(PORT)).unwrap();
        s.write_all(&vec![7u8; TOTAL]).unwrap();
    })
    .join()
    .unwrap();
    assert_eq!(reader.join().unwrap(), TOTAL);
    // The last ACKs cross the link after the reader saw the FIN.
    std::thread::sleep(Duration::from_millis(100));
    let stats = pair.stop();
    let ended_s = unix_s();

    for direction in ["a_to_b", "b_to_a"] {
        let file = dir.path().join(format!("link-{direction}.pcapng"));
        let rows = tshark_fields(&file, &["frame.time_epoch", "frame.comment"]);
        let packets_in = stat(&stats, direction, "link", "packets_in");
        assert_eq!(
            rows.len() as u64,
            packets_in,
            "{direction}: packets in the capture"
        );
        assert_eq!(
            stat(&stats, direction, "capture", "packets_captured"),
            packets_in
        );
        for row in &rows {
            let t: f64 = row[0].parse().unwrap();
            assert!(
                (started_s..=ended_s).contains(&t),
                "{direction}: stamped {t}"
            );
            // Delivery comes the configured one-way delay after leaving the queue.
            let exit_ns = comment_ns(&row[1], "queue_exit_after_ns=");
            let delivery_ns = comment_ns(&row[1], "delivery_after_ns=");
            assert_eq!(delivery_ns - exit_ns, 5_000_000, "{}", row[1]);
        }
    }

    let a_to_b = dir.path().join("link-a_to_b.pcapng");
    let data = tshark_fields(
        &a_to_b,
        &[
            "tcp.dstport",
            "tcp.seq",
            "tcp.len",
            "frame.cap_len",
            "frame.len",
        ],
    );
    // New data starts where the highest byte so far ended; a segment below it is a
    // retransmission (a busy machine can fire an RTO); a gap above it can only be data the
    // kernel dropped at the input TUN before the link read it.
    let tun_dropped = stat(&stats, "a_to_b", "emulator", "tun_tx_dropped");
    let mut highest = 1u64;
    let mut largest_frame = 0u64;
    for row in data.iter().filter(|row| row[0] == PORT.to_string()) {
        let (seq, len): (u64, u64) = (row[1].parse().unwrap(), row[2].parse().unwrap());
        if len == 0 {
            continue;
        }
        assert!(
            seq <= highest || tun_dropped > 0,
            "data from {seq} after {highest}: a gap the link never saw"
        );
        highest = highest.max(seq + len);
        let (cap_len, frame_len): (u64, u64) = (row[3].parse().unwrap(), row[4].parse().unwrap());
        assert!(cap_len <= 128, "headers only: {cap_len} bytes kept");
        largest_frame = largest_frame.max(frame_len);
    }
    assert_eq!(
        highest,
        TOTAL as u64 + 1,
        "the data's sequence numbers cover what was sent"
    );
    assert!(
        largest_frame > 1500,
        "GSO packets keep their whole length: {largest_frame}"
    );
}

/// A burst beyond a short queue: the drops the link counted are the packets the capture
/// marks as dropped by the queue.
#[test]
fn queue_drops_are_marked_in_the_capture() {
    require_root!();
    if lacks_tshark() {
        return;
    }
    const PORT: u16 = 5402;
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().display().to_string();
    let mut pair = LinkedPair::start(&[
        "--rate", "20mbit", "--delay", "10ms", "--queue", "20", "--pcap", &pcap,
    ]);
    let receiver = spawn_in(&pair.b, || UdpSocket::bind(addr_b(PORT)).unwrap())
        .join()
        .unwrap();
    spawn_in(&pair.a, || {
        let sock = UdpSocket::bind("0.0.0.0:0").unwrap();
        for _ in 0..200 {
            sock.send_to(&[7u8; 1000], addr_b(PORT)).unwrap();
        }
    })
    .join()
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(receiver);
    let stats = pair.stop();

    let file = dir.path().join("link-a_to_b.pcapng");
    let rows = tshark_fields(&file, &["udp.dstport", "frame.comment"]);
    assert_eq!(
        rows.len() as u64,
        stat(&stats, "a_to_b", "link", "packets_in")
    );
    let burst: Vec<_> = rows.iter().filter(|r| r[0] == PORT.to_string()).collect();
    assert_eq!(
        burst.len(),
        200,
        "every datagram of the burst entered the link"
    );
    let dropped = burst
        .iter()
        .filter(|r| r[1] == "dropped: queue full")
        .count() as u64;
    let counted = stat(&stats, "a_to_b", "link", "packets_dropped_queue");
    assert_eq!(dropped, counted, "drops in the capture and in the stats");
    assert!(
        dropped >= 150,
        "a 200-packet burst into a 20-packet queue: {dropped} dropped"
    );
    let forwarded = burst
        .iter()
        .filter(|r| r[1].starts_with("forwarded"))
        .count() as u64;
    assert_eq!(forwarded + dropped, 200);
}

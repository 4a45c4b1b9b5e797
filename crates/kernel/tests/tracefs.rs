//! The per-ACK trace on a real socket: a private tracefs instance with `tcp:tcp_probe`
//! filtered on one loopback connection's cookie sees only that connection, and its
//! `snd_una` advances by the bytes the peer read. Needs root (tracefs); skips, saying so,
//! without it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;

use oscil_kernel::socket::diag::cookie;
use oscil_kernel::trace::tracefs::{Instance, Record, TraceError, Tracepoint, TRACEFS};

const SENT_BYTES: usize = 8 << 20;

#[test]
fn tcp_probe_on_one_socket_follows_its_acknowledged_bytes() {
    if oscil_testkit::lacks_root("tracefs") {
        return;
    }
    let root = Path::new(TRACEFS);
    if !root.join("instances").is_dir() {
        let status = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .status()
            .expect("run mount");
        assert!(status.success(), "mount tracefs");
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut sender = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut receiver, _) = listener.accept().unwrap();
    // Another connection's ACKs must not pass the filter.
    let mut other = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut other_peer, _) = listener.accept().unwrap();
    let ours = cookie(&sender).unwrap();
    let name = format!("oscil-test-{}", std::process::id());
    let probe = Tracepoint {
        name: "tcp/tcp_probe".into(),
        filter: Some(format!("sock_cookie == {ours}")),
    };
    let mut trace = Instance::create(root, &name, 1024, &[probe]).unwrap();

    let reading = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0;
        while total < SENT_BYTES {
            total += receiver.read(&mut buf).unwrap();
        }
    });
    let chunk = vec![7u8; 1 << 16];
    for _ in 0..SENT_BYTES / chunk.len() {
        sender.write_all(&chunk).unwrap();
    }
    other.write_all(&chunk).unwrap();
    other_peer.read_exact(&mut vec![0u8; chunk.len()]).unwrap();
    reading.join().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));

    let mut records: Vec<Record> = Vec::new();
    let missed = trace.drain(&mut records).unwrap();
    assert_eq!((missed, trace.overruns()), (0, 0), "no event lost");
    let (event, format) = trace.format(records[0].id).expect("a tcp_probe record");
    assert_eq!(event, "tcp/tcp_probe");
    let field = |r: &Record, name| format.value(&r.data, name).unwrap();
    assert!(records.iter().all(|r| field(r, "sock_cookie") == ours));
    assert!(records.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
    let una: Vec<u64> = records.iter().map(|r| field(r, "snd_una")).collect();
    // Sequence numbers wrap at 2^32: the advance is the wrapping difference.
    let advanced = (una[una.len() - 1].wrapping_sub(una[0])) & 0xffff_ffff;
    let window = 4 << 20;
    assert!(
        advanced as usize + window >= SENT_BYTES && advanced as usize <= SENT_BYTES,
        "snd_una advanced {advanced} bytes over {} ACKs for {SENT_BYTES} sent",
        records.len()
    );
}

#[test]
fn a_root_without_tracefs_is_a_clear_error() {
    let empty = tempfile::tempdir().unwrap();
    let probe = Tracepoint {
        name: "tcp/tcp_probe".into(),
        filter: None,
    };
    match Instance::create(empty.path(), "x", 64, &[probe]) {
        Err(TraceError::NoTracefs(path)) => assert_eq!(path, empty.path()),
        other => panic!("expected NoTracefs, got {:?}", other.err()),
    }
}

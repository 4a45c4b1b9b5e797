//! The TCP memory of a network namespace, summed over its sockets from one sock_diag dump,
//! agrees with the kernel's own count: in a fresh namespace that holds the only busy
//! sockets, `/proc/net/sockstat` `mem` (global across namespaces) grows by what the dump
//! sums. Needs root (it makes a namespace); skips, saying so, without it.

use std::io::{ErrorKind, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;

use oscil_kernel::socket::diag::Diag;
use oscil_testkit::Netns;

/// Set in the child that runs inside the namespace.
const CHILD: &str = "OSCIL_NAMESPACE_MEMORY_CHILD";

#[test]
fn namespace_sum_agrees_with_sockstat() {
    if std::env::var_os(CHILD).is_some() {
        return measure_inside();
    }
    if oscil_testkit::lacks_root("a network namespace") {
        return;
    }
    let ns = Netns::new("oscil-diag-");
    // A large send buffer inside the namespace only, so the writer can queue megabytes.
    let sysctl = Command::new("ip")
        .args(["netns", "exec", &ns.0, "sysctl", "-qw"])
        .arg("net.ipv4.tcp_wmem=4096 16777216 16777216")
        .status()
        .expect("sysctl");
    assert!(sysctl.success());
    // sockstat's count is global: other processes' TCP traffic during the few milliseconds
    // between the two readings moves it too. That noise only ever adds, so up to three
    // attempts are made and the closest one must agree.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as i64;
    let mut attempts = Vec::new();
    for _ in 0..3 {
        let (sum, delta) = measure_in(&ns.0);
        eprintln!("namespace sum {sum} bytes; sockstat fell by {delta} bytes when they closed");
        // The kernel caches up to 1 MiB of reserve per CPU before it touches the global
        // count. A writer that queued little met global memory pressure: try again.
        let tolerance = cpus * (1 << 20) + sum / 20;
        if sum > 4 << 20 && (sum - delta).abs() <= tolerance {
            return;
        }
        attempts.push((sum, delta, tolerance));
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    panic!(
        "namespace sum against sockstat's fall, with the tolerance, in 3 attempts: {attempts:?}"
    );
}

/// Runs the measuring child in the namespace: (namespace sum, sockstat's fall), bytes.
fn measure_in(ns: &str) -> (i64, i64) {
    let output = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "namespace_sum_agrees_with_sockstat",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .expect("run the child in the namespace");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "child failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let figure = |name: &str| -> i64 {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in: {stdout}"))
            .trim()
            .parse()
            .unwrap()
    };
    (
        figure("namespace_sum_bytes"),
        figure("sockstat_delta_bytes"),
    )
}

/// Inside the fresh namespace: queue megabytes that nobody reads, sum them from the dump,
/// then free them and see how far the global count falls. Before and after are a few
/// milliseconds apart, so other processes' TCP traffic barely moves the global figure.
fn measure_inside() {
    let page = page_size();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut writer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (_unread, _) = listener.accept().unwrap();
    writer.set_nonblocking(true).unwrap();
    let chunk = vec![0u8; 64 << 10];
    let mut idle_rounds = 0;
    while idle_rounds < 20 {
        match writer.write(&chunk) {
            Ok(_) => idle_rounds = 0,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                idle_rounds += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("write: {e}"),
        }
    }
    // What the samplers record as host.csv tcp_mem_ns_bytes.
    let sum = Diag::open().unwrap().namespace_charged_bytes().unwrap();
    let held = oscil_kernel::host::sockstat::read().unwrap().tcp_mem_pages as i64;
    // Closing the unread end with data queued resets the connection: both queues go.
    drop(_unread);
    drop(writer);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let freed = oscil_kernel::host::sockstat::read().unwrap().tcp_mem_pages as i64;
    println!("namespace_sum_bytes={sum}");
    println!("sockstat_delta_bytes={}", (held - freed) * page);
}

fn page_size() -> i64 {
    // getconf is on every Linux system; avoids unsafe sysconf in a test.
    let out = Command::new("getconf").arg("PAGESIZE").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

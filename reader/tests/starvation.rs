//! A reader the host starves of CPU is judged starved, by its threads' wait for a CPU, even
//! though its sampler (in the real-time class, when it may) still wakes on time; a reader
//! left alone is not. The starved reader is pinned to one CPU at nice 19 with two busy
//! loops pinned beside it at the default priority (`taskset`, `nice`: `sched_setaffinity`
//! and `setpriority`, inherited by every thread the reader starts): it gets about 1% of that
//! CPU while reading at 200 Mbit/s over loopback, which the issue 38 reader, reading
//! nothing for whole seconds on a busy machine, looked like.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use oscil_model::run::sampling::Sampling;
use oscil_model::run::starvation::{self, RUN_QUEUE_WAIT_MS_PER_S_MAX};
use oscil_testkit::{workspace_bin, Daemon};

/// The pattern: 4 s at the pacing rate, so the reader has work in every second.
const ARGS: &[&str] = &[
    "--fast",
    "2s",
    "--slow",
    "2s",
    "--cycles",
    "1",
    "--pacing-rate",
    "200mbit",
    "--quiet",
];

/// Busy loops pinned to one CPU, ended by PID when dropped.
struct BusyLoops(Vec<Child>);

impl BusyLoops {
    fn start(cpu: usize, count: usize) -> Self {
        BusyLoops(
            (0..count)
                .map(|_| {
                    Command::new("taskset")
                        .args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"])
                        .stdout(Stdio::null())
                        .spawn()
                        .expect("start a busy loop with taskset")
                })
                .collect(),
        )
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One reader run into `out`, pinned at nice 19 to `starved_on` when given: what the
/// starvation rule says of it, and its `sampling`.
fn run(daemon: &Daemon, out: &Path, starved_on: Option<usize>) -> (Option<String>, Sampling) {
    let reader = workspace_bin("oscil-reader");
    let mut command = match starved_on {
        None => Command::new(&reader),
        Some(cpu) => {
            let mut command = Command::new("taskset");
            command
                .args(["-c", &cpu.to_string(), "nice", "-n", "19"])
                .arg(&reader);
            command
        }
    };
    let output = command
        .arg("--connect")
        .arg(daemon.addr.to_string())
        .arg("--out")
        .arg(out)
        .args(ARGS)
        .output()
        .expect("run oscil-reader");
    let meta = oscil_rundir::load_meta(out).unwrap_or_else(|e| {
        panic!(
            "no run.json ({e}): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let sampling = meta.sampling.expect("run.json has sampling");
    (
        starvation::starved(&sampling, meta.config.interval_us),
        sampling,
    )
}

#[test]
fn a_reader_starved_of_cpu_is_judged_starved_and_one_left_alone_is_not() {
    let daemon = Daemon::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    // Left alone: on a busy machine a try may wait long; one of three must not.
    let alone: Vec<_> = (0..3)
        .map(|k| run(&daemon, &dir.path().join(format!("alone-{k}")), None))
        .take_while(|(starved, _)| starved.is_some())
        .collect();
    assert!(alone.len() < 3, "starved every time alone: {alone:?}");
    let cpu = std::thread::available_parallelism().map_or(1, usize::from) - 1;
    let (starved, sampling) = {
        let _busy = BusyLoops::start(cpu, 2);
        run(&daemon, &dir.path().join("starved"), Some(cpu))
    };
    let why = starved.unwrap_or_else(|| panic!("not judged starved: {sampling:?}"));
    eprintln!("starved: {why}");
    // Judged by the reading threads' wait for a CPU, past the floor.
    let waited_ms = sampling.reader.run_queue_wait_p99_ms_per_s;
    assert!(
        waited_ms.is_some_and(|ms| ms > RUN_QUEUE_WAIT_MS_PER_S_MAX),
        "{sampling:?}"
    );
    assert!(
        why.starts_with("the reader ") && why.contains("for a CPU"),
        "{why}"
    );
}

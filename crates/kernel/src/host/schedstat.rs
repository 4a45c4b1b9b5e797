//! How long this process's threads waited for a CPU: the scheduler's run-queue wait, the
//! second field of `/proc/self/task/<tid>/schedstat` (nanoseconds a thread was runnable
//! and not running). A reader the host starves of CPU stops reading while its sampler,
//! in the real-time class, still wakes on time (issue 38): only the waiting of the
//! threads that read or write shows it.

use std::collections::HashMap;
use std::time::Duration;

/// Each thread's run-queue wait at the last reading, to give the next its growth.
#[derive(Debug, Default)]
pub struct RunQueueWaits {
    last_ns: HashMap<u32, u64>,
}

impl RunQueueWaits {
    /// Starts counting from now: what the threads alive now waited before is not counted.
    pub fn new() -> Self {
        let mut waits = RunQueueWaits::default();
        waits.since_last();
        waits
    }

    /// The longest any thread of the process waited for a CPU since the last reading (a
    /// thread born since counts from its start); `None` when `/proc` does not tell (no
    /// `CONFIG_SCHED_INFO`, or no descriptor left to read it with).
    pub fn since_last(&mut self) -> Option<Duration> {
        let now = read_all()?;
        let longest_ns = now
            .iter()
            .map(|(tid, ns)| ns.saturating_sub(self.last_ns.get(tid).copied().unwrap_or(0)))
            .max();
        self.last_ns = now;
        longest_ns.map(Duration::from_nanos)
    }
}

/// Every thread's run-queue wait so far; a thread that ended while being read is skipped.
fn read_all() -> Option<HashMap<u32, u64>> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let waits: HashMap<u32, u64> = tasks
        .filter_map(|task| {
            let task = task.ok()?;
            let tid = task.file_name().to_str()?.parse().ok()?;
            let text = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            Some((tid, parse_wait_ns(&text)?))
        })
        .collect();
    (!waits.is_empty()).then_some(waits)
}

/// `schedstat`'s three fields: time on a CPU, time waiting on a run queue (both ns), and
/// timeslices run.
fn parse_wait_ns(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn the_second_field_is_the_wait() {
        assert_eq!(parse_wait_ns("1200 3400 5\n"), Some(3400));
        assert_eq!(parse_wait_ns("1200\n"), None);
    }

    #[test]
    fn threads_that_outnumber_the_cpus_wait_for_them() {
        // Twice as many spinning threads as CPUs: together they run at most the CPUs'
        // time, so the one that waited longest waited at least half the time; on a busy
        // host more, never less.
        let mut waits = RunQueueWaits::new();
        let stop = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..2 * crate::sys::online_cpus())
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(600));
        let longest = waits.since_last().unwrap();
        stop.store(true, Ordering::Relaxed);
        spinners.into_iter().for_each(|s| s.join().unwrap());
        assert!(longest >= Duration::from_millis(250), "{longest:?}");
    }
}

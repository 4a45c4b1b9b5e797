//! What a process spent: CPU seconds from `/proc/self/stat` through the `procfs` crate, and
//! context switches from `getrusage`: `/proc/self/status` counts only the main thread's,
//! and the threads that did the work may have ended. A difference of two readings is the
//! cost of what ran between them.

use oscil_model::host::ProcessCost;

/// This process so far; `None` when `/proc` does not tell.
pub fn of_self() -> Option<ProcessCost> {
    let me = procfs::process::Process::myself().ok()?;
    let stat = me.stat().ok()?;
    let ticks = procfs::ticks_per_second() as f64;
    let (voluntary_ctx, involuntary_ctx) = crate::sys::context_switches().ok()?;
    Some(ProcessCost {
        user_s: stat.utime as f64 / ticks,
        system_s: stat.stime as f64 / ticks,
        voluntary_ctx,
        involuntary_ctx,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinning_costs_cpu_and_sleeping_costs_switches() {
        // The scheduler's own count of this thread's time on a CPU (`schedstat`, in ns) is
        // the yardstick: a spin timed by the wall clock gets less CPU on a busy machine.
        let on_cpu_ns = || -> u64 {
            let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
            text.split_whitespace().next().unwrap().parse().unwrap()
        };
        let before = of_self().unwrap();
        let spin_from_ns = on_cpu_ns();
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut x = 0u64;
        while on_cpu_ns() - spin_from_ns < 300_000_000 && std::time::Instant::now() < give_up {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        // Sleeps in a thread that ends before the second reading still count.
        std::thread::spawn(|| {
            for _ in 0..5 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
        .join()
        .unwrap();
        let spent = of_self().unwrap().since(&before);
        assert!(spent.cpu_s() >= 0.2, "{spent:?}");
        assert!(spent.voluntary_ctx >= 5, "{spent:?}");
    }
}

//! `/proc/stat`'s `cpuN` lines: each CPU's time by state since boot, in clock ticks
//! (`USER_HZ`), from which an interval's busy share of each CPU follows.

use crate::host::proc::{ParseError, ProcFile, ReadError};
use oscil_model::host::CpuLoad;

const FILE: &str = "/proc/stat";

/// One CPU's ticks since boot: busy (user, nice, system, irq, softirq, steal; guest time is
/// already in user) and all of them (busy, idle and iowait).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    pub cpu: u32,
    pub busy: u64,
    pub total: u64,
}

/// Parses the `cpuN` lines of `/proc/stat` (not the `cpu` line, their sum).
pub fn parse(text: &str) -> Result<Vec<CpuTicks>, ParseError> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("cpu")?;
            let (number, times) = rest.split_once(' ')?;
            (!number.is_empty()).then_some((number, times))
        })
        .map(|(number, times)| {
            let cpu = number
                .parse()
                .map_err(|_| ParseError::new(FILE, format!("cpu{number}: not a CPU number")))?;
            // user nice system idle iowait irq softirq steal [guest guest_nice]
            let mut ticks = [0u64; 8];
            let mut words = times.split_whitespace();
            for (i, slot) in ticks.iter_mut().enumerate() {
                let word = words.next().ok_or_else(|| {
                    ParseError::new(FILE, format!("cpu{cpu} has {i} times, fewer than 8"))
                })?;
                *slot = word.parse().map_err(|_| {
                    ParseError::new(FILE, format!("cpu{cpu}: expected a number, found {word:?}"))
                })?;
            }
            let [user, nice, system, idle, iowait, irq, softirq, steal] = ticks;
            let busy = user + nice + system + irq + softirq + steal;
            Ok(CpuTicks {
                cpu,
                busy,
                total: busy + idle + iowait,
            })
        })
        .collect()
}

/// Opens the file to read it again and again.
pub fn open() -> Result<ProcFile<Vec<CpuTicks>>, ReadError> {
    ProcFile::open(FILE, parse)
}

/// Each CPU's busy share between two readings, as the busiest and the mean, percent; `None`
/// when no CPU of `now` was in `before` with time passed (the first reading, or an
/// interval shorter than a clock tick).
pub fn busy_between(before: &[CpuTicks], now: &[CpuTicks]) -> Option<CpuLoad> {
    let shares: Vec<f64> = now
        .iter()
        .filter_map(|n| {
            let b = before.iter().find(|b| b.cpu == n.cpu)?;
            let total = n.total.checked_sub(b.total).filter(|&t| t > 0)?;
            let busy = n.busy.saturating_sub(b.busy).min(total);
            Some(busy as f64 * 100.0 / total as f64)
        })
        .collect();
    (!shares.is_empty()).then(|| CpuLoad {
        busy_max_pct: shares.iter().copied().fold(0.0, f64::max),
        busy_mean_pct: shares.iter().sum::<f64>() / shares.len() as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "\
cpu  300 0 200 1000 100 0 0 0 0 0
cpu0 100 0 100 500 50 0 0 0 0 0
cpu1 200 0 100 500 50 0 0 0 0 0
intr 12345 1 2 3
ctxt 999
";

    #[test]
    fn reads_busy_and_total_ticks_of_each_cpu_not_the_sum() {
        let cpus = parse(BEFORE).unwrap();
        assert_eq!(
            cpus,
            [
                CpuTicks {
                    cpu: 0,
                    busy: 200,
                    total: 750
                },
                CpuTicks {
                    cpu: 1,
                    busy: 300,
                    total: 850
                },
            ]
        );
        // irq, softirq and steal are busy; guest (already in user) is not counted twice.
        let one = parse("cpu3 1 2 3 4 5 6 7 8 9 10\n").unwrap();
        assert_eq!(
            one,
            [CpuTicks {
                cpu: 3,
                busy: 1 + 2 + 3 + 6 + 7 + 8,
                total: 36
            }]
        );
    }

    #[test]
    fn an_interval_gives_the_busiest_cpu_and_the_mean() {
        // Over 100 ticks cpu0 ran 90 busy (user 60, system 20, softirq 10) and 10 idle;
        // cpu1 ran 30 busy and 60 idle and 10 iowait.
        let after = "\
cpu0 160 0 120 510 50 0 10 0 0 0
cpu1 230 0 100 560 60 0 0 0 0 0
";
        let load = busy_between(&parse(BEFORE).unwrap(), &parse(after).unwrap()).unwrap();
        assert!((load.busy_max_pct - 90.0).abs() < 1e-9, "{load:?}");
        assert!((load.busy_mean_pct - 60.0).abs() < 1e-9, "{load:?}");
        // No time passed, or no CPU in common: no figure.
        let same = parse(BEFORE).unwrap();
        assert_eq!(busy_between(&same, &same), None);
        assert_eq!(busy_between(&[], &same), None);
    }

    #[test]
    fn a_short_line_or_a_word_not_a_number_says_which_cpu() {
        let e = parse("cpu0 1 2 3\n").unwrap_err();
        assert!(e.reason.contains("cpu0 has 3 times"), "{e}");
        let e = parse("cpu7 1 2 3 x 5 6 7 8\n").unwrap_err();
        assert!(
            e.reason.contains("cpu7") && e.reason.contains("\"x\""),
            "{e}"
        );
    }

    #[test]
    fn reads_this_host_every_cpu_within_0_to_100() {
        let mut file = open().unwrap();
        let before = file.read().unwrap();
        assert_eq!(before.len() as u32, crate::sys::online_cpus());
        std::thread::sleep(std::time::Duration::from_millis(50));
        let load = busy_between(&before, &file.read().unwrap()).unwrap();
        assert!((0.0..=100.0).contains(&load.busy_max_pct), "{load:?}");
        assert!(load.busy_mean_pct <= load.busy_max_pct, "{load:?}");
    }
}

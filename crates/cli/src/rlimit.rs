//! The bounds oscil puts on itself (the report's memory and time, the lab's on the report
//! it runs) never rise past what the process was started with: a shared host's
//! `ulimit -v 4194304` below the default 8 GiB is taken, and said, rather than refused
//! (raising a limit back is not allowed, and would undo the host's own).

use std::time::Duration;

use crate::sys::{self, Resource};

/// A bound in force: what was asked, or the lower limit the process already had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound<T> {
    pub value: T,
    /// The process's own limit was lower than what was asked, so it is the bound.
    pub inherited: bool,
}

impl<T: Ord + Copy> Bound<T> {
    /// The lower of `asked` and `had` (`None`: no limit).
    pub fn lower_of(asked: T, had: Option<T>) -> Bound<T> {
        match had {
            Some(had) if had < asked => Bound {
                value: had,
                inherited: true,
            },
            _ => Bound {
                value: asked,
                inherited: false,
            },
        }
    }
}

impl Bound<u64> {
    /// When the process's own limit is the bound: that, in words, against what was
    /// `asked` (a flag and its value).
    pub fn memory_note(&self, asked: &str) -> Option<String> {
        self.inherited.then(|| {
            format!(
                "memory bound {}, the address space limit it was started with (below {asked})",
                bytes_text(self.value)
            )
        })
    }
}

impl Bound<Duration> {
    /// When the process's own CPU time limit is the bound: that, in words, against what
    /// was `asked`.
    pub fn time_note(&self, asked: &str) -> Option<String> {
        self.inherited.then(|| {
            format!(
                "time bound {} s, the CPU time limit it was started with (below {asked})",
                self.value.as_secs()
            )
        })
    }
}

/// Bytes of address space: `asked`, or the lower `RLIMIT_AS` this process has.
pub fn memory_bound(asked_bytes: u64) -> std::io::Result<Bound<u64>> {
    Ok(Bound::lower_of(
        asked_bytes,
        sys::soft_limit(Resource::AddressSpace)?,
    ))
}

/// Time: `asked`, or the lower CPU time (`RLIMIT_CPU`) this process has, which
/// [`end_at_cpu_limit`] makes end the process with a line rather than without a word.
pub fn time_bound(asked: Duration) -> std::io::Result<Bound<Duration>> {
    let had = sys::soft_limit(Resource::CpuTime)?.map(Duration::from_secs);
    Ok(Bound::lower_of(asked, had))
}

/// When this process has a CPU time limit, reaching it writes `program: stopped after N s
/// of CPU time, ...` to stderr and exits with `code` (the kernel's SIGXCPU would end it
/// with no word at all).
pub fn end_at_cpu_limit(program: &str, code: i32) -> std::io::Result<()> {
    let Some(seconds) = sys::soft_limit(Resource::CpuTime)? else {
        return Ok(());
    };
    let line = format!(
        "{program}: stopped after {seconds} s of CPU time, the CPU time limit it was started with\n"
    );
    sys::end_on_cpu_limit(line, code)
}

/// Caps this process's address space at `bytes` (RLIMIT_AS, soft and hard): past it an
/// allocation fails and the process ends, instead of the machine running out of memory.
/// Take `bytes` from [`memory_bound`]: it is never more than the process has.
pub fn limit_address_space(bytes: u64) -> std::io::Result<()> {
    sys::limit_address_space(bytes)
}

/// `bytes` in GiB (or MiB below one), for the line that says which bound was taken.
pub fn bytes_text(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    match bytes as f64 / MIB {
        mib if mib >= 1024.0 => format!("{:.1} GiB", mib / 1024.0),
        mib => format!("{mib:.1} MiB"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lower_bound_wins_and_says_whose_it_is() {
        let asked = 8u64 << 30;
        assert_eq!(
            Bound::lower_of(asked, Some(4 << 30)),
            Bound {
                value: 4 << 30,
                inherited: true
            }
        );
        assert_eq!(Bound::lower_of(asked, Some(16 << 30)).value, asked);
        assert!(!Bound::lower_of(asked, None).inherited);
        assert!(!Bound::lower_of(asked, Some(asked)).inherited);
        assert_eq!(bytes_text(4 << 30), "4.0 GiB");
        let taken = Bound::lower_of(asked, Some(4 << 30));
        assert_eq!(
            taken.memory_note("--max-memory 8G").unwrap(),
            "memory bound 4.0 GiB, the address space limit it was started with (below --max-memory 8G)"
        );
        assert_eq!(Bound::lower_of(asked, None).memory_note("x"), None);
        assert_eq!(bytes_text(8 << 20), "8.0 MiB");
    }
}

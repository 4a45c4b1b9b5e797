//! The only unsafe code of the crate: `getrlimit`, `setrlimit` and a SIGXCPU handler, for
//! the bounds a binary puts on itself ([`crate::rlimit`]).

use std::io;

/// A resource limit of this process that oscil bounds itself by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// `RLIMIT_AS`, bytes of address space.
    AddressSpace,
    /// `RLIMIT_CPU`, seconds of CPU time.
    CpuTime,
}

/// `resource`'s soft limit now; `None` when unlimited.
pub fn soft_limit(resource: Resource) -> io::Result<Option<u64>> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit for the whole call.
    let rc = unsafe {
        match resource {
            Resource::AddressSpace => libc::getrlimit(libc::RLIMIT_AS, &mut limit),
            Resource::CpuTime => libc::getrlimit(libc::RLIMIT_CPU, &mut limit),
        }
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur))
}

/// Sets this process's address space limit, soft and hard, to `bytes` (lowering the hard
/// limit is always allowed; raising it is not, without privilege).
pub fn limit_address_space(bytes: u64) -> io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: setrlimit reads the struct we pass and nothing else.
    match unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// The line [`end_on_cpu_limit`]'s handler writes, and the exit code.
static CPU_LIMIT_END: std::sync::OnceLock<(Box<[u8]>, i32)> = std::sync::OnceLock::new();

extern "C" fn on_cpu_limit(_: libc::c_int) {
    if let Some((line, code)) = CPU_LIMIT_END.get() {
        // SAFETY: write and _exit are async-signal-safe; `line` lives for the process.
        unsafe {
            libc::write(2, line.as_ptr().cast(), line.len());
            libc::_exit(*code);
        }
    }
}

/// From now on SIGXCPU (the soft `RLIMIT_CPU` reached) writes `line` to stderr and ends
/// the process with `code`, instead of the default silent death. Only the first call's
/// line is kept.
pub fn end_on_cpu_limit(line: String, code: i32) -> io::Result<()> {
    let _ = CPU_LIMIT_END.set((line.into_bytes().into_boxed_slice(), code));
    // SAFETY: the handler only reads a value set before it is installed, then writes
    // and exits.
    let previous = unsafe {
        libc::signal(
            libc::SIGXCPU,
            on_cpu_limit as extern "C" fn(libc::c_int) as libc::sighandler_t,
        )
    };
    match previous == libc::SIG_ERR {
        true => Err(io::Error::last_os_error()),
        false => Ok(()),
    }
}

//! The one system call std does not wrap that the report needs: capping its own memory.
#![allow(unsafe_code)]

/// Caps this process's address space at `bytes` (RLIMIT_AS, soft and hard): past it an
/// allocation fails and the report ends, instead of the machine running out of memory.
pub fn limit_address_space(bytes: u64) -> std::io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: setrlimit reads the struct we pass and nothing else.
    match unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

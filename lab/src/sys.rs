//! The system calls std does not wrap that the lab needs: noticing a stop signal sent to
//! its own process, signalling a child by PID, bounding a child's memory, and waiting for
//! a stream with a deadline.
#![allow(unsafe_code)]

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn note_signal(signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP_SIGNAL.store(signal, Ordering::SeqCst);
}

/// From now on SIGINT, SIGTERM and SIGHUP only set a flag that [`stop_signal`] reads, so
/// the lab can finish the current run's bookkeeping and clean up whoever sent them (a
/// terminal, a closed terminal, a supervisor).
pub fn catch_stop_signals() -> std::io::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        let previous = unsafe {
            libc::signal(
                signal,
                note_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
        if previous == libc::SIG_ERR {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The signal that asked the lab to stop, if one came.
pub fn stop_signal() -> Option<i32> {
    match STOP_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// This process's effective user.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail and takes nothing.
    unsafe { libc::geteuid() }
}

/// Sends `signal` to process `pid`.
pub fn kill(pid: u32, signal: i32) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| std::io::Error::other("pid out of range"))?;
    // SAFETY: kill takes plain integers.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Makes `command`'s child start with at most `bytes` of address space (RLIMIT_AS, soft
/// and hard), so an allocation past it fails in the child instead of taking the machine.
pub fn limit_address_space(command: &mut Command, bytes: u64) {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: the closure runs in the child between fork and exec. It calls only
    // setrlimit, which is async-signal-safe, on a value copied in before the fork, and
    // allocates nothing (`last_os_error` holds the errno inline).
    unsafe {
        command.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_AS, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

/// Makes `command`'s child get SIGKILL when the lab dies, even by SIGKILL, so no link,
/// daemon or reader outlives it (PR_SET_PDEATHSIG, kept across exec). The signal comes
/// when the *thread* that spawned the child ends: only threads that outlive their
/// children spawn (the lab's main thread; a fleet pair's thread, which waits for its own).
pub fn die_with_parent(command: &mut Command) {
    // SAFETY: getpid is async-signal-safe and runs before the fork.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the child between fork and exec and calls only prctl and
    // getppid, both async-signal-safe, on plain integers; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The lab died before the prctl took hold: nobody would send the signal.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Waits up to `timeout` for `fd` to have bytes to read (or its end); `false` when the
/// time ran out first.
pub fn wait_readable(
    fd: std::os::fd::BorrowedFd<'_>,
    timeout: std::time::Duration,
) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // Rounded up: poll(2) counts whole milliseconds, and a wait cut to 299 of 300 ms would
    // end a deadline before it is due.
    let ms = libc::c_int::try_from(timeout.as_micros().div_ceil(1000)).unwrap_or(libc::c_int::MAX);
    loop {
        // SAFETY: `poll` is one valid pollfd for the whole call.
        match unsafe { libc::poll(&mut poll, 1, ms) } {
            -1 if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            -1 => return Err(std::io::Error::last_os_error()),
            n => return Ok(n > 0),
        }
    }
}

pub use libc::{SIGINT, SIGKILL, SIGTERM};

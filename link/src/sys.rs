//! The few system calls the emulator needs that std does not wrap: TUN ioctls, setns,
//! ppoll with a nanosecond timeout, per-thread CPU time, and signal waiting.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Opens (creating if needed) the L3 TUN device `name` in the calling thread's network
/// namespace, non-blocking, with a virtio-net header on every packet; with `gso`, the
/// kernel may hand over TCP super-packets of up to 64 KB and checksum-pending packets.
pub fn open_tun(name: &str, gso: bool) -> io::Result<OwnedFd> {
    let path = CString::new("/dev/net/tun").expect("no NUL");
    // SAFETY: path is a valid C string; the returned fd is owned below.
    let raw = check(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: raw is a freshly opened fd that nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.is_empty() || name.len() >= req.ifr_name.len() || name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name {name:?} must be 1 to 15 bytes"),
        ));
    }
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags =
        (libc::IFF_TUN | libc::IFF_NO_PI | libc::IFF_VNET_HDR) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one ifreq, which lives for the call.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req) })?;
    let offload = if gso {
        libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6
    } else {
        0
    };
    // SAFETY: TUNSETOFFLOAD takes its argument by value.
    check(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETOFFLOAD,
            offload as libc::c_ulong,
        )
    })?;
    Ok(fd)
}

/// Moves the calling thread into the network namespace `ns` (an open `/run/netns/NAME`).
pub fn enter_netns(ns: &File) -> io::Result<()> {
    // SAFETY: setns only reads the fd; it affects the calling thread alone.
    check(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) })?;
    Ok(())
}

/// Waits until `fd` is readable or `timeout` has passed, at nanosecond resolution.
/// Returns whether it is readable.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    wait_for(fd, libc::POLLIN, timeout)
}

/// Waits until `fd` is writable (POLLOUT) or `timeout` has passed; whether it is. For
/// tests and tools that write as an event loop does, only when the kernel says "give".
pub fn wait_writable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    wait_for(fd, libc::POLLOUT, timeout)
}

fn wait_for(fd: BorrowedFd<'_>, events: libc::c_short, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd and a valid timespec, both live for the call.
    let ret = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    match check(ret) {
        Ok(n) => Ok(n > 0),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
        Err(e) => Err(e),
    }
}

/// Asks the kernel to wake this thread within `slack_ns` of its timeouts (default 50 µs).
pub fn set_timer_slack(slack_ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes a value and touches only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack_ns as libc::c_ulong, 0, 0, 0) };
}

/// Gives the calling thread real-time (SCHED_FIFO) priority, so compiler jobs on the same
/// cores cannot make deliveries late. The kernel's RT throttling still bounds it.
pub fn set_realtime(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: valid sched_param for the calling thread.
    let ret =
        unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if ret != 0 {
        return Err(io::Error::from_raw_os_error(ret));
    }
    Ok(())
}

/// User and system CPU seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct CpuSeconds {
    pub user_s: f64,
    pub system_s: f64,
}

fn cpu(who: libc::c_int) -> CpuSeconds {
    // SAFETY: rusage is plain old data filled by the call.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage for the call.
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return CpuSeconds::default();
    }
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    CpuSeconds {
        user_s: secs(usage.ru_utime),
        system_s: secs(usage.ru_stime),
    }
}

/// CPU used by the calling thread.
pub fn thread_cpu() -> CpuSeconds {
    cpu(libc::RUSAGE_THREAD)
}

/// CPU used by the whole process.
pub fn process_cpu() -> CpuSeconds {
    cpu(libc::RUSAGE_SELF)
}

fn term_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is filled by sigemptyset before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        set
    }
}

/// Blocks SIGINT and SIGTERM in the calling thread and the threads it spawns later, so
/// that only [`wait_term_signal`] receives them.
pub fn block_term_signals() -> io::Result<()> {
    let set = term_signals();
    // SAFETY: valid sigset; the old mask is not needed.
    let ret = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if ret != 0 {
        return Err(io::Error::from_raw_os_error(ret));
    }
    Ok(())
}

/// Waits up to `timeout` for SIGINT or SIGTERM; returns the signal if one came.
pub fn wait_term_signal(timeout: Duration) -> Option<i32> {
    let set = term_signals();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: valid sigset and timespec; no siginfo wanted.
    let ret = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
    (ret > 0).then_some(ret)
}

//! The only unsafe code of the crate: thin wrappers over `getsockopt`, `setsockopt`,
//! `sysconf` and the like, each taking a borrowed fd so the socket outlives the call.

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsRawFd, BorrowedFd};

/// `SO_COOKIE` (asm-generic/socket.h; the libc crate exports it only for some targets).
pub const SO_COOKIE: libc::c_int = 57;

/// Number of `SK_MEMINFO_*` slots the kernel fills for `SO_MEMINFO` (`SK_MEMINFO_VARS`).
pub const SK_MEMINFO_VARS: usize = 9;

/// `getsockopt(TCP_INFO)`. Returns the struct and the number of bytes the kernel filled;
/// fields past that length stay zero (older kernels return a shorter struct).
pub fn tcp_info(fd: BorrowedFd<'_>) -> io::Result<(libc::tcp_info, usize)> {
    let mut info = MaybeUninit::<libc::tcp_info>::zeroed();
    let mut len = size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is a zeroed, writable buffer of `len` bytes, valid for the whole call;
    // `tcp_info` is plain data, so any bytes the kernel writes are a valid value.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: zero-initialised plain data, possibly partly overwritten by the kernel.
    Ok((unsafe { info.assume_init() }, len as usize))
}

/// `poll(2)` on one descriptor with no wait: the events of `events` it reports now.
pub fn poll_now(fd: BorrowedFd<'_>, events: libc::c_short) -> io::Result<libc::c_short> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd, live for the call; a zero timeout never blocks.
    match unsafe { libc::poll(&mut pfd, 1, 0) } {
        n if n < 0 => Err(io::Error::last_os_error()),
        _ => Ok(pfd.revents),
    }
}

/// A `struct tcp_info` from the bytes of a sock_diag `INET_DIAG_INFO` attribute: the
/// same layout `getsockopt` fills. Returns it and how many bytes were given.
pub fn tcp_info_from_bytes(bytes: &[u8]) -> (libc::tcp_info, usize) {
    let mut info = MaybeUninit::<libc::tcp_info>::zeroed();
    let len = bytes.len().min(size_of::<libc::tcp_info>());
    // SAFETY: at most `size_of::<tcp_info>()` bytes are copied into the zeroed struct, which
    // does not overlap `bytes`; `tcp_info` is plain data, so any bytes are a valid value.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), info.as_mut_ptr().cast::<u8>(), len);
        (info.assume_init(), len)
    }
}

/// `getsockopt(SOL_SOCKET, SO_MEMINFO)`: the socket's `sk_meminfo` array.
pub fn meminfo(fd: BorrowedFd<'_>) -> io::Result<[u32; SK_MEMINFO_VARS]> {
    let mut buf = [0u8; SK_MEMINFO_VARS * 4];
    let len = get_bytes(fd, libc::SOL_SOCKET, libc::SO_MEMINFO, &mut buf)?;
    if len < buf.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("SO_MEMINFO returned {len} bytes, expected {}", buf.len()),
        ));
    }
    let mut out = [0u32; SK_MEMINFO_VARS];
    for (slot, chunk) in out.iter_mut().zip(buf.chunks_exact(4)) {
        *slot = u32::from_ne_bytes(chunk.try_into().expect("chunks of 4"));
    }
    Ok(out)
}

/// `getsockopt` into a byte buffer; returns how many bytes the kernel wrote.
pub fn get_bytes(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` is a writable buffer of `len` bytes, valid for the whole call.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(len as usize)
}

/// `setsockopt` from a byte buffer.
pub fn set_bytes(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    buf: &[u8],
) -> io::Result<()> {
    // SAFETY: `buf` is a readable buffer of the given length, valid for the whole call.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            buf.as_ptr().cast(),
            buf.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `SO_TIMESTAMPING` (asm-generic/socket.h, the 32-bit `timespec` form every 64-bit
/// target uses); the libc crate exports it only for some targets.
pub const SO_TIMESTAMPING: libc::c_int = 37;

/// `sendmsg` of `buf` with one `SO_TIMESTAMPING` control message asking for `tx_flags`
/// timestamps of this write only; never blocks.
pub fn send_with_tx_flags(fd: BorrowedFd<'_>, buf: &[u8], tx_flags: u32) -> io::Result<usize> {
    // u64 words keep the control buffer aligned for `cmsghdr`.
    let mut control = [0u64; 4];
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(size_of::<u32>() as u32) } as usize;
    debug_assert!(space <= size_of::<[u64; 4]>());
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is a valid empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space;
    // SAFETY: `msg` points at `control`, which holds `space` bytes, so CMSG_FIRSTHDR is
    // non-null and its header and 4 data bytes lie inside `control`; `iov` and `buf` outlive
    // the call, and the kernel only reads `buf`.
    let rc = unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = SO_TIMESTAMPING;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u32>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u32>(), tx_flags);
        libc::sendmsg(
            fd.as_raw_fd(),
            &msg,
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc as usize)
}

/// One message of the socket's error queue, reduced to what a TX timestamp says: the
/// `sock_extended_err` and the software timestamp (`scm_timestamping.ts[0]`).
#[derive(Debug, Clone, Copy)]
pub struct ErrQueueEntry {
    pub origin: u8,
    /// `ee_info`: for a timestamp, which one (`SCM_TSTAMP_*`).
    pub info: u32,
    /// `ee_data`: for a timestamp, the `OPT_ID` key.
    pub data: u32,
    pub software: Option<libc::timespec>,
}

/// `recvmsg(MSG_ERRQUEUE)` once, without blocking: `None` when the queue is empty.
pub fn recv_errqueue(fd: BorrowedFd<'_>) -> io::Result<Option<ErrQueueEntry>> {
    let mut control = [0u64; 64];
    // SAFETY: an all-zero msghdr is a valid empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; 64]>();
    // SAFETY: `msg` points at `control`, valid and writable for the whole call; no data
    // buffer is given (OPT_TSONLY queues no payload, and a payload would be truncated).
    let rc = unsafe {
        libc::recvmsg(
            fd.as_raw_fd(),
            &mut msg,
            libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock => Ok(None),
            _ => Err(e),
        };
    }
    let mut entry = ErrQueueEntry {
        origin: 0,
        info: 0,
        data: 0,
        software: None,
    };
    // SAFETY: the kernel filled `msg_controllen` bytes of `control` with well-formed
    // control messages; CMSG_FIRSTHDR/NXTHDR stay inside them, and each payload is read
    // unaligned with the type its level and type say it holds.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            let (level, kind) = ((*cmsg).cmsg_level, (*cmsg).cmsg_type);
            let data = libc::CMSG_DATA(cmsg);
            if level == libc::SOL_SOCKET && kind == SO_TIMESTAMPING {
                let ts = std::ptr::read_unaligned(data.cast::<[libc::timespec; 3]>());
                entry.software = Some(ts[0]);
            } else if (level == libc::SOL_IP && kind == libc::IP_RECVERR)
                || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR)
            {
                let err = std::ptr::read_unaligned(data.cast::<libc::sock_extended_err>());
                (entry.origin, entry.info, entry.data) = (err.ee_origin, err.ee_info, err.ee_data);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok(Some(entry))
}

/// Voluntary and involuntary context switches of every thread of this process, those that
/// ended included (`getrusage(RUSAGE_SELF)`).
pub fn context_switches() -> io::Result<(u64, u64)> {
    let mut usage = MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a writable rusage for the whole call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: zero-initialised plain data, filled by the kernel.
    let usage = unsafe { usage.assume_init() };
    let count = |n: libc::c_long| u64::try_from(n).unwrap_or(0);
    Ok((count(usage.ru_nvcsw), count(usage.ru_nivcsw)))
}

/// CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`): what a piece of work
/// cost, without the time the thread waited for a CPU.
pub fn thread_cpu_time() -> std::time::Duration {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// `CLOCK_MONOTONIC` now: the clock of `Instant` and of a tracefs instance's `mono` clock,
/// so a trace's event times can be put on a run's clock.
pub fn monotonic() -> std::time::Duration {
    clock(libc::CLOCK_MONOTONIC)
}

fn clock(id: libc::clockid_t) -> std::time::Duration {
    let mut ts = MaybeUninit::<libc::timespec>::zeroed();
    // SAFETY: `ts` is a writable timespec for the whole call.
    if unsafe { libc::clock_gettime(id, ts.as_mut_ptr()) } != 0 {
        return std::time::Duration::ZERO;
    }
    // SAFETY: zero-initialised plain data, filled by the kernel.
    let ts = unsafe { ts.assume_init() };
    std::time::Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// The kernel's page size, the unit of `/proc/net/sockstat` `mem`.
pub fn page_size_bytes() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(v).unwrap_or(4096)
}

/// Gives the calling thread the nice value `nice` (lower runs sooner); lowering it below 0
/// needs `CAP_SYS_NICE`, so an unprivileged caller gets `PermissionDenied`.
pub fn set_thread_nice(nice: i32) -> io::Result<()> {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    // SAFETY: setpriority takes plain integers; on Linux PRIO_PROCESS with a thread id
    // applies to that thread alone.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Puts the calling thread in the real-time class `SCHED_FIFO` at the lowest priority:
/// woken, it runs before any ordinary thread. Needs `CAP_SYS_NICE`.
pub fn set_thread_fifo() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: `param` is a valid sched_param for the whole call; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the (soft, hard) limits now in
/// force.
pub fn raise_nofile_limit() -> io::Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit for the whole call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: `limit` is a valid rlimit, read for the whole call.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((limit.rlim_cur, limit.rlim_max))
}

/// CPUs online now (`sysconf(_SC_NPROCESSORS_ONLN)`): a tracefs instance has a ring
/// buffer on each.
pub fn online_cpus() -> u32 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).unwrap_or(1).max(1)
}

/// `mount("nodev", target, "tracefs", 0, NULL)`: the system call itself, so no program is
/// looked up on a `PATH` to do it.
pub fn mount_tracefs(target: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: every pointer is a NUL-terminated string valid for the call, or null for
    // the data tracefs does not need.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// `memfd_create(name, MFD_CLOEXEC)`: an anonymous file in memory.
pub fn memfd_create(name: &std::ffi::CStr) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: `name` is a NUL-terminated string valid for the call.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and is owned by no one else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// `sendfile(out, file, &offset, len)`: returns the bytes the kernel took.
pub fn sendfile(
    out: BorrowedFd<'_>,
    file: BorrowedFd<'_>,
    offset: u64,
    len: usize,
) -> io::Result<usize> {
    let mut off = offset as libc::off_t;
    // SAFETY: both fds are borrowed for the call; `off` is a valid, writable off_t.
    let rc = unsafe { libc::sendfile(out.as_raw_fd(), file.as_raw_fd(), &mut off, len) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_can_lower_its_own_priority() {
        // Raising the nice value needs no privilege; it applies to this thread alone.
        let thread = std::thread::spawn(|| {
            set_thread_nice(5).unwrap();
            // SAFETY: getpriority takes plain integers.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
        });
        assert_eq!(thread.join().unwrap(), 5);
        // SAFETY: as above.
        let mine = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        assert_ne!(mine, 5, "the test thread's own priority is untouched");
    }

    #[test]
    fn a_thread_in_the_real_time_class_is_alone_there() {
        // SAFETY: sched_getscheduler takes a plain integer (0: the calling thread).
        let policy = || unsafe { libc::sched_getscheduler(0) };
        let thread = std::thread::spawn(move || match set_thread_fifo() {
            Ok(()) => Some(policy()),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => None,
            Err(e) => panic!("{e}"),
        });
        match thread.join().unwrap() {
            Some(p) => assert_eq!(p, libc::SCHED_FIFO),
            None => oscil_testkit::skip("SCHED_FIFO needs CAP_SYS_NICE (root)"),
        }
        assert_eq!(
            policy(),
            libc::SCHED_OTHER,
            "the test thread's class is untouched"
        );
    }

    #[test]
    fn nofile_soft_limit_reaches_the_hard_limit() {
        let (soft, hard) = raise_nofile_limit().unwrap();
        assert_eq!(soft, hard);
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
        let line = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[3], soft.to_string(), "{line}");
        assert_eq!(words[4], hard.to_string(), "{line}");
    }
}

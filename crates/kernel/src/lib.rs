//! The operating system, and only it: the kernel's view of a TCP socket and a host
//! (`TCP_INFO`, `SO_MEMINFO`, sock_diag, socket options, `/proc/net/sockstat`, `TcpExt`,
//! sysctls), the sampling clock, tracefs and the per-ACK tracer; each answer turned into
//! the model's types (`oscil-model`). Linux only. Every unit is in the field name; rates
//! are bits per second.

#[allow(unsafe_code)]
mod sys;

pub mod host;
pub mod rows;
pub mod socket;
pub mod ticker;
pub mod trace;

pub use host::netstat::TcpExt;
pub use host::proc::{ParseError, ProcFile, ReadError};
pub use socket::meminfo::SkMemInfo;
pub use socket::sockopt::SockoptError;
/// CPUs online now: a tracefs instance keeps a ring buffer on each.
pub use sys::online_cpus;
/// Run at start by servers: a flood of connections then meets the caps a server sets, not
/// the default soft limit of 1,024 descriptors.
pub use sys::raise_nofile_limit;

/// Run by each sampler thread at start: on a host whose cores the data path keeps busy, a
/// sampler at the default priority wakes tens of milliseconds late, and at nice -10 still
/// up to several (at 10 ms, tens of intervals merged per 4 s run over loopback); in the
/// lowest real-time class its p99 lateness stays under 1 ms. Its work per tick is short and
/// it sleeps between ticks, so it cannot starve the data path. Needs `CAP_SYS_NICE` (root
/// has it); without it the sampler falls back to nice -10, then to the default, and says so
/// in `run.json` (tick lateness).
pub fn prioritise_this_thread() -> std::io::Result<()> {
    sys::set_thread_fifo().or_else(|_| sys::set_thread_nice(SAMPLER_NICE))
}

/// Whether `poll(2)` says `socket` is writable now, as an event loop asks before each write.
/// For TCP that is the kernel's `tcp_poll`: the queue at most two thirds of `SO_SNDBUF`, and
/// the unsent bytes under half of `TCP_NOTSENT_LOWAT`. Asking also tells the kernel someone
/// waits (`SOCK_NOSPACE`) when it is not, so the next freed space raises POLLOUT for epoll.
pub fn polls_writable(socket: &impl std::os::fd::AsFd) -> std::io::Result<bool> {
    let revents = sys::poll_now(socket.as_fd(), libc::POLLOUT)?;
    Ok(revents & libc::POLLOUT != 0)
}

/// The nice value of a sampler thread outside the real-time class: ahead of the data path.
const SAMPLER_NICE: i32 = -10;
pub use socket::tcp_info::TcpInfo;

#[cfg(test)]
mod test_util {
    use std::net::{TcpListener, TcpStream};

    /// A connected loopback TCP pair: (client, server).
    pub fn loopback_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }
}

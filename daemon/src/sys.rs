//! The only unsafe code of the daemon: registering a descriptor of its own with tokio.

use std::io;
use std::os::fd::OwnedFd;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Registers `fd` with tokio's reactor for write readiness.
pub(crate) fn register_writable(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the `AsyncFd` owns `fd` and only gives it back through `into_inner`, which
    // deregisters it first; nothing closes or replaces the descriptor while registered.
    unsafe { AsyncFd::register_with_interest(fd, Interest::WRITABLE) }.map_err(io::Error::from)
}

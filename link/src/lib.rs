//! A userspace long-haul link emulator over TUN: delay, rate with a bounded queue, loss

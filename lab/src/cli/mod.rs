//! The command line: the flags, each typed by clap (`args`), and their translation into a
//! [`crate::config::Job`] (`job`), checked with the same parsers and rules as the binaries
//! before anything exists on any host.

mod args;
mod job;
#[cfg(test)]
mod tests;

pub use args::{Cli, MarkerEvery, OrderArg, ReadPattern, Receiver, Sub, ValueError};
pub use job::{check_congestion_available, CliError};

//! Standard output as every binary writes it. `println!` panics when stdout is a pipe whose
//! reader left (`| head -1`) or a full disk (`> /dev/full`); here a failed write is kept,
//! later writes are skipped, and [`finish`] turns it into the exit (docs/cli.md): a closed
//! pipe ends quietly with the code the work earned, any other failure is one line on
//! stderr and exit 1. The work itself (a run, a campaign and its restore) goes on either way.

use std::fmt;
use std::io::Write;
use std::process::ExitCode;
use std::sync::OnceLock;

use crate::exit;

/// The first write to stdout that failed, if one did.
static FAILED: OnceLock<std::io::Error> = OnceLock::new();

/// Writes `args` to stdout, unless an earlier write failed.
pub fn write_fmt(args: fmt::Arguments<'_>) {
    if FAILED.get().is_none() {
        let written = std::io::stdout().lock().write_fmt(args);
        written.unwrap_or_else(failed);
    }
}

/// Writes `bytes` to stdout, unless an earlier write failed.
pub fn write_bytes(bytes: &[u8]) {
    if FAILED.get().is_none() {
        let written = std::io::stdout().lock().write_all(bytes);
        written.unwrap_or_else(failed);
    }
}

/// Pushes what was written out now (a stream's line must reach its reader at once),
/// unless an earlier write failed.
pub fn flush() {
    if FAILED.get().is_none() {
        let flushed = std::io::stdout().lock().flush();
        flushed.unwrap_or_else(failed);
    }
}

/// Why writing stdout failed, if it has: `BrokenPipe` when its reader left.
pub fn failure() -> Option<std::io::ErrorKind> {
    FAILED.get().map(std::io::Error::kind)
}

/// Keeps `error` as stdout's failure (the first one counts), for a writer of its own that
/// failed (clap's help, a man page).
pub fn failed(error: std::io::Error) {
    let _ = FAILED.set(error);
}

/// `print!` that never panics: see the module's doc.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::stdout::write_fmt(format_args!($($arg)*)) };
}

/// `println!` that never panics: see the module's doc.
#[macro_export]
macro_rules! outln {
    () => { $crate::stdout::write_bytes(b"\n") };
    ($($arg:tt)*) => { $crate::stdout::write_fmt(format_args!("{}\n", format_args!($($arg)*))) };
}

/// The exit of a binary whose work ended with `code`: stdout flushed, then `code` itself
/// when every write went through or the pipe was closed by its reader (that reader chose to
/// stop reading; the work was done), else one line, `PROG: cannot write to standard
/// output: why`, and [`exit::FAILED_START`] (or `code`, when that already says worse).
pub fn finish(program: &str, code: u8) -> ExitCode {
    ExitCode::from(settle(program, code))
}

/// [`finish`] as a number, for `std::process::exit`.
pub fn settle(program: &str, code: u8) -> u8 {
    flush();
    exit_code(program, code, FAILED.get())
}

/// [`finish`]'s rule, apart from the process's stdout.
fn exit_code(program: &str, code: u8, failure: Option<&std::io::Error>) -> u8 {
    match failure {
        None => code,
        Some(error) if error.kind() == std::io::ErrorKind::BrokenPipe => code,
        Some(error) => {
            let _ = writeln!(
                std::io::stderr(),
                "{program}: cannot write to standard output: {}",
                oscil_model::error_text::os_error(error)
            );
            match code {
                exit::OK => exit::FAILED_START,
                worse => worse,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error, ErrorKind};

    #[test]
    fn a_closed_pipe_keeps_the_works_code_and_a_full_disk_fails() {
        assert_eq!(exit_code("p", exit::OK, None), exit::OK);
        let closed = Error::from(ErrorKind::BrokenPipe);
        assert_eq!(exit_code("p", exit::OK, Some(&closed)), exit::OK);
        assert_eq!(
            exit_code("p", exit::CUT_SHORT, Some(&closed)),
            exit::CUT_SHORT
        );
        let full = Error::from_raw_os_error(28);
        assert_eq!(exit_code("p", exit::OK, Some(&full)), exit::FAILED_START);
        assert_eq!(
            exit_code("p", exit::CUT_SHORT, Some(&full)),
            exit::CUT_SHORT
        );
    }
}

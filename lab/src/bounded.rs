//! A child the lab runs on data it does not trust (the report over run directories that a
//! remote host or another user shaped), bounded in time and memory: whatever slips past
//! the readers' checks, the lab goes on and says what happened.

use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::sys;

/// How long the campaign's report may take: a report of 1,000 flows over 60 s takes well
/// under a minute.
pub const REPORT_TIME: Duration = Duration::from_secs(20 * 60);
/// The report's address space: ample for the largest campaign it reads (its inputs are
/// bounded by what each run.json declares), far below what would starve the machine.
pub const REPORT_MEMORY_BYTES: u64 = 8 << 30;

#[derive(Debug, thiserror::Error)]
pub enum BoundedError {
    #[error("{program}: cannot run: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{program}: stopped after {limit:?}, its time limit")]
    TimedOut { program: String, limit: Duration },
    #[error("{program}: {status} (its memory limit is {limit_bytes} bytes of address space)")]
    Failed {
        program: String,
        status: ExitStatus,
        limit_bytes: u64,
    },
}

/// Runs `command` to its end with at most `memory_bytes` of address space and `time` of
/// wall-clock time (then SIGKILL), its output discarded.
pub fn run_bounded(
    mut command: Command,
    time: Duration,
    memory_bytes: u64,
) -> Result<(), BoundedError> {
    let program = command.get_program().to_string_lossy().into_owned();
    sys::limit_address_space(&mut command, memory_bytes);
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|source| BoundedError::Spawn {
            program: program.clone(),
            source,
        })?;
    let deadline = Instant::now() + time;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(BoundedError::TimedOut {
                    program,
                    limit: time,
                });
            }
        }
    };
    match status.success() {
        true => Ok(()),
        false => Err(BoundedError::Failed {
            program,
            status,
            limit_bytes: memory_bytes,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_past_its_time_is_stopped() {
        let mut sleep = Command::new("sleep");
        sleep.arg("30");
        let started = Instant::now();
        let err = run_bounded(sleep, Duration::from_millis(300), 1 << 30).unwrap_err();
        assert!(matches!(err, BoundedError::TimedOut { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    /// `tail` of /dev/zero keeps one endless line: without a bound it grows until the
    /// machine runs out of memory; with 64 MiB it fails within a moment.
    #[test]
    fn a_child_past_its_memory_fails_and_is_told() {
        let mut tail = Command::new("tail");
        tail.arg("/dev/zero").stderr(Stdio::null());
        let started = Instant::now();
        let err = run_bounded(tail, Duration::from_secs(30), 64 << 20).unwrap_err();
        assert!(matches!(err, BoundedError::Failed { .. }), "{err}");
        assert!(
            err.to_string().contains("67108864 bytes of address space"),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_child_within_its_bounds_runs_to_its_end() {
        let mut echo = Command::new("true");
        echo.arg("ok");
        run_bounded(echo, Duration::from_secs(10), 1 << 30).unwrap();
    }
}

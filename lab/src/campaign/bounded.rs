//! A child the lab runs on data it does not trust (the report over run directories that a
//! remote host or another user shaped), bounded in time and memory: whatever slips past
//! the readers' checks, the lab goes on and says what happened.

use std::io::{BufRead, BufReader, Read, Seek};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use oscil_cli::rlimit::{self, Bound};

use crate::progress::{self, ProgressMode};
use crate::sys;

/// How long the campaign's report may take: a report of 1,000 flows over 60 s takes well
/// under a minute.
pub const REPORT_TIME: Duration = Duration::from_secs(20 * 60);
/// The report's address space: ample for the largest campaign it reads (its inputs are
/// bounded by what each run.json declares), far below what would starve the machine.
pub const REPORT_MEMORY_BYTES: u64 = 8 << 30;
/// How long the report may take for the lab's words on one run or the end table: it loads
/// the runs and draws nothing, a fraction of the report's own time.
pub const WORDS_TIME: Duration = Duration::from_secs(5 * 60);
/// The most of the report's words the lab reads: an end table of 10,000 configurations.
const MAX_WORDS_BYTES: u64 = 4 << 20;

/// A child's bounds: what the lab asks, or the lower limits the lab itself was started
/// with (which the child inherits, and which the lab cannot raise).
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub time: Bound<Duration>,
    pub memory: Bound<u64>,
}

impl Bounds {
    pub fn lower_of(time: Duration, memory_bytes: u64) -> std::io::Result<Bounds> {
        Ok(Bounds {
            time: rlimit::time_bound(time)?,
            memory: rlimit::memory_bound(memory_bytes)?,
        })
    }

    /// The bounds taken instead of those asked (`time`, `memory_bytes`), in words.
    pub fn notes(&self, time: Duration, memory_bytes: u64) -> Vec<String> {
        let memory = format!("the lab's {}", rlimit::bytes_text(memory_bytes));
        let time = format!("the lab's {} s", time.as_secs());
        [self.memory.memory_note(&memory), self.time.time_note(&time)]
            .into_iter()
            .flatten()
            .collect()
    }

    /// Gives the report `command` these bounds as its own too, so it says nothing of them
    /// a second time.
    pub fn apply_to_report(&self, command: &mut Command) {
        command
            .arg(format!("--max-memory={}", self.memory.value))
            .arg(format!("--max-time={}s", self.time.value.as_secs().max(1)));
    }
}

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
/// wall-clock time (then SIGKILL), its output discarded. Take both from [`Bounds`]: a
/// child cannot be given more than the lab has.
pub fn run_bounded(
    command: Command,
    time: Duration,
    memory_bytes: u64,
) -> Result<(), BoundedError> {
    run_with_stdout(command, time, memory_bytes, Stdio::null())
}

/// The lab's words from the report, written by the report itself in a bounded child
/// (`oscil-report --end-table DIR`): the end table of the campaign in `dir`, or one line
/// of a run's figures. The lab parses no run directory's figures itself.
pub fn report_words(bin: &Path, dir: &Path) -> Result<String, BoundedError> {
    let program = bin.join("oscil-report");
    let spawn_error = |source| BoundedError::Spawn {
        program: program.display().to_string(),
        source,
    };
    // Unnamed: nothing to clean up, no path another user could plant.
    let mut out = tempfile::tempfile().map_err(spawn_error)?;
    let stdout = out.try_clone().map_err(spawn_error)?;
    let bounds = Bounds::lower_of(WORDS_TIME, REPORT_MEMORY_BYTES).map_err(spawn_error)?;
    let mut command = Command::new(&program);
    command.arg("--end-table").arg(dir);
    bounds.apply_to_report(&mut command);
    run_with_stdout(
        command,
        bounds.time.value,
        bounds.memory.value,
        Stdio::from(stdout),
    )?;
    let mut words = Vec::new();
    out.rewind()
        .and_then(|()| out.take(MAX_WORDS_BYTES).read_to_end(&mut words))
        .map_err(spawn_error)?;
    Ok(String::from_utf8_lossy(&words).into_owned())
}

fn run_with_stdout(
    mut command: Command,
    time: Duration,
    memory_bytes: u64,
    stdout: Stdio,
) -> Result<(), BoundedError> {
    let program = command.get_program().to_string_lossy().into_owned();
    sys::limit_address_space(&mut command, memory_bytes);
    sys::die_with_parent(&mut command);
    // With `--progress json` the child's lines on stderr are the lab's messages too.
    let json = progress::mode() == ProgressMode::Json;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(if json {
            Stdio::piped()
        } else {
            Stdio::inherit()
        })
        .spawn()
        .map_err(|source| BoundedError::Spawn {
            program: program.clone(),
            source,
        })?;
    let relay = child.stderr.take().map(|stderr| {
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                progress::say(&line);
            }
        })
    });
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
    if let Some(relay) = relay {
        let _ = relay.join();
    }
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

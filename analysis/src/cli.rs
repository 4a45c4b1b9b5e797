//! The report's command line: its flags (the help text is their doc comments), their
//! conversion into a [`ReportConfig`], the bounds the report puts on itself, and
//! `--end-table`. `main.rs` only parses, calls the library and maps the error to an exit code.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use oscil_cli::placeholder;
use oscil_cli::rlimit;
use oscil_cli::units::{parse_bytes, parse_percent, parse_positive_duration, UnitError};

use crate::charts::time_sequence::Span;
use crate::error::ReportError;
use crate::load::input;
use crate::load::summary::Scope;
use crate::options::ReportConfig;
use crate::write::end_table;

/// Turns oscil run directories and campaigns into PNG charts (one per run, a comparison
/// across configurations, bloat against RTT when the paths differ), tables
/// (summary.csv, configurations.csv, cycles.csv), verdicts with 95% intervals, an optional
/// recommendation, and index.html.
#[derive(Debug, Parser)]
#[command(version, allow_negative_numbers = true, args_override_self = true)]
pub struct Cli {
    /// Run directories written by oscil-reader, or campaign directories written by
    /// oscil-lab (their complete runs).
    #[arg(value_parser = oscil_cli::files::path, required = true, value_name = "RUN_OR_CAMPAIGN_DIR")]
    pub run_dirs: Vec<PathBuf>,
    /// Where to write the report (created if missing; default: CAMPAIGN/report for one
    /// campaign, else ./report).
    #[arg(value_parser = oscil_cli::files::path, long, short = 'o', value_name = placeholder::DIR)]
    out: Option<PathBuf>,
    /// Write into a used --out, removing only the files an earlier report wrote there.
    #[arg(long)]
    force: bool,
    /// The configuration (or the run) the others are compared with (default: the
    /// configuration with the kernel's default notsent lowat on the same path).
    #[arg(long, value_name = "NAME")]
    baseline: Option<String>,
    /// Judge and recommend on figures over every cycle instead of the steady cycles (2 and
    /// later).
    #[arg(long)]
    whole_run: bool,
    /// Write recommendation.md and 99-oscil-tcp.conf: per path, the least sender memory
    /// whose goodput is not clearly below the best's.
    #[arg(long)]
    recommend: bool,
    /// How far below the best configuration's goodput a recommendation may be, in percent
    /// (1% or 1) [default: 1%].
    #[arg(long, value_parser = parse_percent, value_name = "PCT")]
    goodput_tolerance: Option<f64>,
    /// Stop with an error after this long, whatever the input (run directories may come
    /// from hosts or users that are not trusted).
    #[arg(long, default_value = "20m", value_parser = parse_positive_duration, value_name = "DUR")]
    max_time: Duration,
    /// The most memory (address space) the report may take; past it, it stops with an error
    /// (at least 128M: its code, its threads' stacks and heaps take that much).
    #[arg(long, default_value = "8G", value_parser = parse_memory_limit, value_name = "BYTES")]
    max_memory: u64,
    /// The span of traced runs' (--trace) time-sequence pictures, as FROM..TO since the
    /// run's start (20s..26s) [default: 2 s before to 3 s after each fast phase's start].
    #[arg(long, value_name = "FROM..TO")]
    zoom: Option<Span>,
    /// Also write each run's and each configuration's headline figures for Prometheus, in
    /// the OpenMetrics text format, into DIR (node_exporter's textfile collector reads it):
    /// oscil-run-<run>.prom and oscil-campaign.prom.
    #[arg(value_parser = oscil_cli::files::path, long, value_name = placeholder::DIR)]
    metrics: Option<PathBuf>,
    /// Print oscil-lab's end table of a campaign directory (runs, network goodput of the
    /// fast phases and slow-phase queued bytes per configuration, against the baseline), or
    /// the line of a run directory's figures, and write nothing else.
    #[arg(long, conflicts_with_all = ["out", "force", "baseline", "whole_run", "recommend", "zoom", "metrics"])]
    pub end_table: bool,
}

/// `--goodput-tolerance` unless given: 1%.
const DEFAULT_GOODPUT_TOLERANCE: f64 = 0.01;

/// Less address space than any report needs: below it, a limit fails as an allocation
/// abort or a thread that cannot start (64M did, on one 1 s run with two workers; 128M
/// drew it), whatever the input.
const MIN_MEMORY_BYTES: u64 = 128 << 20;

/// A `--max-memory` clap refuses: not a size, or too small for any report.
#[derive(Debug, thiserror::Error)]
pub enum MemoryLimitError {
    /// Not a size.
    #[error(transparent)]
    Size(#[from] UnitError),
    /// Below [`MIN_MEMORY_BYTES`].
    #[error("{0} is less than any report needs: give at least 128M (its code, its threads' stacks and heaps take that much address space)")]
    TooSmall(String),
}

/// `--max-memory`: a size of at least [`MIN_MEMORY_BYTES`].
fn parse_memory_limit(input: &str) -> Result<u64, MemoryLimitError> {
    match parse_bytes(input)? {
        bytes if bytes < MIN_MEMORY_BYTES => Err(MemoryLimitError::TooSmall(input.to_owned())),
        bytes => Ok(bytes),
    }
}

/// Flags that cannot work as given, found before the report is made (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// `--goodput-tolerance` without `--recommend`: a flag that would do nothing.
    #[error("--goodput-tolerance sets how far below the best goodput --recommend may choose: add --recommend (see oscil-report --help)")]
    ToleranceWithoutRecommend,
    /// `--metrics DIR` that could not be written, found before the report rather than after.
    #[error(transparent)]
    Metrics(#[from] oscil_cli::files::OutputFileError),
}

/// Why `--end-table` stopped.
#[derive(Debug, thiserror::Error)]
pub enum EndTableError {
    /// A directory could not be read as a run or a campaign.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// Standard output went away (a closed pipe): nothing more to say.
    #[error("cannot write to stdout: {0}")]
    Stdout(std::io::Error),
}

/// `--end-table`: the lab's words, for each directory given.
pub fn print_end_tables(dirs: &[PathBuf]) -> Result<(), EndTableError> {
    use std::io::Write;
    for dir in dirs {
        let words = end_table::words(dir)?;
        write!(std::io::stdout(), "{words}").map_err(EndTableError::Stdout)?;
    }
    Ok(())
}

/// Ends the process with one line once `limit` has passed.
fn watchdog(limit: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!(
            "oscil-report: stopped after {}, its time limit (--max-time)",
            humantime::format_duration(limit)
        );
        std::process::exit(oscil_cli::exit::FAILED_START.into());
    });
}

/// Bounds the report by `--max-time` and `--max-memory`, and by the lower limits it was
/// started with (a CPU time limit ends it with a line too), and says which it took when
/// they are not the ones asked.
pub fn bound_itself(cli: &Cli) -> std::io::Result<()> {
    watchdog(cli.max_time);
    rlimit::end_at_cpu_limit("oscil-report", oscil_cli::exit::FAILED_START.into())?;
    let time = rlimit::time_bound(cli.max_time)?;
    let memory = rlimit::memory_bound(cli.max_memory)?;
    rlimit::limit_address_space(memory.value)?;
    let asked_memory = format!("--max-memory {}", rlimit::bytes_text(cli.max_memory));
    let asked_time = format!("--max-time {}", humantime::format_duration(cli.max_time));
    let notes = [
        memory.memory_note(&asked_memory),
        time.time_note(&asked_time),
    ];
    for note in notes.into_iter().flatten() {
        eprintln!("oscil-report: {note}");
    }
    Ok(())
}

impl Cli {
    /// Refuses a flag that would do nothing beside the others, and a `--metrics` that
    /// could not be written.
    pub fn check(&self) -> Result<(), CheckError> {
        if !self.recommend && self.goodput_tolerance.is_some() {
            return Err(CheckError::ToleranceWithoutRecommend);
        }
        if let Some(dir) = &self.metrics {
            oscil_cli::files::check_writable_dir("--metrics", dir)?;
        }
        Ok(())
    }

    /// The report asked for.
    pub fn into_config(self) -> ReportConfig {
        ReportConfig {
            out_dir: self
                .out
                .unwrap_or_else(|| input::default_out(&self.run_dirs)),
            run_dirs: self.run_dirs,
            baseline: self.baseline,
            scope: if self.whole_run {
                Scope::Whole
            } else {
                Scope::Steady
            },
            recommend: self
                .recommend
                .then_some(self.goodput_tolerance.unwrap_or(DEFAULT_GOODPUT_TOLERANCE)),
            force: self.force,
            zoom: self.zoom,
            metrics_dir: self.metrics,
        }
    }
}

//! `oscil-report RUN_OR_CAMPAIGN_DIR... [--out DIR] [--baseline NAME] [--recommend]`
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use oscil_cli::placeholder;
use oscil_cli::units::{parse_bytes, parse_percent, parse_positive_duration};
use oscil_kernel::rlimit;
use oscil_report::charts::time_sequence::Span;
use oscil_report::load::input;
use oscil_report::load::summary::Scope;
use oscil_report::{report, ReportConfig, ReportError};
use std::time::Duration;

/// Turns oscil run directories and campaigns into PNG charts (one per run, a comparison
/// across configurations, bloat against RTT when the paths differ), tables
/// (summary.csv, configurations.csv, cycles.csv), verdicts with 95% intervals, an optional
/// recommendation, and index.html.
#[derive(Debug, Parser)]
#[command(version, allow_negative_numbers = true, args_override_self = true)]
struct Cli {
    /// Run directories written by oscil-reader, or campaign directories written by
    /// oscil-lab (their complete runs).
    #[arg(required = true, value_name = "RUN_OR_CAMPAIGN_DIR")]
    run_dirs: Vec<PathBuf>,
    /// Where to write the report (created if missing; default: CAMPAIGN/report for one
    /// campaign, else ./report).
    #[arg(long, short = 'o', value_name = placeholder::DIR)]
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
    #[arg(long, value_name = placeholder::DIR)]
    metrics: Option<PathBuf>,
    /// Print oscil-lab's end table of a campaign directory (runs, network goodput of the
    /// fast phases and slow-phase queued bytes per configuration, against the baseline), or
    /// the line of a run directory's figures, and write nothing else.
    #[arg(long, conflicts_with_all = ["out", "force", "baseline", "whole_run", "recommend", "zoom", "metrics"])]
    end_table: bool,
}

/// `--goodput-tolerance` unless given: 1%.
const DEFAULT_GOODPUT_TOLERANCE: f64 = 0.01;

/// Less address space than any report needs: below it, a limit fails as an allocation
/// abort or a thread that cannot start (64M did, on one 1 s run with two workers; 128M
/// drew it), whatever the input.
const MIN_MEMORY_BYTES: u64 = 128 << 20;

/// `--max-memory`: a size of at least [`MIN_MEMORY_BYTES`].
fn parse_memory_limit(input: &str) -> Result<u64, String> {
    match parse_bytes(input).map_err(|e| e.to_string())? {
        bytes if bytes < MIN_MEMORY_BYTES => Err(format!(
            "{input} is less than any report needs: give at least 128M (its code, its threads' stacks and heaps take that much address space)"
        )),
        bytes => Ok(bytes),
    }
}

/// `--end-table`: the lab's words, for each directory given.
fn end_table(dirs: &[PathBuf]) -> ExitCode {
    use std::io::Write;
    for dir in dirs {
        let words = match oscil_report::write::end_table::words(dir) {
            Ok(words) => words,
            Err(err) => {
                eprintln!(
                    "oscil-report: {}",
                    oscil_model::error_text::error_line(&err)
                );
                return ExitCode::from(oscil_cli::exit::FAILED_START);
            }
        };
        if write!(std::io::stdout(), "{words}").is_err() {
            return ExitCode::from(oscil_cli::exit::FAILED_START);
        }
    }
    ExitCode::SUCCESS
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
fn bound_itself(cli: &Cli) -> std::io::Result<()> {
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

fn main() -> ExitCode {
    let cli: Cli = oscil_cli::parse();
    if !cli.recommend && cli.goodput_tolerance.is_some() {
        eprintln!("oscil-report: --goodput-tolerance sets how far below the best goodput --recommend may choose: add --recommend (see oscil-report --help)");
        return ExitCode::from(oscil_cli::exit::USAGE);
    }
    if let Err(e) = bound_itself(&cli) {
        eprintln!(
            "oscil-report: cannot bound its memory and time (--max-memory, --max-time): {}",
            oscil_model::error_text::os_error(&e)
        );
        return ExitCode::from(oscil_cli::exit::FAILED_START);
    }
    if cli.end_table {
        return end_table(&cli.run_dirs);
    }
    let config = ReportConfig {
        out_dir: cli.out.unwrap_or_else(|| input::default_out(&cli.run_dirs)),
        run_dirs: cli.run_dirs,
        baseline: cli.baseline,
        scope: if cli.whole_run {
            Scope::Whole
        } else {
            Scope::Steady
        },
        recommend: cli
            .recommend
            .then_some(cli.goodput_tolerance.unwrap_or(DEFAULT_GOODPUT_TOLERANCE)),
        force: cli.force,
        zoom: cli.zoom,
        metrics_dir: cli.metrics,
    };
    match report(&config) {
        Ok(report) => {
            for warning in &report.warnings {
                eprintln!("oscil-report: warning: {warning}");
            }
            for file in &report.files {
                oscil_cli::outln!("{}", file.display());
            }
            oscil_cli::stdout::finish("oscil-report", oscil_cli::exit::OK)
        }
        Err(err) => {
            eprintln!(
                "oscil-report: {}",
                oscil_model::error_text::error_line(&err)
            );
            // What the command line names and cannot work is a bad value, as in every
            // binary (docs/cli.md); anything else failed on the way.
            let code = match &err {
                ReportError::OutNotEmpty(_) | ReportError::Baseline(_) => oscil_cli::exit::USAGE,
                ReportError::Run(e) if e.is_bad_path() => oscil_cli::exit::USAGE,
                _ => oscil_cli::exit::FAILED_START,
            };
            ExitCode::from(code)
        }
    }
}

//! `oscil-report RUN_OR_CAMPAIGN_DIR... [--out DIR] [--baseline NAME] [--recommend]`
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use oscil_cli::placeholder;
use oscil_cli::units::{parse_bytes, parse_percent, parse_positive_duration};
use oscil_report::summary::Scope;
use oscil_report::time_sequence::Span;
use oscil_report::{input, report, ReportConfig, ReportError};
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
    /// (1% or 1).
    #[arg(long, default_value = "1%", value_parser = parse_percent, value_name = "PCT", requires = "recommend")]
    goodput_tolerance: f64,
    /// Stop with an error after this long, whatever the input (run directories may come
    /// from hosts or users that are not trusted).
    #[arg(long, default_value = "20m", value_parser = parse_positive_duration, value_name = "DUR")]
    max_time: Duration,
    /// The most memory (address space) the report may take; past it, it stops with an error.
    #[arg(long, default_value = "8G", value_parser = parse_bytes, value_name = "BYTES")]
    max_memory: u64,
    /// The span of traced runs' (--trace) time-sequence pictures, as FROM..TO since the
    /// run's start (20s..26s) [default: 2 s before to 3 s after each fast phase's start].
    #[arg(long, value_name = "FROM..TO")]
    zoom: Option<Span>,
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

fn main() -> ExitCode {
    let cli: Cli = oscil_cli::parse();
    watchdog(cli.max_time);
    if let Err(e) = oscil_report::sys::limit_address_space(cli.max_memory) {
        eprintln!("oscil-report: cannot limit its memory (--max-memory): {e}");
        return ExitCode::from(oscil_cli::exit::FAILED_START);
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
        recommend: cli.recommend.then_some(cli.goodput_tolerance),
        force: cli.force,
        zoom: cli.zoom,
    };
    match report(&config) {
        Ok(report) => {
            for warning in &report.warnings {
                eprintln!("oscil-report: warning: {warning}");
            }
            for file in &report.files {
                println!("{}", file.display());
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!(
                "oscil-report: {}",
                oscil_protocol::error_text::error_line(&err)
            );
            let code = match err {
                ReportError::OutNotEmpty(_) | ReportError::Baseline(_) => oscil_cli::exit::USAGE,
                _ => oscil_cli::exit::FAILED_START,
            };
            ExitCode::from(code)
        }
    }
}

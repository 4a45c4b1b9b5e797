//! `oscil-report RUN_DIR... [--out DIR] [--baseline LABEL]`
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use oscil_report::{report, ReportConfig};

/// Turns oscil run directories into PNG charts (one per run, a comparison across runs,
/// and queued bytes against RTT when the paths differ) and summary.md / summary.csv.
#[derive(Debug, Parser)]
#[command(version)]
struct Cli {
    /// Run directories written by oscil-reader.
    #[arg(required = true, value_name = "RUN_DIR")]
    run_dirs: Vec<PathBuf>,
    /// Where to write the charts and tables (created if missing).
    #[arg(long, default_value = "report", value_name = "DIR")]
    out: PathBuf,
    /// The label of the run the others are compared with (default: the run with the
    /// kernel's default notsent lowat on the same path).
    #[arg(long, value_name = "LABEL")]
    baseline: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = ReportConfig {
        run_dirs: cli.run_dirs,
        out_dir: cli.out,
        baseline: cli.baseline,
    };
    match report(&config) {
        Ok(report) => {
            for file in &report.files {
                println!("{}", file.display());
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("oscil-report: {err}");
            ExitCode::FAILURE
        }
    }
}

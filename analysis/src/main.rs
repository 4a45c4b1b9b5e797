//! `oscil-report RUN_OR_CAMPAIGN_DIR... [--out DIR] [--baseline NAME] [--recommend]`: the
//! flags live in the library's `cli` module.

use std::process::ExitCode;

use oscil_model::error_text::{error_line, os_error};
use oscil_report::cli::{bound_itself, print_end_tables, Cli, EndTableError};

fn main() -> ExitCode {
    let cli: Cli = oscil_cli::parse();
    if let Err(e) = cli.check() {
        eprintln!("oscil-report: {e}");
        return ExitCode::from(oscil_cli::exit::USAGE);
    }
    if let Err(e) = bound_itself(&cli) {
        eprintln!(
            "oscil-report: cannot bound its memory and time (--max-memory, --max-time): {}",
            os_error(&e)
        );
        return ExitCode::from(oscil_cli::exit::FAILED_START);
    }
    if cli.end_table {
        return match print_end_tables(&cli.run_dirs) {
            Ok(()) => ExitCode::SUCCESS,
            // A closed stdout leaves nobody to tell.
            Err(EndTableError::Stdout(_)) => ExitCode::from(oscil_cli::exit::FAILED_START),
            Err(EndTableError::Report(e)) => {
                eprintln!("oscil-report: {}", error_line(&e));
                ExitCode::from(oscil_cli::exit::FAILED_START)
            }
        };
    }
    match oscil_report::report(&cli.into_config()) {
        Ok(report) => {
            for warning in &report.warnings {
                eprintln!("oscil-report: warning: {warning}");
            }
            for file in &report.files {
                oscil_cli::outln!("{}", file.display());
            }
            oscil_cli::stdout::finish("oscil-report", oscil_cli::exit::OK)
        }
        Err(e) => {
            eprintln!("oscil-report: {}", error_line(&e));
            ExitCode::from(e.exit_code())
        }
    }
}

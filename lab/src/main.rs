//! `oscil-lab`: flags become a typed job; the library runs it.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::error::ErrorKind;
use clap::Parser;
use oscil_lab::cli::Cli;
use oscil_lab::{bin_dir, run_job, Finished};

fn main() -> ExitCode {
    let now = SystemTime::now();
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let stamp = humantime::format_rfc3339_seconds(now).to_string();
    let default_out = format!(
        "lab-{}-{}",
        stamp[..10].replace('-', ""),
        stamp[11..19].replace(':', "")
    );
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return clap_error(error),
    };
    let job = match cli.into_job(since_epoch.as_nanos() as u64, default_out.into()) {
        Ok(job) => job,
        Err(error) => {
            eprintln!("oscil-lab: {error}");
            return ExitCode::from(2);
        }
    };
    match run_job(job, &bin_dir(), since_epoch.as_millis() as u64) {
        Ok(Finished::Complete) => ExitCode::SUCCESS,
        Ok(Finished::Incomplete) => ExitCode::FAILURE,
        Ok(Finished::Interrupted(signal)) => ExitCode::from(128 + signal as u8),
        Err(error) => {
            eprintln!("oscil-lab: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Help and version as clap prints them; any other flag error in one line, exit 2.
fn clap_error(error: clap::Error) -> ExitCode {
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        let _ = error.print();
        return ExitCode::SUCCESS;
    }
    let text = error.render().to_string();
    let first = text.lines().next().unwrap_or_default();
    eprintln!(
        "oscil-lab: {} (see --help)",
        first.trim_start_matches("error: ")
    );
    ExitCode::from(2)
}

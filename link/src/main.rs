//! `oscil-link`: joins two network namespaces through two TUN devices with an emulated
//! long-haul link (the same delay, rate, queue and loss in both directions). The flags live
//! in the library's `cli` module.

use std::process::ExitCode;

use oscil_link::cli::Cli;

fn main() -> ExitCode {
    let cli: Cli = oscil_cli::parse();
    let (config, stats) = match cli.into_config() {
        Ok(asked) => asked,
        Err(e) => {
            eprintln!("oscil-link: {e}");
            return ExitCode::from(oscil_cli::exit::USAGE);
        }
    };
    match oscil_link::run_until_stopped(config, stats.as_deref()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("oscil-link: {}", oscil_model::error_text::error_line(&e));
            ExitCode::from(oscil_cli::exit::FAILED_START)
        }
    }
}

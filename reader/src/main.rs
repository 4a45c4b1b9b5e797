//! oscil-reader: parses flags, runs one session, prints the summary. The flags and their
//! meaning live in the library's `cli` module.

use std::process::ExitCode;

use oscil_reader::cli::{start_failure_code, with_the_key_named, Args};
use oscil_reader::summary::{self, Output};

fn main() -> ExitCode {
    let args: Args = oscil_cli::parse();
    for warning in args.start_warnings() {
        eprintln!("{warning}");
    }
    let output = args.output();
    // Values clap cannot check alone (a --meta file, the pattern against the interval) are
    // bad flags too: exit 2, nothing started.
    let (config, key_source) = match args.into_config() {
        Ok(config) => config,
        Err(error) => return fail(oscil_cli::exit::USAGE, &error, output),
    };
    match oscil_reader::run_until_stopped(config.clone()) {
        Ok(outcome) => {
            let code = summary::print(&config.out, &outcome.meta, &outcome.summary, output);
            oscil_cli::stdout::finish("oscil-reader", code)
        }
        Err(error) => {
            let code = start_failure_code(&error);
            fail(code, &with_the_key_named(error, key_source), output)
        }
    }
}

/// One line on stderr; with --json also an error object on stdout, as iperf3 -J does (with
/// --json-stream, as its end line).
fn fail(code: u8, error: &anyhow::Error, output: Output) -> ExitCode {
    let line = oscil_model::error_text::error_line(&**error);
    eprintln!("oscil-reader: {line}");
    summary::print_error(code, &line, output);
    oscil_cli::stdout::finish("oscil-reader", code)
}

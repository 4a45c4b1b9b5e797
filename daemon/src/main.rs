//! `oscil-daemon`: the sender end of an oscil test. Flags (the library's `cli` module) become
//! a `DaemonConfig`; the library does the rest.

use std::process::ExitCode;

use oscil_daemon::cli::{Cli, Opening};
use oscil_model::error_text::{error_line, os_error};

#[tokio::main]
async fn main() -> ExitCode {
    let cli: Cli = oscil_cli::parse();
    for warning in cli.start_warnings() {
        eprintln!("{warning}");
    }
    if cli.gen_key {
        return match oscil_daemon::print_new_key() {
            Ok(()) => oscil_cli::stdout::finish("oscil-daemon", oscil_cli::exit::OK),
            Err(e) => fail(
                oscil_cli::exit::FAILED_START,
                format!("cannot read /dev/urandom: {}", os_error(&e)),
            ),
        };
    }
    // Flags that cannot work are usage errors: nothing has started yet.
    let (opening, config, key_source) = match cli.checked() {
        Ok(checked) => checked,
        Err(e) => return fail(oscil_cli::exit::USAGE, error_line(&*e)),
    };
    let key_words = match key_source {
        Some(source) => format!("sessions prove the key from {source}"),
        None => "no key".to_owned(),
    };
    let flows = cli.max_total_flows;
    let served = match opening {
        Opening::Listen(listen) => {
            let port_file = cli.port_file.as_deref();
            oscil_daemon::serve(listen, config, flows, &key_words, port_file).await
        }
        Opening::Connect(reader) => oscil_daemon::dial_out(reader, config, flows, &key_words).await,
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(oscil_cli::exit::FAILED_START, error_line(&*e)),
    }
}

fn fail(code: u8, message: String) -> ExitCode {
    eprintln!("oscil-daemon: {message}");
    ExitCode::from(code)
}

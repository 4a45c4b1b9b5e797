//! `oscil-lab`: flags become a typed job; the library runs it.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use oscil_kernel::socket::congestion::CongestionControls;
use oscil_lab::cli::{check_congestion_available, Cli};
use oscil_lab::progress::{self, Event};
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
    let cli: Cli = oscil_cli::parse();
    progress::set_mode(cli.progress);
    let job = cli
        .into_job(since_epoch.as_nanos() as u64, default_out.into())
        .and_then(|job| {
            check_congestion_available(&job, CongestionControls::of_this_host)?;
            Ok(job)
        });
    let job = match job {
        Ok(job) => job,
        Err(error) => return end(oscil_cli::exit::USAGE, Some(&error.to_string())),
    };
    // The binaries' rule: 1 when runs failed, 3 when the campaign was cut short (it can be
    // resumed), whatever the signal.
    let code = match run_job(job, &bin_dir(), since_epoch.as_millis() as u64) {
        Ok(Finished::Complete) => oscil_cli::exit::OK,
        Ok(Finished::Incomplete) => oscil_cli::exit::FAILED_START,
        Ok(Finished::Interrupted(_)) => oscil_cli::exit::CUT_SHORT,
        Err(error) => {
            progress::say(&format!("oscil-lab: {error}"));
            match error.is_bad_path() {
                true => oscil_cli::exit::USAGE,
                false => oscil_cli::exit::FAILED_START,
            }
        }
    };
    end(code, None)
}

/// The lab's exit: `error` said, stdout settled, and with `--progress json` the last event.
fn end(code: u8, error: Option<&str>) -> ExitCode {
    if let Some(error) = error {
        progress::say(&format!("oscil-lab: {error}"));
    }
    let code = oscil_cli::stdout::settle("oscil-lab", code);
    progress::emit(&Event::End { exit_code: code });
    ExitCode::from(code)
}

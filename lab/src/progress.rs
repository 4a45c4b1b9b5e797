//! How the lab shows its progress (`--progress human|json|none`) and, for `json`, the
//! events: one JSON object a line on stderr, where the human progress goes, defined once
//! here (docs/lab.md lists them). Every other stderr line of the lab goes through [`say`],
//! which in `json` wraps it as a `message` event, so stderr holds only JSON lines.
//!
//! The mode is the process's, set once from the command line before any work, as stderr
//! itself is the process's: every part of the lab that writes a line reads it here.

use std::io::Write;
use std::sync::OnceLock;

use oscil_model::campaign::{CampaignRun, CampaignRunStatus, RunSettings};
use serde::Serialize;

/// How the progress is shown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// A bar on a terminal, a line as each run ends.
    #[default]
    Human,
    /// One JSON object a line on stderr per event; every other line as a `message` event.
    Json,
    /// No bar and no run lines; warnings and errors are still said.
    None,
}

static MODE: OnceLock<ProgressMode> = OnceLock::new();

/// Sets the mode for the whole process; the first call counts.
pub fn set_mode(mode: ProgressMode) {
    let _ = MODE.set(mode);
}

pub fn mode() -> ProgressMode {
    MODE.get().copied().unwrap_or_default()
}

/// One event of `--progress json`.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event<'a> {
    /// A line the human form says (a warning, a calibration, the report's place).
    Message { text: &'a str },
    /// A fleet's round of runs on distinct pairs begins.
    RoundStarted {
        round: usize,
        rounds: usize,
        runs: Vec<u32>,
        eta_s: u64,
    },
    RunStarted {
        #[serde(flatten)]
        run: RunId<'a>,
        settings: &'a RunSettings,
        eta_s: u64,
    },
    RunFinished {
        #[serde(flatten)]
        run: RunId<'a>,
        status: CampaignRunStatus,
        reason: Option<&'a str>,
    },
    /// A spoiled run about to run again.
    Redo {
        #[serde(flatten)]
        run: RunId<'a>,
        why: &'a str,
    },
    /// The lab's last event: its exit code (docs/cli.md).
    End { exit_code: u8 },
}

/// Which run an event is about, as campaign.json names it.
#[derive(Debug, Serialize)]
pub struct RunId<'a> {
    pub position: u32,
    pub label: &'a str,
    pub repetition: u32,
    /// A fleet's pair (`<sender>-to-<receiver>`); `null` on one backend.
    pub pair: Option<&'a str>,
    /// The fleet's round (from 1); `null` on one backend.
    pub round: Option<usize>,
}

impl<'a> RunId<'a> {
    pub fn of(run: &'a CampaignRun, round: Option<usize>) -> Self {
        RunId {
            position: run.position,
            label: &run.label,
            repetition: run.repetition,
            pair: run.pair.as_deref(),
            round,
        }
    }
}

/// Writes `event` as a line on stderr in `json` mode; nothing otherwise. A terminal that
/// went away must not stop the lab's cleanup: a failed write is ignored.
pub fn emit(event: &Event<'_>) {
    if mode() == ProgressMode::Json {
        let line = serde_json::to_string(event).expect("an event serializes");
        let _ = writeln!(std::io::stderr(), "{line}");
    }
}

/// A line on stderr (a `message` event in `json` mode).
pub fn say(text: &str) {
    match mode() {
        ProgressMode::Json => emit(&Event::Message { text }),
        _ => {
            let _ = writeln!(std::io::stderr(), "{text}");
        }
    }
}

/// Whether the human run lines and bar are shown.
pub fn human() -> bool {
    mode() == ProgressMode::Human
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_one_line_objects_named_by_event() {
        let line = serde_json::to_string(&Event::End { exit_code: 3 }).unwrap();
        assert_eq!(line, r#"{"event":"end","exit_code":3}"#);
        let text = "two\nlines";
        let line = serde_json::to_string(&Event::Message { text }).unwrap();
        assert!(!line.contains('\n'), "{line}");
    }
}

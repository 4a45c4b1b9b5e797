//! The live line on a terminal: phase, time left, current throughput.

use std::collections::VecDeque;
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use oscil_model::pattern::PhaseSpan;

/// The bar and the times take 29 columns, the message ([`message`]) the rest of 80.
const TEMPLATE: &str = "{bar:20} {elapsed:>3}/{duration:3} {msg}";

/// `cycle 1/3 fast 4.9 s left, 123.4 Mbit/s`: the phase, and the goodput over the last
/// second.
fn message(span: Option<&PhaseSpan>, cycles: u32, t_s: f64, goodput_bps: f64) -> String {
    let phase = span.map_or("ending".to_string(), |s| {
        format!(
            "cycle {}/{cycles} {} {:.1} s left",
            s.cycle,
            s.phase,
            s.end_s - t_s
        )
    });
    format!("{phase}, {:.1} Mbit/s", goodput_bps / 1e6)
}

/// How the progress is shown: a bar redrawn in place, or, on a terminal that takes no
/// cursor movement (`TERM=dumb`, where indicatif draws nothing), a plain line now and then.
enum Display {
    Bar(ProgressBar),
    /// The phase and the time of the last line written (a new one at each phase, and every
    /// [`PLAIN_EVERY_S`] within one).
    Plain(Mutex<Option<(usize, f64)>>),
}

/// Seconds between two plain lines within one phase.
const PLAIN_EVERY_S: f64 = 5.0;

/// True when `TERM` names a terminal without cursor movement.
fn is_dumb_terminal() -> bool {
    std::env::var("TERM").is_ok_and(|term| term == "dumb")
}

pub struct Progress {
    display: Option<Display>,
    schedule: Vec<PhaseSpan>,
    cycles: u32,
    /// (t_s, bytes) of the last second's samples: a slow phase reads in a burst at the
    /// start of each second, so one interval alone would mostly show zero.
    recent: Mutex<VecDeque<(f64, u64)>>,
}

impl Progress {
    /// Draws only when asked to and stderr is a terminal: a bar, or plain lines on a dumb
    /// terminal.
    pub fn new(enabled: bool, total: Duration, schedule: Vec<PhaseSpan>, cycles: u32) -> Self {
        let display = (enabled && std::io::stderr().is_terminal()).then(|| {
            if is_dumb_terminal() {
                return Display::Plain(Mutex::new(None));
            }
            let bar = ProgressBar::new(total.as_millis() as u64);
            bar.set_style(ProgressStyle::with_template(TEMPLATE).expect("static template"));
            Display::Bar(bar)
        });
        Progress {
            display,
            schedule,
            cycles,
            recent: Mutex::new(VecDeque::new()),
        }
    }

    /// Shows the state at `t_s`, after `bytes` were read in the interval ending then.
    pub fn update(&self, t_s: f64, bytes: u64) {
        let Some(display) = &self.display else {
            return;
        };
        let mut recent = self.recent.lock().expect("progress lock");
        recent.push_back((t_s, bytes));
        while recent.front().is_some_and(|&(t, _)| t <= t_s - 1.0) {
            recent.pop_front();
        }
        let window_s = t_s.clamp(1e-3, 1.0);
        let goodput_bps = recent.iter().map(|&(_, b)| b).sum::<u64>() as f64 * 8.0 / window_s;
        let phase = self.schedule.iter().position(|s| s.contains(t_s));
        let span = phase.map(|i| &self.schedule[i]);
        let text = message(span, self.cycles, t_s, goodput_bps);
        match display {
            Display::Bar(bar) => {
                bar.set_position((t_s * 1000.0) as u64);
                bar.set_message(text);
            }
            Display::Plain(last) => {
                let mut last = last.lock().expect("progress lock");
                let phase = phase.unwrap_or(self.schedule.len());
                let due = last.is_none_or(|(p, at_s)| p != phase || t_s - at_s >= PLAIN_EVERY_S);
                if due {
                    eprintln!("oscil-reader: {:.0} s: {text}", t_s);
                    *last = Some((phase, t_s));
                }
            }
        }
    }

    pub fn finish(&self) {
        if let Some(Display::Bar(bar)) = &self.display {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oscil_model::pattern::PatternConfig;

    #[test]
    fn the_line_fits_80_columns() {
        let schedule = PatternConfig::CLOUDFLARE.schedule();
        let bar_and_times = "#".repeat(20) + " 59s/60s ";
        for (t_s, bps) in [(0.5, 1e9), (14.0, 99_999e6), (61.0, 0.0)] {
            let span = schedule.iter().find(|s| s.contains(t_s));
            let line = bar_and_times.clone() + &message(span, 3, t_s, bps);
            assert!(line.chars().count() <= 80, "{line}");
        }
        let span = schedule.iter().find(|s| s.contains(1.0));
        assert_eq!(
            message(span, 3, 1.0, 12.34e6),
            "cycle 1/3 fast 4.0 s left, 12.3 Mbit/s"
        );
    }
}

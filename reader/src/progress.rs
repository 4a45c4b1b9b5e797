//! The live line on a terminal: phase, time left, current throughput.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use oscil_protocol::PhaseSpan;

pub struct Progress {
    bar: Option<ProgressBar>,
    schedule: Vec<PhaseSpan>,
    cycles: u32,
}

impl Progress {
    /// Draws only when asked to and stderr is a terminal.
    pub fn new(enabled: bool, total: Duration, schedule: Vec<PhaseSpan>, cycles: u32) -> Self {
        let bar = (enabled && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(total.as_millis() as u64);
            bar.set_style(
                ProgressStyle::with_template("{bar:30} {elapsed:>4} / {duration:4} {msg}")
                    .expect("static template"),
            );
            bar
        });
        Progress {
            bar,
            schedule,
            cycles,
        }
    }

    pub fn update(&self, t_s: f64, goodput_bps: f64) {
        let Some(bar) = &self.bar else { return };
        let span = self.schedule.iter().find(|s| s.contains(t_s));
        let phase = span.map_or("ending".to_string(), |s| {
            let left_s = s.end_s - t_s;
            format!(
                "cycle {}/{} {} ({left_s:.0} s left)",
                s.cycle, self.cycles, s.phase
            )
        });
        bar.set_position((t_s * 1000.0) as u64);
        bar.set_message(format!("{phase}  {:.1} Mbit/s", goodput_bps / 1e6));
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

//! The live line on a terminal: phase, time left, current throughput.

use std::collections::VecDeque;
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use oscil_protocol::PhaseSpan;

pub struct Progress {
    bar: Option<ProgressBar>,
    schedule: Vec<PhaseSpan>,
    cycles: u32,
    /// (t_s, bytes) of the last second's samples: a slow phase reads in a burst at the
    /// start of each second, so one interval alone would mostly show zero.
    recent: Mutex<VecDeque<(f64, u64)>>,
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
            recent: Mutex::new(VecDeque::new()),
        }
    }

    /// Shows the state at `t_s`, after `bytes` were read in the interval ending then.
    pub fn update(&self, t_s: f64, bytes: u64) {
        let Some(bar) = &self.bar else { return };
        let mut recent = self.recent.lock().expect("progress lock");
        recent.push_back((t_s, bytes));
        while recent.front().is_some_and(|&(t, _)| t <= t_s - 1.0) {
            recent.pop_front();
        }
        let window_s = t_s.clamp(1e-3, 1.0);
        let goodput_bps = recent.iter().map(|&(_, b)| b).sum::<u64>() as f64 * 8.0 / window_s;
        let span = self.schedule.iter().find(|s| s.contains(t_s));
        let phase = span.map_or("ending".to_string(), |s| {
            let left_s = s.end_s - t_s;
            format!(
                "cycle {}/{} {} ({left_s:.1} s left)",
                s.cycle, self.cycles, s.phase
            )
        });
        bar.set_position((t_s * 1000.0) as u64);
        bar.set_message(format!(
            "{phase}  {:.1} Mbit/s over the last second",
            goodput_bps / 1e6
        ));
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

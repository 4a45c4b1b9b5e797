//! What the terminal shows: one campaign progress bar (run k of N, label, elapsed, ETA,
//! the current run's phase and goodput), a line as each run ends, and the table at the
//! end. The bar is hidden when stderr is not a terminal; the lines are always printed.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use oscil_model::campaign::{CampaignRun, CampaignRunStatus};
use oscil_model::files::rows::{Phase, ReaderSample};
use oscil_model::text::escape_peer;

use crate::progress::{self, Event, RunId};

/// A line on stderr (a `message` event with `--progress json`). A terminal that went away
/// (SIGHUP) must not stop the lab's cleanup, so a failed write is ignored.
pub use crate::progress::say;

pub struct Ui {
    bar: ProgressBar,
    /// Where `oscil-report` is, which gives each run's line its figures.
    bin: PathBuf,
    /// Planned time still to run, for the ETA.
    remaining: Duration,
    overhead: Duration,
    run_started: Instant,
    last_goodput: (Instant, String),
    /// Every distinct warning the runs recorded, each shown once.
    pub warnings: Vec<String>,
    /// A terminal without cursor movement: each run's start said in a line of its own.
    plain: bool,
}

/// `45s`, `2m05s`, `2h01m`: the plan's total and the progress line's ETA.
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// `fast 1/3`: the phase that holds `elapsed`.
pub fn phase_at(run: &CampaignRun, elapsed: Duration) -> String {
    let t = elapsed.as_secs_f64();
    let cycles = run.settings.pattern.cycles;
    run.settings
        .pattern
        .schedule()
        .iter()
        .find(|span| span.contains(t))
        .map_or("ending".into(), |span| {
            let phase = if span.phase == Phase::Fast {
                "fast"
            } else {
                "slow"
            };
            format!("{phase} {}/{cycles}", span.cycle)
        })
}

/// Goodput over the last second of `reader.csv`, while the reader writes it.
fn live_goodput(run_dir: &Path, interval_us: u64) -> Option<String> {
    let rows: Vec<ReaderSample> = oscil_rundir::load_rows(run_dir).ok()?;
    let points: Vec<(f64, u64)> = rows.iter().map(|r| (r.t_s, r.bytes)).collect();
    last_second_goodput(&points, interval_us)
}

/// Goodput over the last second of (t_s, bytes read in the interval ending then).
pub fn last_second_goodput(points: &[(f64, u64)], interval_us: u64) -> Option<String> {
    let last = points.last()?.0;
    // The samples whose intervals make up the last second (each covers the interval
    // that ends at its t_s).
    let since = last - 1.0 + interval_us as f64 / 2e6;
    let bytes: u64 = points.iter().filter(|p| p.0 > since).map(|p| p.1).sum();
    Some(format!("{:.1} Mbit/s", bytes as f64 * 8.0 / 1e6))
}

impl Ui {
    pub fn new(runs_to_do: u64, planned: Duration, overhead: Duration, bin: &Path) -> Ui {
        // A terminal without cursor movement (TERM=dumb) gets no bar, which indicatif would
        // not draw there, but a plain line as each run starts.
        let terminal = std::io::stderr().is_terminal() && progress::human();
        let dumb = std::env::var("TERM").is_ok_and(|term| term == "dumb");
        let bar = match terminal && !dumb {
            true => ProgressBar::new(runs_to_do),
            false => ProgressBar::hidden(),
        };
        bar.set_length(runs_to_do);
        bar.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:20}] {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.enable_steady_tick(Duration::from_millis(500));
        Ui {
            bar,
            bin: bin.to_owned(),
            remaining: planned,
            overhead,
            run_started: Instant::now(),
            last_goodput: (Instant::now(), String::new()),
            warnings: Vec::new(),
            plain: terminal && dumb,
        }
    }

    /// A line above the bar (or on stderr when there is none).
    pub fn line(&self, text: &str) {
        if self.bar.is_hidden() {
            say(text);
        } else {
            self.bar.println(text);
        }
    }

    /// `run 3/8`: the run in progress among those this invocation runs.
    fn counter(&self) -> String {
        let total = self.bar.length().unwrap_or(0);
        format!("run {}/{total}", (self.bar.position() + 1).min(total))
    }

    pub fn start_run(&mut self, run: &CampaignRun) {
        self.run_started = Instant::now();
        self.last_goodput = (Instant::now(), String::new());
        progress::emit(&Event::RunStarted {
            run: RunId::of(run, None),
            settings: &run.settings,
            eta_s: self.remaining.as_secs(),
        });
        let starting = format!(
            "{} {} rep-{}: starting, ETA {}",
            self.counter(),
            run.label,
            run.repetition,
            human_duration(self.remaining)
        );
        if self.plain {
            self.line(&format!("oscil-lab: {starting}"));
        }
        self.bar.set_message(starting);
    }

    pub fn tick(&mut self, run: &CampaignRun, run_dir: &Path, elapsed: Duration) {
        if self.last_goodput.0.elapsed() >= Duration::from_secs(1) {
            self.last_goodput = (
                Instant::now(),
                live_goodput(run_dir, run.settings.interval_us).unwrap_or_default(),
            );
        }
        let eta = self.remaining.saturating_sub(self.run_started.elapsed());
        self.bar.set_message(format!(
            "{} {} rep-{}: {} {}, ETA {}",
            self.counter(),
            run.label,
            run.repetition,
            phase_at(run, elapsed),
            self.last_goodput.1,
            human_duration(eta)
        ));
    }

    /// One run more than planned: a spoiled run about to be run again, and why.
    pub fn redo(&mut self, run: &CampaignRun, why: &str) {
        progress::emit(&Event::Redo {
            run: RunId::of(run, None),
            why,
        });
        if progress::human() {
            self.line(&format!(
                "[{}] {} rep-{}: running it again, spoiled ({why}; this attempt is kept beside it, outside the verdicts)",
                run.position, run.label, run.repetition
            ));
        }
        self.remaining += run.settings.pattern.total() + self.overhead;
        self.bar.inc_length(1);
    }

    pub fn finish_run(
        &mut self,
        run: &CampaignRun,
        status: CampaignRunStatus,
        reason: Option<&str>,
        run_dir: &Path,
    ) {
        self.remaining = self
            .remaining
            .saturating_sub(run.settings.pattern.total() + self.overhead);
        self.bar.inc(1);
        progress::emit(&Event::RunFinished {
            run: RunId::of(run, None),
            status,
            reason,
        });
        if progress::human() {
            self.say_finished(run, status, reason, run_dir);
        }
        self.show_warnings(run_dir);
    }

    /// The human line of a run that ended: its status, the report's figures, the reason.
    fn say_finished(
        &self,
        run: &CampaignRun,
        status: CampaignRunStatus,
        reason: Option<&str>,
        run_dir: &Path,
    ) {
        let figures = match status {
            CampaignRunStatus::Complete | CampaignRunStatus::Partial => {
                let words = super::bounded::report_words(&self.bin, run_dir);
                words
                    .ok()
                    .map(|w| w.trim_end().to_owned())
                    .filter(|w| !w.is_empty())
            }
            _ => None,
        };
        let status_word = format!("{status:?}").to_lowercase();
        let detail = [figures, reason.map(str::to_owned)]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("; ");
        self.line(&format!(
            "[{}] {} rep-{}: {status_word}{}{detail}",
            run.position,
            run.label,
            run.repetition,
            if detail.is_empty() { "" } else { ", " }
        ));
    }

    /// The warnings in the run's `run.json` not shown yet.
    fn show_warnings(&mut self, run_dir: &Path) {
        let Some(lab) = oscil_rundir::load_meta(run_dir)
            .ok()
            .and_then(|meta| meta.lab)
        else {
            return;
        };
        // A remote receiver wrote this run.json: its text is escaped before it is shown.
        for warning in lab.warnings.iter().map(|w| escape_peer(w)) {
            if !self.warnings.contains(&warning) {
                self.line(&format!("oscil-lab: warning: {warning}"));
                self.warnings.push(warning);
            }
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// The end table: per configuration, complete runs and the report's figures, as the
/// report writes it ([`crate::campaign::bounded::report_words`]), or why there is none.
pub fn table(dir: &Path, bin: &Path) -> String {
    super::bounded::report_words(bin, dir)
        .unwrap_or_else(|e| format!("oscil-lab: no table of the runs: {e}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::matrix::{configurations, plan_runs, AxisValue, Matrix, Setting};
    use oscil_model::campaign::Order;

    #[test]
    fn phase_and_durations_read_as_words() {
        let matrix = Matrix {
            axes: vec![vec![AxisValue {
                label: Some("a".into()),
                set: Setting::Lowat(None),
            }]],
            ..Matrix::default()
        };
        let run = &plan_runs(&configurations(&matrix), 1, Order::Grouped, 0)[0];
        assert_eq!(phase_at(run, Duration::from_secs(1)), "fast 1/3");
        assert_eq!(phase_at(run, Duration::from_secs(21)), "fast 2/3");
        assert_eq!(phase_at(run, Duration::from_secs(59)), "slow 3/3");
        assert_eq!(phase_at(run, Duration::from_secs(61)), "ending");
        assert_eq!(human_duration(Duration::from_secs(125)), "2m05s");
        assert_eq!(human_duration(Duration::from_secs(7300)), "2h01m");
    }
}

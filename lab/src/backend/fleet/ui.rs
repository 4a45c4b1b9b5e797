//! What the terminal shows of a fleet: a line as each round starts (its pairs and runs),
//! every few seconds the pairs running now with each one's phase and goodput and the ETA,
//! a line as each run ends, and at the end a table of the pairs (complete runs, measured
//! path, why a pair failed).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use oscil_model::campaign::{Campaign, CampaignRun, CampaignRunStatus};

use crate::campaign::ui::{human_duration, last_second_goodput, phase_at, say};
use crate::config::FleetSpec;
use crate::plan::matrix::planned_duration;
use crate::progress::{self, Event, RunId};
use crate::remote::host::Host;

/// How often the line of the running pairs is printed.
const SHOW_EVERY: Duration = Duration::from_secs(5);

pub struct Progress {
    /// The wall time of each round still planned, for the ETA.
    round_times: Vec<Duration>,
    round: usize,
    round_started: Instant,
    /// The runs of this round still going: how far each is, its last goodput.
    running: BTreeMap<usize, (Duration, String)>,
    shown: Instant,
}

impl Progress {
    pub fn new(campaign: &Campaign, rounds: &[Vec<usize>], overhead: Duration) -> Progress {
        let round_times = rounds
            .iter()
            .map(|r| {
                super::schedule::wall_time(std::slice::from_ref(r), |i| {
                    planned_duration([&campaign.runs[i]], overhead)
                })
            })
            .collect();
        Progress {
            round_times,
            round: 0,
            round_started: Instant::now(),
            running: BTreeMap::new(),
            shown: Instant::now(),
        }
    }

    pub fn start_round(
        &mut self,
        k: usize,
        round: &[usize],
        campaign: &Campaign,
        spec: &FleetSpec,
    ) {
        self.round = k;
        self.round_started = Instant::now();
        self.running = round
            .iter()
            .map(|&i| (i, (Duration::ZERO, String::new())))
            .collect();
        progress::emit(&Event::RoundStarted {
            round: k + 1,
            rounds: self.round_times.len(),
            runs: round.iter().map(|&i| campaign.runs[i].position).collect(),
            eta_s: self.eta().as_secs(),
        });
        for &i in round {
            let run = &campaign.runs[i];
            progress::emit(&Event::RunStarted {
                run: RunId::of(run, Some(k + 1)),
                settings: &run.settings,
                eta_s: self.eta().as_secs(),
            });
        }
        self.shown = Instant::now();
        if !progress::human() {
            return;
        }
        let runs: Vec<String> = round
            .iter()
            .map(|&i| describe(&campaign.runs[i], spec))
            .collect();
        say(&format!(
            "oscil-lab: round {}/{}: {}; ETA {}",
            k + 1,
            self.round_times.len(),
            runs.join(", "),
            human_duration(self.eta())
        ));
    }

    /// The rest of this round's planned time and every later round's.
    fn eta(&self) -> Duration {
        let this = self
            .round_times
            .get(self.round)
            .copied()
            .unwrap_or_default();
        let later: Duration = self.round_times.iter().skip(self.round + 1).sum();
        this.saturating_sub(self.round_started.elapsed()) + later
    }

    pub fn tick(&mut self, run: usize, elapsed: Duration, goodput: Option<String>) {
        if let Some(state) = self.running.get_mut(&run) {
            state.0 = elapsed;
            if let Some(g) = goodput {
                state.1 = g;
            }
        }
    }

    pub fn done(&mut self, index: usize, run: &CampaignRun, spec: &FleetSpec) {
        self.running.remove(&index);
        progress::emit(&Event::RunFinished {
            run: RunId::of(run, Some(self.round + 1)),
            status: run.status,
            reason: run.reason.as_deref(),
        });
        if !progress::human() {
            return;
        }
        let status = format!("{:?}", run.status).to_lowercase();
        let reason = run
            .reason
            .as_deref()
            .map_or(String::new(), |r| format!(" ({r})"));
        say(&format!(
            "[{}] {}: {status}{reason}",
            run.position,
            describe(run, spec)
        ));
    }

    /// Every few seconds: the round, each running pair's phase and goodput, the ETA.
    pub fn show(&mut self, campaign: &Campaign, spec: &FleetSpec) {
        if self.shown.elapsed() < SHOW_EVERY || self.running.is_empty() || !progress::human() {
            return;
        }
        self.shown = Instant::now();
        let pairs: Vec<String> = self
            .running
            .iter()
            .map(|(&i, (elapsed, goodput))| {
                let run = &campaign.runs[i];
                format!(
                    "{} {}: {} {goodput}",
                    describe_pair(run, spec),
                    run.label,
                    phase_at(run, *elapsed)
                )
            })
            .collect();
        say(&format!(
            "oscil-lab: round {}/{} · {} · ETA {}",
            self.round + 1,
            self.round_times.len(),
            pairs.join(" · "),
            human_duration(self.eta())
        ));
    }

    pub fn finish(&self) {}
}

fn describe_pair(run: &CampaignRun, spec: &FleetSpec) -> String {
    spec.pairs
        .iter()
        .find(|p| Some(p.dir_name().as_str()) == run.pair.as_deref())
        .map_or_else(|| "?".into(), ToString::to_string)
}

/// `a>b lowat-131072 rep-1`.
pub fn describe(run: &CampaignRun, spec: &FleetSpec) -> String {
    format!(
        "{} {} rep-{}",
        describe_pair(run, spec),
        run.label,
        run.repetition
    )
}

/// Goodput over the last second of the `reader.csv` a remote reader is writing: its header
/// and last rows, read over the pair's ssh connection.
pub fn remote_goodput(host: &Host, csv: &str, interval_us: u64) -> Option<String> {
    let text = host
        .run(&[
            "sh",
            "-c",
            "head -n 1 \"$1\" && tail -n 40 \"$1\"",
            "sh",
            csv,
        ])
        .ok()?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next()?.split(',').collect();
    let t = header.iter().position(|c| *c == "t_s")?;
    let b = header.iter().position(|c| *c == "bytes")?;
    let points: Vec<(f64, u64)> = lines
        .filter_map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            Some((cells.get(t)?.parse().ok()?, cells.get(b)?.parse().ok()?))
        })
        .collect();
    last_second_goodput(&points, interval_us)
}

/// Per pair: runs complete of those planned, the path as measured, and why it failed.
pub fn pair_table(campaign: &Campaign, spec: &FleetSpec) -> String {
    let width = spec
        .pairs
        .iter()
        .map(|p| p.to_string().len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut text = format!("{:width$}  runs  min RTT     failed\n", "pair");
    for pair in &spec.pairs {
        let name = pair.dir_name();
        let runs: Vec<&CampaignRun> = campaign
            .runs
            .iter()
            .filter(|r| r.pair.as_deref() == Some(&name))
            .collect();
        let done = runs
            .iter()
            .filter(|r| r.status == CampaignRunStatus::Complete)
            .count();
        let facts = campaign.hosts.as_ref().map(|h| &h["pairs"][&name]);
        let rtt = facts
            .and_then(|f| f["measured_min_rtt_us"].as_u64())
            .map_or("-".into(), |us| format!("{:.1} ms", us as f64 / 1000.0));
        let failed = runs
            .iter()
            .find(|r| r.status == CampaignRunStatus::Failed)
            .and_then(|r| r.reason.as_deref())
            .map(oscil_model::text::escape_peer)
            .unwrap_or_default();
        text.push_str(&format!(
            "{:width$}  {:>4}  {rtt:<10}  {failed}\n",
            pair.to_string(),
            format!("{done}/{}", runs.len())
        ));
    }
    text
}

/// `--dry-run`: every host as it will be reached (name, address, user, port, binaries),
/// the user and port from the inventory, else `--ssh-option`, else ssh's own defaults.
pub fn hosts_table(spec: &FleetSpec) -> String {
    let option = |key: &str| {
        spec.ssh_options.iter().rev().find_map(|o| {
            let (k, v) = o.split_once('=')?;
            k.eq_ignore_ascii_case(key).then(|| v.to_owned())
        })
    };
    let ssh_default = || "(ssh's default)".to_owned();
    let rows: Vec<[String; 5]> = spec
        .hosts
        .iter()
        .map(|h| {
            [
                h.name.clone(),
                h.address.clone(),
                h.user
                    .clone()
                    .or_else(|| option("User"))
                    .unwrap_or_else(ssh_default),
                h.port
                    .map(|p| p.to_string())
                    .or_else(|| option("Port"))
                    .unwrap_or_else(ssh_default),
                h.bin_dir
                    .clone()
                    .or_else(|| spec.remote_bin.clone())
                    .unwrap_or_else(|| "(the remote PATH)".into()),
            ]
        })
        .collect();
    let header = ["host", "address", "user", "port", "binaries"].map(String::from);
    let widths: Vec<usize> = (0..5)
        .map(|i| {
            rows.iter()
                .chain([&header])
                .map(|r| r[i].len())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out += cells.join("  ").trim_end();
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goodput_comes_from_the_last_second_of_the_readers_rows() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("reader.csv");
        let mut text = String::from("t_s,flow,phase,bytes\n");
        for k in 1..=30 {
            // 100 ms intervals of 100 kB: 8 Mbit/s.
            text += &format!("{:.1},0,fast,100000\n", k as f64 / 10.0);
        }
        std::fs::write(&csv, text).unwrap();
        let shown = remote_goodput(&Host::Local, csv.to_str().unwrap(), 100_000);
        assert_eq!(shown.as_deref(), Some("8.0 Mbit/s"));
        let missing = dir.path().join("none.csv");
        assert_eq!(
            remote_goodput(&Host::Local, missing.to_str().unwrap(), 100_000),
            None
        );
    }
}

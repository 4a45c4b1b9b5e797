//! The plan: every combination of the listed settings (a configuration, named by its
//! label), each repeated, in a grouped or seeded shuffled order. Pure code: the seed and
//! the matrix are parameters, so a plan can be reproduced and tested.

use std::path::PathBuf;
use std::time::Duration;

use oscil_cli::group::GroupSpec;
use oscil_model::campaign::{
    CampaignRun, CampaignRunStatus, Direction, Order, PathSettings, RunSettings, SlowRateBasis,
};
use oscil_model::group::{total_flows, FlowGroup, Reading};
use oscil_model::pattern::{BitRate, PatternConfig};
use oscil_model::socket::WriteMode;
use oscil_protocol::request::SessionRequest;

/// One value of one axis: what it sets, and the words it adds to the label (none when the
/// label leaves it out because it is the backend's default).
#[derive(Debug, Clone, PartialEq)]
pub struct AxisValue {
    pub label: Option<String>,
    pub set: Setting,
}

/// What one axis value sets in a run's settings.
#[derive(Debug, Clone, PartialEq)]
pub enum Setting {
    Path(Option<PathSettings>),
    Congestion(Option<String>),
    Lowat(Option<u64>),
    Wmem(Option<[u64; 3]>),
    Rmem(Option<[u64; 3]>),
    AdvWinScale(Option<i32>),
    Sndbuf(Option<u32>),
    Rcvbuf(Option<u32>),
    PacingRate(Option<u64>),
    WriteMode(WriteMode),
    Pattern(PatternConfig),
    Direction(Direction),
}

impl Setting {
    fn apply(&self, settings: &mut RunSettings) {
        match self.clone() {
            Setting::Path(v) => settings.path = v,
            Setting::Congestion(v) => settings.congestion = v,
            Setting::Lowat(v) => settings.lowat_bytes = v,
            Setting::Wmem(v) => settings.wmem_bytes = v,
            Setting::Rmem(v) => settings.rmem_bytes = v,
            Setting::AdvWinScale(v) => settings.adv_win_scale = v,
            Setting::Sndbuf(v) => settings.sndbuf_bytes = v,
            Setting::Rcvbuf(v) => settings.rcvbuf_bytes = v,
            Setting::PacingRate(v) => settings.pacing_rate_bps = v,
            Setting::WriteMode(v) => settings.write_mode = v,
            Setting::Pattern(v) => settings.pattern = v,
            Setting::Direction(v) => settings.direction = v,
        }
    }
}

/// The axes in label order, and what every run shares.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub axes: Vec<Vec<AxisValue>>,
    pub flows: u32,
    pub interval_us: u64,
    pub pattern: PatternConfig,
    pub write_size_bytes: Option<u32>,
    /// The reader's `--marker-every`, µs; `None`: no markers.
    pub marker_every_us: Option<u64>,
    /// How the slow phases' rate is chosen, the same for every configuration of a path.
    pub slow_rate: SlowRateChoice,
    /// The reader's `--no-probe`.
    pub no_probe: bool,
    /// The reader's `--trace`.
    pub trace: bool,
    /// `--group`: the same groups in every configuration, each over its settings.
    pub groups: Vec<GroupSpec>,
    /// `--reverse-group`: the reverse pair's groups in every `both` configuration.
    pub reverse_groups: Vec<GroupSpec>,
}

/// The lab's defaults: one flow, the default sampling interval, the Cloudflare pattern,
/// no axis and nothing else asked for.
impl Default for Matrix {
    fn default() -> Self {
        Matrix {
            axes: Vec::new(),
            flows: 1,
            interval_us: oscil_model::run::sampling::DEFAULT_INTERVAL.as_micros() as u64,
            pattern: PatternConfig::CLOUDFLARE,
            write_size_bytes: None,
            marker_every_us: None,
            slow_rate: SlowRateChoice::PerPath,
            no_probe: false,
            trace: false,
            groups: Vec::new(),
            reverse_groups: Vec::new(),
        }
    }
}

/// `--slow-rate`: how each run's slow rate is made.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SlowRateChoice {
    /// `--slow-rate RATE`.
    Given(BitRate),
    /// The default: one rate per path, `fraction` x the emulated path's rate in the lab,
    /// `fraction` x the pair's calibration peak on real hosts (`crate::plan::calibrate`).
    PerPath,
    /// `--slow-rate auto-per-run`: each run's own peak.
    PerRun,
}

impl SlowRateChoice {
    /// Fills in `settings`' slow rate and how it was chosen; a pattern without a slow phase
    /// has none. An emulated path's share is computed here, so every configuration of the
    /// path asks for the same rate before any run.
    fn apply(self, settings: &mut RunSettings) {
        let p = &settings.pattern;
        if p.full_speed || p.slow_ms == 0 {
            return;
        }
        let (bps, basis) = match (self, &settings.path) {
            (SlowRateChoice::Given(bps), _) => (Some(bps), SlowRateBasis::Given),
            (SlowRateChoice::PerPath, Some(path)) => (
                Some(p.fraction.of_rate(BitRate::from_bps(path.rate_bps))),
                SlowRateBasis::PathRate,
            ),
            (SlowRateChoice::PerPath, None) => {
                (None, SlowRateBasis::Calibration { peak_bps: None })
            }
            (SlowRateChoice::PerRun, _) => (None, SlowRateBasis::PerRun),
        };
        settings.slow_rate_bps = bps;
        settings.slow_rate_basis = Some(basis);
    }
}

/// One combination of settings; its repetitions share the label.
#[derive(Debug, Clone, PartialEq)]
pub struct Configuration {
    pub label: String,
    pub settings: RunSettings,
}

/// Every combination, first axis outermost (as the old nested loops ran them).
pub fn configurations(matrix: &Matrix) -> Vec<Configuration> {
    let base = Configuration {
        label: String::new(),
        settings: RunSettings {
            write_size_bytes: matrix.write_size_bytes,
            marker_every_us: matrix.marker_every_us,
            no_probe: matrix.no_probe,
            trace: matrix.trace,
            ..RunSettings::unset(matrix.flows, matrix.interval_us, matrix.pattern)
        },
    };
    let mut configs = matrix.axes.iter().fold(vec![base], |configs, axis| {
        configs
            .iter()
            .flat_map(|config| axis.iter().map(move |value| extend(config, value)))
            .collect::<Vec<_>>()
    });
    for config in &mut configs {
        with_groups(&mut config.settings, &matrix.groups, &matrix.reverse_groups);
        matrix.slow_rate.apply(&mut config.settings);
    }
    configs
}

/// The groups over a configuration's settings (its socket options, writer and pattern are
/// every group's defaults), their flows the run's; the run's timetable oscillates while any
/// group does. A group's own slow rate stays; without one it is `None`, its share of the
/// path's rate ([`RunSettings::groups`]).
/// A `both` run's reverse groups are resolved over the same settings.
fn with_groups(settings: &mut RunSettings, specs: &[GroupSpec], reverse_specs: &[GroupSpec]) {
    let base = FlowGroup {
        // Left to the run's own rate, fixed per path after this.
        slow_rate_bps: None,
        ..SessionRequest::of_run(settings).flow_groups().remove(0)
    };
    if settings.direction == Direction::Both {
        settings.reverse_groups = oscil_cli::group::resolve(reverse_specs, &base);
    }
    if specs.is_empty() {
        return;
    }
    settings.groups = oscil_cli::group::resolve(specs, &base);
    settings.flows = u32::try_from(total_flows(&settings.groups)).unwrap_or(u32::MAX);
    settings.pattern.full_speed = settings
        .groups
        .iter()
        .all(|g| g.pattern == Reading::FullSpeed);
}

fn extend(config: &Configuration, value: &AxisValue) -> Configuration {
    let mut next = config.clone();
    value.set.apply(&mut next.settings);
    if let Some(words) = &value.label {
        if !next.label.is_empty() {
            next.label.push('_');
        }
        next.label.push_str(&sanitize(words));
    }
    next
}

/// Keeps a label usable as a directory name: letters, digits, `.`, `-` and `_`.
pub fn sanitize(words: &str) -> String {
    words
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' | '_' => c,
            _ => '-',
        })
        .collect()
}

/// Every run of the plan in the order they run: each configuration `repeat` times,
/// grouped (repetitions back to back) or shuffled with `seed`.
pub fn plan_runs(
    configs: &[Configuration],
    repeat: u32,
    order: Order,
    seed: u64,
) -> Vec<CampaignRun> {
    let mut slots: Vec<(usize, u32)> = configs
        .iter()
        .enumerate()
        .flat_map(|(i, _)| (1..=repeat).map(move |rep| (i, rep)))
        .collect();
    if order == Order::Shuffled {
        shuffle(&mut slots, seed);
    }
    slots
        .into_iter()
        .enumerate()
        .map(|(place, (i, repetition))| CampaignRun {
            label: configs[i].label.clone(),
            repetition,
            position: place as u32 + 1,
            dir: run_dir(&configs[i].label, repetition),
            settings: configs[i].settings.clone(),
            status: CampaignRunStatus::Pending,
            reason: None,
            pair: None,
            link_spoiled: None,
        })
        .collect()
}

/// `runs/<label>/rep-<k>`, relative to the campaign directory.
pub fn run_dir(label: &str, repetition: u32) -> PathBuf {
    PathBuf::from("runs")
        .join(label)
        .join(format!("rep-{repetition}"))
}

/// Fisher-Yates driven by SplitMix64: small, fixed forever, so a recorded seed gives the
/// same order on any build.
fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for i in (1..items.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

/// How long the runs still to do will take: each run's pattern, its session's round trips
/// on the emulated path, and `per_run_overhead` (starting the link and the daemon, copying
/// results).
pub fn planned_duration<'a>(
    runs: impl IntoIterator<Item = &'a CampaignRun>,
    per_run_overhead: Duration,
) -> Duration {
    runs.into_iter()
        .map(|run| run.settings.pattern.total() + setup_round_trips(run) + per_run_overhead)
        .sum()
}

/// Round trips a session spends before its pattern starts: the handshake, the data
/// connections and their challenges, ready and start (about 5), and with markers the
/// clock exchanges, one after another. On a 466 ms path that is 2.3 s, or 7.9 s with
/// markers. Unknown (0) on real hosts, whose path the lab does not set.
fn setup_round_trips(run: &CampaignRun) -> Duration {
    const SESSION_ROUND_TRIPS: u32 = 5;
    let Some(path) = &run.settings.path else {
        return Duration::ZERO;
    };
    let clock = match run.settings.marker_every_us {
        Some(_) => oscil_model::run::clock::EXCHANGES,
        None => 0,
    };
    Duration::from_micros(path.rtt_us) * (SESSION_ROUND_TRIPS + clock)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(label: Option<&str>, set: Setting) -> AxisValue {
        AxisValue {
            label: label.map(str::to_owned),
            set,
        }
    }

    fn matrix() -> Matrix {
        let path = |rate_bps, text: &str| {
            value(
                Some(text),
                Setting::Path(Some(PathSettings {
                    rate_bps,
                    rtt_us: 466_000,
                    loss_pct: 0.0,
                    queue_packets: None,
                })),
            )
        };
        Matrix {
            axes: vec![
                vec![
                    path(10_000_000, "10mbit_466ms"),
                    path(1_000_000_000, "1gbit_466ms"),
                ],
                vec![value(
                    Some("cubic"),
                    Setting::Congestion(Some("cubic".into())),
                )],
                vec![
                    value(Some("lowat-default"), Setting::Lowat(None)),
                    value(Some("lowat-128k"), Setting::Lowat(Some(131072))),
                ],
                vec![value(None, Setting::Wmem(Some([4096, 16384, 536870912])))],
                vec![
                    value(None, Setting::Sndbuf(None)),
                    value(Some("sndbuf-16k"), Setting::Sndbuf(Some(16384))),
                ],
            ],
            ..Matrix::default()
        }
    }

    #[test]
    fn every_combination_once_with_its_label_and_settings() {
        let configs = configurations(&matrix());
        let labels: Vec<&str> = configs.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "10mbit_466ms_cubic_lowat-default",
                "10mbit_466ms_cubic_lowat-default_sndbuf-16k",
                "10mbit_466ms_cubic_lowat-128k",
                "10mbit_466ms_cubic_lowat-128k_sndbuf-16k",
                "1gbit_466ms_cubic_lowat-default",
                "1gbit_466ms_cubic_lowat-default_sndbuf-16k",
                "1gbit_466ms_cubic_lowat-128k",
                "1gbit_466ms_cubic_lowat-128k_sndbuf-16k",
            ]
        );
        let last = &configs[7].settings;
        assert_eq!(last.path.as_ref().unwrap().rate_bps, 1_000_000_000);
        assert_eq!(last.lowat_bytes, Some(131072));
        assert_eq!(last.sndbuf_bytes, Some(16384));
        assert_eq!(last.wmem_bytes, Some([4096, 16384, 536870912]));
        assert_eq!(last.congestion.as_deref(), Some("cubic"));
        assert_eq!(configs[0].settings.lowat_bytes, None);
    }

    #[test]
    fn every_configuration_of_a_path_reads_its_slow_phases_at_one_rate() {
        let configs = configurations(&matrix());
        // 5% of each path's rate, whatever the lowat or sndbuf: 0.5 and 50 Mbit/s.
        for config in &configs {
            let rate_bps = config.settings.path.as_ref().unwrap().rate_bps;
            assert_eq!(
                config.settings.slow_rate_bps,
                Some(BitRate::from_bps(rate_bps / 20))
            );
            assert_eq!(
                config.settings.slow_rate_basis,
                Some(SlowRateBasis::PathRate)
            );
        }
        // Real hosts (no path) wait for a calibration; asked, a given rate or each run's
        // own peak; the full-speed control has no slow phase to rate.
        let hosts = Matrix {
            axes: vec![vec![value(None, Setting::Lowat(None))]],
            ..Matrix::default()
        };
        let basis = |slow_rate, full_speed| {
            let pattern = PatternConfig {
                full_speed,
                ..PatternConfig::CLOUDFLARE
            };
            let matrix = Matrix {
                slow_rate,
                axes: vec![vec![value(None, Setting::Pattern(pattern))]],
                ..hosts.clone()
            };
            let settings = &configurations(&matrix)[0].settings;
            (
                settings.slow_rate_bps.map(BitRate::bps),
                settings.slow_rate_basis,
            )
        };
        let calibration = Some(SlowRateBasis::Calibration { peak_bps: None });
        assert_eq!(basis(SlowRateChoice::PerPath, false), (None, calibration));
        let given = (Some(5_000_000), Some(SlowRateBasis::Given));
        assert_eq!(
            basis(SlowRateChoice::Given(BitRate::from_bps(5_000_000)), false),
            given
        );
        let per_run = (None, Some(SlowRateBasis::PerRun));
        assert_eq!(basis(SlowRateChoice::PerRun, false), per_run);
        assert_eq!(basis(SlowRateChoice::PerPath, true), (None, None));
    }

    #[test]
    fn labels_are_directory_names() {
        assert_eq!(sanitize("wmem-4096:16384:1/2"), "wmem-4096-16384-1-2");
    }

    #[test]
    fn grouped_runs_repetitions_back_to_back() {
        let configs = configurations(&matrix());
        let runs = plan_runs(&configs[..2], 3, Order::Grouped, 0);
        let order: Vec<(String, u32, u32)> = runs
            .iter()
            .map(|r| (r.label.clone(), r.repetition, r.position))
            .collect();
        let a = "10mbit_466ms_cubic_lowat-default".to_string();
        let b = "10mbit_466ms_cubic_lowat-default_sndbuf-16k".to_string();
        assert_eq!(
            order,
            [
                (a.clone(), 1, 1),
                (a.clone(), 2, 2),
                (a, 3, 3),
                (b.clone(), 1, 4),
                (b.clone(), 2, 5),
                (b, 3, 6)
            ]
        );
        assert_eq!(
            runs[4].dir,
            PathBuf::from("runs/10mbit_466ms_cubic_lowat-default_sndbuf-16k/rep-2")
        );
        assert!(runs.iter().all(|r| r.status == CampaignRunStatus::Pending));
    }

    #[test]
    fn shuffled_order_is_a_seeded_permutation() {
        let configs = configurations(&matrix());
        let key = |runs: &[CampaignRun]| -> Vec<(String, u32)> {
            runs.iter()
                .map(|r| (r.label.clone(), r.repetition))
                .collect()
        };
        let grouped = key(&plan_runs(&configs, 2, Order::Grouped, 1));
        let a = key(&plan_runs(&configs, 2, Order::Shuffled, 1));
        let again = key(&plan_runs(&configs, 2, Order::Shuffled, 1));
        let other = key(&plan_runs(&configs, 2, Order::Shuffled, 2));
        assert_eq!(a, again, "the same seed gives the same order");
        assert_ne!(
            a, grouped,
            "16 runs shuffled stay in order with odds 1 in 16!"
        );
        assert_ne!(a, other);
        let mut sorted = a.clone();
        sorted.sort();
        let mut grouped_sorted = grouped.clone();
        grouped_sorted.sort();
        assert_eq!(sorted, grouped_sorted, "every run exactly once");
        let positions: Vec<u32> = plan_runs(&configs, 2, Order::Shuffled, 1)
            .iter()
            .map(|r| r.position)
            .collect();
        assert_eq!(positions, (1..=16).collect::<Vec<u32>>());
    }

    #[test]
    fn duration_is_patterns_round_trips_and_overhead() {
        let configs = configurations(&matrix());
        let runs = plan_runs(&configs, 1, Order::Grouped, 0);
        // 8 runs of the 60 s pattern on a 466 ms path: 5 session round trips and 2 s
        // overhead each.
        let per_run = Duration::from_secs(62) + Duration::from_millis(5 * 466);
        assert_eq!(planned_duration(&runs, Duration::from_secs(2)), per_run * 8);
        // Markers add the clock exchanges, 12 more round trips.
        let mut marked = matrix();
        marked.marker_every_us = Some(1_000_000);
        let runs = plan_runs(&configurations(&marked), 1, Order::Grouped, 0);
        let per_run = per_run + Duration::from_millis(12 * 466);
        assert_eq!(planned_duration(&runs, Duration::from_secs(2)), per_run * 8);
    }
}

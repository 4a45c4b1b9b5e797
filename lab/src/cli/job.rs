//! The typed flags into a [`Job`]: defaults filled in, flags that do not go together
//! refused, and every run of the plan held to the session rules, before anything exists on
//! any host.

use std::path::PathBuf;

use std::time::Duration;

use oscil_cli::list::{List, DEFAULT};
use oscil_cli::request_args::SlowRateArg;
use oscil_kernel::socket::congestion::CongestionControls;
use oscil_model::campaign::{Direction, Order, PathSettings};
use oscil_model::lab::LinkKind;
use oscil_model::pattern::PatternConfig;
use oscil_model::run::sampling::DEFAULT_INTERVAL;
use oscil_model::socket::WriteMode;
use oscil_protocol::request::{RequestError, SessionRequest};

use super::args::{Cli, MarkerEvery, OrderArg, ReadPattern, Receiver, Sub};
use crate::backend::fleet::inventory::Plugins;
use crate::config::{BackendSpec, HostsSpec, Job, NewCampaign};
use crate::plan::matrix::{AxisValue, Matrix, Setting, SlowRateChoice};

/// The lab's marker interval unless `--marker-every` says otherwise, µs.
const DEFAULT_MARKER_EVERY_US: u64 = 1_000_000;

/// `--quick`: one short cycle, for trying a setup.
pub(super) const QUICK: PatternConfig = PatternConfig {
    fast_ms: 2000,
    slow_ms: 4000,
    cycles: 1,
    ..PatternConfig::CLOUDFLARE
};

/// The buffer triples the namespace lab sets unless told: Cloudflare's.
const LAB_WMEM: ([u64; 3], &str) = ([4096, 16384, 536870912], "4096:16384:536870912");
const LAB_RMEM: ([u64; 3], &str) = ([8192, 262144, 536870912], "8192:262144:536870912");

/// Flags that cannot work together, or a plan no session may run; the message names them.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0} describe the emulated path; they do not apply to real hosts (the campaign measures the path instead)")]
    PathOnHosts(String),
    #[error("--pcap: a fleet's runs are not captured; give --sender and --receiver for a capture on real hosts")]
    PcapInFleet,
    #[error(
        "--sender and --receiver go together (one names the daemon's host, the other the reader's)"
    )]
    HalfHosts,
    #[error("--resume takes the plan from DIR/campaign.json; leave out {0}")]
    PlanWithResume(String),
    /// A run the plan holds breaks a rule of every session (the reader's and the daemon's).
    #[error("{source} (configuration {label})")]
    Request { label: String, source: RequestError },
    #[error("--pairs: pairs of what? give --inventory")]
    PairsWithoutInventory,
    #[error("--inventory -: standard input is a terminal, not an inventory: pipe one in (ansible-inventory -i hosts.ini --list | oscil-lab --inventory - ...) or give its file")]
    InventoryFromTerminal,
    #[error("--inventory: names the hosts; leave out --sender and --receiver")]
    InventoryWithHosts,
    #[error("--inventory: {path}: {source}")]
    Inventory {
        path: PathBuf,
        source: crate::backend::fleet::inventory::InventoryError,
    },
    #[error("--pairs: {0}")]
    Pairs(#[from] crate::backend::fleet::pairs::PairsError),
    #[error("--inventory: {0}")]
    Fleet(#[from] crate::config::FleetError),
    #[error("--cc: {name:?} is not a congestion control this kernel has (it has: {available})")]
    NoSuchCongestion { name: String, available: String },
    #[error("--cc: cannot read the congestion controls this kernel has: {0}")]
    CongestionList(std::io::Error),
    #[error("--pcap: the capture is oscil-link's; leave out --link netem")]
    PcapWithoutTun,
    #[error("--direction {0}: only in the namespace lab for now (on real hosts the daemon runs on --sender only)")]
    DirectionOnHosts(Direction),
    #[error("--reverse-group: for the reverse pair of --direction both; give --direction both")]
    ReverseGroupWithoutBoth,
}

/// A LIST as given, else `default` alone: the kernel's (or the host's) own value.
fn or_unset<T: Clone>(given: &Option<List<Option<T>>>) -> List<Option<T>> {
    given.clone().unwrap_or_else(|| List::of([(DEFAULT, None)]))
}

/// One axis: each entry labelled `<prefix><entry>` unless it has `omit`'s value (the
/// backend's default, left out of labels).
fn axis<T: Clone + PartialEq>(
    list: &List<T>,
    prefix: &str,
    omit: Option<&T>,
    set: impl Fn(T) -> Setting,
) -> Vec<AxisValue> {
    let entries = list.entries().iter();
    entries
        .map(|e| AxisValue {
            label: (omit != Some(&e.value)).then(|| format!("{prefix}{}", e.text)),
            set: set(e.value.clone()),
        })
        .collect()
}

impl Cli {
    /// The job this command line asks for. `default_seed` and `default_out` come from
    /// the clock in `main`, so this stays a pure function.
    pub fn into_job(self, default_seed: u64, default_out: PathBuf) -> Result<Job, CliError> {
        if let Some(Sub::Restore { dir }) = self.command {
            return Ok(Job::Restore { dir });
        }
        if let Some(dir) = self.resume.clone() {
            self.refuse_plan_options()?;
            return Ok(Job::Resume {
                dir,
                dry_run: self.dry_run,
            });
        }
        let backend = self.backend()?;
        let matrix = self.matrix(&backend)?;
        let order = match self.order {
            Some(OrderArg::Grouped) => Order::Grouped,
            Some(OrderArg::Shuffled) | None => Order::Shuffled,
        };
        Ok(Job::New(Box::new(NewCampaign {
            matrix,
            repeat: self.repeat.unwrap_or(1),
            order,
            seed: self.seed.unwrap_or(default_seed),
            out: self.out.unwrap_or(default_out),
            force: self.force,
            dry_run: self.dry_run,
            backend,
        })))
    }

    /// The options that make a plan, by name, when given.
    fn plan_options(&self) -> Vec<&'static str> {
        let given = [
            ("--rate", self.rate.is_some()),
            ("--rtt", self.rtt.is_some()),
            ("--queue", self.queue.is_some()),
            ("--loss", self.loss.is_some()),
            ("--link", self.link.is_some()),
            ("--pcap", self.pcap),
            ("--tcp-notsent-lowat", self.tcp_notsent_lowat.is_some()),
            ("--wmem", self.wmem.is_some()),
            ("--rmem", self.rmem.is_some()),
            ("--adv-win-scale", self.adv_win_scale.is_some()),
            ("--cc", self.cc.is_some()),
            ("--sndbuf", self.sndbuf.is_some()),
            ("--rcvbuf", self.rcvbuf.is_some()),
            ("--pacing-rate", self.pacing_rate.is_some()),
            ("--write-mode", self.write_mode.is_some()),
            ("--pattern", self.pattern.is_some()),
            ("--flows", self.flows.is_some()),
            ("--group", !self.group.is_empty()),
            ("--direction", self.direction.is_some()),
            ("--reverse-group", !self.reverse_group.is_empty()),
            ("--fast", self.fast.is_some()),
            ("--slow", self.slow.is_some()),
            ("--fraction", self.fraction.is_some()),
            ("--cycles", self.cycles.is_some()),
            ("--quick", self.quick),
            ("--interval", self.interval.is_some()),
            ("--write-size", self.write_size.is_some()),
            ("--marker-every", self.marker_every.is_some()),
            ("--slow-rate", self.slow_rate.is_some()),
            ("--trace", self.trace),
            ("--repeat", self.repeat.is_some()),
            ("--order", self.order.is_some()),
            ("--seed", self.seed.is_some()),
            ("--out", self.out.is_some()),
            ("--force", self.force),
            ("--sender", self.sender.is_some()),
            ("--receiver", self.receiver.is_some()),
            ("--ssh-option", !self.ssh_option.is_empty()),
            ("--remote-bin", self.remote_bin.is_some()),
            ("--install", self.install),
            ("--inventory", self.inventory.is_some()),
            ("--pairs", self.pairs.is_some()),
        ];
        given.iter().filter(|(_, g)| *g).map(|(n, _)| *n).collect()
    }

    fn refuse_plan_options(&self) -> Result<(), CliError> {
        match self.plan_options() {
            given if given.is_empty() => Ok(()),
            given => Err(CliError::PlanWithResume(given.join(", "))),
        }
    }

    fn backend(&self) -> Result<BackendSpec, CliError> {
        let fleet = self.inventory.is_some();
        let (sender, receiver) = match (&self.sender, &self.receiver) {
            (None, None) if !fleet => {
                if self.pairs.is_some() {
                    return Err(CliError::PairsWithoutInventory);
                }
                let link = self.link.unwrap_or(LinkKind::Tun);
                if self.pcap && link != LinkKind::Tun {
                    return Err(CliError::PcapWithoutTun);
                }
                return Ok(BackendSpec::Netns {
                    link,
                    pcap: self.pcap,
                });
            }
            (None, None) => (String::new(), Receiver::Local),
            _ if fleet => return Err(CliError::InventoryWithHosts),
            (Some(s), Some(r)) => (s.clone(), r.clone()),
            _ => return Err(CliError::HalfHosts),
        };
        let path_options: Vec<&str> = [
            ("--rate", self.rate.is_some()),
            ("--rtt", self.rtt.is_some()),
            ("--queue", self.queue.is_some()),
            ("--loss", self.loss.is_some()),
            ("--link", self.link.is_some()),
        ]
        .iter()
        .filter(|(_, given)| *given)
        .map(|(name, _)| *name)
        .collect();
        if !path_options.is_empty() {
            return Err(CliError::PathOnHosts(path_options.join(", ")));
        }
        if let Some(path) = &self.inventory {
            if self.pcap {
                return Err(CliError::PcapInFleet);
            }
            return fleet_spec(self, path);
        }
        Ok(BackendSpec::Hosts(HostsSpec {
            sender,
            receiver: match receiver {
                Receiver::Local => None,
                Receiver::Ssh(target) => Some(target),
            },
            ssh_options: self.ssh_option.clone(),
            remote_bin: self.remote_bin.clone(),
            install: self.install,
            pcap: self.pcap,
        }))
    }

    /// The Cloudflare pattern, or `--quick`'s, with the values given.
    fn pattern_config(&self) -> PatternConfig {
        let base = if self.quick {
            QUICK
        } else {
            PatternConfig::CLOUDFLARE
        };
        let ms = |d: std::time::Duration| d.as_millis() as u64;
        PatternConfig {
            fast_ms: self.fast.map_or(base.fast_ms, ms),
            slow_ms: self.slow.map_or(base.slow_ms, ms),
            fraction: self.fraction.unwrap_or(base.fraction),
            cycles: self.cycles.unwrap_or(base.cycles),
            full_speed: false,
        }
    }

    /// Markers every second unless told otherwise (`off` for none): a write's wait to be
    /// read is the figure a person understands first, and a queue that holds writes longer
    /// than the run still shows in it (censored). Never more often than the sampling
    /// (shorter is refused with every run's request, in `matrix`).
    fn marker_every_us(&self, interval_us: u64) -> Option<u64> {
        match self.marker_every {
            Some(MarkerEvery::Off) => None,
            Some(MarkerEvery::Every(every)) => Some(every.as_micros() as u64),
            None => Some(DEFAULT_MARKER_EVERY_US.max(interval_us)),
        }
    }

    fn matrix(&self, backend: &BackendSpec) -> Result<Matrix, CliError> {
        let lab = matches!(backend, BackendSpec::Netns { .. });
        let pattern = self.pattern_config();
        let interval_us = self.interval.unwrap_or(DEFAULT_INTERVAL).as_micros() as u64;
        let mut axes = Vec::new();
        if lab {
            axes.push(self.paths());
        }
        axes.extend(self.setting_axes(lab));
        axes.push(self.patterns(pattern));
        axes.push(self.directions(lab)?);
        let matrix = Matrix {
            axes,
            flows: self.flows.unwrap_or(1),
            interval_us,
            write_size_bytes: self.write_size,
            marker_every_us: self.marker_every_us(interval_us),
            slow_rate: match self.slow_rate {
                None => SlowRateChoice::PerPath,
                Some(SlowRateArg::Bps(bps)) => SlowRateChoice::Given(bps),
                Some(SlowRateArg::AutoPerRun) => SlowRateChoice::PerRun,
            },
            no_probe: self.no_probe,
            trace: self.trace,
            pattern,
            groups: self.group.clone(),
            reverse_groups: self.reverse_group.clone(),
        };
        // Every run's session, by the rules the reader and the daemon will apply to it.
        for config in crate::plan::matrix::configurations(&matrix) {
            let reverse = (config.settings.direction == Direction::Both)
                .then(|| config.settings.reverse_pair());
            for settings in std::iter::once(&config.settings).chain(&reverse) {
                SessionRequest::of_run(settings)
                    .validate()
                    .map_err(|source| CliError::Request {
                        label: config.label.clone(),
                        source,
                    })?;
            }
        }
        Ok(matrix)
    }

    /// The sysctl and socket option axes, in label order. The lab's buffer defaults are
    /// Cloudflare's triples; real hosts keep their own unless told.
    fn setting_axes(&self, lab: bool) -> Vec<Vec<AxisValue>> {
        let unset = || List::of([(DEFAULT, None)]);
        let buffers = |given: &Option<List<Option<[u64; 3]>>>, (bytes, text)| {
            let (default, omit) = match lab {
                true => (List::of([(text, Some(bytes))]), Some(bytes)),
                false => (unset(), None),
            };
            (given.clone().unwrap_or(default), Some(omit))
        };
        let (wmem, wmem_omit) = buffers(&self.wmem, LAB_WMEM);
        let (rmem, rmem_omit) = buffers(&self.rmem, LAB_RMEM);
        let cubic = || List::of([("cubic", Some("cubic".to_owned()))]);
        let lowats = || List::of([(DEFAULT, None), ("131072", Some(131072))]);
        vec![
            axis(
                &self.cc.clone().unwrap_or_else(cubic),
                "",
                None,
                Setting::Congestion,
            ),
            axis(
                &self.tcp_notsent_lowat.clone().unwrap_or_else(lowats),
                "lowat-",
                None,
                Setting::Lowat,
            ),
            axis(&wmem, "wmem-", wmem_omit.as_ref(), Setting::Wmem),
            axis(&rmem, "rmem-", rmem_omit.as_ref(), Setting::Rmem),
            axis(
                &or_unset(&self.adv_win_scale),
                "adv-",
                Some(&None),
                Setting::AdvWinScale,
            ),
            axis(
                &or_unset(&self.sndbuf),
                "sndbuf-",
                Some(&None),
                Setting::Sndbuf,
            ),
            axis(
                &or_unset(&self.rcvbuf),
                "rcvbuf-",
                Some(&None),
                Setting::Rcvbuf,
            ),
            axis(
                &or_unset(&self.pacing_rate),
                "pacing-",
                Some(&None),
                Setting::PacingRate,
            ),
            self.write_modes(),
        ]
    }

    /// Rate x RTT, with the loss and queue every path shares.
    fn paths(&self) -> Vec<AxisValue> {
        let loss_pct = self.loss.map_or(0.0, |p| p * 100.0);
        let gbit = || List::of([("1gbit", 1_000_000_000)]);
        let rtt_466ms = || List::of([("466ms", Duration::from_millis(466))]);
        let rates = self.rate.clone().unwrap_or_else(gbit);
        let rtts = self.rtt.clone().unwrap_or_else(rtt_466ms);
        let mut paths = Vec::new();
        for rate in rates.entries() {
            for rtt in rtts.entries() {
                paths.push(AxisValue {
                    label: Some(format!("{}_{}", rate.text, rtt.text)),
                    set: Setting::Path(Some(PathSettings {
                        rate_bps: rate.value,
                        rtt_us: rtt.value.as_micros() as u64,
                        loss_pct,
                        queue_packets: self.queue,
                    })),
                });
            }
        }
        paths
    }

    /// The direction axis, labelled where it is not forward; real hosts only forward.
    fn directions(&self, lab: bool) -> Result<Vec<AxisValue>, CliError> {
        let forward = || List::of([(Direction::Forward.name(), Direction::Forward)]);
        let directions = self.direction.clone().unwrap_or_else(forward);
        let values = directions.entries().iter().map(|e| e.value);
        if let Some(other) = values.clone().find(|d| !lab && !d.is_forward()) {
            return Err(CliError::DirectionOnHosts(other));
        }
        if !self.reverse_group.is_empty() && !values.clone().any(|d| d == Direction::Both) {
            return Err(CliError::ReverseGroupWithoutBoth);
        }
        Ok(axis(
            &directions,
            "",
            Some(&Direction::Forward),
            Setting::Direction,
        ))
    }

    /// The writer axis: labelled only where it is not the daemon's default.
    fn write_modes(&self) -> Vec<AxisValue> {
        let until_eagain = || List::of([("until-eagain", WriteMode::UntilEagain)]);
        let modes = self.write_mode.clone().unwrap_or_else(until_eagain);
        let entries = modes.entries().iter();
        entries
            .map(|e| AxisValue {
                label: (!e.value.is_until_eagain()).then(|| e.value.to_string()),
                set: Setting::WriteMode(e.value),
            })
            .collect()
    }

    fn patterns(&self, pattern: PatternConfig) -> Vec<AxisValue> {
        let oscillating = || List::of([("oscillating", ReadPattern::Oscillating)]);
        let patterns = self.pattern.clone().unwrap_or_else(oscillating);
        let entries = patterns.entries().iter();
        entries
            .map(|e| {
                let full_speed = e.value == ReadPattern::FullSpeed;
                AxisValue {
                    label: full_speed.then(|| "full-speed".to_owned()),
                    set: Setting::Pattern(PatternConfig {
                        full_speed,
                        ..pattern
                    }),
                }
            })
            .collect()
    }
}

/// Refuses a `--cc` entry this kernel has neither loaded nor as a module, naming those it
/// has. Only for the emulated lab, whose daemon runs on this kernel; a real sender's daemon
/// refuses the session instead (before any data flows).
pub fn check_congestion_available(
    job: &Job,
    available: impl FnOnce() -> std::io::Result<CongestionControls>,
) -> Result<(), CliError> {
    let Job::New(campaign) = job else {
        return Ok(());
    };
    if !matches!(campaign.backend, BackendSpec::Netns { .. }) {
        return Ok(());
    }
    let configs = crate::plan::matrix::configurations(&campaign.matrix);
    let mut names: Vec<&str> = Vec::new();
    for name in configs
        .iter()
        .filter_map(|c| c.settings.congestion.as_deref())
    {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    if names.is_empty() {
        return Ok(());
    }
    let available = available().map_err(CliError::CongestionList)?;
    match names.into_iter().find(|name| !available.has(name)) {
        None => Ok(()),
        Some(name) => Err(CliError::NoSuchCongestion {
            name: name.to_owned(),
            available: available.describe(),
        }),
    }
}

/// `--inventory FILE --pairs …` (with `--ssh-option`, `--remote-bin`, `--install`): the
/// fleet, or why not in one line (the file and the line when the inventory is at fault).
fn fleet_spec(cli: &Cli, path: &std::path::Path) -> Result<BackendSpec, CliError> {
    use std::io::IsTerminal;
    // Waiting for a terminal's input no one knows is asked for looks like a hang.
    if path == std::path::Path::new("-") && std::io::stdin().is_terminal() {
        return Err(CliError::InventoryFromTerminal);
    }
    let plugins = match cli.inventory_plugins {
        true => Plugins::Allowed,
        false => Plugins::StaticOnly,
    };
    let (hosts, reader) =
        crate::backend::fleet::inventory::load(path, plugins).map_err(|source| {
            CliError::Inventory {
                path: path.to_path_buf(),
                source,
            }
        })?;
    crate::campaign::ui::say(&format!(
        "oscil-lab: {} host(s) read from {} {}, {}",
        hosts.len(),
        crate::backend::fleet::inventory::source_name(path),
        reader.text(),
        plugins.text()
    ));
    let pairs = cli.pairs.as_deref().unwrap_or("all");
    let pairs = crate::backend::fleet::pairs::parse_pairs(pairs, &hosts)?;
    let spec = crate::config::FleetSpec {
        hosts,
        pairs,
        ssh_options: cli.ssh_option.clone(),
        remote_bin: cli.remote_bin.clone(),
        install: cli.install,
    };
    spec.check()?;
    Ok(BackendSpec::Fleet(spec))
}

//! oscil-lab: campaigns. A plan (every combination of the listed settings, each repeated,
//! in a seeded order) run on a backend (two namespaces joined by an emulated link, or two
//! real hosts over ssh), kept in a campaign directory that can be resumed, with every
//! setting changed on a host recorded first and restored on every exit path.

mod backend;
mod campaign;
pub mod cli;
mod config;
mod execute;
mod leftovers;
mod plan;
pub mod progress;
mod remote;
mod sys;

use std::path::{Path, PathBuf};
use std::time::Duration;

use oscil_model::campaign::{
    Backend as BackendKind, Campaign, CampaignRunStatus, Direction, RunSettings, SlowRateBasis,
    CAMPAIGN_FORMAT_VERSION, CAMPAIGN_JSON,
};
use oscil_model::lab::LinkKind;
use oscil_rundir::safe_fs;

use backend::Backend;
use backend::{fleet, hosts, netns};
use campaign::dir::CampaignDir;
pub use campaign::dir::Finished;
use campaign::error::LabError;
use campaign::finish::finish_campaign;
use campaign::{meta, sysctl, ui};
use config::{BackendSpec, Job, NewCampaign};
use execute::Ended;
use plan::capacity;
use plan::matrix::{configurations, plan_runs, planned_duration};
use remote::host::Host;

/// Where this build's binaries are: `$OSCIL_BIN_DIR`, else beside `oscil-lab` itself.
pub fn bin_dir() -> PathBuf {
    std::env::var_os("OSCIL_BIN_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok()?.parent().map(Path::to_owned))
        .unwrap_or_else(|| PathBuf::from("."))
}

pub fn run_job(job: Job, bin: &Path, now_unix_ms: u64) -> Result<Finished, LabError> {
    match job {
        Job::Restore { dir } => {
            // Only a campaign's directory holds what to restore: a run's, an empty one or a
            // typo is named as such, not "nothing to restore".
            if !dir.join(campaign::sysctl::RESTORE_JSON).exists() {
                oscil_rundir::campaign::check_is_campaign(&dir)?;
            }
            let restored = fleet::restore_all(&dir)?;
            ui::say(&format!(
                "oscil-lab: {}",
                if restored {
                    "every recorded setting is back"
                } else {
                    "nothing to restore"
                }
            ));
            Ok(Finished::Complete)
        }
        Job::New(new) if matches!(new.backend, BackendSpec::Fleet(_)) => {
            new_fleet(&new, bin, now_unix_ms)
        }
        Job::New(new) if new.dry_run => {
            check_out(&new.out, new.force)?;
            print_plan(&plan_new(&new, now_unix_ms), &new.backend);
            Ok(Finished::Complete)
        }
        Job::New(new) => {
            prepare_out(&new.out, new.force)?;
            remove_leftovers();
            let campaign = plan_new(&new, now_unix_ms);
            run_campaign(
                CampaignDir {
                    dir: new.out.clone(),
                    campaign,
                },
                &new.backend,
                bin,
            )
        }
        Job::Resume { dir, dry_run } => {
            oscil_rundir::campaign::check_is_campaign(&dir)?;
            // campaign.json names hosts, options and directories root acts on: only when
            // nobody else could have written it.
            safe_fs::check_trusted_dir(&dir)?;
            safe_fs::check_trusted(&dir.join(CAMPAIGN_JSON))?;
            let campaign = oscil_rundir::campaign::load(&dir)?;
            let spec = backend_spec(&campaign)?;
            if !dry_run {
                remove_leftovers();
            }
            if let BackendSpec::Fleet(fleet) = &spec {
                if dry_run {
                    fleet::print_plan(&campaign, fleet);
                    return Ok(Finished::Complete);
                }
                if fleet::restore_all(&dir)? {
                    ui::say("oscil-lab: restored the settings an earlier attempt left changed");
                }
                return fleet::run(CampaignDir { dir, campaign }, fleet, bin);
            }
            if dry_run {
                print_plan(&campaign, &spec);
                return Ok(Finished::Complete);
            }
            if fleet::restore_all(&dir)? {
                ui::say("oscil-lab: restored the settings an earlier attempt left changed");
            }
            run_campaign(CampaignDir { dir, campaign }, &spec, bin)
        }
    }
}

/// A new many-host campaign: planned in rounds, printed (`--dry-run`) or run.
fn new_fleet(new: &NewCampaign, bin: &Path, now_unix_ms: u64) -> Result<Finished, LabError> {
    let BackendSpec::Fleet(spec) = &new.backend else {
        unreachable!("only fleets come here")
    };
    let mut campaign = plan_new(new, now_unix_ms);
    let (runs, rounds) = fleet::plan_runs_of_pairs(new, spec);
    campaign.runs = runs;
    if let Some(hosts) = campaign.hosts.as_mut() {
        hosts["planned_rounds"] = rounds.into();
    }
    if new.dry_run {
        check_out(&new.out, new.force)?;
        fleet::print_plan(&campaign, spec);
        return Ok(Finished::Complete);
    }
    prepare_out(&new.out, new.force)?;
    remove_leftovers();
    fleet::run(
        CampaignDir {
            dir: new.out.clone(),
            campaign,
        },
        spec,
        bin,
    )
}

/// Before a campaign makes anything: what labs killed before they could clean up left.
fn remove_leftovers() {
    if let Some(line) = leftovers::remove().line() {
        ui::say(&line);
    }
}

fn plan_new(new: &NewCampaign, now_unix_ms: u64) -> Campaign {
    let configs = configurations(&new.matrix);
    Campaign {
        format_version: CAMPAIGN_FORMAT_VERSION,
        software: format!("oscil-lab {}", env!("CARGO_PKG_VERSION")),
        created_unix_ms: now_unix_ms,
        backend: match new.backend {
            BackendSpec::Netns { .. } => BackendKind::Netns,
            BackendSpec::Hosts(_) | BackendSpec::Fleet(_) => BackendKind::Hosts,
        },
        sender: String::new(),
        receiver: String::new(),
        order: new.order,
        seed: new.seed,
        repeat: new.repeat,
        runs: plan_runs(&configs, new.repeat, new.order, new.seed),
        hosts: Some(serde_json::json!({ "lab_backend": new.backend })),
        calibrations: Vec::new(),
    }
}

fn backend_spec(campaign: &Campaign) -> Result<BackendSpec, LabError> {
    let value = campaign
        .hosts
        .as_ref()
        .and_then(|h| h.get("lab_backend"))
        .cloned()
        .ok_or(LabError::NotResumable)?;
    let spec = serde_json::from_value(value)
        .map_err(|e| LabError::Setup(format!("campaign.json does not say how it ran ({e})")))?;
    let refused =
        |why: &dyn std::fmt::Display| LabError::Setup(format!("campaign.json: {why}; refused"));
    match &spec {
        BackendSpec::Hosts(hosts) => hosts.check().map_err(|why| refused(&why))?,
        BackendSpec::Fleet(fleet) => fleet.check().map_err(|why| refused(&why))?,
        BackendSpec::Netns { .. } => {}
    }
    Ok(spec)
}

/// `--dry-run`: every run still to do, with its settings, and the total.
fn print_plan(campaign: &Campaign, spec: &BackendSpec) {
    let todo: Vec<_> = campaign
        .runs
        .iter()
        .filter(|r| r.status != CampaignRunStatus::Complete)
        .collect();
    if let Some(first) = todo.first() {
        let full_speed = todo
            .iter()
            .filter(|r| r.settings.pattern.full_speed)
            .count();
        let pattern = match full_speed {
            0 => "",
            n if n == todo.len() => " (read at full speed as long)",
            _ => " (full-speed: read at full speed as long)",
        };
        oscil_cli::outln!("every run: {}", shared_words(&first.settings, pattern));
        // Forward is the default, left unsaid as the labels leave it.
        if todo.iter().any(|r| !r.settings.direction.is_forward()) {
            oscil_cli::outln!("direction: {}", directions_words(&todo));
        }
        oscil_cli::outln!(
            "   #  rep  configuration (its label names what differs from the defaults)"
        );
    }
    for run in &todo {
        oscil_cli::outln!("{:>4}  {:>3}  {}", run.position, run.repetition, run.label);
    }
    if matches!(
        spec,
        BackendSpec::Netns {
            link: LinkKind::Tun,
            ..
        }
    ) {
        let mut said = Vec::new();
        for run in &todo {
            let Some(path) = &run.settings.path else {
                continue;
            };
            let held = capacity::HELD_ON_TIME;
            match capacity::warning(path, run.settings.flows, held) {
                Some(warning) if !said.contains(&warning) => {
                    ui::say(&format!("oscil-lab: warning: {warning}"));
                    said.push(warning);
                }
                _ => {}
            }
        }
    }
    let total = planned_duration(todo.iter().copied(), spec.per_run_overhead());
    oscil_cli::outln!(
        "{} run(s), {} order (seed {}), about {} in all ({} per run beyond the pattern and the session's round trips)",
        todo.len(),
        format!("{:?}", campaign.order).to_lowercase(),
        campaign.seed,
        ui::human_duration(total),
        ui::human_duration(spec.per_run_overhead())
    );
}

/// Which way the runs' data flows, and a `both` run's reverse pair's flows.
fn directions_words(runs: &[&oscil_model::campaign::CampaignRun]) -> String {
    let mut words: Vec<String> = Vec::new();
    for run in runs {
        let s = &run.settings;
        let word = match s.direction {
            Direction::Forward => "forward (sender to receiver)".to_owned(),
            Direction::Reverse => "reverse (receiver to sender)".to_owned(),
            Direction::Both => {
                let reverse = oscil_protocol::request::SessionRequest::of_run(&s.reverse_pair());
                let groups = reverse.flow_groups();
                let groups: Vec<String> = groups.iter().map(oscil_cli::group::spec_of).collect();
                format!("both at once (the reverse pair: {})", groups.join(" and "))
            }
        };
        if !words.contains(&word) {
            words.push(word);
        }
    }
    words.join("; ")
}

/// What every run of a plan shares, in words: the axes' values are in the labels.
fn shared_words(settings: &RunSettings, pattern_note: &str) -> String {
    let p = &settings.pattern;
    let ms = |ms: u64| ui::human_duration(Duration::from_millis(ms));
    let slow_at = match (&settings.slow_rate_basis, settings.slow_rate_bps) {
        (Some(SlowRateBasis::Given), Some(rate)) => {
            format!(" at {} Mbit/s", rate.bps() as f64 / 1e6)
        }
        (Some(basis), _) => format!(" at {}", basis.describe(p.fraction)),
        (None, _) => String::new(),
    };
    let mut words = vec![
        format!(
            "{} fast, {} slow{slow_at}, {} cycle(s){pattern_note}",
            ms(p.fast_ms),
            ms(p.slow_ms),
            p.cycles
        ),
        format!("{} flow(s)", settings.flows),
        format!(
            "sampled every {}",
            humantime::format_duration(Duration::from_micros(settings.interval_us))
        ),
    ];
    if let Some(us) = settings.marker_every_us {
        words.push(format!(
            "markers every {}",
            humantime::format_duration(Duration::from_micros(us))
        ));
    }
    if let Some(bytes) = settings.write_size_bytes {
        words.push(format!("{bytes}-byte writes"));
    }
    // As the reader will be asked: a group's slow rate filled in from the path's.
    let request = oscil_protocol::request::SessionRequest::of_run(settings);
    for (group, number) in request.groups.iter().zip(1..) {
        words.push(format!(
            "group {number}: {}",
            oscil_cli::group::spec_of(group)
        ));
    }
    words.join(", ")
}

/// `cannot create DIR: a file is there, not a directory`, as the reader and the report say.
fn cannot_create(dir: &Path, error: &std::io::Error) -> LabError {
    LabError::Out(oscil_rundir::RunDirError::cannot_create(dir, error))
}

/// What [`prepare_out`] checks, touching nothing (`--dry-run` checks it too): true when
/// `--force` is to clear an earlier campaign there.
fn check_out(out: &Path, force: bool) -> Result<bool, LabError> {
    // The directories above too: another user's could have the campaign swapped for a copy.
    safe_fs::check_trusted_dir(out)?;
    let mut entries = match std::fs::read_dir(out) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) if out.is_file() => return Err(cannot_create(out, &e)),
        Err(source) => return Err(LabError::io("cannot read", out.to_owned(), source)),
    };
    if entries.next().is_none() {
        return Ok(false);
    }
    if !force {
        return Err(LabError::OutInUse(out.to_owned()));
    }
    if out.join(sysctl::RESTORE_JSON).exists() || fleet::has_restore(out) {
        return Err(LabError::Setup(format!(
            "{}: a campaign there left settings to restore; run oscil-lab restore {0} first",
            out.display()
        )));
    }
    Ok(true)
}

/// A new campaign needs an empty (or absent) directory, or `--force`; one that exists must
/// be owned by root (or this user) and writable by nobody else, or another user could
/// plant links in it for root to write through.
fn prepare_out(out: &Path, force: bool) -> Result<(), LabError> {
    if !check_out(out, force)? {
        return Ok(());
    }
    for name in [CAMPAIGN_JSON, "runs", "report", "logs", fleet::PAIRS_DIR] {
        let path = out.join(name);
        let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
    }
    Ok(())
}

fn check_binaries(bin: &Path, names: &[&str]) -> Result<(), LabError> {
    match names.iter().find(|name| !bin.join(name).is_file()) {
        Some(name) => Err(LabError::Setup(format!(
            "{} is missing (build with cargo build --release --workspace, or set OSCIL_BIN_DIR)",
            bin.join(name).display()
        ))),
        None => Ok(()),
    }
}

/// What the namespace lab needs of this machine, checked before anything is made.
fn check_netns_prerequisites(link: LinkKind, bin: &Path) -> Result<(), LabError> {
    let mut needed = vec!["oscil-daemon", "oscil-reader"];
    if link == LinkKind::Tun {
        needed.push("oscil-link");
    }
    check_binaries(bin, &needed)?;
    if Host::Local.run(&["id", "-u"])? != "0" {
        return Err(LabError::Setup(
            "needs root: it creates network namespaces, TUN devices and per-namespace sysctls \
             (run it with sudo)"
                .into(),
        ));
    }
    Ok(())
}

fn make_backend(
    spec: &BackendSpec,
    campaign: &Campaign,
    dir: &Path,
    bin: &Path,
) -> Result<Box<dyn Backend>, LabError> {
    match spec {
        BackendSpec::Netns { link, pcap } => {
            let mut congestion: Vec<String> = campaign
                .runs
                .iter()
                .filter_map(|r| r.settings.congestion.clone())
                .collect();
            congestion.sort();
            congestion.dedup();
            Ok(Box::new(netns::Netns::new(*link, *pcap, bin, &congestion)?))
        }
        BackendSpec::Hosts(hosts) => Ok(Box::new(hosts::Hosts::new(hosts, dir, bin)?)),
        BackendSpec::Fleet(_) => Err(LabError::Setup(
            "a fleet runs through oscil_lab::backend::fleet, not one backend".into(),
        )),
    }
}

fn run_campaign(
    mut cdir: CampaignDir,
    spec: &BackendSpec,
    bin: &Path,
) -> Result<Finished, LabError> {
    if cdir
        .campaign
        .runs
        .iter()
        .all(|r| r.status == CampaignRunStatus::Complete)
    {
        // Resuming a finished campaign: nothing to set up, only the report to redo.
        finish_campaign(&mut cdir, bin)?;
        return Ok(Finished::Complete);
    }
    sys::catch_stop_signals()
        .map_err(|e| LabError::Setup(format!("cannot catch SIGINT/SIGTERM: {e}")))?;
    let mut backend = set_up(&mut cdir, spec, bin)?;
    let ended = run_all(&mut cdir, backend.as_mut(), bin);
    // Whatever happened, the backend puts everything back before anything else.
    let closed = backend.close();
    drop(backend);
    let ended = ended?;
    closed?;
    finish_campaign(&mut cdir, bin)?;
    let complete = cdir
        .campaign
        .runs
        .iter()
        .all(|r| r.status == CampaignRunStatus::Complete);
    Ok(match ended {
        Ended::Interrupted(signal) => {
            ui::say(&format!(
                "oscil-lab: stopped by signal {signal}; oscil-lab --resume {} continues",
                cdir.dir.display()
            ));
            Finished::Interrupted(signal)
        }
        Ended::Done if complete => Finished::Complete,
        Ended::Done => Finished::Incomplete,
    })
}

/// Checks this machine, makes the backend, and records its ends and facts.
fn set_up(
    cdir: &mut CampaignDir,
    spec: &BackendSpec,
    bin: &Path,
) -> Result<Box<dyn Backend>, LabError> {
    if let BackendSpec::Netns { link, .. } = spec {
        check_netns_prerequisites(*link, bin)?;
    }
    let made = !cdir.dir.exists();
    std::fs::create_dir_all(&cdir.dir).map_err(|e| cannot_create(&cdir.dir, &e))?;
    // Again: another user may have made it between the check and now.
    safe_fs::check_trusted_dir(&cdir.dir)?;
    let backend = make_backend(spec, &cdir.campaign, &cdir.dir, bin).inspect_err(|_| {
        // A start that failed (a host out of reach) leaves no empty --out behind; one that
        // holds anything stays, as remove_dir takes only an empty directory.
        if made {
            let _ = std::fs::remove_dir(&cdir.dir);
        }
    })?;
    let ends = backend.ends();
    cdir.campaign.sender = ends.sender;
    cdir.campaign.receiver = ends.receiver;
    let mut hosts = backend.facts();
    hosts["lab_backend"] = serde_json::to_value(spec).expect("spec serializes");
    cdir.campaign.hosts = Some(hosts);
    cdir.save()?;
    Ok(backend)
}

/// Every run still to do, with the terminal's progress bar and the warnings file.
fn run_all(
    cdir: &mut CampaignDir,
    backend: &mut dyn Backend,
    bin: &Path,
) -> Result<Ended, LabError> {
    let todo: Vec<_> = cdir
        .campaign
        .runs
        .iter()
        .filter(|r| r.status != CampaignRunStatus::Complete)
        .cloned()
        .collect();
    ui::say(&format!(
        "oscil-lab: {} run(s) into {} ({} -> {})",
        todo.len(),
        cdir.dir.display(),
        cdir.campaign.sender,
        cdir.campaign.receiver
    ));
    for warning in meta::axis_warnings(&todo, backend.receiver_kernel()) {
        ui::say(&format!("oscil-lab: warning: {warning}"));
    }
    let overhead = backend.per_run_overhead();
    let mut ui = ui::Ui::new(
        todo.len() as u64,
        planned_duration(&todo, overhead),
        overhead,
        bin,
    );
    let ended = execute::execute(cdir, backend, &mut ui);
    ui.finish();
    write_warnings(&cdir.dir, &ui.warnings)?;
    ended
}

/// `<out>/warnings.txt`: every distinct warning of the runs, one a line.
fn write_warnings(dir: &Path, warnings: &[String]) -> Result<(), LabError> {
    if warnings.is_empty() {
        return Ok(());
    }
    let path = dir.join("warnings.txt");
    std::fs::write(&path, warnings.join("\n") + "\n")
        .map_err(|source| LabError::io("cannot write", path, source))
}

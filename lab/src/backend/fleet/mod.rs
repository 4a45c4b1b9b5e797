//! Many hosts: the inventory's pairs, each a two-host campaign of the same matrix, run in
//! rounds ([`schedule`]) so no host is ever in two runs at once, the runs of a round
//! in parallel (a thread per pair), everything over OpenSSH as the two-host backend does it
//! (each pair a [`Hosts`] with its own `pairs/<pair>/restore.json`, every connection to a
//! host shared through one control socket). A host that cannot be reached, or a pair that
//! fails its pre-flight, fails only that pair's runs.
//!
//! ```text
//! <out>/campaign.json                  every run, with its pair; the rounds; each pair's facts
//! <out>/runs/<pair>/<label>/rep-<k>/   the run directories
//! <out>/pairs/<pair>/restore.json      what to put back on the pair's hosts, while changed
//! <out>/pairs/<pair>/path.json         the measured path: ping and the runs' minimum RTT
//! <out>/report/                        one report, a recommendation per path, the mesh
//! ```

pub(crate) mod inventory;
pub(crate) mod pairs;
mod schedule;
mod ui;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use oscil_model::campaign::{Calibration, Campaign, CampaignRun, CampaignRunStatus};
use oscil_rundir::safe_fs;

use super::calibration::calibrate_before;
use super::hosts::{close_connection, preflight, Endpoint, Hosts, PairSpec};
use super::Backend;
use crate::campaign::dir::{outcome, set_aside, CampaignDir, Finished};
use crate::campaign::error::LabError;
use crate::campaign::finish::finish_campaign;
use crate::campaign::sysctl::{self, RestoreFile};
use crate::campaign::ui::{human_duration, say};
use crate::config::{FleetSpec, NewCampaign};
use crate::plan::calibrate;
use crate::plan::matrix::{configurations, plan_runs, planned_duration};
use crate::remote::host::Host;
use crate::remote::lock::{self, HostLock, LockError};
use inventory::InventoryHost;
use pairs::Pair;
use ui::describe;

/// Where each pair keeps its restore file and its measured path.
pub const PAIRS_DIR: &str = "pairs";
/// How long a restore waits for a held host: long enough for a lab killed just before to
/// let its hosts go, short enough that a restore under a running campaign is soon refused.
const RESTORE_PATIENCE: Duration = Duration::from_secs(5);
/// Time a run takes beyond its pattern on real hosts, for estimates.
const OVERHEAD: Duration = Duration::from_secs(5);

/// Every pair's runs (each pair's own seeded order, as a one-pair campaign would have it),
/// put in round order: positions count through the rounds.
pub fn plan_runs_of_pairs(new: &NewCampaign, spec: &FleetSpec) -> (Vec<CampaignRun>, usize) {
    let configs = configurations(&new.matrix);
    let mut runs = Vec::new();
    for (i, pair) in spec.pairs.iter().enumerate() {
        let seed = new.seed.wrapping_add(i as u64);
        for mut run in plan_runs(&configs, new.repeat, new.order, seed) {
            run.pair = Some(pair.dir_name());
            run.dir = Path::new("runs")
                .join(pair.dir_name())
                .join(&run.label)
                .join(format!("rep-{}", run.repetition));
            runs.push(run);
        }
    }
    let rounds = rounds_of(&runs, spec, |_| true);
    let mut ordered: Vec<CampaignRun> = rounds.concat().iter().map(|&i| runs[i].clone()).collect();
    for (place, run) in ordered.iter_mut().enumerate() {
        run.position = place as u32 + 1;
    }
    (ordered, rounds.len())
}

/// The rounds of the runs `wanted` keeps, as indices into `runs`.
fn rounds_of(
    runs: &[CampaignRun],
    spec: &FleetSpec,
    wanted: impl Fn(&CampaignRun) -> bool,
) -> Vec<Vec<usize>> {
    let tagged: Vec<(usize, &Pair)> = runs
        .iter()
        .enumerate()
        .filter(|(_, r)| wanted(r))
        .filter_map(|(i, r)| Some((i, pair_of(spec, r)?)))
        .collect();
    schedule::rounds(&tagged)
}

/// The pair a run belongs to, by its directory name.
fn pair_of<'a>(spec: &'a FleetSpec, run: &CampaignRun) -> Option<&'a Pair> {
    let name = run.pair.as_deref()?;
    spec.pairs.iter().find(|p| p.dir_name() == name)
}

fn pending(run: &CampaignRun) -> bool {
    run.status != CampaignRunStatus::Complete
}

/// `--dry-run`: the rounds still to run, each with its runs, and the wall time.
pub fn print_plan(campaign: &Campaign, spec: &FleetSpec) {
    print!("{}", ui::hosts_table(spec));
    let rounds = rounds_of(&campaign.runs, spec, pending);
    let duration = |i: usize| planned_duration([&campaign.runs[i]], OVERHEAD);
    for (k, round) in rounds.iter().enumerate() {
        let runs: Vec<String> = round
            .iter()
            .map(|&i| describe(&campaign.runs[i], spec))
            .collect();
        oscil_cli::outln!("round {:>3}: {}", k + 1, runs.join(", "));
    }
    let todo: Vec<(usize, &Pair)> = campaign
        .runs
        .iter()
        .enumerate()
        .filter(|(_, r)| pending(r))
        .filter_map(|(i, r)| Some((i, pair_of(spec, r)?)))
        .collect();
    oscil_cli::outln!(
        "{} run(s) of {} pair(s) in {} round(s) (the busiest host is in {} runs); about {} in all ({} per run beyond the pattern)",
        todo.len(),
        spec.pairs.len(),
        rounds.len(),
        schedule::lower_bound(&todo),
        human_duration(schedule::wall_time(&rounds, duration)),
        human_duration(OVERHEAD),
    );
}

/// How each end of `pair` is reached: its inventory entry, the common ssh options, and
/// its own port and binary directory.
fn pair_spec(spec: &FleetSpec, pair: &Pair) -> PairSpec {
    let end = |name: &str| {
        let host = spec
            .host(name)
            .expect("checked: pairs name inventory hosts");
        endpoint(spec, host)
    };
    PairSpec {
        sender: end(&pair.sender),
        receiver: Some(end(&pair.receiver)),
        install: spec.install,
        pcap: false,
    }
}

fn endpoint(spec: &FleetSpec, host: &InventoryHost) -> Endpoint {
    let mut ssh_options = spec.ssh_options.clone();
    if let Some(port) = host.port {
        ssh_options.push(format!("Port={port}"));
    }
    Endpoint {
        target: host.target(),
        ssh_options,
        remote_bin: host.bin_dir.clone().or_else(|| spec.remote_bin.clone()),
    }
}

/// `oscil-lab restore DIR`: the campaign's own restore file and every pair's, the pairs in
/// parallel and every host's commands through one shared ssh connection (a restore after a
/// crash connects afresh; a connection per command costs seconds on a long path).
pub fn restore_all(dir: &Path) -> Result<bool, LabError> {
    if !dir.is_dir() {
        return Err(sysctl::RestoreError::NoDir(dir.to_owned()).into());
    }
    let control = safe_fs::private_temp_dir("oscil-ssh-")?;
    let control_path = control.path().join("%C").display().to_string();
    let mut files = Vec::new();
    for file_dir in std::iter::once(dir.to_owned()).chain(pair_dirs(dir)?) {
        if let Some(mut file) = RestoreFile::load(&file_dir)? {
            for host in restore_hosts(&mut file) {
                if let Host::Ssh(ssh) = host {
                    ssh.control_path = Some(control_path.clone());
                }
            }
            files.push((file_dir, file));
        }
    }
    // Not under a campaign that holds these hosts now (the one that left the files, still
    // running, or another).
    let mut held: Vec<Host> = Vec::new();
    for (_, file) in &mut files {
        for host in restore_hosts(file) {
            if !matches!(host, Host::Netns(_)) && !held.contains(host) {
                held.push(host.clone());
            }
        }
    }
    let _locks = lock::take_all_within(&held, &lock::holder(dir), RESTORE_PATIENCE)?;
    let mut restored = false;
    let results: Vec<Result<(), sysctl::RestoreError>> = std::thread::scope(|s| {
        let handles: Vec<_> = files
            .iter()
            .map(|(pair_dir, file)| s.spawn(move || file.restore(pair_dir)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("restore thread"))
            .collect()
    });
    let mut connected: Vec<Host> = Vec::new();
    for (_, mut file) in files {
        for host in restore_hosts(&mut file) {
            if !connected.contains(host) {
                close_connection(host);
                connected.push(host.clone());
            }
        }
    }
    for result in results {
        result?;
        restored = true;
    }
    Ok(restored)
}

/// Every host a restore file names.
fn restore_hosts(file: &mut RestoreFile) -> impl Iterator<Item = &mut Host> {
    let hosts = file.hosts.iter_mut().map(|h| &mut h.host);
    let daemon = file.daemon.iter_mut().map(|d| &mut d.host);
    hosts
        .chain(daemon)
        .chain(file.temp_dirs.iter_mut().map(|t| &mut t.host))
}

/// True when some pair of the campaign in `dir` left settings to restore.
pub fn has_restore(dir: &Path) -> bool {
    pair_dirs(dir).is_ok_and(|dirs| dirs.iter().any(|d| d.join(sysctl::RESTORE_JSON).exists()))
}

/// `<dir>/pairs/*`, directories only (a link there is not followed).
fn pair_dirs(dir: &Path) -> Result<Vec<PathBuf>, LabError> {
    let root = dir.join(PAIRS_DIR);
    let entries = match std::fs::read_dir(&root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(LabError::io("cannot read", root, source)),
        Ok(entries) => entries,
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// A pair ready to run, or why it is not.
type PairBackend = Result<Hosts, PairDown>;

/// Why a host is down for this campaign: not reached, or its lock not taken. Shared by
/// every pair the host is in.
type HostDown = Arc<LabError>;

/// Why a pair could not start; `campaign.json` and the pair's runs keep its words.
#[derive(Debug, thiserror::Error)]
enum PairDown {
    #[error("host {host}: {cause}")]
    Host { host: String, cause: HostDown },
    #[error("{}: {source}", dir.display())]
    Dir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Setup(LabError),
}

/// Runs every run not complete, round by round, then the paths, the report and the table.
pub fn run(mut cdir: CampaignDir, spec: &FleetSpec, bin: &Path) -> Result<Finished, LabError> {
    if !cdir.campaign.runs.iter().any(pending) {
        finish(&mut cdir, spec, bin)?;
        return Ok(Finished::Complete);
    }
    crate::sys::catch_stop_signals()
        .map_err(|e| LabError::Setup(format!("cannot catch SIGINT/SIGTERM: {e}")))?;
    std::fs::create_dir_all(cdir.dir.join(PAIRS_DIR))
        .map_err(|source| LabError::io("cannot create", cdir.dir.clone(), source))?;
    safe_fs::check_trusted_dir(&cdir.dir)?;
    // Saved first: a campaign refused for a held host is resumed once the host is free.
    cdir.save()?;
    let control = safe_fs::private_temp_dir("oscil-ssh-")?;
    let (mut backends, locks) = set_up(&mut cdir, spec, bin, control.path())?;
    let interrupted = run_rounds(&mut cdir, spec, &mut backends);
    // Whatever happened, every pair puts its hosts back before anything else; only then
    // are the hosts let go.
    let closed = close_all(&mut backends);
    drop(locks);
    for host in &spec.hosts {
        close_connection(&Host::Ssh(crate::remote::host::SshHost {
            target: host.target(),
            options: endpoint(spec, host).ssh_options,
            sudo: false,
            control_path: Some(control.path().join("%C").display().to_string()),
        }));
    }
    let interrupted = interrupted?;
    closed?;
    finish(&mut cdir, spec, bin)?;
    let complete = !cdir.campaign.runs.iter().any(pending);
    Ok(match interrupted {
        Some(signal) => {
            say(&format!(
                "oscil-lab: stopped by signal {signal}; oscil-lab --resume {} continues",
                cdir.dir.display()
            ));
            Finished::Interrupted(signal)
        }
        None if complete => Finished::Complete,
        None => Finished::Incomplete,
    })
}

/// Reaches every host once and takes its lock (a host another campaign holds refuses the
/// whole campaign, before anything is changed), then sets up each pair with runs to do (in
/// parallel); records each pair's facts, and fails the runs of pairs that could not be set
/// up. The locks are held until they are dropped.
fn set_up(
    cdir: &mut CampaignDir,
    spec: &FleetSpec,
    bin: &Path,
    control: &Path,
) -> Result<(BTreeMap<String, PairBackend>, Vec<HostLock>), LabError> {
    let todo: Vec<&Pair> = spec
        .pairs
        .iter()
        .filter(|p| {
            cdir.campaign
                .runs
                .iter()
                .any(|r| pending(r) && pair_of(spec, r) == Some(p))
        })
        .collect();
    let mut names: Vec<&str> = todo
        .iter()
        .flat_map(|p| [p.sender.as_str(), p.receiver.as_str()])
        .collect();
    names.sort_unstable();
    names.dedup();
    say(&format!(
        "oscil-lab: reaching {} host(s) for {} pair(s)",
        names.len(),
        todo.len()
    ));
    let mut reached = reach_hosts(spec, &names, control);
    let locks = lock_hosts(&mut reached, &cdir.dir)?;
    let dir = cdir.dir.clone();
    let backends: BTreeMap<String, PairBackend> = std::thread::scope(|s| {
        let handles: Vec<_> = todo
            .iter()
            .map(|&pair| {
                let down = [&pair.sender, &pair.receiver].into_iter().find_map(|h| {
                    let cause = reached[h.as_str()].as_ref().err()?;
                    Some(PairDown::Host {
                        host: h.clone(),
                        cause: Arc::clone(cause),
                    })
                });
                let pair_dir = dir.join(PAIRS_DIR).join(pair.dir_name());
                let ends = pair_spec(spec, pair);
                s.spawn(move || {
                    let backend = match down {
                        Some(why) => Err(why),
                        None => std::fs::create_dir_all(&pair_dir)
                            .map_err(|source| PairDown::Dir {
                                dir: pair_dir.clone(),
                                source,
                            })
                            .and_then(|()| {
                                Hosts::for_pair(&ends, &pair_dir, bin, control)
                                    .map_err(PairDown::Setup)
                            }),
                    };
                    (pair.dir_name(), backend)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("set-up thread"))
            .collect()
    });
    record_pairs(cdir, spec, &backends)?;
    Ok((backends, locks))
}

/// The lock of every host reached; a host whose lock could not be taken is down for this
/// campaign, one another campaign holds refuses it.
fn lock_hosts(
    reached: &mut BTreeMap<&str, Result<Host, HostDown>>,
    dir: &Path,
) -> Result<Vec<HostLock>, LabError> {
    let up: Vec<(&str, Host)> = reached
        .iter()
        .filter_map(|(name, r)| Some((*name, r.as_ref().ok()?.clone())))
        .collect();
    let hosts: Vec<Host> = up.iter().map(|(_, h)| h.clone()).collect();
    let mut locks = Vec::new();
    for ((name, _), taken) in up.iter().zip(lock::take_each(&hosts, &lock::holder(dir))) {
        match taken {
            Ok(lock) => locks.push(lock),
            Err(held @ LockError::Held { .. }) => return Err(held.into()),
            Err(failed) => {
                reached.insert(name, Err(Arc::new(failed.into())));
            }
        }
    }
    Ok(locks)
}

/// Each host once (in parallel): reached over ssh, as root or with `sudo -n`, its shared
/// connection opened; or why not.
fn reach_hosts<'a>(
    spec: &FleetSpec,
    names: &[&'a str],
    control: &Path,
) -> BTreeMap<&'a str, Result<Host, HostDown>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = names
            .iter()
            .map(|&name| {
                let end = endpoint(spec, spec.host(name).expect("in the inventory"));
                s.spawn(move || {
                    let reached = preflight(&end.target, &end.ssh_options, control);
                    (name, reached.map_err(Arc::new))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("preflight thread"))
            .collect()
    })
}

/// Each pair's facts (or why it could not start) into `campaign.json`; the runs of a
/// pair that could not start fail with that reason.
fn record_pairs(
    cdir: &mut CampaignDir,
    spec: &FleetSpec,
    backends: &BTreeMap<String, PairBackend>,
) -> Result<(), LabError> {
    let hosts = cdir
        .campaign
        .hosts
        .get_or_insert_with(|| serde_json::json!({}));
    for (name, backend) in backends {
        let facts = match backend {
            Ok(b) => b.facts(),
            Err(why) => serde_json::json!({ "failed": why.to_string() }),
        };
        hosts["pairs"][name] = facts;
    }
    cdir.campaign.sender = format!("{} pair(s)", spec.pairs.len());
    cdir.campaign.receiver = format!("{} host(s)", spec.hosts.len());
    for run in cdir.campaign.runs.iter_mut().filter(|r| pending(r)) {
        if let Some(Err(why)) = run.pair.as_ref().and_then(|p| backends.get(p)) {
            run.status = CampaignRunStatus::Failed;
            run.reason = Some(format!("the pair could not start: {why}"));
            say(&format!("oscil-lab: {}: {why}", describe(run, spec)));
        }
    }
    cdir.save()
}

/// What a pair's thread says as it goes.
enum Event {
    Tick {
        run: usize,
        elapsed: Duration,
        goodput: Option<String>,
    },
    Done {
        run: usize,
        status: CampaignRunStatus,
        reason: Option<String>,
        /// The pair's calibration, when this run made it (`calibrate_before`).
        calibration: Option<Calibration>,
    },
}

/// The rounds, one after another; within one, a thread per run. Returns the stop signal
/// when one came.
fn run_rounds(
    cdir: &mut CampaignDir,
    spec: &FleetSpec,
    backends: &mut BTreeMap<String, PairBackend>,
) -> Result<Option<i32>, LabError> {
    let ready = |r: &CampaignRun| {
        pending(r)
            && r.pair
                .as_ref()
                .is_some_and(|p| matches!(backends.get(p), Some(Ok(_))))
    };
    let rounds = rounds_of(&cdir.campaign.runs, spec, ready);
    let mut progress = ui::Progress::new(&cdir.campaign, &rounds, OVERHEAD);
    for (k, round) in rounds.iter().enumerate() {
        if let Some(signal) = crate::sys::stop_signal() {
            return Ok(Some(signal));
        }
        progress.start_round(k, round, &cdir.campaign, spec);
        // The round's pairs are distinct: each thread takes its pair's hosts and hands
        // them back.
        let mut jobs = Vec::new();
        for &i in round {
            let run = cdir.campaign.runs[i].clone();
            let pair = run.pair.clone().expect("fleet runs have a pair");
            let backend = backends.remove(&pair).expect("scheduled pairs are set up");
            jobs.push((i, run, pair, backend.expect("scheduled pairs are set up")));
        }
        let (tx, rx) = mpsc::channel();
        let dir = cdir.dir.clone();
        let returned = std::thread::scope(|s| -> Result<Vec<(String, Hosts)>, LabError> {
            let handles: Vec<_> = jobs
                .into_iter()
                .map(|(i, mut run, pair, mut backend)| {
                    let (tx, dir) = (tx.clone(), dir.clone());
                    s.spawn(move || {
                        let live = backend.live_reader_csv();
                        let mut looked = Instant::now();
                        let interval_us = run.settings.interval_us;
                        let ended = one_run(&dir, &mut run, &mut backend, &mut |elapsed| {
                            // A look at the remote reader's rows every 2 s, one command on
                            // the pair's shared connection.
                            let goodput = match &live {
                                Some((host, csv)) if looked.elapsed() > Duration::from_secs(2) => {
                                    looked = Instant::now();
                                    ui::remote_goodput(host, csv, interval_us)
                                }
                                _ => None,
                            };
                            let _ = tx.send(Event::Tick {
                                run: i,
                                elapsed,
                                goodput,
                            });
                        });
                        let (status, reason, calibration) = ended;
                        let _ = tx.send(Event::Done {
                            run: i,
                            status,
                            reason,
                            calibration,
                        });
                        (pair, backend)
                    })
                })
                .collect();
            drop(tx);
            follow(cdir, spec, &rx, &mut progress)?;
            Ok(handles
                .into_iter()
                .map(|h| h.join().expect("run thread"))
                .collect())
        })?;
        for (pair, backend) in returned {
            backends.insert(pair, Ok(backend));
        }
    }
    progress.finish();
    Ok(crate::sys::stop_signal())
}

/// Follows a round's threads until all are done: each run's status saved as it ends, the
/// progress shown every second.
fn follow(
    cdir: &mut CampaignDir,
    spec: &FleetSpec,
    rx: &mpsc::Receiver<Event>,
    progress: &mut ui::Progress,
) -> Result<(), LabError> {
    loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(Event::Tick {
                run,
                elapsed,
                goodput,
            }) => progress.tick(run, elapsed, goodput),
            Ok(Event::Done {
                run,
                status,
                reason,
                calibration,
            }) => {
                if let Some(calibration) = calibration {
                    calibrate::apply(&mut cdir.campaign, calibration);
                }
                let r = &mut cdir.campaign.runs[run];
                r.status = status;
                r.reason = reason;
                cdir.save()?;
                progress.done(run, &cdir.campaign.runs[run], spec);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
        }
        progress.show(&cdir.campaign, spec);
    }
}

/// One run on its pair's hosts, with its logs, after the pair's calibration when it waits
/// for one (`calibrate_before`): its status from what it left, and the calibration it made.
fn one_run(
    dir: &Path,
    run: &mut CampaignRun,
    backend: &mut Hosts,
    tick: &mut dyn FnMut(Duration),
) -> (CampaignRunStatus, Option<String>, Option<Calibration>) {
    let calibration = match calibrate_before(backend, dir, run, &mut |line| say(line)) {
        Ok(calibration) => calibration,
        Err(why) => return (CampaignRunStatus::Failed, Some(why.to_string()), None),
    };
    let run_dir = dir.join(&run.dir);
    let logs = dir.join("logs").join(format!(
        "{:03}_{}_{}_rep-{}",
        run.position,
        run.pair.as_deref().unwrap_or_default(),
        run.label,
        run.repetition
    ));
    let prepared = set_aside(&run_dir).and_then(|()| {
        for d in [run_dir.parent().unwrap_or(dir), &logs] {
            std::fs::create_dir_all(d)
                .map_err(|source| LabError::io("cannot create", d.to_owned(), source))?;
        }
        Ok(())
    });
    if let Err(e) = prepared {
        return (CampaignRunStatus::Failed, Some(e.to_string()), calibration);
    }
    let result = backend.run(run, &run_dir, &logs, tick);
    let (status, reason) = outcome(&run_dir, &result, &logs.join("reader.log"));
    (status, reason, calibration)
}

/// Every pair puts its hosts back (in parallel); the first failure is reported after all
/// were tried.
fn close_all(backends: &mut BTreeMap<String, PairBackend>) -> Result<(), LabError> {
    let results: Vec<Result<(), LabError>> = std::thread::scope(|s| {
        let handles: Vec<_> = backends
            .values_mut()
            .filter_map(|b| b.as_mut().ok())
            .map(|b| s.spawn(move || b.close()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("close thread"))
            .collect()
    });
    backends.clear();
    results.into_iter().collect()
}

/// Each pair's measured path (`pairs/<pair>/path.json` and `campaign.json`), then the
/// report and the end table as for one pair, and which pairs failed.
fn finish(cdir: &mut CampaignDir, spec: &FleetSpec, bin: &Path) -> Result<(), LabError> {
    for pair in &spec.pairs {
        record_path(cdir, pair)?;
    }
    finish_campaign(cdir, bin)?;
    oscil_cli::out!("{}", ui::pair_table(&cdir.campaign, spec));
    Ok(())
}

/// A pair's path as measured: the ping at set-up and the lowest RTT its runs saw.
fn record_path(cdir: &mut CampaignDir, pair: &Pair) -> Result<(), LabError> {
    let name = pair.dir_name();
    let min_rtt_us = oscil_rundir::campaign::complete_runs(&cdir.campaign, &cdir.dir)
        .filter(|(run, _)| run.pair.as_deref() == Some(&name))
        .filter_map(|(_, dir)| dir.ok())
        .filter_map(|d| oscil_rundir::load_rows::<oscil_model::files::rows::SenderSample>(&d).ok())
        .flatten()
        .map(|r| r.rtt_us)
        .filter(|&r| r > 0)
        .min();
    let hosts = cdir
        .campaign
        .hosts
        .get_or_insert_with(|| serde_json::json!({}));
    let facts = &mut hosts["pairs"][&name];
    if let Some(us) = min_rtt_us {
        facts["measured_min_rtt_us"] = us.into();
    }
    let path = serde_json::json!({
        "pair": pair.to_string(),
        "ping": facts["path"]["ping"],
        "measured_min_rtt_us": min_rtt_us,
    });
    let pair_dir = cdir.dir.join(PAIRS_DIR).join(&name);
    if pair_dir.is_dir() {
        let text = serde_json::to_vec_pretty(&path).expect("serializes");
        safe_fs::write_atomic(&pair_dir.join("path.json"), &text, 0o644)?;
    }
    cdir.save()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::fleet::inventory::parse;
    use crate::backend::fleet::pairs::parse_pairs;
    use crate::plan::matrix::{AxisValue, Matrix, Setting};
    use oscil_model::campaign::Order;

    fn new_campaign(pairs: &str) -> (NewCampaign, FleetSpec) {
        let hosts =
            parse("a ansible_host=10.0.0.1 ansible_port=2200\nb\nc\nd oscil_bin=/opt/o\n").unwrap();
        let spec = FleetSpec {
            pairs: parse_pairs(pairs, &hosts).unwrap(),
            hosts,
            ssh_options: vec!["User=root".into()],
            remote_bin: Some("/usr/local/bin".into()),
            install: false,
        };
        let lowat = |label: &str, bytes| AxisValue {
            label: Some(label.into()),
            set: Setting::Lowat(bytes),
        };
        let new = NewCampaign {
            matrix: Matrix {
                axes: vec![vec![
                    lowat("lowat-default", None),
                    lowat("lowat-131072", Some(131072)),
                ]],
                ..Matrix::default()
            },
            repeat: 2,
            order: Order::Shuffled,
            seed: 7,
            out: "out".into(),
            force: false,
            dry_run: true,
            backend: crate::config::BackendSpec::Fleet(spec.clone()),
        };
        (new, spec)
    }

    #[test]
    fn a_mesh_plan_puts_runs_under_their_pair_in_rounds_that_share_no_host() {
        let (new, spec) = new_campaign("all");
        let (runs, rounds) = plan_runs_of_pairs(&new, &spec);
        assert_eq!(runs.len(), 12 * 2 * 2);
        assert_eq!(rounds, 24, "4 hosts: 2 pairs a round");
        let positions: Vec<u32> = runs.iter().map(|r| r.position).collect();
        assert_eq!(positions, (1..=48).collect::<Vec<u32>>());
        let first = &runs[0];
        let pair = first.pair.as_deref().unwrap();
        assert_eq!(
            first.dir,
            Path::new("runs")
                .join(pair)
                .join(&first.label)
                .join(format!("rep-{}", first.repetition))
        );
        // Rounds recomputed from the saved plan keep every host to one run at a time.
        for round in rounds_of(&runs, &spec, pending) {
            let mut hosts: Vec<&str> = round
                .iter()
                .flat_map(|&i| {
                    let p = pair_of(&spec, &runs[i]).unwrap();
                    [p.sender.as_str(), p.receiver.as_str()]
                })
                .collect();
            let n = hosts.len();
            hosts.sort_unstable();
            hosts.dedup();
            assert_eq!(hosts.len(), n);
        }
    }

    #[test]
    fn each_end_is_reached_with_its_own_port_user_and_binaries() {
        let (_, spec) = new_campaign("a>d");
        let ends = pair_spec(&spec, &spec.pairs[0]);
        assert_eq!(ends.sender.target, "10.0.0.1");
        assert_eq!(ends.sender.ssh_options, ["User=root", "Port=2200"]);
        assert_eq!(ends.sender.remote_bin.as_deref(), Some("/usr/local/bin"));
        let receiver = ends.receiver.unwrap();
        assert_eq!(receiver.target, "d");
        assert_eq!(receiver.remote_bin.as_deref(), Some("/opt/o"));
        spec.check().unwrap();
    }

    #[test]
    fn the_dry_run_shows_each_host_as_it_will_be_reached() {
        let (_, spec) = new_campaign("a>d");
        assert_eq!(
            ui::hosts_table(&spec),
            "\
host  address   user  port             binaries
a     10.0.0.1  root  2200             /usr/local/bin
b     b         root  (ssh's default)  /usr/local/bin
c     c         root  (ssh's default)  /usr/local/bin
d     d         root  (ssh's default)  /opt/o
"
        );
    }
}

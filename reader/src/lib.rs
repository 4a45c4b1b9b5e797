//! The receiver: opens a session with oscil-daemon, runs the oscillating reading pattern
//! on every data connection, samples its side while the daemon sends its own, and writes
//! one run directory as it goes.
//!
//! Data flow: `session` opens the connections; each flow in [`read`] reads as its pacer
//! says; [`record`]'s sampler records the reader's side and the control task the daemon's,
//! both through the recorder into the run directory and the running [`summary`].

pub mod cli;
mod config;
mod error;
mod listen;
pub mod read;
mod record;
mod session;
mod stream;
pub mod summary;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;

use oscil_kernel::host::{self, cost, netstat};
use oscil_kernel::ticker::intervals_by;
use oscil_model::files::markers::RunSpan;
use oscil_model::files::rows::Side;
use oscil_model::group::{group_by_flow, FlowGroup, Reading};
use oscil_model::host::ProcessCost;
use oscil_model::pattern::{CycleSlowRate, PatternConfig, PhaseSpan, SlowRate, SlowRule};
use oscil_model::run::absent;
use oscil_model::run::clock::realtime_unix_ns;
use oscil_model::run::{Ending, RunConfig, RunCost, RunMeta, RunStatus, FORMAT_VERSION};
use oscil_model::text::escape_peer;
use oscil_protocol::control::{Connection, DaemonMessage, Ended, ReaderMessage};
use oscil_rundir::{safe_fs, RunDirError, RunWriter};
use tokio::net::tcp::OwnedReadHalf;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

pub use crate::config::{ReaderConfig, SOFTWARE};
pub use crate::error::ReaderError;
pub use crate::record::checks::WelcomeError;

use crate::read::pacer::Pacer;
use crate::read::Flow;
use crate::record::checks::SampleCheck;
use crate::record::sampler::Sampler;
use crate::record::{Recorder, SharedRecorder};
use crate::summary::progress::Progress;
use crate::summary::{Summary, SummaryBuilder};

/// How long the reader waits for the daemon's last samples after asking it to stop.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// How long the daemon may say nothing (at least three intervals) before the run is cut.
const SILENCE_LIMIT: Duration = Duration::from_secs(5);

/// A finished run: what `run.json` says and the per-phase figures.
pub struct Outcome {
    pub meta: RunMeta,
    pub summary: Summary,
}

/// What run.json says before the run starts: the request, both hosts and the options in
/// force; how it ended is filled in at the end.
fn run_meta(config: &ReaderConfig, session: &session::Session, schedule: &[PhaseSpan]) -> RunMeta {
    let reader_host = host::collect();
    RunMeta {
        format_version: FORMAT_VERSION,
        run_id: new_run_id(),
        label: config.label.clone(),
        reader_software: SOFTWARE.into(),
        // Escaped as it arrived, as is every string of the welcome.
        daemon_software: Some(session.welcome.software.clone()),
        started_unix_ms: unix_ms(),
        config: RunConfig {
            connect: config.connect.clone(),
            flows: config.flows,
            interval_us: config.interval.as_micros() as u64,
            pattern: config.pattern,
            sender_request: config.sender_request.clone(),
            reader_request: config.reader_request.clone(),
            write_size_bytes: Some(config.write_size_bytes),
            write_mode: config.write_mode,
            marker_every_us: config.marker_every.map(|d| d.as_micros() as u64),
            slow_rate: (!config.pattern.full_speed && config.pattern.slow_ms > 0).then_some(
                SlowRate {
                    chosen_by: config.slow_rule,
                    cycles: Vec::new(),
                },
            ),
            groups: config.groups.clone(),
        },
        schedule: schedule.to_vec(),
        absent: absent::of_kernels(&reader_host, Some(&session.welcome.host))
            .into_iter()
            .chain(absent::of_congestion(
                &session.welcome.options_in_force.congestion,
            ))
            .collect(),
        reader_host,
        sender_host: Some(session.welcome.host.clone()),
        sender_options: Some(session.welcome.options_in_force.clone()),
        sender_options_by_group: session.welcome.groups_in_force.clone(),
        reader_options: Some(session.reader_options.clone()),
        tcpext_delta: BTreeMap::new(),
        ending: Ending::in_progress(),
        lab: config.lab.clone(),
        meta: config.meta.clone(),
        cost: None,
        wakeups: Vec::new(),
        sampling: None,
        clock: session.clock,
        markers: None,
        probe: None,
        trace: None,
    }
}

/// 128 bits from the OS's CSPRNG as 32 lowercase hex characters: the run's identity,
/// which every copy of its directory keeps. `None` only if the OS gives no randomness,
/// and then the run is merely not recognised when copied.
fn new_run_id() -> Option<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// What both ends counted over the session: the TcpExt counters that moved, the writers'
/// wake-ups and each process's cost (the daemon's from its `Ended`, when it sent one).
fn record_counters(
    meta: &mut RunMeta,
    tcpext_before: Option<oscil_kernel::TcpExt>,
    cost_before: Option<ProcessCost>,
    daemon_ended: Option<&Ended>,
) {
    if let (Some(before), Ok(after)) = (&tcpext_before, netstat::read()) {
        let delta = netstat::delta(before, &after, netstat::WATCHED);
        meta.tcpext_delta.insert("reader".into(), delta);
    }
    if let Some(ended) = daemon_ended {
        meta.tcpext_delta
            .insert("sender".into(), ended.tcpext_delta.clone());
        meta.wakeups = ended.wakeups.clone();
        let sampled_by = ended.sampled_by.as_ref();
        meta.absent
            .extend(sampled_by.and_then(|s| absent::of_sampling(Side::Sender, s)));
    }
    meta.cost = Some(RunCost {
        reader: cost_before
            .zip(cost::of_self())
            .map(|(before, after)| after.since(&before)),
        sender: daemon_ended.and_then(|e| e.cost),
    });
}

/// Descriptors the reader holds beside its data connections: the control connection, the
/// run files, the runtime's epoll and wakers, the sampler's netlink socket, stdio.
const FILES_BESIDE_FLOWS: u64 = 64;

/// Raises the open files limit as far as the hard limit allows, and refuses before
/// connecting when `flows` still cannot fit.
fn make_room_for(flows: u32) -> anyhow::Result<()> {
    let needed = u64::from(flows) + FILES_BESIDE_FLOWS;
    let (soft, hard) = oscil_kernel::raise_nofile_limit()
        .context("cannot raise the open files limit (RLIMIT_NOFILE)")?;
    if needed > soft {
        anyhow::bail!(
            "--flows {flows} needs about {needed} open files, but this process may open {soft} \
             (hard limit {hard}): raise it (ulimit -Hn as root, or LimitNOFILE=) or ask fewer flows"
        );
    }
    Ok(())
}

/// Runs one session on a runtime of its own until it ends or a signal stops it: what
/// `oscil-reader` does between parsing its flags and printing the summary.
pub fn run_until_stopped(config: ReaderConfig) -> anyhow::Result<Outcome> {
    make_room_for(config.flows)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let (stop_tx, stop_rx) = mpsc::unbounded_channel();
        stop_signals(stop_tx.clone())?;
        let outcome = run(config, stop_tx, stop_rx).await?;
        Ok(outcome)
    })
}

/// Why a run is asked to stop before its pattern ends: a signal, or `--json-stream`'s
/// standard output gone.
pub type StopReason = &'static str;

/// One message on `tx` per Ctrl-C or SIGTERM.
fn stop_signals(tx: mpsc::UnboundedSender<StopReason>) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
    let mut terminate = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            if tx.send("interrupted by a signal").is_err() {
                return;
            }
        }
    });
    Ok(())
}

/// Runs one session. Each message on `stop` is a request to stop (Ctrl-C) and why: the
/// first cuts the run short, a second one also gives up waiting for the daemon's last
/// samples. A run cut short is not an error: the run directory is complete up to that
/// moment and `Outcome::meta.ending` says why. `stop_tx` is `stop`'s sender, for the
/// `--json-stream` writer to stop the run when stdout fails.
pub async fn run(
    config: ReaderConfig,
    stop_tx: mpsc::UnboundedSender<StopReason>,
    mut stop: mpsc::UnboundedReceiver<StopReason>,
) -> Result<Outcome, ReaderError> {
    check_out_dir(&config)?;
    // A listening reader may wait long for its daemon: a stop ends the wait.
    let session = tokio::select! {
        opened = session::open(&config) => opened?,
        Some(_) = stop.recv(), if config.listen => return Err(ReaderError::StoppedListening),
    };
    say_adjustments(&config, &session);
    let schedule = config.pattern.schedule();
    let recorder = open_recorder(&config, &session, &schedule, stop_tx)?;
    let tcpext_before = netstat::read().ok();

    let session::Session {
        control_rx,
        mut control_tx,
        data,
        probe,
        ..
    } = session;
    control_tx.write(&ReaderMessage::Start).await?;
    let start = Instant::now();
    let probe = record::probe::start(probe, start);
    let start_unix_ns = realtime_unix_ns();
    let cost_before = cost::of_self();

    let (flows, mut readers) = spawn_readers(&config, data, start);
    let tracing = config
        .trace
        .then(|| record::trace::Tracing::start(&config.out, &flows, start.into_std(), &schedule));
    let (stop_sampling, sampler) = spawn_sampler(&config, &flows, &recorder, start, &schedule)?;
    // The daemon sends samples every interval: a long silence means the path or the daemon
    // is gone, even if no connection has said so yet.
    let mut control = tokio::spawn(collect_daemon_samples(
        control_rx,
        recorder.clone(),
        flows.clone(),
        SampleCheck::new(&config.groups, config.interval),
        (config.interval * 3).max(SILENCE_LIMIT),
        start,
    ));

    let (cut_short, mut daemon_end) = first_end(&mut readers, &mut control, &mut stop).await;
    let elapsed = start.elapsed();
    readers.abort_all();
    let probed = record::probe::stop(probe).await;
    // Both sides' last samples end on the same interval.
    let intervals = intervals_by(elapsed, config.interval);
    let _ = stop_sampling.send(intervals);
    // The last sample first, then the stop: the daemon resets the data connections when it
    // ends, and a reset socket is gone from the kernel's tables (and from sock_diag).
    let sample_error = join_sampler(sampler).await;
    if daemon_end.is_none() {
        let reason = cut_short.as_deref().unwrap_or("pattern complete");
        ask_daemon_to_end(&mut control_tx, reason, intervals).await;
        daemon_end = last_daemon_end(&mut control, &mut stop).await;
    }
    let (daemon_ended, unconfirmed) = ControlEnd::confirmed(daemon_end);
    let mut recorder = recorder.close().expect("the recorder is closed only here");
    if let Some(tracing) = tracing {
        finish_trace(&mut recorder, tracing, daemon_ended.as_ref()).await;
    }
    finish(
        recorder,
        &flows,
        RunEnd {
            start_unix_ns,
            end_s: elapsed.as_secs_f64(),
            intervals,
            schedule: &schedule,
            tcpext_before,
            cost_before,
            daemon_ended,
            probed,
            probe_asked: config.probe,
            reason: cut_short.or(sample_error).or(unconfirmed),
        },
    )
}

/// What the kernel or the daemon changed of each group's request, said before the run as
/// the daemon's start warnings are: one line each on stderr, naming the group when there
/// are several.
fn say_adjustments(config: &ReaderConfig, session: &session::Session) {
    let in_force = &session.welcome.groups_in_force;
    for (number, (group, in_force)) in (1..).zip(config.groups.iter().zip(in_force)) {
        for line in summary::adjusted::adjustments(&group.sender, in_force) {
            match config.groups.len() {
                1 => eprintln!("oscil-reader: {line}"),
                _ => eprintln!("oscil-reader: --group {number}: {line}"),
            }
        }
    }
}

/// The recorder of a run, writing the run directory whose `run.json` says the run is under
/// way.
fn open_recorder(
    config: &ReaderConfig,
    session: &session::Session,
    schedule: &[PhaseSpan],
    stop_tx: mpsc::UnboundedSender<StopReason>,
) -> Result<SharedRecorder, ReaderError> {
    let meta = run_meta(config, session, schedule);
    let stream = config
        .json_stream
        .then(|| stream::Stream::start(&meta, &config.out, stop_tx))
        .transpose()
        .map_err(ReaderError::Thread)?;
    let mut recorder = Recorder::new(
        RunWriter::create(&config.out, config.force, meta)?,
        SummaryBuilder::new(
            schedule.to_vec(),
            config.interval.as_secs_f64(),
            session.welcome.host.page_size_bytes,
        ),
        config.flows,
        config.interval.as_secs_f64(),
    );
    if config.trace {
        recorder.trace_sender_into(&config.out);
    }
    recorder.stream = stream;
    Ok(SharedRecorder::new(recorder))
}

/// One flow per data connection, each reading by its own pacer, its group's pattern, from
/// `start`.
fn spawn_readers(
    config: &ReaderConfig,
    data: Vec<tokio::net::TcpStream>,
    start: Instant,
) -> (Vec<Arc<Flow>>, JoinSet<Result<(), read::FlowError>>) {
    let group_by_flow = group_by_flow(&config.groups);
    let flows: Vec<Arc<Flow>> = data
        .into_iter()
        .zip(0..)
        .zip(group_by_flow)
        .map(|((stream, index), group)| {
            let book = config
                .marker_every
                .map(|_| read::markers::Book::new(config.flows));
            Arc::new(Flow::new((index, group), stream, config.interval, book))
        })
        .collect();
    let mut readers = JoinSet::new();
    let fair_share_bytes = (flows.len() > 1).then_some(read::FAIR_SHARE_BYTES);
    for flow in &flows {
        let group = &config.groups[flow.group as usize];
        readers.spawn(read::read_pattern(
            flow.clone(),
            group_pacer(config, group),
            start,
            fair_share_bytes,
        ));
    }
    (flows, readers)
}

/// The pacer of one flow of `group`: the run's timetable with the group's pattern,
/// fraction and slow rate (its own, or the rule of a run without groups).
fn group_pacer(config: &ReaderConfig, group: &FlowGroup) -> Pacer {
    let pattern = PatternConfig {
        full_speed: config.pattern.full_speed || group.pattern == Reading::FullSpeed,
        fraction: group.fraction,
        ..config.pattern
    };
    let rule = match group.slow_rate_bps {
        Some(bps) => SlowRule::Absolute {
            bytes_per_s: bps / 8,
        },
        None => SlowRule::PeakDelivered,
    };
    Pacer::new(&pattern, rule, group.flows)
}

/// The sampler's own thread.
type SamplerThread = std::thread::JoinHandle<Result<(), record::sampler::SampleError>>;

/// Starts the reader's sampler on its own thread; it samples until told the last interval.
fn spawn_sampler(
    config: &ReaderConfig,
    flows: &[Arc<Flow>],
    recorder: &SharedRecorder,
    start: Instant,
    schedule: &[PhaseSpan],
) -> Result<(std::sync::mpsc::Sender<u64>, SamplerThread), ReaderError> {
    let (stop_sampling, stop_rx) = std::sync::mpsc::channel();
    let sampler = Sampler {
        flows: flows.to_vec(),
        recorder: recorder.clone(),
        start: start.into_std(),
        interval: config.interval,
        schedule: schedule.to_vec(),
        progress: Progress::new(
            config.progress,
            config.pattern.total(),
            schedule.to_vec(),
            config.pattern.cycles,
        ),
    };
    let sampler = std::thread::Builder::new()
        .name("sampler".into())
        .spawn(move || sampler.run(stop_rx))
        .map_err(ReaderError::Thread)?;
    Ok((stop_sampling, sampler))
}

/// Waits for the pattern to finish, or for the first reason to stop early: a reading task
/// failed, the control connection ended, or a signal. Returns why the run was cut short
/// (`None`: the pattern completed) and the daemon's end when it came first.
async fn first_end(
    readers: &mut JoinSet<Result<(), read::FlowError>>,
    control: &mut tokio::task::JoinHandle<ControlEnd>,
    stop: &mut mpsc::UnboundedReceiver<StopReason>,
) -> (Option<String>, Option<ControlEnd>) {
    let all_read = async {
        while let Some(joined) = readers.join_next().await {
            match joined {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Some(e.to_string()),
                Err(e) => return Some(format!("a reading task failed: {e}")),
            }
        }
        None
    };
    tokio::select! {
        error = all_read => (error, None),
        end = control => {
            let reason = match &end {
                Ok(ControlEnd::Ended(ended)) => format!("the daemon ended the session: {}", ended.reason),
                Ok(ControlEnd::Failed(reason)) => reason.clone(),
                Err(e) => format!("control task failed: {e}"),
            };
            (Some(reason), end.ok())
        }
        Some(reason) = stop.recv() => (Some(reason.into()), None),
    }
}

/// Joins the sampler thread without blocking the runtime; why it failed, if it did.
async fn join_sampler(sampler: SamplerThread) -> Option<String> {
    let sampler = tokio::task::spawn_blocking(move || sampler.join());
    match sampler.await.expect("joining the sampler thread") {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(_) => Some("the sampler thread panicked".into()),
    }
}

/// After the stop: the daemon's last samples and counters, within [`STOP_GRACE`] (a second
/// signal gives up at once).
async fn last_daemon_end(
    control: &mut tokio::task::JoinHandle<ControlEnd>,
    stop: &mut mpsc::UnboundedReceiver<StopReason>,
) -> Option<ControlEnd> {
    let grace = tokio::time::sleep(STOP_GRACE);
    let end = tokio::select! {
        end = &mut *control => end.ok(),
        _ = grace => None,
        Some(_) = stop.recv() => None,
    };
    if end.is_none() {
        control.abort();
        let _ = (&mut *control).await;
    }
    end
}

/// Tells the daemon the run is over: why, and the intervals the reader sampled. Its end
/// comes on the control task (`last_daemon_end`); a failed write shows there too.
async fn ask_daemon_to_end(
    control_tx: &mut oscil_protocol::control::Connection<tokio::net::tcp::OwnedWriteHalf>,
    reason: &str,
    intervals: u64,
) {
    let stop_message = ReaderMessage::Stop {
        reason: reason.into(),
        intervals: Some(intervals),
    };
    let _ = control_tx.write(&stop_message).await;
}

/// Stops the reader's trace and writes both sides' trace facts into `run.json`.
async fn finish_trace(
    recorder: &mut Recorder,
    tracing: record::trace::Tracing,
    daemon_ended: Option<&Ended>,
) {
    let reader = tokio::task::spawn_blocking(move || tracing.finish())
        .await
        .expect("joining the trace thread");
    let sender = daemon_ended.and_then(|e| e.trace.clone());
    let not_written = recorder.sender_trace.as_mut().map_or(0, |csv| {
        let _ = csv.flush();
        csv.not_written
    });
    let arrived = record::trace::Arrived {
        rows: recorder.sender_trace_rows,
        not_written,
    };
    recorder.writer.meta_mut().trace = Some(record::trace::facts(reader, sender, arrived));
}

/// What the end of a run leaves to write into `run.json`.
struct RunEnd<'a> {
    start_unix_ns: u64,
    end_s: f64,
    /// The intervals the reader ran: both sides' samples should cover them all.
    intervals: u64,
    schedule: &'a [PhaseSpan],
    tcpext_before: Option<oscil_kernel::TcpExt>,
    cost_before: Option<ProcessCost>,
    daemon_ended: Option<Ended>,
    /// What the idle probe found, if it ran, and whether it was asked for.
    probed: Option<record::probe::Found>,
    probe_asked: bool,
    /// Why the run was cut short or its samples failed, if either.
    reason: Option<String>,
}

/// Writes the run's end: markers, slow rates, counters, the schedule as it ran, the
/// sampling's quality and how the run ended.
fn finish(
    mut recorder: Recorder,
    flows: &[Arc<Flow>],
    end: RunEnd<'_>,
) -> Result<Outcome, ReaderError> {
    // Every interval line out before the end line, which the caller prints.
    if let Some(stream) = recorder.stream.take() {
        stream.finish();
    }
    // A file the end could not write (a full disk) is said in run.json, which still fits
    // (RunWriter's reserve), rather than ending the reader with run.json unwritten.
    let mut not_written = Vec::new();
    if let Some(clock) = recorder.writer.meta().clock {
        // Nothing reads any more: a marker unread now was unread at the run's end.
        let span = RunSpan {
            start_unix_ns: end.start_unix_ns,
            end_unix_ns: realtime_unix_ns(),
        };
        match recorder.markers(flows, span, &clock) {
            Ok(counts) => recorder.writer.meta_mut().markers = Some(counts),
            Err(e) => not_written.push(e.to_string()),
        }
    }
    if let Err(e) = record::probe::record(&mut recorder, end.probed, end.probe_asked) {
        not_written.push(e.to_string());
    }
    let meta = recorder.writer.meta_mut();
    if let Some(rate) = &mut meta.config.slow_rate {
        rate.cycles = slow_rates(flows);
    }
    let daemon_ended = end.daemon_ended.as_ref();
    record_counters(meta, end.tcpext_before, end.cost_before, daemon_ended);
    meta.schedule = cut_schedule(end.schedule, end.end_s);
    let reason = match (end.reason, not_written.join("; ")) {
        (reason, lost) if lost.is_empty() => reason,
        (Some(reason), lost) => Some(format!("{reason}; then {lost}")),
        (None, lost) => Some(lost),
    };
    let sampling = recorder.sampling(end.intervals);
    let mut holes = sampling.holes();
    holes.extend(
        recorder
            .writer
            .meta()
            .trace
            .as_ref()
            .and_then(record::trace::holes),
    );
    recorder.writer.meta_mut().sampling = Some(sampling);
    let (status, reason) = match reason {
        Some(reason) => (RunStatus::Partial, reason),
        None if !holes.is_empty() => (
            RunStatus::Holes,
            format!("pattern complete, but {}", holes.join("; ")),
        ),
        None => (RunStatus::Complete, "pattern complete".into()),
    };
    let ending = Ending {
        status,
        reason,
        duration_s: end.end_s,
        ended_unix_ms: unix_ms(),
    };
    let summary = recorder.summary.finish(end.end_s);
    let meta = recorder.writer.finish(ending)?;
    Ok(Outcome { meta, summary })
}

/// Records the daemon's samples, each checked against the session first, until the daemon
/// ends the session or something goes wrong.
async fn collect_daemon_samples(
    mut control_rx: Connection<OwnedReadHalf>,
    recorder: SharedRecorder,
    flows: Vec<Arc<Flow>>,
    mut check: SampleCheck,
    silence_limit: Duration,
    start: Instant,
) -> ControlEnd {
    loop {
        let Ok(message) = tokio::time::timeout(silence_limit, control_rx.read()).await else {
            return ControlEnd::Failed(format!(
                "no word from the daemon for {} s",
                silence_limit.as_secs()
            ));
        };
        match message {
            Ok(Some(DaemonMessage::Samples { host, flows })) => {
                let elapsed_s = start.elapsed().as_secs_f64();
                if let Err(e) = check.check(&host, &flows, elapsed_s) {
                    return ControlEnd::Failed(format!(
                        "the daemon sent an impossible sample: {e}"
                    ));
                }
                if let Err(e) = recorder.record(|r| r.sender(&flows, &host)) {
                    return ControlEnd::Failed(format!("recording the daemon's samples: {e}"));
                }
            }
            Ok(Some(DaemonMessage::Trace { rows })) => {
                let (asked, elapsed_s) = (recorder.traces(), start.elapsed().as_secs_f64());
                if let Err(e) =
                    record::checks::check_trace_rows(&rows, asked, flows.len(), elapsed_s)
                {
                    return ControlEnd::Failed(format!("the daemon sent an impossible trace: {e}"));
                }
                if let Err(e) = recorder.record(|r| r.trace_sender(&rows)) {
                    return ControlEnd::Failed(format!("recording the daemon's trace: {e}"));
                }
            }
            Ok(Some(DaemonMessage::Markers { markers })) => {
                if let Err(e) = read::announce_markers(&flows, markers) {
                    return ControlEnd::Failed(e.to_string());
                }
            }
            Ok(Some(DaemonMessage::Ended(ended))) => {
                let mut ended = match check.ended(&ended) {
                    Ok(escaped) => escaped,
                    Err(e) => {
                        return ControlEnd::Failed(format!(
                            "the daemon sent an impossible end: {e}"
                        ))
                    }
                };
                // Only the counters the reader asked about go into run.json.
                ended
                    .tcpext_delta
                    .retain(|name, _| netstat::WATCHED.contains(&name.as_str()));
                return ControlEnd::Ended(Box::new(ended));
            }
            Ok(Some(other)) => {
                let shown = escape_peer(&format!("{other:?}"));
                return ControlEnd::Failed(format!(
                    "the daemon sent an unexpected message: {shown}"
                ));
            }
            Ok(None) => {
                return ControlEnd::Failed("the daemon closed the control connection".into())
            }
            Err(e) => return ControlEnd::Failed(format!("control connection: {e}")),
        }
    }
}

/// How the control connection ended.
enum ControlEnd {
    /// Boxed: the end's counters outweigh a failure's words tenfold.
    Ended(Box<Ended>),
    Failed(String),
}

impl ControlEnd {
    /// The daemon's own account of the session, or why there is none: what it sent that
    /// made no sense, or that nothing came in time.
    fn confirmed(end: Option<ControlEnd>) -> (Option<Ended>, Option<String>) {
        let unconfirmed = |why: &str| {
            Some(format!(
                "the daemon did not confirm the end of the session: {why}"
            ))
        };
        match end {
            Some(ControlEnd::Ended(ended)) => (Some(*ended), None),
            Some(ControlEnd::Failed(why)) => (None, unconfirmed(&why)),
            None => (
                None,
                unconfirmed(&format!(
                    "no end came within {} s of the stop (or a second signal gave up waiting)",
                    STOP_GRACE.as_secs()
                )),
            ),
        }
    }
}

/// Fails early, before any connection, on an output directory that cannot be used.
/// Checks before connecting that the run directory can be written, so a run never streams
/// for a minute and then fails; leaves nothing behind (the directory is made only once the
/// daemon has accepted the session).
fn check_out_dir(config: &ReaderConfig) -> Result<(), RunDirError> {
    let out = &config.out;
    let io_error = |source| RunDirError::Io {
        path: out.clone(),
        source,
    };
    // Root's or this user's all the way up: nobody else may point it elsewhere or plant
    // links in it (the run's files are written again at the end).
    safe_fs::check_trusted_dir(out)?;
    let missing: Vec<&std::path::Path> = out.ancestors().take_while(|dir| !dir.exists()).collect();
    std::fs::create_dir_all(out).map_err(|e| RunDirError::cannot_create(out, &e))?;
    let probe = out.join(".oscil-write-test");
    let written = std::fs::write(&probe, b"").and_then(|()| std::fs::remove_file(&probe));
    for dir in &missing {
        let _ = std::fs::remove_dir(dir);
    }
    written.map_err(io_error)?;
    if !config.force && std::fs::read_dir(out).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(RunDirError::NotEmpty(out.clone()));
    }
    Ok(())
}

/// The schedule as it ran: spans after `end_s` dropped, the one running then cut.
fn cut_schedule(schedule: &[PhaseSpan], end_s: f64) -> Vec<PhaseSpan> {
    schedule
        .iter()
        .filter(|s| s.start_s < end_s)
        .map(|s| PhaseSpan {
            end_s: s.end_s.min(end_s),
            ..*s
        })
        .collect()
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Every flow's slow budgets added up per cycle: the rate the reader's slow phases read at.
fn slow_rates(flows: &[Arc<Flow>]) -> Vec<CycleSlowRate> {
    let mut by_cycle: BTreeMap<u32, u64> = BTreeMap::new();
    for rate in flows.iter().flat_map(|f| f.slow_rates()) {
        let total = by_cycle.entry(rate.cycle).or_default();
        *total = total.saturating_add(rate.bytes_per_s);
    }
    by_cycle
        .into_iter()
        .map(|(cycle, bytes_per_s)| CycleSlowRate { cycle, bytes_per_s })
        .collect()
}

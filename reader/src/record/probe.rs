//! The reader's end of the idle probe (`oscil_model::files::probe`): an 8-byte sequence number
//! every 100 ms on a connection of its own, each echo's round trip noted, `probe.csv`
//! written at the end. It runs beside the loaded flows from the start message to the
//! pattern's end and is none of them: no reader row, no flow count.

use oscil_model::files::probe::{ProbeBook, ProbeFacts, ProbeRow, PROBE_BYTES, PROBE_EVERY};
use oscil_rundir::RunDirError;

use crate::record::Recorder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

/// What the probe found: every probe sent, and the facts for `run.json`.
pub(crate) type Found = (Vec<ProbeRow>, ProbeFacts);

/// The probe while the run goes on.
pub(crate) struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Found>,
}

/// Starts probing on `stream` (the session's probe connection, if it has one), with the
/// session's clock starting at `start`.
pub(crate) fn start(stream: Option<TcpStream>, start: Instant) -> Option<Running> {
    let stream = stream?;
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(probe(stream, start, stopped));
    Some(Running { stop, task })
}

/// Stops the probe if it ran; what it found.
pub(crate) async fn stop(running: Option<Running>) -> Option<Found> {
    match running {
        Some(running) => Some(running.stop().await),
        None => None,
    }
}

impl Running {
    /// Stops sending; probes still unanswered count as lost.
    pub(crate) async fn stop(self) -> Found {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_else(|e| {
            let facts = ProbeFacts {
                on: true,
                every_us: PROBE_EVERY.as_micros() as u64,
                note: Some(format!("the probe task failed: {e}")),
                ..ProbeFacts::default()
            };
            (Vec::new(), facts)
        })
    }
}

/// Writes `probe.csv` and says in `run.json` what the probe did; a run without the probe
/// says it was off, and why when it was `asked` for. The rows go into the summary's figures
/// too.
pub(crate) fn record(
    recorder: &mut Recorder,
    found: Option<Found>,
    asked: bool,
) -> Result<(), RunDirError> {
    let facts = match found {
        Some((rows, facts)) => {
            recorder.writer.whole_file(&rows)?;
            rows.iter().for_each(|row| recorder.summary.probe(row));
            facts
        }
        None => ProbeFacts {
            note: asked.then(|| "the daemon does not echo the probe (an older daemon)".into()),
            ..ProbeFacts::default()
        },
    };
    recorder.writer.meta_mut().probe = Some(facts);
    Ok(())
}

fn us_since(start: Instant) -> u64 {
    start.elapsed().as_micros() as u64
}

/// Sends a probe every [`PROBE_EVERY`] from `start` and takes the echoes until stopped or
/// the connection fails (then the note says why).
async fn probe(stream: TcpStream, start: Instant, mut stopped: oneshot::Receiver<()>) -> Found {
    let _ = stream.set_nodelay(true);
    let (mut rx, mut tx) = stream.into_split();
    let mut book = ProbeBook::default();
    let mut ticks = tokio::time::interval_at(start, PROBE_EVERY);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut echo = [0u8; PROBE_BYTES];
    let mut have = 0;
    let note = loop {
        tokio::select! {
            _ = &mut stopped => break None,
            _ = ticks.tick() => {
                let bytes = book.send(us_since(start));
                if let Err(e) = tx.write_all(&bytes).await {
                    break Some(format!("sending a probe: {e}"));
                }
            }
            // Cancel-safe: a read that loses the race has read nothing.
            read = rx.read(&mut echo[have..]) => match read {
                Ok(0) => break Some("the daemon closed the probe connection".to_owned()),
                Ok(n) => {
                    have += n;
                    if have == PROBE_BYTES {
                        have = 0;
                        if let Err(e) = book.echoed(u64::from_be_bytes(echo), us_since(start)) {
                            break Some(e.to_string());
                        }
                    }
                }
                Err(e) => break Some(format!("reading an echo: {e}")),
            },
        }
    };
    let sent = book.sent();
    let rows = book.finish();
    let facts = ProbeFacts {
        on: true,
        every_us: PROBE_EVERY.as_micros() as u64,
        sent,
        answered: rows.iter().filter(|r| r.rtt_us.is_some()).count() as u64,
        note,
    };
    (rows, facts)
}

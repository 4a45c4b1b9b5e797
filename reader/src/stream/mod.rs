//! `--json-stream`: one JSON object per line on stdout while the run goes on, a start
//! line, one line per sampling interval with both ends' figures, and the end line that
//! `summary::print` writes (docs/reader.md, docs/json-stream.schema.json). The lines are
//! written by a thread of their own, so a slow reader of stdout never holds up the
//! sampler; when stdout's reader leaves (`| head -3`), the run stops as on a signal.

pub(crate) mod join;
pub(crate) mod lines;
mod sums;

use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;

use oscil_model::files::rows::{HostSample, ReaderSample, SenderSample};
use oscil_model::run::RunMeta;
use tokio::sync::mpsc::UnboundedSender;

use join::{Joiner, Session};
use lines::{Interval, Line, Start};

/// Why the run stopped when stdout's reader left: `summary::print` says nothing more of it.
pub const STDOUT_CLOSED: &str = "standard output was closed (--json-stream)";
/// Why the run stopped when stdout failed otherwise (a full disk).
const STDOUT_FAILED: &str = "cannot write to standard output (--json-stream)";

/// Lines that may wait for the writer (minutes of 100 ms samples): beyond that a stalled
/// reader of stdout costs lines, said at the end, rather than memory or the sampler's time.
const BACKLOG_LINES: usize = 4096;

pub struct Stream {
    joiner: Option<Joiner>,
    lines: Option<SyncSender<String>>,
    writer: Option<JoinHandle<()>>,
    /// Interval lines the writer had no room for.
    dropped: u64,
}

impl Stream {
    /// Starts the writer with the session's start line; `stop` hears when stdout fails.
    pub fn start(
        meta: &RunMeta,
        out: &Path,
        stop: UnboundedSender<&'static str>,
    ) -> std::io::Result<Stream> {
        let (lines, backlog) = sync_channel(BACKLOG_LINES);
        let writer = std::thread::Builder::new()
            .name("json-stream".into())
            .spawn(move || write(backlog, stop))?;
        let reader_page_size_bytes = meta.reader_host.page_size_bytes;
        let joiner = Joiner::new(Session {
            interval_s: meta.config.interval_us as f64 / 1e6,
            schedule: meta.schedule.clone(),
            groups: meta.config.groups.len() as u32,
            reader_page_size_bytes,
            sender_page_size_bytes: meta
                .sender_host
                .as_ref()
                .map_or(reader_page_size_bytes, |h| h.page_size_bytes),
        });
        let mut stream = Stream {
            joiner: Some(joiner),
            lines: Some(lines),
            writer: Some(writer),
            dropped: 0,
        };
        stream.send(Line::Start(Box::new(Start::of(meta, out))).text());
        Ok(stream)
    }

    /// The reader's sample.
    pub fn reader(&mut self, rows: &[ReaderSample], host: &HostSample) {
        let lines = self.joiner.as_mut().map(|j| j.reader(rows, host));
        self.send_intervals(lines.unwrap_or_default());
    }

    /// The daemon's sample.
    pub fn sender(&mut self, rows: &[SenderSample], host: &HostSample) {
        let lines = self.joiner.as_mut().map(|j| j.sender(rows, host));
        self.send_intervals(lines.unwrap_or_default());
    }

    /// The intervals still waiting for a side, then every line printed: what is left
    /// before the end line.
    pub fn finish(mut self) {
        if let Some(joiner) = self.joiner.take() {
            self.send_intervals(joiner.finish());
        }
        if self.dropped > 0 {
            eprintln!(
                "oscil-reader: --json-stream: {} interval lines left out: the reader of standard output fell behind",
                self.dropped
            );
        }
    }

    fn send_intervals(&mut self, intervals: Vec<Interval>) {
        for interval in intervals {
            self.send(Line::Interval(Box::new(interval)).text());
        }
    }

    fn send(&mut self, line: String) {
        let Some(lines) = &self.lines else { return };
        match lines.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.dropped += 1,
            // The writer stopped on a failed stdout: nothing more is printed.
            Err(TrySendError::Disconnected(_)) => self.lines = None,
        }
    }
}

impl Drop for Stream {
    /// Every line sent is printed before the end line, which comes after the run.
    fn drop(&mut self) {
        self.lines = None;
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// Prints each line as it comes, flushed, until the run drops its end of `lines` or stdout
/// fails; then tells the run to stop, once.
fn write(lines: Receiver<String>, stop: UnboundedSender<&'static str>) {
    for line in lines {
        oscil_cli::stdout::write_bytes(line.as_bytes());
        oscil_cli::stdout::flush();
        if let Some(kind) = oscil_cli::stdout::failure() {
            let reason = match kind {
                std::io::ErrorKind::BrokenPipe => STDOUT_CLOSED,
                _ => STDOUT_FAILED,
            };
            let _ = stop.send(reason);
            return;
        }
    }
}

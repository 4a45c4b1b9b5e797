//! The reader's side of the markers (`oscil_model::files::markers`): one [`FlowMarkers`] per
//! flow, fed by the flow's reads and the daemon's announcements, and turned into
//! `markers.csv` rows at the end.

use std::sync::{Mutex, PoisonError};

use oscil_model::files::markers::{self, FlowMarkers, Marker, MarkerCounts, MarkerRow, RunSpan};
use oscil_model::run::clock::ClockEstimate;

/// Reads remembered across all flows (16 bytes each): enough for a marker announced up to
/// half a second after the read that passed it on loopback at full speed (~45,000
/// 128 KiB reads a second), shared out between flows.
const READ_HISTORY: usize = 1 << 20;

/// Markers kept across all flows (a 15-minute run marked every 10 ms on 10 flows).
const MAX_MARKERS: usize = 1 << 20;

/// One flow's markers, shared by its reading task and the control task.
pub struct Book(Mutex<FlowMarkers>);

impl Book {
    /// The share of one of `flows` flows.
    pub fn new(flows: u32) -> Self {
        let share = |total: usize, least: usize| (total / flows.max(1) as usize).max(least);
        Book(Mutex::new(FlowMarkers::new(
            share(READ_HISTORY, 1024).min(1 << 16),
            share(MAX_MARKERS, 1000),
        )))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FlowMarkers> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn read(&self, bytes: u64, now_unix_ns: u64) {
        self.lock().read(bytes, now_unix_ns);
    }

    pub fn announce(&self, marker: Marker) {
        self.lock().announce(marker);
    }

    /// Takes the flow's markers as rows (by `k`) on the reader's run timeline, with their
    /// counts; those still unread are censored at `span`'s end.
    pub fn take_rows(
        &self,
        span: RunSpan,
        clock: &ClockEstimate,
    ) -> (Vec<MarkerRow>, MarkerCounts) {
        let taken = std::mem::replace(&mut *self.lock(), FlowMarkers::new(1, 0));
        let (resolved, counts) = taken.into_resolved();
        let mut rows: Vec<MarkerRow> = resolved
            .iter()
            .map(|r| markers::row(r, span, clock.offset_ns()))
            .collect();
        rows.sort_by_key(|r| r.k);
        (rows, counts)
    }
}

//! The fixed bounds every run directory is read within, whatever its `run.json` declares.

/// The most bytes a `run.json` may hold.
pub const MAX_META_BYTES: u64 = 16 << 20;
/// The most bytes a row of any CSV here takes (the longest, sender.csv's, takes ~250).
pub const MAX_ROW_BYTES: u64 = 1024;
/// The most flows a run may declare.
pub const MAX_FLOWS: u32 = 100_000;
/// The longest run a `run.json` may declare: a week.
pub const MAX_RUN_S: f64 = 7.0 * 86_400.0;
/// The sampling clock's resolution: both ends record times to the nanosecond
/// (`CLOCK_MONOTONIC`), so a shorter span was never measured.
pub const CLOCK_RESOLUTION_S: f64 = 1e-9;
/// The fastest one flow's bytes may come over a row's span: 80 Tbit/s, hundreds of times
/// what a 100 Gbit/s path or a receive queue read at memory speed over a tenth of an
/// interval (the shortest last sample) gives. Past it a rate is absurd, and the charts'
/// scales with it.
pub const MAX_BYTES_PER_S: f64 = 1e13;
/// Seconds past the declared end that a row's time may still fall at (the session's
/// teardown), and before zero that a marker's may (the clock offset).
pub(crate) const SLACK_S: f64 = 60.0;

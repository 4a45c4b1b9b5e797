//! The figures taken from the loaded runs: the metrics and their estimates; the verdicts
//! and charts are drawn from them.

pub(crate) mod groups;
pub(crate) mod metrics;
pub(crate) mod stats;

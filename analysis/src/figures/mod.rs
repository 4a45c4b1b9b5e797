//! The figures taken from the loaded runs: the metrics and their estimates, and the shares
//! of time each limit held; the verdicts and charts are drawn from them.

pub(crate) mod limit_shares;
pub(crate) mod metrics;
pub(crate) mod stats;

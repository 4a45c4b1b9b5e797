//! The figures taken from the loaded runs: the metrics and their estimates, the shares of
//! time each limit held, the kernel's queue events, and which figures are shown; the
//! verdicts and charts are drawn from them.

pub(crate) mod limit_shares;
pub(crate) mod metrics;
pub(crate) mod queue_events;
pub(crate) mod shown_figures;
pub(crate) mod stats;

//! The report's first stage: the directories given (runs, campaigns) read within bounds,
//! each run summarised with its settings, series and limit shares, the runs grouped into
//! configurations; the figures, verdicts, charts and files are made from these.

pub(crate) mod configs;
pub(crate) mod groups;
pub mod input;
pub(crate) mod limit_shares;
pub(crate) mod paths;
pub(crate) mod run_series;
pub(crate) mod series;
pub(crate) mod settings;
pub mod summary;
pub mod window;

//! The pictures, built as data from the summaries, figures and verdicts (a run's picture,
//! the comparison, the paths, the headline, the time sequences, the kernel's queue events
//! as a panel's data) and rendered to PNG by
//! `draw` and `interval_draw`, each with its `record` of what it shows; the write stage
//! lists them.

pub mod chart;
pub(crate) mod comparison;
pub(crate) mod draw;
pub(crate) mod groups_chart;
pub(crate) mod headline;
pub(crate) mod interval_draw;
pub(crate) mod mesh;
pub(crate) mod overlay_chart;
pub(crate) mod path_chart;
pub(crate) mod queue_events;
pub(crate) mod record;
pub mod run_chart;
pub mod shared_scale;
pub(crate) mod text_layout;
pub mod time_sequence;

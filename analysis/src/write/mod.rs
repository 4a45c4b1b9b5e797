//! The report's last stage: the files in the output directory (tables, the
//! recommendation, the page, the manifest, OpenMetrics) and the lab's end table, made
//! from everything before it.

pub(crate) mod across;
mod config_table;
pub mod end_table;
mod groups_table;
mod html;
pub(crate) mod manifest;
pub(crate) mod openmetrics;
pub(crate) mod out_dir;
mod summary_md;
mod table;

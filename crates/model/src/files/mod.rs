//! What each CSV of a run directory holds: one row type per file, its columns its fields
//! (`columns::Row`).

pub mod columns;
pub mod markers;
pub mod probe;
pub mod rows;
pub mod trace;

//! A run's record, defined once: the rows of every CSV of a run directory (their columns
//! come from the structs, `columns`), `run.json`, `campaign.json` and the lab's record,
//! the reading pattern, host facts, socket options and the one sysctl table. Plain data
//! and pure rules, no OS code: the protocol, the run directory and the report all read
//! these types, and the kernel crate fills them.

pub mod campaign;
pub mod error_text;
pub mod files;
pub mod group;
pub mod host;
pub mod lab;
pub mod pattern;
pub mod run;
pub mod socket;
pub mod sysctl;
pub mod text;

//! What a campaign will run, settled apart from running it: the plan can then be printed
//! (`--dry-run`), reproduced from its seed and tested without a host.

pub(crate) mod calibrate;
pub(crate) mod capacity;
pub(crate) mod matrix;

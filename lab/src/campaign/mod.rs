//! What every backend's runs go through: the campaign directory and each run's outcome,
//! each run's session, the sysctls recorded and restored, the terminal, the end. Written
//! once so a campaign resumes and restores the same way wherever it runs; the loop over
//! the runs (`crate::execute`, or the fleet's rounds) sits above the backends.

mod bounded;
pub(crate) mod dir;
pub(crate) mod error;
pub(crate) mod finish;
pub(crate) mod meta;
pub(crate) mod session;
pub(crate) mod sysctl;
pub(crate) mod ui;

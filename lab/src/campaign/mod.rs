//! A campaign's life, whatever the backend: the loop over its runs, each run's session and
//! outcome, the sysctls recorded and restored, the terminal, the end. Written once so a
//! campaign resumes and restores the same way wherever it runs.

mod bounded;
pub(crate) mod execute;
pub(crate) mod finish;
pub(crate) mod meta;
pub(crate) mod session;
pub(crate) mod sysctl;
pub(crate) mod ui;

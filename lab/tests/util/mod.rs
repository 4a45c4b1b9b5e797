//! The lab's own test helpers: one campaign through `scripts/lab`, removed afterwards.

#![allow(dead_code)] // each test file uses its own share of these

use std::path::{Path, PathBuf};
use std::process::Command;

use oscil_testkit::{bin_dir, lacks_root, unique};

/// A campaign directory, removed when dropped.
pub struct Campaign(pub PathBuf);

impl Drop for Campaign {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `scripts/lab` with `args` into a fresh directory named from `prefix`, with this
/// build's binaries; panics unless it succeeds. `None`, having said why (a failure under
/// `OSCIL_REQUIRE_ROOT`), without root: the lab needs namespaces and TUN devices.
pub fn run_lab(prefix: &str, args: &[&str]) -> Option<Campaign> {
    if lacks_root("network namespaces, TUN devices") {
        return None;
    }
    Some(run_lab_with(prefix, args, &bin_dir()).0)
}

/// [`run_lab`] with the binaries of `bin` (the caller checked for root): the campaign and
/// what the lab printed on stdout (its run lines and end table).
pub fn run_lab_with(prefix: &str, args: &[&str], bin: &Path) -> (Campaign, String) {
    let out = Campaign(std::env::temp_dir().join(unique(prefix)));
    let lab = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/lab");
    let output = Command::new(&lab)
        .args(args)
        .arg("--out")
        .arg(&out.0)
        .env("OSCIL_BIN_DIR", bin)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run scripts/lab");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "scripts/lab failed: {}\n{stdout}",
        output.status
    );
    println!("{} ({})", Spoiled::count(&out.0), out.0.display());
    (out, stdout)
}

/// What the two rules that spoil a run did in a fresh campaign (which resumes nothing):
/// the runs each redid (the attempts kept as `rep-<k>.attempt-<n>`) and left out of the
/// verdicts (the last attempt spoiled too).
#[derive(Debug, Default, PartialEq)]
pub struct Spoiled {
    pub starved_redone: usize,
    pub starved_left_out: usize,
    pub late_redone: usize,
    pub late_left_out: usize,
}

impl Spoiled {
    pub fn count(out: &Path) -> Spoiled {
        let mut spoiled = Spoiled::default();
        let Ok(labels) = std::fs::read_dir(out.join("runs")) else {
            return spoiled;
        };
        let runs = labels
            .filter_map(|l| std::fs::read_dir(l.ok()?.path()).ok())
            .flatten()
            .filter_map(|r| r.ok().map(|r| r.path()));
        for run in runs {
            let redone = run.to_string_lossy().contains(".attempt-");
            let late = oscil_rundir::lab::link_health(&run).spoiled.is_some();
            let counter = match (late, redone) {
                (true, true) => &mut spoiled.late_redone,
                (true, false) => &mut spoiled.late_left_out,
                (false, true) => &mut spoiled.starved_redone,
                (false, false) if oscil_rundir::lab::spoiled(&run).is_some() => {
                    &mut spoiled.starved_left_out
                }
                (false, false) => continue,
            };
            *counter += 1;
        }
        spoiled
    }
}

impl std::fmt::Display for Spoiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the starvation rule (a reader or sender starved of CPU) redid {} run(s) and left {} out of the verdicts; the late-link rule redid {} and left {} out",
            self.starved_redone, self.starved_left_out, self.late_redone, self.late_left_out
        )
    }
}

/// Why the lab left `run` (a run directory of a campaign) out of the verdicts, said on
/// stdout; `None` when it measured the path. A test reads no figure from a run the lab
/// refused: its reader or sender was starved, or its link late, twice.
pub fn left_out(run: &Path) -> Option<String> {
    let why = oscil_rundir::lab::spoiled(run)?;
    println!("{}: left out of the verdicts, {why}", run.display());
    Some(why)
}

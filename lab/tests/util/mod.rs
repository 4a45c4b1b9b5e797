//! The lab's own test helpers: one campaign through `scripts/lab`, removed afterwards.

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
    println!(
        "the spoiled-run rule (a late link, a starved reader or sender) redid {} run(s) of {}",
        redone_runs(&out.0),
        out.0.display()
    );
    (out, stdout)
}

/// Runs of a fresh campaign kept as `rep-<k>.attempt-<n>`: attempts the lab redid because
/// they were spoiled (a fresh campaign resumes nothing).
pub fn redone_runs(out: &Path) -> usize {
    let Ok(labels) = std::fs::read_dir(out.join("runs")) else {
        return 0;
    };
    labels
        .filter_map(|l| std::fs::read_dir(l.ok()?.path()).ok())
        .flatten()
        .filter_map(|r| r.ok()?.file_name().into_string().ok())
        .filter(|name| name.contains(".attempt-"))
        .count()
}

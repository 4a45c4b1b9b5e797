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
    let out = Campaign(std::env::temp_dir().join(unique(prefix)));
    let lab = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/lab");
    let status = Command::new(&lab)
        .args(args)
        .arg("--out")
        .arg(&out.0)
        .env("OSCIL_BIN_DIR", bin_dir())
        .status()
        .expect("run scripts/lab");
    assert!(status.success(), "scripts/lab failed: {status}");
    Some(out)
}

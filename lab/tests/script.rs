//! scripts/lab on a machine where root's PATH has no cargo (sudo with a rustup toolchain in
//! the user's home): it reuses an existing build, or says in one line what to run.

use std::path::Path;
use std::process::Command;

use oscil_testkit::workspace_bin;

fn lab_without_cargo(target: &Path) -> std::process::Output {
    Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/lab"))
        .args(["--dry-run", "--quick"])
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("run scripts/lab")
}

#[test]
fn without_cargo_it_reuses_a_build_or_says_what_to_run() {
    let empty = tempfile::tempdir().unwrap();
    let output = lab_without_cargo(empty.path());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("cargo build --release --workspace"),
        "{stderr}"
    );

    std::fs::create_dir(empty.path().join("release")).unwrap();
    std::os::unix::fs::symlink(
        workspace_bin("oscil-lab"),
        empty.path().join("release/oscil-lab"),
    )
    .unwrap();
    let output = lab_without_cargo(empty.path());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("   1    1  1gbit_466ms_cubic_lowat-"),
        "{stdout}"
    );
    assert!(stdout.contains("2 run(s)"), "{stdout}");
}

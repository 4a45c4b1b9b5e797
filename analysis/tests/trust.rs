//! Where a report run as root writes (issue 38, holes 1 and 8): only into a directory that
//! is root's (or this user's) all the way up, never through a link, and never half a
//! picture, even when the disk fills. One real run over loopback is made, then reported.

mod util;

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use oscil_testkit::{lacks_root, Daemon};
use util::{reader_run, report};

/// One short real run, made once.
fn good_run() -> &'static (tempfile::TempDir, PathBuf) {
    static RUN: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    RUN.get_or_init(|| {
        let daemon = Daemon::start(&[]);
        let scratch = tempfile::tempdir().expect("scratch dir");
        let dir = scratch.path().join("good");
        let args = ["--fast", "1s", "--slow", "1s", "--cycles", "1"];
        reader_run(&daemon, &dir, "good", &args);
        (scratch, dir)
    })
}

/// The exit code and stderr of a command that must say one line.
fn one_line(output: &Output) -> (Option<i32>, String) {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    (output.status.code(), stderr)
}

fn give_to_nobody(path: &Path) {
    std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
}

/// An empty `--out` another user owns, one under another user's directory, and one
/// reached through a link: each refused in one line, exit 1, nothing written. Before, the
/// first two were written into (the user could then plant `headline.png -> /root/secret`
/// as the pictures appeared).
#[test]
fn an_out_directory_another_user_could_change_is_refused() {
    if lacks_root("to give directories to nobody") {
        return;
    }
    let (_, run) = good_run();
    let scratch = tempfile::tempdir().unwrap();
    fs::set_permissions(scratch.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let theirs = scratch.path().join("theirs");
    fs::create_dir(&theirs).unwrap();
    give_to_nobody(&theirs);
    let (code, stderr) = one_line(&report(&[run], &theirs, &[]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("owned by uid 65534, neither root nor this user"),
        "{stderr}"
    );
    let under = theirs.join("report");
    let (code, stderr) = one_line(&report(&[run], &under, &[]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("{}: owned by uid 65534", theirs.display())),
        "{stderr}"
    );
    assert_eq!(fs::read_dir(&theirs).unwrap().count(), 0, "nothing written");
    let mine = scratch.path().join("mine");
    fs::create_dir(&mine).unwrap();
    let link = scratch.path().join("link");
    symlink(&mine, &link).unwrap();
    let (code, stderr) = one_line(&report(&[run], &link, &[]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("a symbolic link on the way"), "{stderr}");
    assert_eq!(fs::read_dir(&mine).unwrap().count(), 0, "nothing written");
    // The control: the same report into a directory of root's is written.
    let out = report(&[run], &mine.join("report"), &[]);
    assert!(out.status.success(), "{out:?}");
}

/// The default report directory (`report` here, `<campaign>/report` for a campaign) under
/// another user's directory is refused likewise.
#[test]
fn the_default_report_directory_is_checked_too() {
    if lacks_root("to give a directory to nobody") {
        return;
    }
    let (_, run) = good_run();
    let scratch = tempfile::tempdir().unwrap();
    give_to_nobody(scratch.path());
    let output = Command::new(env!("CARGO_BIN_EXE_oscil-report"))
        .arg(run)
        .current_dir(scratch.path())
        .output()
        .unwrap();
    let (code, stderr) = one_line(&output);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("owned by uid 65534"), "{stderr}");
    assert_eq!(
        fs::read_dir(scratch.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

/// A PNG ends with its IEND chunk: one cut short does not.
fn is_whole_png(bytes: &[u8]) -> bool {
    const IEND: [u8; 12] = [0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xAE, 0x42, 0x60, 0x82];
    bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.ends_with(&IEND)
}

/// A report whose disk fills (a 1200 KiB tmpfs in a mount namespace of its own) fails in
/// one line that says so, and leaves every picture whole or absent, no temporary file
/// behind. Before, the picture being drawn was left cut short under its final name.
#[test]
fn a_full_disk_leaves_no_picture_cut_short() {
    if lacks_root("to mount a tmpfs in a mount namespace") {
        return;
    }
    let (_, run) = good_run();
    let scratch = tempfile::tempdir().unwrap();
    let small = scratch.path().join("small");
    let kept = scratch.path().join("kept");
    fs::create_dir(&small).unwrap();
    let script = r#"mount -t tmpfs -o size=1200k tmpfs "$1" || exit 99
"$2" "$3" --out "$1/report"; rc=$?
cp -a "$1/report" "$4"; exit $rc"#;
    let output = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", script, "sh"])
        .args([
            &small,
            &PathBuf::from(env!("CARGO_BIN_EXE_oscil-report")),
            run,
            &kept,
        ])
        .output()
        .unwrap();
    let (code, stderr) = one_line(&output);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    let names: Vec<String> = fs::read_dir(&kept)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        names.iter().any(|n| n.ends_with(".png")),
        "some pictures fit: {names:?}"
    );
    for name in &names {
        assert!(
            !name.starts_with(".oscil-"),
            "a temporary file left: {names:?}"
        );
        if name.ends_with(".png") {
            assert!(
                is_whole_png(&fs::read(kept.join(name)).unwrap()),
                "{name} is cut short"
            );
        }
    }
}

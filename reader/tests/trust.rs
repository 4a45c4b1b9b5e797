//! Where the reader writes, and what it says when it cannot (issue 38, holes 1 and 8): its
//! `--out` must be root's (or this user's) all the way up and reached through no link; a
//! disk that fills during the run is named in `run.json` and on the terminal.

mod util;

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::process::Output;

use oscil_testkit::{lacks_root, workspace_bin, Daemon};
use util::reader;

/// The exit code and stderr of a reader that must say one line.
fn one_line(output: &Output) -> (Option<i32>, String) {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    (output.status.code(), stderr)
}

/// An empty `--out` another user owns, and one reached through a link to a directory of
/// root's alone: refused in one line before connecting (no daemon listens), exit 1,
/// nothing written. Before, both were accepted.
#[test]
fn an_out_directory_another_user_could_change_is_refused() {
    if lacks_root("to give a directory to nobody") {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    fs::set_permissions(scratch.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let theirs = scratch.path().join("theirs");
    fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let root_only = scratch.path().join("root-only");
    fs::create_dir(&root_only).unwrap();
    fs::set_permissions(&root_only, fs::Permissions::from_mode(0o700)).unwrap();
    let link = scratch.path().join("link");
    symlink(&root_only, &link).unwrap();
    let cases = [
        (
            theirs.clone(),
            "owned by uid 65534, neither root nor this user",
        ),
        (
            theirs.join("run"),
            "owned by uid 65534, neither root nor this user",
        ),
        (link.join("run"), "a symbolic link on the way"),
    ];
    for (out, why) in cases {
        let output = reader()
            .args(["--connect", "127.0.0.1:9", "--quiet", "--out"])
            .arg(&out)
            .output()
            .unwrap();
        let (code, stderr) = one_line(&output);
        assert_eq!(code, Some(1), "{}: {stderr}", out.display());
        assert!(stderr.contains(why), "{}: {stderr}", out.display());
    }
    assert_eq!(fs::read_dir(&theirs).unwrap().count(), 0, "nothing written");
    assert_eq!(
        fs::read_dir(&root_only).unwrap().count(),
        0,
        "nothing written"
    );
}

/// A disk that fills mid-run (a 1 MiB tmpfs in a mount namespace of its own, filled by
/// `dd` a second in): the run ends partial with the cause in `run.json` and on stderr,
/// exit 3. Before, `run.json` kept saying the reader was killed or crashed.
#[test]
fn a_full_disk_is_named_as_the_end_of_the_run() {
    if lacks_root("to mount a tmpfs in a mount namespace") {
        return;
    }
    let daemon = Daemon::start(&[]);
    let scratch = tempfile::tempdir().unwrap();
    let small = scratch.path().join("small");
    let kept = scratch.path().join("run.json");
    fs::create_dir(&small).unwrap();
    let script = r#"mount -t tmpfs -o size=1m tmpfs "$1" || exit 99
"$2" --connect "$3" --quiet --fast 2s --slow 2s --cycles 2 --out "$1/run" & reader=$!
sleep 1; dd if=/dev/zero of="$1/fill" bs=4k 2>/dev/null
wait $reader; rc=$?
cp "$1/run/run.json" "$4"; ls -A "$1/run" >"$4.ls"; exit $rc"#;
    let output = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(&small)
        .arg(workspace_bin("oscil-reader"))
        .arg(daemon.addr.to_string())
        .arg(&kept)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("run cut short"), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    let meta: serde_json::Value = serde_json::from_slice(&fs::read(&kept).unwrap()).unwrap();
    assert_eq!(meta["ending"]["status"], "partial", "{meta}");
    let reason = meta["ending"]["reason"].as_str().unwrap();
    assert!(reason.contains("No space left on device"), "{reason}");
    let names = fs::read_to_string(scratch.path().join("run.json.ls")).unwrap();
    assert!(
        !names.contains(".oscil-"),
        "a reserve or temporary file left: {names}"
    );
}

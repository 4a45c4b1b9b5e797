//! oscil-lab against files another user or a crash shaped: a crafted restore.json or
//! campaign.json is refused before anything runs (no ssh ProxyCommand, no sysctl off the
//! list, no directory the lab did not make), as is one another user owns or may write; an
//! --out another user owns is refused; `restore` of a missing directory is an error.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use oscil_testkit::{lacks_root, workspace_bin};
use serde_json::json;

fn lab(args: &[&str]) -> Output {
    Command::new(workspace_bin("oscil-lab"))
        .args(args)
        .output()
        .expect("run oscil-lab")
}

/// The exit code and stderr, which is one line.
fn one_line(output: &Output) -> (Option<i32>, String) {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    (output.status.code(), stderr)
}

/// A directory of the campaign's shape, mode 0755, holding `name` (mode 0644) with `value`.
fn dir_with(name: &str, value: &serde_json::Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, serde_json::to_vec(value).unwrap()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    dir
}

/// A restore.json that would run `touch MARKER` as root through ssh, if it were obeyed.
fn proxy_command_restore(marker: &Path) -> serde_json::Value {
    let proxy = format!("ProxyCommand=touch {}", marker.display());
    json!({
        "hosts": [{
            "host": {"ssh": {"target": "nobody@192.0.2.1", "options": [proxy], "sudo": false}},
            "sysctls": {"net.ipv4.tcp_notsent_lowat": "4294967295"}
        }],
        "temp_dirs": []
    })
}

#[test]
fn a_crafted_restore_json_runs_nothing() {
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("ran");
    let cases = [
        (
            proxy_command_restore(&marker),
            "\"ProxyCommand\" is not an option the lab passes to ssh",
        ),
        (
            json!({"hosts": [{"host": "local", "sysctls": {"kernel.core_pattern": "|/tmp/x"}}]}),
            "sysctl \"kernel.core_pattern\" is not one the lab sets",
        ),
        (
            json!({"hosts": [{"host": "local", "sysctls": {"net.ipv4.tcp_rmem": "1 2 3\nx"}}]}),
            "net.ipv4.tcp_rmem = \"1 2 3\\nx\" is not a value",
        ),
        (
            json!({"hosts": [], "temp_dirs": [{"host": "local", "path": "/etc"}]}),
            "\"/etc\" is not a directory the lab makes (/tmp/oscil-lab.XXXXXX)",
        ),
        (
            json!({"hosts": [], "temp_dirs": [{"host": "local", "path": "/tmp/oscil-lab.AAAAAA/../../etc"}]}),
            "is not a directory the lab makes",
        ),
    ];
    for (restore, why) in cases {
        let dir = dir_with("restore.json", &restore);
        let (code, stderr) = one_line(&lab(&["restore", dir.path().to_str().unwrap()]));
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains(why), "{why}\n{stderr}");
        assert!(stderr.contains("refused, nothing was changed"), "{stderr}");
        assert!(
            dir.path().join("restore.json").exists(),
            "kept for a person to look at"
        );
    }
    assert!(!marker.exists(), "the ProxyCommand ran");
}

#[test]
fn a_restore_json_others_may_write_is_refused() {
    let restore = json!({"hosts": [{"host": "local", "sysctls": {}}]});
    let dir = dir_with("restore.json", &restore);
    let path = dir.path().join("restore.json");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (code, stderr) = one_line(&lab(&["restore", dir.path().to_str().unwrap()]));
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("writable by other users (mode 666); refused"),
        "{stderr}"
    );
    if lacks_root("the owner half: to give the file to nobody") {
        return;
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let chown = Command::new("chown")
        .arg("65534")
        .arg(&path)
        .status()
        .unwrap();
    assert!(chown.success());
    let (code, stderr) = one_line(&lab(&["restore", dir.path().to_str().unwrap()]));
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("owned by uid 65534, neither root nor this user"),
        "{stderr}"
    );
}

#[test]
fn restore_of_a_missing_directory_is_an_error() {
    let (code, stderr) = one_line(&lab(&["restore", "/no/such/dir"]));
    assert_eq!(
        code,
        Some(2),
        "a directory named that is not there: a bad value"
    );
    assert_eq!(stderr, "oscil-lab: /no/such/dir: no such directory\n");
}

#[test]
fn a_campaign_json_naming_a_proxy_command_is_not_resumed() {
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("ran");
    let proxy = format!("ProxyCommand=touch {}", marker.display());
    let campaign = json!({
        "format_version": 1, "software": "oscil-lab", "created_unix_ms": 0,
        "backend": "hosts", "sender": "", "receiver": "", "order": "grouped",
        "seed": 0, "repeat": 1, "runs": [],
        "hosts": {"lab_backend": {"kind": "hosts", "sender": "nobody@192.0.2.1",
            "receiver": null, "ssh_options": [proxy], "remote_bin": null, "install": false}}
    });
    let dir = dir_with("campaign.json", &campaign);
    let (code, stderr) = one_line(&lab(&["--resume", dir.path().to_str().unwrap()]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("campaign.json: \"ProxyCommand\" is not an option the lab passes to ssh"),
        "{stderr}"
    );
    assert!(!marker.exists(), "the ProxyCommand ran");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let (code, stderr) = one_line(&lab(&["--resume", dir.path().to_str().unwrap()]));
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("writable by other users (mode 777)"),
        "{stderr}"
    );
}

#[test]
fn an_out_directory_another_user_owns_is_refused() {
    if lacks_root("to give the directory to nobody") {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let chown = Command::new("chown")
        .arg("65534")
        .arg(&out)
        .status()
        .unwrap();
    assert!(chown.success());
    let out_arg = out.to_str().unwrap();
    let (code, stderr) = one_line(&lab(&["--quick", "--out", out_arg]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("owned by uid 65534, neither root nor this user"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "nothing written"
    );
}

/// Issue 38, hole 1: `--out P/camp` with `P` another user's (who could swap the campaign
/// for a copy and plant links in it once the runs are done) is refused in one line,
/// `--dry-run` too, nothing made; so is an `--out` reached through a link. Before, only
/// `--out` itself was checked, and only when it existed.
#[test]
fn an_out_directory_under_another_users_is_refused() {
    if lacks_root("to give the directory to nobody") {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let theirs = scratch.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let out = theirs.join("camp");
    let out_arg = out.to_str().unwrap();
    for extra in [&["--dry-run"][..], &[]] {
        let mut args = vec!["--quick", "--out", out_arg];
        args.extend(extra);
        let (code, stderr) = one_line(&lab(&args));
        assert_eq!(code, Some(1), "{stderr}");
        let expected = format!("{}: owned by uid 65534, neither root", theirs.display());
        assert!(stderr.contains(&expected), "{stderr}");
    }
    assert!(!out.exists(), "nothing made");
    let link = scratch.path().join("link");
    std::os::unix::fs::symlink(scratch.path(), &link).unwrap();
    let (code, stderr) = one_line(&lab(&[
        "--quick",
        "--dry-run",
        "--out",
        link.join("camp").to_str().unwrap(),
    ]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("a symbolic link on the way"), "{stderr}");
}

/// The hosts and users: each refused by the lab's own check, in one line, before
/// ssh is ever run (so no ssh configuration could expand one into a command).
#[test]
fn hosts_and_users_that_are_not_names_are_refused_before_ssh() {
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("ran");
    let touch = format!("$(touch {})", marker.display());
    let proxy = format!("-oProxyCommand=touch {}", marker.display());
    let targets = [
        ("h;id".to_string(), "host \"h;id\" is not a DNS name"),
        (touch.clone(), "is not a DNS name"),
        (format!("{touch}@h"), "is not a POSIX user name"),
        (format!("root@{proxy}"), "is not a DNS name"),
        (format!("ssh://{proxy}"), "is not a DNS name"),
    ];
    for (target, why) in &targets {
        let out = scratch.path().join("out");
        let output = lab(&[
            "--sender",
            target,
            "--receiver",
            "local",
            "--out",
            out.to_str().unwrap(),
        ]);
        let (code, stderr) = one_line(&output);
        assert_eq!(code, Some(2), "{target}: {stderr}");
        assert!(stderr.contains(why), "{target}: {stderr}");
        assert!(!out.exists(), "{target}: nothing made");
    }
    let output = lab(&[
        "--sender",
        "snd",
        "--receiver",
        "local",
        "--ssh-option",
        &format!("HostName={touch}"),
    ]);
    let (code, stderr) = one_line(&output);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("is not a DNS name"), "{stderr}");
    let output = lab(&[
        "--sender",
        "snd",
        "--receiver",
        "local",
        "--remote-bin",
        "/tmp/$(id)",
    ]);
    let (code, stderr) = one_line(&output);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("is not an absolute directory of plain names"),
        "{stderr}"
    );
    assert!(!marker.exists(), "a command ran");
}

/// An inventory is data (issue 38, hole 2): a generator inventory whose host name pipes a
/// command, and an executable script inventory, run nothing, with or without `--dry-run`,
/// and are refused in one line; `--inventory-plugins` lets Ansible run the plugin.
#[test]
fn an_inventory_that_would_run_a_command_runs_nothing_unless_plugins_are_allowed() {
    if Command::new("ansible-inventory")
        .arg("--version")
        .output()
        .is_err()
    {
        oscil_testkit::skip("ansible-inventory is not installed (apt-get install ansible-core)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("touched");
    let generator = dir.path().join("gen.yml");
    std::fs::write(
        &generator,
        format!(
            "plugin: ansible.builtin.generator\nhosts:\n  name: \"{{{{ lookup('pipe', 'touch {} && echo h') }}}}{{{{ n }}}}\"\nlayers:\n  n: ['1', '2']\n",
            marker.display()
        ),
    )
    .unwrap();
    let script = dir.path().join("script.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ntouch {}\necho '{{\"all\": {{\"hosts\": [\"a\", \"b\"]}}}}'\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.path().join("camp");
    let out = out.to_str().unwrap();
    for inventory in [&generator, &script] {
        let inv = inventory.to_str().unwrap();
        for dry_run in [true, false] {
            let mut args = vec!["--inventory", inv, "--pairs", "all", "--out", out];
            if dry_run {
                args.push("--dry-run");
            }
            let (code, stderr) = one_line(&lab(&args));
            assert_eq!(code, Some(2), "{inv} dry run {dry_run}: {stderr}");
            assert!(stderr.starts_with("oscil-lab: --inventory: "), "{stderr}");
            assert!(
                !marker.exists(),
                "{inv} (dry run {dry_run}) ran its command: {stderr}"
            );
        }
    }
    let (code, stderr) = one_line(&lab(&[
        "--inventory",
        generator.to_str().unwrap(),
        "--pairs",
        "all",
        "--out",
        out,
        "--dry-run",
    ]));
    assert!(
        stderr.contains("names the inventory plugin \"ansible.builtin.generator\"")
            && stderr.contains("--inventory-plugins"),
        "{code:?} {stderr}"
    );
    let allowed = lab(&[
        "--inventory",
        generator.to_str().unwrap(),
        "--inventory-plugins",
        "--pairs",
        "all",
        "--out",
        out,
        "--dry-run",
    ]);
    let stderr = String::from_utf8_lossy(&allowed.stderr);
    assert!(allowed.status.success(), "{stderr}");
    assert!(marker.exists(), "the allowed plugin did not run: {stderr}");
    let first = stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("oscil-lab: 2 host(s) read from ")
            && first.contains("every inventory plugin Ansible enables (--inventory-plugins"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&allowed.stdout);
    assert!(stdout.contains("h1") && stdout.contains("h2"), "{stdout}");
}

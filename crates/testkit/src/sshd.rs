//! Real "hosts" for the lab's ssh tests: an sshd (Debian openssh-server, keys made here)
//! in a network namespace the test made, the sysctls the lab sets read and set there, and
//! the polling and killing those tests share.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const SSHD: &str = "/usr/sbin/sshd";
/// The sysctls the lab sets on a host and must put back.
pub const LAB_KEYS: [&str; 4] = [
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_notsent_lowat",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_adv_win_scale",
];

/// Runs a command to its end, failing the test when it fails; its output, trimmed.
pub fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().expect("run");
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// True (after saying why) where these tests cannot run: not root, or no sshd.
pub fn lacks_sshd() -> bool {
    if crate::skip::lacks_root("network namespaces, sshd") {
        return true;
    }
    if !Path::new(SSHD).exists() {
        crate::skip::skip(&format!("no {SSHD} (apt-get install openssh-server)"));
        return true;
    }
    false
}

/// A host key and a user key in `dir`, the user's key authorized.
pub fn make_keys(dir: &Path) {
    for name in ["host_key", "user_key"] {
        let file = dir.join(name);
        run(
            "ssh-keygen",
            &[
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-f",
                file.to_str().unwrap(),
            ],
        );
    }
    std::fs::copy(dir.join("user_key.pub"), dir.join("authorized_keys")).unwrap();
    std::fs::create_dir_all("/run/sshd").unwrap();
}

/// The ssh options that reach these hosts with the keys in `dir`.
pub fn ssh_options(dir: &Path) -> Vec<String> {
    vec![
        format!("IdentityFile={}", dir.join("user_key").display()),
        "StrictHostKeyChecking=no".into(),
        "UserKnownHostsFile=/dev/null".into(),
        "LogLevel=ERROR".into(),
    ]
}

/// An sshd in namespace `ns` on `addr` port 22, with the keys in `dir`, once it listens.
/// Its sessions run root's shell, whose start-up files may run `pyenv rehash` (this
/// machine's do): a session killed during it (the tests kill labs mid-campaign) leaves
/// pyenv's lock behind, and every later login would wait pyenv's 60 s for it, so the
/// sessions wait 1 s. `session_path`, when given, is the sessions' PATH (a host without
/// some program: see [`path_without`]).
pub fn start_sshd(ns: &str, addr: &str, dir: &Path, session_path: Option<&Path>) -> Child {
    let config = dir.join(format!("sshd_{ns}.conf"));
    let mut text = format!(
        "ListenAddress {addr}\nHostKey {}\nAuthorizedKeysFile {}\nPidFile none\nUsePAM no\nStrictModes no\n\
         PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
         SetEnv PYENV_REHASH_TIMEOUT=1",
        dir.join("host_key").display(),
        dir.join("authorized_keys").display()
    );
    // One SetEnv line: sshd takes the first and ignores the rest.
    if let Some(path) = session_path {
        text.push_str(&format!(" PATH={}", path.display()));
    }
    text.push('\n');
    std::fs::write(&config, text).unwrap();
    let child = Command::new("ip")
        .args(["netns", "exec", ns, SSHD, "-D", "-e", "-f"])
        .arg(&config)
        .stderr(Stdio::null())
        .spawn()
        .expect("start sshd");
    wait_for("sshd to listen", Duration::from_secs(10), || {
        !run("ip", &["netns", "exec", ns, "ss", "-Hltn", "sport = :22"]).is_empty()
    });
    child
}

/// A directory in `dir` of links to every program in /usr/bin and /usr/sbin but `missing`:
/// a PATH on which this machine looks like a host without it (on a merged-/usr system,
/// where /bin is /usr/bin).
pub fn path_without(dir: &Path, missing: &str) -> std::path::PathBuf {
    let farm = dir.join(format!("bin-without-{missing}"));
    std::fs::create_dir_all(&farm).unwrap();
    for source in ["/usr/bin", "/usr/sbin"] {
        for entry in std::fs::read_dir(source).unwrap().flatten() {
            let name = entry.file_name();
            if name != missing && farm.join(&name).symlink_metadata().is_err() {
                std::os::unix::fs::symlink(entry.path(), farm.join(&name)).unwrap();
            }
        }
    }
    farm
}

/// The lab's sysctls in namespace `ns`, white space normalised.
pub fn lab_sysctls(ns: &str) -> BTreeMap<String, String> {
    LAB_KEYS
        .iter()
        .map(|k| {
            let v = run("ip", &["netns", "exec", ns, "sysctl", "-n", k]);
            (
                k.to_string(),
                v.split_whitespace().collect::<Vec<_>>().join(" "),
            )
        })
        .collect()
}

/// Sets `KEY=VALUE`s in namespace `ns`.
pub fn set_sysctls(ns: &str, values: &[&str]) {
    let mut args = vec!["netns", "exec", ns, "sysctl", "-qw"];
    args.extend(values);
    run("ip", &args);
}

/// Kills every process in each namespace and deletes it (a test's clean-up).
pub fn remove_namespaces<'a>(names: impl IntoIterator<Item = &'a String>) {
    for ns in names {
        let pids = Command::new("ip").args(["netns", "pids", ns]).output();
        for pid in pids
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
            .split_whitespace()
        {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
        let _ = Command::new("ip").args(["netns", "del", ns]).status();
    }
}

/// Polls `done` until it holds, failing the test after `limit`.
pub fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGKILL to a process and every descendant (oscil-lab and the ssh clients its threads
/// started), so nothing of it can clean up.
pub fn kill_with_children(child: &mut Child) {
    let mut pids = vec![child.id().to_string()];
    let mut i = 0;
    while i < pids.len() {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", pids[i]))
            .map(|d| d.filter_map(Result::ok).collect::<Vec<_>>())
            .unwrap_or_default();
        for task in tasks {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            pids.extend(children.split_whitespace().map(str::to_owned));
        }
        i += 1;
    }
    for pid in pids.iter().skip(1) {
        let _ = Command::new("kill").args(["-KILL", pid]).status();
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The PLAY RECAP's `changed=N` of every host, from ansible-playbook's output.
pub fn recap_changed(recap: &str) -> Vec<u32> {
    recap
        .lines()
        .filter_map(|l| l.split("changed=").nth(1))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect()
}

/// The path of namespace `ns`'s campaign lock (oscil-lab takes one per network namespace,
/// in /run, which namespaces share with the test).
pub fn lab_lock_file(ns: &str) -> std::path::PathBuf {
    let inode = run(
        "ip",
        &[
            "netns",
            "exec",
            ns,
            "stat",
            "-L",
            "-c",
            "%i",
            "/proc/self/ns/net",
        ],
    );
    std::path::PathBuf::from(format!("/run/oscil-lab/net-{inode}.lock"))
}

/// True while some process holds namespace `ns`'s campaign lock, as the kernel's table of
/// locks (`/proc/locks`) lists it: read, never taken, since a probe that took the lock for
/// a moment (`flock -n`) would turn away a campaign starting in that moment.
pub fn lab_lock_held(ns: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(lab_lock_file(ns)) else {
        return false;
    };
    let inode = format!(":{} ", meta.ino());
    std::fs::read_to_string("/proc/locks")
        .expect("read /proc/locks")
        .lines()
        .any(|l| l.contains("FLOCK") && format!("{l} ").contains(&inode))
}

//! Where a command runs: this machine, a network namespace on it, or a machine over ssh.
//! Everything else in the lab (sysctls, the daemon, the reader) is written once against
//! [`Host`], and [`Proc`] supervises what it starts there.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use oscil_model::text::escape_peer;
use serde::{Deserialize, Serialize};

use crate::sys;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Host {
    /// This machine.
    Local,
    /// A network namespace on this machine.
    Netns(String),
    /// A machine reached with the system's OpenSSH client.
    Ssh(SshHost),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SshHost {
    /// `user@host`, as ssh takes it.
    pub target: String,
    /// Each passed as `-o KEY=VALUE`.
    pub options: Vec<String>,
    /// Prefix commands with `sudo -n` (the user is not root).
    pub sudo: bool,
    /// A private socket through which every command shares one ssh connection (a new
    /// connection per command costs several round trips on a long path). Not recorded in
    /// restore.json: a restore after a crash connects afresh.
    #[serde(skip)]
    pub control_path: Option<String>,
}

/// A command on a host that could not run or failed; the message names both.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("{host}: cannot run {program}: {source}")]
    Spawn {
        host: String,
        program: String,
        source: std::io::Error,
    },
    #[error("{host}: `{command}` failed: {detail}")]
    Failed {
        host: String,
        command: String,
        detail: String,
    },
}

/// The ssh options the lab passes on (`-o KEY=VALUE`): how to reach and authenticate a
/// host. Options that run a command here (`ProxyCommand`, `LocalCommand`,
/// `KnownHostsCommand`, `Match exec`), forward anything, or pull in other files are not
/// among them: the lab runs ssh as root, and these options also come back from files.
pub const SSH_OPTIONS: [&str; 24] = [
    "AddressFamily",
    "BatchMode",
    "CheckHostIP",
    "Ciphers",
    "Compression",
    "ConnectionAttempts",
    "ConnectTimeout",
    "GlobalKnownHostsFile",
    "HostKeyAlgorithms",
    "HostKeyAlias",
    "HostName",
    "IdentitiesOnly",
    "IdentityFile",
    "IPQoS",
    "KexAlgorithms",
    "LogLevel",
    "MACs",
    "Port",
    "PubkeyAcceptedAlgorithms",
    "ServerAliveCountMax",
    "ServerAliveInterval",
    "StrictHostKeyChecking",
    "User",
    "UserKnownHostsFile",
];

/// Why a host, an ssh target or an ssh option (given, or read back from a file) is not one
/// the lab would use. Every name is escaped: it may come from a file anyone could shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostArgError {
    #[error("{0:?} is not KEY=VALUE")]
    NotKeyValue(String),
    #[error("\"{key}\" is not an option the lab passes to ssh (it takes: {takes})", takes = SSH_OPTIONS.join(", "))]
    NotPassed { key: String },
    #[error("\"{0}\": its value is empty, too long or has control characters")]
    BadValue(String),
    #[error("\"{0}\" is not USER@HOST")]
    NotTarget(String),
    #[error("host \"{0}\" is not a DNS name (letters, digits, '-', '_' and '.', no '-' or '.' first) nor an IP address")]
    NotHostName(String),
    #[error(
        "user \"{0}\" is not a POSIX user name (letters, digits, '.', '_' and '-', no '-' first)"
    )]
    NotUserName(String),
    #[error("\"{0}\" is not a namespace name")]
    NotNamespace(String),
    #[error("\"{0}\" is not an absolute directory of plain names (letters, digits, '.', '_', '-' and '+'; no '..')")]
    NotBinDir(String),
}

/// Why `option` (`KEY=VALUE`) is not passed to ssh, if it is not.
pub fn check_ssh_option(option: &str) -> Result<(), HostArgError> {
    let Some((key, value)) = option.split_once('=') else {
        return Err(HostArgError::NotKeyValue(option.to_owned()));
    };
    if !SSH_OPTIONS.iter().any(|k| k.eq_ignore_ascii_case(key)) {
        return Err(HostArgError::NotPassed {
            key: escape_peer(key),
        });
    }
    if value.is_empty() || value.len() > 1024 || value.chars().any(char::is_control) {
        return Err(HostArgError::BadValue(escape_peer(option)));
    }
    // What ssh connects to and as whom: held to the target's rules.
    match key.to_ascii_lowercase().as_str() {
        "hostname" => check_host_name(value),
        "user" => check_user_name(value),
        _ => Ok(()),
    }
}

/// Why `target` is not a `[USER@]HOST` ssh may be given, if it is not: the user a POSIX
/// user name, the host a DNS name or an IP address ([`check_host_name`],
/// [`check_user_name`]). Nothing else gets through, so no ssh configuration that expands
/// `%h` or `%r` into a command can be turned into another one. The command line's
/// `--sender`/`--receiver` and an inventory's hosts are both checked here.
pub fn check_ssh_target(target: &str) -> Result<(), HostArgError> {
    if target.is_empty() || target.len() > 255 {
        return Err(HostArgError::NotTarget(escape_peer(target)));
    }
    let host = match target.split_once('@') {
        Some((user, host)) => {
            check_user_name(user)?;
            host
        }
        None => target,
    };
    check_host_name(host)
}

/// Why `host` is neither a DNS name (labels of letters, digits, `-` and `_`, at most 63
/// bytes each, 253 in all, none starting with `-`) nor an IPv4 or IPv6 address (bare or
/// in brackets, with an optional plain zone: `fe80::1%eth0`), if it is neither.
pub fn check_host_name(host: &str) -> Result<(), HostArgError> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let (address, zone) = bare.split_once('%').unwrap_or((bare, ""));
    let plain = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let ipv6 =
        address.parse::<std::net::Ipv6Addr>().is_ok() && zone.chars().all(|c| plain(c) || c == '.');
    let label =
        |l: &str| !l.is_empty() && l.len() <= 63 && !l.starts_with('-') && l.chars().all(plain);
    let dns = host.len() <= 253 && host.split('.').all(label);
    match ipv6 || dns {
        true => Ok(()),
        false => Err(HostArgError::NotHostName(escape_peer(host))),
    }
}

/// Why `dir` (`--remote-bin`, an inventory's `oscil_bin`) is not a directory the lab
/// would run binaries from as root, if it is not: an absolute path of plain names, so it
/// reads the same to every shell and tool on the way. Who owns it and who may write it
/// is checked on the host itself, before anything is run or written there.
pub fn check_bin_dir(dir: &str) -> Result<(), HostArgError> {
    let plain = |name: &str| {
        !name.is_empty()
            && name != "."
            && name != ".."
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-+".contains(c))
    };
    let ok = dir.len() <= 1024
        && dir.strip_prefix('/').is_some_and(|rest| {
            rest.is_empty() || rest.trim_end_matches('/').split('/').all(plain)
        });
    match ok {
        true => Ok(()),
        false => Err(HostArgError::NotBinDir(escape_peer(dir))),
    }
}

/// Why `user` is not a POSIX user name (the portable set: letters, digits, `.`, `_`,
/// `-`, not `-` first; at most 32 bytes), if it is not.
pub fn check_user_name(user: &str) -> Result<(), HostArgError> {
    let ok = !user.is_empty()
        && user.len() <= 32
        && !user.starts_with('-')
        && user
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    match ok {
        true => Ok(()),
        false => Err(HostArgError::NotUserName(escape_peer(user))),
    }
}

impl Host {
    /// Why this host, read back from a file, is not one the lab would have made: an ssh
    /// target or option outside the rules above, or a namespace name that is not plain.
    pub fn check(&self) -> Result<(), HostArgError> {
        match self {
            Host::Local => Ok(()),
            Host::Netns(name) => {
                let plain = !name.is_empty()
                    && name.len() <= 64
                    && !name.starts_with('.')
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
                match plain {
                    true => Ok(()),
                    false => Err(HostArgError::NotNamespace(escape_peer(name))),
                }
            }
            Host::Ssh(ssh) => {
                check_ssh_target(&ssh.target)?;
                ssh.options.iter().try_for_each(|o| check_ssh_option(o))
            }
        }
    }
}

/// Quotes one word for the remote shell that ssh hands its command to.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=@%+,-".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

impl Host {
    /// How messages name the host.
    pub fn name(&self) -> String {
        match self {
            Host::Local => "this machine".into(),
            Host::Netns(ns) => format!("namespace {ns}"),
            Host::Ssh(ssh) => ssh.target.clone(),
        }
    }

    /// [`Host::command`], and on this machine (or a namespace of it) a child that dies
    /// with the lab: a lab killed by SIGKILL leaves no link, daemon or reader running.
    /// Over ssh the client is left alone: a fleet's threads hand its connections on.
    fn local_command(&self, argv: &[&str]) -> Command {
        let mut command = self.command(argv);
        if !matches!(self, Host::Ssh(_)) {
            sys::die_with_parent(&mut command);
        }
        command
    }

    /// `argv` as it runs on this host, as root.
    pub fn command(&self, argv: &[&str]) -> Command {
        match self {
            Host::Local => {
                let mut command = Command::new(argv[0]);
                command.args(&argv[1..]);
                command
            }
            Host::Netns(ns) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", ns]).args(argv);
                command
            }
            Host::Ssh(ssh) => {
                let mut command = Command::new("ssh");
                command.args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]);
                command.args(["-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]);
                for option in &ssh.options {
                    command.arg("-o").arg(option);
                }
                if let Some(path) = &ssh.control_path {
                    command.args(["-o", "ControlMaster=auto", "-o", "ControlPersist=30"]);
                    command.arg("-o").arg(format!("ControlPath={path}"));
                }
                let sudo: &[&str] = if ssh.sudo { &["sudo", "-n"] } else { &[] };
                let words: Vec<String> = sudo.iter().chain(argv).map(|w| shell_quote(w)).collect();
                command.arg(&ssh.target).arg("--").arg(words.join(" "));
                command
            }
        }
    }

    /// Runs `argv` to its end and returns its standard output, trimmed.
    pub fn run(&self, argv: &[&str]) -> Result<String, HostError> {
        self.run_input(argv, &[])
    }

    /// Runs `argv` with `input` on its standard input (how files and keys reach a remote
    /// host without ever being on a command line). In a process group of its own, like
    /// everything the lab starts: a Ctrl-C on the terminal reaches only the lab.
    pub fn run_input(&self, argv: &[&str], input: &[u8]) -> Result<String, HostError> {
        let mut child = self
            .local_command(argv)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|source| self.spawn_error(argv, source))?;
        let mut stdin = child.stdin.take().expect("piped");
        // A command that does not read its input closes the pipe early: not an error.
        let _ = stdin.write_all(input);
        drop(stdin);
        let output = child
            .wait_with_output()
            .map_err(|source| self.spawn_error(argv, source))?;
        if output.status.success() {
            return Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let detail = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map_or_else(|| output.status.to_string(), |l| l.trim().to_owned());
        Err(HostError::Failed {
            host: self.name(),
            command: argv.join(" "),
            detail,
        })
    }

    fn spawn_error(&self, argv: &[&str], source: std::io::Error) -> HostError {
        let program = match self {
            Host::Local => argv[0],
            Host::Netns(_) => "ip",
            Host::Ssh(_) => "ssh",
        };
        HostError::Spawn {
            host: self.name(),
            program: program.into(),
            source,
        }
    }

    /// Starts `argv` in the background, its output into `log`. Local processes get a
    /// process group of their own, so a Ctrl-C on the terminal reaches only the lab, which
    /// then stops them in the right order.
    pub fn spawn(&self, argv: &[&str], log: &File) -> Result<Proc, HostError> {
        let clone_log = || {
            log.try_clone()
                .map_err(|source| self.spawn_error(argv, source))
        };
        let remote = matches!(self, Host::Ssh(_));
        // Over ssh, a shell says its PID and then becomes the program, so the lab can
        // signal the program itself later.
        let wrapped: Vec<&str> = if remote {
            ["sh", "-c", "echo $$; exec \"$@\" >&2", "sh"]
                .iter()
                .chain(argv)
                .copied()
                .collect()
        } else {
            argv.to_vec()
        };
        let mut child = self
            .local_command(&wrapped)
            .stdin(Stdio::null())
            .stdout(if remote {
                Stdio::piped()
            } else {
                Stdio::from(clone_log()?)
            })
            .stderr(Stdio::from(clone_log()?))
            .process_group(0)
            .spawn()
            .map_err(|source| self.spawn_error(argv, source))?;
        let pid = if remote {
            let mut line = String::new();
            let stdout = child.stdout.take().expect("piped");
            let _ = BufReader::new(stdout).read_line(&mut line);
            line.trim().parse().ok()
        } else {
            Some(child.id())
        };
        let Some(pid) = pid else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(HostError::Failed {
                host: self.name(),
                command: argv.join(" "),
                detail: "it did not start (see the log)".into(),
            });
        };
        Ok(Proc {
            host: self.clone(),
            pid,
            child,
        })
    }
}

/// A process the lab started on a host, stopped (gently, then not) when dropped.
pub struct Proc {
    host: Host,
    /// The program's PID on its host.
    pub pid: u32,
    /// This machine's handle: the program itself, or the ssh client carrying it.
    child: Child,
}

impl Proc {
    /// Sends `signal` to the program, wherever it runs.
    pub fn signal(&self, signal: i32) {
        match &self.host {
            Host::Ssh(_) => {
                let _ = self
                    .host
                    .run(&["kill", &format!("-{signal}"), &self.pid.to_string()]);
            }
            _ => {
                let _ = sys::kill(self.pid, signal);
            }
        }
    }

    /// The exit status, once it has ended.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits up to `limit` for it to end by itself.
    pub fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, up to `grace` to end, then SIGKILL.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Some(status) = self.try_wait() {
            return Some(status);
        }
        self.signal(sys::SIGTERM);
        if let Some(status) = self.wait_for(grace) {
            return Some(status);
        }
        self.signal(sys::SIGKILL);
        let _ = self.child.kill();
        self.child.wait().ok()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_each_word_whole() {
        assert_eq!(
            shell_quote("net.ipv4.tcp_wmem=4096"),
            "net.ipv4.tcp_wmem=4096"
        );
        assert_eq!(shell_quote("4096 16384 4194304"), "'4096 16384 4194304'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("$(reboot)"), "'$(reboot)'");
    }

    #[test]
    fn ssh_options_that_run_commands_are_refused() {
        check_ssh_option("Port=2222").unwrap();
        check_ssh_option("identityfile=/root/.ssh/lab").unwrap();
        for bad in [
            "ProxyCommand=touch /tmp/owned",
            "proxycommand=sh",
            "LocalCommand=id",
            "PermitLocalCommand=yes",
            "KnownHostsCommand=id",
            "Include=/tmp/x",
            "Port",
            "Port=22\n",
        ] {
            assert!(check_ssh_option(bad).is_err(), "{bad}");
        }
        check_ssh_target("alice@snd").unwrap();
        for bad in ["-oProxyCommand=id", "a b", "", "it's"] {
            assert!(check_ssh_target(bad).is_err(), "{bad:?}");
        }
        assert!(check_ssh_option("HostName=h;id").is_err());
        assert!(check_ssh_option("User=-oProxyCommand=id").is_err());
        check_ssh_option("HostName=fra-1.example.net").unwrap();
    }

    #[test]
    fn a_binary_directory_is_an_absolute_path_of_plain_names() {
        for good in ["/usr/local/bin", "/opt/oscil-0.1/bin/", "/", "/srv/a+b_c"] {
            check_bin_dir(good).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
        for bad in [
            "bin",
            "/opt/../etc",
            "/opt/./x",
            "/tmp/$(id)",
            "/tmp/a b",
            "/tmp/x\n",
            "//x",
            "",
        ] {
            assert!(check_bin_dir(bad).is_err(), "{bad:?}");
        }
    }

    /// The issue's attempts, refused by the lab's own check (before, only OpenSSH's
    /// hostname check stood in their way); the forms real hosts take, accepted.
    #[test]
    fn only_dns_names_ip_addresses_and_posix_users_are_targets() {
        for good in [
            "snd",
            "root@10.0.0.1",
            "alice.b_c-d@fra-1.example.net",
            "ubuntu@2001:db8::1",
            "root@[2001:db8::1]",
            "root@fe80::1%eth0",
            "_svc@host_1.lan",
        ] {
            check_ssh_target(good).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
        let refused = |target: &str| check_ssh_target(target).unwrap_err().to_string();
        assert_eq!(
            refused("h;id"),
            "host \"h;id\" is not a DNS name (letters, digits, '-', '_' and '.', no '-' or '.' first) nor an IP address"
        );
        assert_eq!(
            refused("root@-oProxyCommand=touch /tmp/x"),
            "host \"-oProxyCommand=touch /tmp/x\" is not a DNS name (letters, digits, '-', '_' and '.', no '-' or '.' first) nor an IP address"
        );
        assert_eq!(
            refused("$(touch /tmp/x)@h"),
            "user \"$(touch /tmp/x)\" is not a POSIX user name (letters, digits, '.', '_' and '-', no '-' first)"
        );
        for bad in [
            "$(touch /tmp/x)",
            "ssh://-oProxyCommand=id",
            "ssh://root@h",
            "a@b@c",
            "-l@h",
            "h.",
            ".h",
            "h..i",
            "fe80::1%eth0;id",
            "[::1",
            "h\u{1b}[2J",
            &"a".repeat(64),
        ] {
            assert!(check_ssh_target(bad).is_err(), "{bad:?}");
        }
        assert!(Host::Netns("../x".into()).check().is_err());
    }

    #[test]
    fn local_commands_report_output_and_failure() {
        assert_eq!(Host::Local.run(&["echo", " hi "]).unwrap(), "hi");
        let input = Host::Local.run_input(&["cat"], b"key\n").unwrap();
        assert_eq!(input, "key");
        let error = Host::Local
            .run(&[
                "sh",
                "-c",
                "echo first >&2; echo 'no such thing' >&2; exit 3",
            ])
            .unwrap_err()
            .to_string();
        assert_eq!(error, "this machine: `sh -c echo first >&2; echo 'no such thing' >&2; exit 3` failed: no such thing");
    }

    #[test]
    fn a_started_process_is_stopped_by_signal() {
        use std::os::unix::process::ExitStatusExt;
        let log = tempfile::tempfile().unwrap();
        let mut proc = Host::Local.spawn(&["sleep", "30"], &log).unwrap();
        assert!(proc.try_wait().is_none());
        let status = proc.stop(Duration::from_secs(5)).unwrap();
        // The kernel's word on how it ended: by the SIGTERM, not the SIGKILL that follows
        // a grace spent waiting, nor by ending its 30 s.
        assert_eq!(status.signal(), Some(sys::SIGTERM), "{status}");
    }
}

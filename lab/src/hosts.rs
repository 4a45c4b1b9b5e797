//! Two real hosts over ssh: checks both before anything changes, records every sysctl it
//! may change in `restore.json` before the first change, sets each run's sysctls on the
//! host they belong to, runs the daemon (fresh key, free port) and the reader, copies the
//! run directory back, and puts every value back on every exit path.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use oscil_rundir::campaign::CampaignRun;
use oscil_rundir::Limits;

use crate::config::HostsSpec;
use crate::execute::{run_session, Backend, LabError};
use crate::host::{Host, SshHost};
use crate::meta::{run_warnings, LabMeta, Sides};
use crate::session::{listening_ports, pick_port, Ends, ReaderEnd, RunFiles};
use crate::sysctl::{
    self, HostRestore, RestoreFile, RunningDaemon, Sysctls, TempDirRecord, RECEIVER_KEYS, RECORDED,
    SENDER_KEYS,
};
use crate::{ui, unpack};

pub struct Hosts {
    ends: Ends,
    campaign_dir: PathBuf,
    /// Each side's values before the campaign: what `default` means, and what is restored.
    original: [Sysctls; 2],
    kernels: [String; 2],
    restore: RestoreFile,
    /// Temporary directories made on each host (key, binaries, the run in progress).
    work: Vec<(Host, String)>,
    ping: Option<String>,
    next_port_seed: u64,
    /// This machine's private directory for the ssh connections' control sockets, when
    /// this backend has its own (held for the campaign and removed when it drops); a
    /// fleet's pairs share the fleet's, so each host has one connection.
    own_control_dir: Option<tempfile::TempDir>,
}

/// One end reached over ssh: how, and where its oscil binaries are.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    pub target: String,
    pub ssh_options: Vec<String>,
    /// `None`: the remote PATH (or, with `install`, a temporary directory).
    pub remote_bin: Option<String>,
}

/// The two ends of one pair; `receiver: None` is this machine.
#[derive(Debug, Clone, PartialEq)]
pub struct PairSpec {
    pub sender: Endpoint,
    pub receiver: Option<Endpoint>,
    /// Copy this build's binaries there first.
    pub install: bool,
}

impl From<&HostsSpec> for PairSpec {
    fn from(spec: &HostsSpec) -> PairSpec {
        let end = |target: &String| Endpoint {
            target: target.clone(),
            ssh_options: spec.ssh_options.clone(),
            remote_bin: spec.remote_bin.clone(),
        };
        PairSpec {
            sender: end(&spec.sender),
            receiver: spec.receiver.as_ref().map(end),
            install: spec.install,
        }
    }
}

/// Reaches `target` (opening the connection later commands share), and finds out whether
/// commands need `sudo -n`.
pub fn preflight(target: &str, options: &[String], control_dir: &Path) -> Result<Host, LabError> {
    let mut ssh = SshHost {
        target: target.to_owned(),
        options: options.to_vec(),
        sudo: false,
        control_path: Some(control_dir.join("%C").display().to_string()),
    };
    let uid = Host::Ssh(ssh.clone()).run(&["id", "-u"]).map_err(|e| {
        LabError::Setup(format!(
            "cannot reach {target} over ssh (BatchMode: keys only): {e}"
        ))
    })?;
    if uid != "0" {
        ssh.sudo = true;
        Host::Ssh(ssh.clone()).run(&["true"]).map_err(|e| {
            LabError::Setup(format!(
                "{target}: needs root or passwordless sudo (sudo -n) to set sysctls: {e}"
            ))
        })?;
    }
    Ok(Host::Ssh(ssh))
}

/// The binary `name` on `host`: found (and of this build's version), or copied there.
fn binary(
    host: &Host,
    name: &str,
    (remote_bin, install): (Option<&String>, bool),
    work: &str,
    local_bin: &Path,
) -> Result<String, LabError> {
    if *host == Host::Local {
        return Ok(local_bin.join(name).display().to_string());
    }
    let dir = remote_bin
        .cloned()
        .or_else(|| install.then(|| work.to_owned()));
    let path = dir.map_or_else(|| name.to_owned(), |d| format!("{d}/{name}"));
    if install {
        let local = local_bin.join(name);
        let bytes =
            std::fs::read(&local).map_err(|source| LabError::io("cannot read", local, source))?;
        host.run_input(
            &[
                "sh",
                "-c",
                "mkdir -p \"$(dirname \"$1\")\" && cat > \"$1\" && chmod 755 \"$1\"",
                "sh",
                &path,
            ],
            &bytes,
        )?;
    }
    let expected = format!("{name} {}", env!("CARGO_PKG_VERSION"));
    let found = host.run(&[&path, "--version"]).map_err(|e| {
        LabError::Setup(format!(
            "{}: {name} is missing or does not run ({e}); give --remote-bin DIR or --install",
            host.name()
        ))
    })?;
    if found != expected {
        return Err(LabError::Setup(format!(
            "{}: {path} is {found:?}, this build is {expected:?}; use --install to copy this build",
            host.name()
        )));
    }
    Ok(path)
}

/// The address ssh connects to for `target` (after ~/.ssh/config), which the reader uses.
fn resolved_address(target: &str, options: &[String]) -> Result<String, LabError> {
    let mut command = Command::new("ssh");
    command.arg("-G");
    for option in options {
        command.arg("-o").arg(option);
    }
    let output = command
        .arg(target)
        .output()
        .map_err(|source| LabError::io("cannot run", "ssh".into(), source))?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("hostname ").map(str::to_owned))
        .ok_or_else(|| LabError::Setup(format!("ssh -G {target} names no hostname")))
}

impl Hosts {
    /// Checks both hosts, ships the key (and binaries), and records what will be restored.
    pub fn new(
        spec: &HostsSpec,
        campaign_dir: &Path,
        local_bin: &Path,
        seed: u64,
    ) -> Result<Hosts, LabError> {
        let control_dir = oscil_rundir::safe_fs::private_temp_dir("oscil-ssh-")?;
        let mut hosts = Self::connect(&spec.into(), campaign_dir, seed, control_dir.path())?;
        hosts.own_control_dir = Some(control_dir);
        // From here on, dropping `hosts` undoes whatever was done.
        hosts.prepare(&spec.into(), local_bin)?;
        Ok(hosts)
    }

    /// One pair of a fleet: its restore file in `pair_dir`, its ssh connections through
    /// the fleet's `control_dir` (one per host, shared with the host's other pairs).
    pub fn for_pair(
        spec: &PairSpec,
        pair_dir: &Path,
        local_bin: &Path,
        seed: u64,
        control_dir: &Path,
    ) -> Result<Hosts, LabError> {
        let mut hosts = Self::connect(spec, pair_dir, seed, control_dir)?;
        hosts.prepare(spec, local_bin)?;
        Ok(hosts)
    }

    /// Reaches both hosts.
    fn connect(
        spec: &PairSpec,
        campaign_dir: &Path,
        seed: u64,
        control_dir: &Path,
    ) -> Result<Hosts, LabError> {
        let sender = preflight(&spec.sender.target, &spec.sender.ssh_options, control_dir)?;
        let receiver = match &spec.receiver {
            Some(end) => preflight(&end.target, &end.ssh_options, control_dir)?,
            None if Host::Local.run(&["id", "-u"])? == "0" => Host::Local,
            None => {
                return Err(LabError::Setup(
                    "--receiver local needs root here (it sets tcp_rmem on this machine)".into(),
                ))
            }
        };
        let connect_host = resolved_address(&spec.sender.target, &spec.sender.ssh_options)?;
        let listen_ip = if connect_host.contains(':') {
            "[::]"
        } else {
            "0.0.0.0"
        };
        Ok(Hosts {
            ends: Ends {
                sender,
                receiver,
                daemon_bin: String::new(),
                reader_bin: String::new(),
                sender_key: String::new(),
                receiver_key: String::new(),
                listen_ip: listen_ip.into(),
                connect_host,
            },
            campaign_dir: campaign_dir.to_owned(),
            original: Default::default(),
            kernels: Default::default(),
            restore: RestoreFile::default(),
            work: Vec::new(),
            ping: None,
            next_port_seed: seed,
            own_control_dir: None,
        })
    }

    /// Work directories, binaries and the campaign key on both hosts, the values to
    /// restore recorded, the path pinged.
    fn prepare(&mut self, spec: &PairSpec, local_bin: &Path) -> Result<(), LabError> {
        let key = oscil_protocol::key::generate_key()
            .map_err(|source| LabError::io("cannot read", "/dev/urandom".into(), source))?;
        let (sender, receiver) = (self.ends.sender.clone(), self.ends.receiver.clone());
        let sender_work = self.make_work_dir(&sender)?;
        let receiver_work = self.make_work_dir(&receiver)?;
        let sender_bin = (spec.sender.remote_bin.as_ref(), spec.install);
        let receiver_bin = (
            spec.receiver.as_ref().and_then(|e| e.remote_bin.as_ref()),
            spec.install,
        );
        self.ends.daemon_bin =
            binary(&sender, "oscil-daemon", sender_bin, &sender_work, local_bin)?;
        self.ends.reader_bin = binary(
            &receiver,
            "oscil-reader",
            receiver_bin,
            &receiver_work,
            local_bin,
        )?;
        self.ends.sender_key = ship_key(&sender, &sender_work, &key)?;
        self.ends.receiver_key = ship_key(&receiver, &receiver_work, &key)?;
        self.record_originals()?;
        let ping = [
            "ping",
            "-c",
            "5",
            "-i",
            "0.2",
            "-q",
            &self.ends.connect_host,
        ];
        self.ping = receiver
            .run(&ping)
            .ok()
            .and_then(|text| text.lines().last().map(str::to_owned));
        Ok(())
    }

    fn make_work_dir(&mut self, host: &Host) -> Result<String, LabError> {
        let dir = host.run(&["mktemp", "-d", "/tmp/oscil-lab.XXXXXX"])?;
        self.work.push((host.clone(), dir.clone()));
        Ok(dir)
    }

    /// Reads both hosts' values and writes `restore.json` (with the temporary directories,
    /// which hold the key) before anything is changed.
    fn record_originals(&mut self) -> Result<(), LabError> {
        self.original = [
            sysctl::read(&self.ends.sender, &RECORDED)?,
            sysctl::read(&self.ends.receiver, &RECORDED)?,
        ];
        self.kernels = [
            self.ends.sender.run(&["uname", "-r"])?,
            self.ends.receiver.run(&["uname", "-r"])?,
        ];
        let keep = |values: &Sysctls, keys: &[&str]| -> Sysctls {
            keys.iter()
                .map(|k| (k.to_string(), values[*k].clone()))
                .collect()
        };
        self.restore = RestoreFile {
            hosts: vec![
                HostRestore {
                    host: self.ends.sender.clone(),
                    sysctls: keep(&self.original[0], &SENDER_KEYS),
                },
                HostRestore {
                    host: self.ends.receiver.clone(),
                    sysctls: keep(&self.original[1], &RECEIVER_KEYS),
                },
            ],
            daemon: None,
            temp_dirs: self
                .work
                .iter()
                .map(|(host, path)| TempDirRecord {
                    host: host.clone(),
                    path: path.clone(),
                })
                .collect(),
        };
        self.restore.save(&self.campaign_dir)?;
        Ok(())
    }

    /// Copies the receiver's run directory back here: `tar c` there, read here as data
    /// ([`unpack`]), at most what the run can hold.
    fn fetch(&self, remote_out: &str, run: &CampaignRun, run_dir: &Path) -> Result<(), LabError> {
        if self.ends.receiver.run(&["test", "-d", remote_out]).is_err() {
            return Ok(());
        }
        let mut source = self
            .ends
            .receiver
            .command(&["tar", "-C", remote_out, "-cf", "-", "."])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| LabError::io("cannot run", "ssh".into(), e))?;
        let stream = source.stdout.take().expect("piped");
        let unpacked = unpack::unpack(stream, run_dir, fetch_limit_bytes(run));
        if unpacked.is_err() {
            let _ = source.kill();
        }
        let packed = source
            .wait()
            .map_err(|e| LabError::io("cannot run", "ssh".into(), e))?;
        let unpacked = unpacked?;
        if !packed.success() {
            return Err(LabError::Setup(format!(
                "copying {remote_out} from {} failed ({packed})",
                self.ends.receiver.name()
            )));
        }
        for ignored in &unpacked.ignored {
            ui::say(&format!(
                "oscil-lab: warning: {}: {ignored} from the remote host ignored (files here are 0644, directories 0755)",
                run_dir.display()
            ));
        }
        self.ends.receiver.run(&["rm", "-rf", remote_out])?;
        Ok(())
    }

    /// The receiver and the `reader.csv` its reader is writing, for a live look (the
    /// second work directory made is the receiver's, see `prepare`).
    pub fn live_reader_csv(&self) -> Option<(Host, String)> {
        let (host, work) = self.work.get(1)?;
        Some((host.clone(), format!("{work}/run/reader.csv")))
    }

    fn meta(&self, run: &CampaignRun) -> Result<LabMeta, LabError> {
        let sysctls = self.ends.sysctls_in_force()?;
        let warnings = run_warnings(&run.settings, &sysctls["receiver"], &self.kernels[1]);
        Ok(LabMeta {
            configuration: run.label.clone(),
            repetition: run.repetition,
            settings: run.settings.clone(),
            link: None,
            sysctls,
            namespaces: None,
            hosts: Some(self.ends()),
            kernel: self.kernels[0].clone(),
            warnings,
        })
    }
}

/// Ends the shared ssh connection to `host`, if it has one.
pub fn close_connection(host: &Host) {
    if let Host::Ssh(ssh) = host {
        let control = format!(
            "ControlPath={}",
            ssh.control_path.as_deref().unwrap_or_default()
        );
        let _ = Command::new("ssh")
            .args(["-o", &control, "-O", "exit", &ssh.target])
            .stderr(Stdio::null())
            .status();
    }
}

/// The most bytes a run's directory may bring back: what its settings let it hold.
fn fetch_limit_bytes(run: &CampaignRun) -> u64 {
    let s = &run.settings;
    let pattern_ms = s
        .pattern
        .fast_ms
        .saturating_add(s.pattern.slow_ms)
        .saturating_mul(u64::from(s.pattern.cycles));
    let limits = Limits::declared(
        s.flows,
        s.interval_us,
        pattern_ms as f64 / 1000.0,
        s.marker_every_us,
    );
    limits.dir_bytes()
}

/// Writes the campaign key into `dir` on `host` through ssh's standard input, mode 0600.
fn ship_key(host: &Host, dir: &str, key: &str) -> Result<String, LabError> {
    let path = format!("{dir}/key");
    host.run_input(
        &["sh", "-c", "umask 077; cat > \"$1\"", "sh", &path],
        key.as_bytes(),
    )?;
    Ok(path)
}

impl Backend for Hosts {
    fn ends(&self) -> Sides {
        Sides {
            sender: self.ends.sender.name(),
            receiver: self.ends.receiver.name(),
        }
    }

    fn facts(&self) -> serde_json::Value {
        serde_json::json!({
            "sender": {"host": self.ends.sender.name(), "kernel": self.kernels[0], "sysctls_before": self.original[0]},
            "receiver": {"host": self.ends.receiver.name(), "kernel": self.kernels[1], "sysctls_before": self.original[1]},
            "path": {"reader_connects_to": self.ends.connect_host, "ping": self.ping},
        })
    }

    fn per_run_overhead(&self) -> Duration {
        crate::config::HOSTS_RUN_OVERHEAD
    }

    fn run(
        &mut self,
        run: &CampaignRun,
        run_dir: &Path,
        logs: &Path,
        tick: &mut dyn FnMut(Duration),
    ) -> Result<ReaderEnd, LabError> {
        self.ends
            .set_sysctls(&run.settings, [&self.original[0], &self.original[1]])?;
        self.next_port_seed = self.next_port_seed.wrapping_add(1);
        let port = pick_port(&listening_ports(&self.ends.sender)?, self.next_port_seed);
        let meta = self.meta(run)?.to_json();
        let local = self.ends.receiver == Host::Local;
        // The second work directory made is the receiver's (see `prepare`).
        let receiver_work = &self.work[1].1;
        let meta_path = format!("{receiver_work}/meta.json");
        let out = if local {
            run_dir.display().to_string()
        } else {
            format!("{receiver_work}/run")
        };
        self.ends.receiver.run_input(
            &[
                "sh",
                "-c",
                "cat > \"$1\"; rm -rf \"$2\"",
                "sh",
                &meta_path,
                if local { "" } else { &out },
            ],
            &meta,
        )?;
        let files = RunFiles {
            out: &out,
            meta: &meta_path,
            daemon_log: &logs.join("daemon.log"),
            reader_log: &logs.join("reader.log"),
        };
        let (campaign_dir, sender) = (self.campaign_dir.clone(), self.ends.sender.clone());
        let restore = &mut self.restore;
        let mut record = |pid: Option<u32>| -> Result<(), LabError> {
            restore.daemon = pid.map(|pid| RunningDaemon {
                host: sender.clone(),
                pid,
            });
            Ok(restore.save(&campaign_dir)?)
        };
        let end = run_session(&self.ends, run, port, &files, tick, Some(&mut record))?;
        if !local {
            self.fetch(&out, run, run_dir)?;
        }
        Ok(end)
    }

    /// Safe to call again: what was undone is not undone twice.
    fn close(&mut self) -> Result<(), LabError> {
        // Once recorded, the work directories go with the restore (or stay for
        // `oscil-lab restore` when it fails); before that, they go here.
        let recorded = !self.restore.temp_dirs.is_empty();
        let restored = self.restore.restore(&self.campaign_dir);
        if restored.is_ok() {
            self.restore = RestoreFile::default();
        }
        for (host, dir) in std::mem::take(&mut self.work) {
            if !recorded {
                let _ = host.run(&["rm", "-rf", &dir]);
            }
        }
        // A fleet's shared connections are the fleet's to close, once every pair is done.
        if self.own_control_dir.is_some() {
            for host in [&self.ends.sender, &self.ends.receiver] {
                close_connection(host);
            }
        }
        restored.map_err(|e| {
            LabError::Setup(format!(
                "could not put every setting back ({e}); `oscil-lab restore {}` retries",
                self.campaign_dir.display()
            ))
        })
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

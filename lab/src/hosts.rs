//! Two real hosts over ssh: checks both before anything changes, records every sysctl it
//! may change in `restore.json` before the first change, sets each run's sysctls on the
//! host they belong to, runs the daemon (fresh key, free port) and the reader, copies the
//! run directory back, and puts every value back on every exit path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use oscil_protocol::campaign::CampaignRun;

use crate::config::HostsSpec;
use crate::execute::{run_session, Backend, LabError};
use crate::host::{Host, SshHost};
use crate::meta::{run_warnings, LabMeta, Sides};
use crate::session::{listening_ports, pick_port, Ends, ReaderEnd, RunFiles};
use crate::sysctl::{
    self, HostRestore, RestoreFile, RunningDaemon, Sysctls, RECEIVER_KEYS, RECORDED, SENDER_KEYS,
};

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
}

/// Reaches `target`, and finds out whether commands need `sudo -n`.
fn preflight(target: &str, options: &[String]) -> Result<Host, LabError> {
    let mut ssh = SshHost {
        target: target.to_owned(),
        options: options.to_vec(),
        sudo: false,
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
    spec: &HostsSpec,
    work: &str,
    local_bin: &Path,
) -> Result<String, LabError> {
    if *host == Host::Local {
        return Ok(local_bin.join(name).display().to_string());
    }
    let dir = spec
        .remote_bin
        .clone()
        .or_else(|| spec.install.then(|| work.to_owned()));
    let path = dir.map_or_else(|| name.to_owned(), |d| format!("{d}/{name}"));
    if spec.install {
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
        let sender = preflight(&spec.sender, &spec.ssh_options)?;
        let receiver = match &spec.receiver {
            Some(target) => preflight(target, &spec.ssh_options)?,
            None if Host::Local.run(&["id", "-u"])? == "0" => Host::Local,
            None => {
                return Err(LabError::Setup(
                    "--receiver local needs root here (it sets tcp_rmem on this machine)".into(),
                ))
            }
        };
        let connect_host = resolved_address(&spec.sender, &spec.ssh_options)?;
        let mut hosts = Hosts {
            ends: Ends {
                sender: sender.clone(),
                receiver: receiver.clone(),
                daemon_bin: String::new(),
                reader_bin: String::new(),
                sender_key: String::new(),
                receiver_key: String::new(),
                listen_ip: if connect_host.contains(':') {
                    "[::]".into()
                } else {
                    "0.0.0.0".into()
                },
                connect_host,
            },
            campaign_dir: campaign_dir.to_owned(),
            original: Default::default(),
            kernels: Default::default(),
            restore: RestoreFile::default(),
            work: Vec::new(),
            ping: None,
            next_port_seed: seed,
        };
        let key = oscil_protocol::key::generate_key()
            .map_err(|source| LabError::io("cannot read", "/dev/urandom".into(), source))?;
        let sender_work = hosts.make_work_dir(&sender)?;
        let receiver_work = hosts.make_work_dir(&receiver)?;
        hosts.ends.daemon_bin = binary(&sender, "oscil-daemon", spec, &sender_work, local_bin)?;
        hosts.ends.reader_bin = binary(&receiver, "oscil-reader", spec, &receiver_work, local_bin)?;
        hosts.ends.sender_key = ship_key(&sender, &sender_work, &key)?;
        hosts.ends.receiver_key = ship_key(&receiver, &receiver_work, &key)?;
        hosts.record_originals()?;
        hosts.ping = hosts
            .ends
            .receiver
            .run(&[
                "ping",
                "-c",
                "5",
                "-i",
                "0.2",
                "-q",
                &hosts.ends.connect_host,
            ])
            .ok()
            .and_then(|text| text.lines().last().map(str::to_owned));
        Ok(hosts)
    }

    fn make_work_dir(&mut self, host: &Host) -> Result<String, LabError> {
        let dir = host.run(&["mktemp", "-d", "/tmp/oscil-lab.XXXXXX"])?;
        self.work.push((host.clone(), dir.clone()));
        Ok(dir)
    }

    /// Reads both hosts' values and writes `restore.json` before anything is changed.
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
        };
        self.restore.save(&self.campaign_dir)?;
        Ok(())
    }

    /// Copies the receiver's run directory back here (ssh ... tar c | tar x).
    fn fetch(&self, remote_out: &str, run_dir: &Path) -> Result<(), LabError> {
        if self.ends.receiver.run(&["test", "-d", remote_out]).is_err() {
            return Ok(());
        }
        std::fs::create_dir_all(run_dir)
            .map_err(|source| LabError::io("cannot create", run_dir.to_owned(), source))?;
        let mut source = self
            .ends
            .receiver
            .command(&["tar", "-C", remote_out, "-cf", "-", "."])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| LabError::io("cannot run", "ssh".into(), e))?;
        let unpacked = Command::new("tar")
            .arg("-C")
            .arg(run_dir)
            .arg("-xf")
            .arg("-")
            .stdin(source.stdout.take().expect("piped"))
            .status()
            .map_err(|e| LabError::io("cannot run", "tar".into(), e))?;
        let packed = source
            .wait()
            .map_err(|e| LabError::io("cannot run", "ssh".into(), e))?;
        if !(unpacked.success() && packed.success()) {
            return Err(LabError::Setup(format!(
                "copying {remote_out} from {} failed",
                self.ends.receiver.name()
            )));
        }
        self.ends.receiver.run(&["rm", "-rf", remote_out])?;
        Ok(())
    }

    fn meta(&self, run: &CampaignRun) -> Result<LabMeta, LabError> {
        let sysctls = BTreeMap::from([
            ("sender", sysctl::read(&self.ends.sender, &RECORDED)?),
            ("receiver", sysctl::read(&self.ends.receiver, &RECORDED)?),
        ]);
        let warnings = run_warnings(&run.settings, &sysctls["receiver"][sysctl::RMEM]);
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
        Duration::from_secs(5)
    }

    fn run(
        &mut self,
        run: &CampaignRun,
        run_dir: &Path,
        logs: &Path,
        tick: &mut dyn FnMut(Duration),
    ) -> Result<ReaderEnd, LabError> {
        let s = &run.settings;
        sysctl::write(
            &self.ends.sender,
            &sysctl::wanted(s, &self.original[0], &SENDER_KEYS),
        )?;
        sysctl::write(
            &self.ends.receiver,
            &sysctl::wanted(s, &self.original[1], &RECEIVER_KEYS),
        )?;
        self.next_port_seed = self.next_port_seed.wrapping_add(1);
        let port = pick_port(&listening_ports(&self.ends.sender)?, self.next_port_seed);
        let meta = self.meta(run)?.to_json();
        let local = self.ends.receiver == Host::Local;
        let receiver_work = self.work[1].1.clone();
        let (out, meta_path) = if local {
            (
                run_dir.display().to_string(),
                format!("{receiver_work}/meta.json"),
            )
        } else {
            (
                format!("{receiver_work}/run"),
                format!("{receiver_work}/meta.json"),
            )
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
            self.fetch(&out, run_dir)?;
        }
        Ok(end)
    }

    fn close(&mut self) -> Result<(), LabError> {
        if self.work.is_empty() {
            return Ok(());
        }
        let restored = self.restore.restore(&self.campaign_dir);
        for (host, dir) in self.work.drain(..) {
            let _ = host.run(&["rm", "-rf", &dir]);
        }
        Ok(restored?)
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

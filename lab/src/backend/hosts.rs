//! Two real hosts over ssh: checks both before anything changes, records every sysctl it
//! may change in `restore.json` before the first change, sets each run's sysctls on the
//! host they belong to, runs the daemon (fresh key, free port) and the reader, copies the
//! run directory back, and puts every value back on every exit path.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use oscil_model::campaign::CampaignRun;
use oscil_model::files::trace::{ReaderTrace, SenderTrace, TraceRow};
use oscil_model::lab::{LabRecord, Sides};
use oscil_model::sysctl::{Side, SysctlValues};
use oscil_rundir::Limits;

use super::{run_session, Backend};
use crate::campaign::error::LabError;
use crate::campaign::meta::run_warnings;
use crate::campaign::session::{Ends, ReaderEnd, RunFiles};
use crate::campaign::sysctl::{self, HostRestore, RestoreFile, RunningDaemon, TempDirRecord};
use crate::campaign::ui;
use crate::config::HostsSpec;
use crate::remote::capture;
use crate::remote::host::{Host, SshHost};
use crate::remote::unpack;

pub struct Hosts {
    ends: Ends,
    campaign_dir: PathBuf,
    /// Each side's values before the campaign: what `default` means, and what is restored.
    original: [SysctlValues; 2],
    kernels: [String; 2],
    restore: RestoreFile,
    /// Temporary directories made on each host (key, binaries, the run in progress).
    work: Vec<(Host, String)>,
    ping: Option<String>,
    /// This machine's private directory for the ssh connections' control sockets, when
    /// this backend has its own (held for the campaign and removed when it drops); a
    /// fleet's pairs share the fleet's, so each host has one connection.
    own_control_dir: Option<tempfile::TempDir>,
    /// Both hosts held for this campaign (a two-host campaign's own; a fleet holds its
    /// hosts once for all their pairs). Dropped after `Drop` has put the hosts back.
    locks: Vec<crate::remote::lock::HostLock>,
    /// With `--pcap`: what the sender has for a capture of each run.
    capturer: Option<capture::Capturer>,
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
    /// Capture each run's packets on the sender (`--pcap`).
    pub pcap: bool,
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
            pcap: spec.pcap,
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

/// Run on a host as `sh -c BINARIES sh install|check DIR NAME` (as root, or the ssh user
/// under `sudo -n`): every binary the lab runs there as root, and every directory it
/// writes one into, must be safe from other users. `safe` walks a physical path up to
/// `/`: each part owned by root or the ssh user, none writable by group or others (a
/// directory above the binary's may be, if sticky, as `/tmp` is: then no one else can
/// rename or remove what root or the ssh user keeps there). `install` checks DIR (made
/// if missing) and writes stdin through a fresh temporary file (`mktemp`: new, mode 0600)
/// renamed into place, so a link planted at DIR/NAME is replaced, never followed; `check`
/// resolves DIR/NAME (or NAME on the PATH) and checks the file it is. Both print the
/// binary's physical path, which is what the lab then runs.
const BINARIES: &str = r#"set -eu
mode=$1 dir=$2 name=$3
me=$(id -u) by=${SUDO_UID:-$(id -u)}
fail() { echo "$*; refused" >&2; exit 1; }
missing() { echo "$* (give --remote-bin DIR or --install)" >&2; exit 1; }
safe() {
  p=$1 top=1
  while :; do
    s=$(stat -c '%u %a' -- "$p") || fail "$p: cannot stat"
    owner=${s% *} m=${s#* }
    case $owner in 0|"$me"|"$by") ;; *) fail "$p is owned by uid $owner, neither root nor the ssh user" ;; esac
    if [ $((0$m & 022)) -ne 0 ] && { [ $top = 1 ] || [ $((0$m & 01000)) -eq 0 ]; }; then
      fail "$p is writable by group or others (mode $m)"
    fi
    [ "$p" = / ] && return 0
    p=$(dirname -- "$p") top=0
  done
}
case $mode in
install)
  mkdir -p -- "$dir"
  d=$(cd -P -- "$dir" && pwd -P)
  safe "$d"
  t=$(mktemp "$d/.$name.XXXXXX")
  trap 'rm -f -- "$t"' EXIT
  cat > "$t"
  chmod 755 "$t"
  if [ -L "$d/$name" ]; then rm -f -- "$d/$name"
  elif [ -e "$d/$name" ] && [ ! -f "$d/$name" ]; then fail "$d/$name is not a regular file"; fi
  mv -f -- "$t" "$d/$name"
  trap - EXIT
  echo "$d/$name" ;;
check)
  if [ -n "$dir" ]; then f=$dir/$name; else f=$(command -v -- "$name") || missing "not on the PATH"; fi
  r=$(readlink -f -- "$f") && [ -f "$r" ] || missing "$f is not a file"
  safe "$r"
  echo "$r" ;;
esac
"#;

/// The binary `name` on `host`: found (and of this build's version), or copied there;
/// either way where no other user can write ([`BINARIES`]).
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
    let dir_text = dir.as_deref().unwrap_or_default();
    let refused = |e: crate::remote::host::HostError| {
        let detail = match &e {
            crate::remote::host::HostError::Failed { detail, .. } => detail.clone(),
            other => other.to_string(),
        };
        let place = dir.as_deref().unwrap_or("the remote PATH");
        LabError::Setup(format!("{}: {name} in {place}: {detail}", host.name()))
    };
    let path = match install {
        true => {
            let local = local_bin.join(name);
            let bytes = std::fs::read(&local)
                .map_err(|source| LabError::io("cannot read", local, source))?;
            let argv = ["sh", "-c", BINARIES, "sh", "install", dir_text, name];
            host.run_input(&argv, &bytes).map_err(refused)?
        }
        false => {
            let argv = ["sh", "-c", BINARIES, "sh", "check", dir_text, name];
            host.run(&argv).map_err(refused)?
        }
    };
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
    pub fn new(spec: &HostsSpec, campaign_dir: &Path, local_bin: &Path) -> Result<Hosts, LabError> {
        let control_dir = oscil_rundir::safe_fs::private_temp_dir("oscil-ssh-")?;
        let mut hosts = Self::connect(&spec.into(), campaign_dir, control_dir.path())?;
        hosts.own_control_dir = Some(control_dir);
        let ends = [hosts.ends.sender.clone(), hosts.ends.receiver.clone()];
        hosts.locks =
            crate::remote::lock::take_all(&ends, &crate::remote::lock::holder(campaign_dir))?;
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
        control_dir: &Path,
    ) -> Result<Hosts, LabError> {
        let mut hosts = Self::connect(spec, pair_dir, control_dir)?;
        hosts.prepare(spec, local_bin)?;
        Ok(hosts)
    }

    /// Reaches both hosts.
    fn connect(
        spec: &PairSpec,
        campaign_dir: &Path,
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
                port_file: String::new(),
            },
            campaign_dir: campaign_dir.to_owned(),
            original: Default::default(),
            kernels: Default::default(),
            restore: RestoreFile::default(),
            work: Vec::new(),
            ping: None,
            own_control_dir: None,
            locks: Vec::new(),
            capturer: None,
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
        self.ends.port_file = format!("{sender_work}/daemon.port");
        self.ends.receiver_key = ship_key(&receiver, &receiver_work, &key)?;
        self.record_originals()?;
        self.capturer = spec.pcap.then(|| capture::Capturer::find(&sender));
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
            sysctl::read(&self.ends.sender, &sysctl::recorded())?,
            sysctl::read(&self.ends.receiver, &sysctl::recorded())?,
        ];
        self.kernels = [
            self.ends.sender.run(&["uname", "-r"])?,
            self.ends.receiver.run(&["uname", "-r"])?,
        ];
        self.restore = RestoreFile {
            hosts: vec![
                HostRestore::new(self.ends.sender.clone(), Side::Sender, &self.original[0]),
                HostRestore::new(
                    self.ends.receiver.clone(),
                    Side::Receiver,
                    &self.original[1],
                ),
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
        let limit_bytes = fetch_limit_bytes(run);
        let limit = fetch_time_limit(limit_bytes);
        let stream = unpack::Deadline::new(source.stdout.take().expect("piped"), limit);
        let unpacked = unpack::unpack(stream, run_dir, limit_bytes, limit);
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

    fn record(&self, run: &CampaignRun) -> Result<LabRecord, LabError> {
        let sysctls = self.ends.sysctls_in_force()?;
        let warnings = run_warnings(&run.settings, &sysctls.receiver, &self.kernels[1]);
        Ok(LabRecord {
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

/// How long a run's directory may take to come back: a minute, and its byte bound at
/// 10 MB/s (the bound is about a hundred times what a run writes, so a real run's files
/// would have to come at under ~100 kB/s to miss it).
fn fetch_time_limit(limit_bytes: u64) -> Duration {
    Duration::from_secs(60 + limit_bytes / 10_000_000)
}

/// The most bytes a run's directory may bring back: what its settings let it hold (with
/// `--trace`, both trace files at their cap).
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
    let traces = match s.trace {
        true => limits
            .bytes::<TraceRow<SenderTrace>>()
            .saturating_add(limits.bytes::<TraceRow<ReaderTrace>>()),
        false => 0,
    };
    limits.dir_bytes().saturating_add(traces)
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
    fn ends(&self) -> Sides<String> {
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
            "capture": self.capturer.as_ref().map(capture::Capturer::facts),
        })
    }

    fn per_run_overhead(&self) -> Duration {
        crate::config::HOSTS_RUN_OVERHEAD
    }

    fn receiver_kernel(&self) -> &str {
        &self.kernels[1]
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
        let record = self.record(run)?.to_json();
        let local = self.ends.receiver == Host::Local;
        // The second work directory made is the receiver's (see `prepare`).
        let receiver_work = &self.work[1].1;
        let record_path = format!("{receiver_work}/lab-record.json");
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
                &record_path,
                if local { "" } else { &out },
            ],
            &record,
        )?;
        let files = RunFiles {
            out: &out,
            lab_record: &record_path,
            daemon_log: &logs.join("daemon.log"),
            reader_log: &logs.join("reader.log"),
        };
        let (campaign_dir, sender) = (self.campaign_dir.clone(), self.ends.sender.clone());
        // The sender's work directory is the first made (see `prepare`).
        let capture_file = format!("{}/{}", self.work[0].1, capture::FILE);
        let capture_log = logs.join("capture.log");
        let (restore, capturer) = (&mut self.restore, &self.capturer);
        let mut capturing = None;
        let mut record = |daemon: Option<(u32, u16)>| -> Result<(), LabError> {
            restore.daemon = daemon.map(|(pid, _)| RunningDaemon {
                host: sender.clone(),
                pid,
            });
            restore.save(&campaign_dir)?;
            match (daemon, capturer) {
                (Some((_, port)), Some(capturer)) => {
                    capturing = capturer.start(&sender, port, &capture_file, &capture_log)?;
                }
                (None, _) => {
                    if let Some(mut proc) = capturing.take() {
                        proc.stop(Duration::from_secs(5));
                    }
                }
                _ => {}
            }
            Ok(())
        };
        let end = run_session(&self.ends, run, &files, tick, Some(&mut record));
        // A run that failed after the capture started still stops it (on drop).
        drop(capturing);
        let end = end?;
        if !local {
            self.fetch(&out, run, run_dir)?;
        }
        if matches!(self.capturer, Some(capture::Capturer::Tcpdump(_))) {
            capture::fetch(&self.ends.sender, &capture_file, run_dir)?;
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

//! The namespace lab: two network namespaces on this machine (sender, receiver) joined by
//! an emulated long-haul link, the TCP sysctls under test set inside them. The host's own
//! sysctls are never touched; the namespaces go when the campaign ends.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use oscil_cli::path_args::default_queue_limit;
use oscil_model::campaign::{CampaignRun, Direction, PathSettings, REVERSE_DIR};
use oscil_model::lab::{bdp_bytes, LabRecord, LinkKind, LinkRecord, OneWay, Sides};
use oscil_model::pattern::BitRate;
use oscil_model::sysctl::{Sysctl, SysctlValue, SysctlValues};

use super::Backend;
use crate::campaign::error::LabError;
use crate::campaign::meta::run_warnings;
use crate::campaign::session::{Ends, ReaderEnd, RunFiles, REVERSE_DAEMON_LOG, REVERSE_READER_LOG};
use crate::campaign::sysctl;
use crate::remote::host::{Host, Proc};

/// The files oscil-link's `--pcap` writes, A (the sender) to B and back, kept in each run's
/// directory with `oscil-lab --pcap`.
const CAPTURE_FILES: [&str; 2] = ["link-a_to_b.pcapng", "link-b_to_a.pcapng"];

const SENDER_ADDR: &str = "10.250.0.1";
const RECEIVER_ADDR: &str = "10.250.0.2";

/// Buckets of each lab namespace's own established-socket hash table, instead of the
/// host's (262,144 on a 24 GB host). Each side's sampler sums its namespace's TCP memory by
/// walking the whole table (`oscil_kernel::socket::diag`): 16,384 buckets take about 0.1 ms, the
/// host's 1.2-2.6 ms, every 100 ms on both sides. Ample for thousands of sockets.
const OWN_EHASH_BUCKETS: u32 = 16_384;

pub struct Netns {
    link_kind: LinkKind,
    /// Keep the link's packet capture of each run (`--pcap`).
    pcap: bool,
    bin: PathBuf,
    ends: Ends,
    /// The same namespaces the other way round: the daemon in the receiver's namespace
    /// (`--direction reverse`, and a `both` run's reverse pair).
    reverse_ends: Ends,
    /// The sender's and the receiver's namespace.
    names: [String; 2],
    /// Namespaces made, deleted on close.
    made: Vec<String>,
    /// The kernel's values in a fresh namespace: what `default` means.
    fresh: SysctlValues,
    kernel: String,
    /// Campaign-wide warnings (copied into every run).
    warnings: Vec<String>,
    /// The key file, the run's metadata and the link's statistics: a fresh private
    /// directory, removed when the lab is done.
    tmp: tempfile::TempDir,
    link: Option<Proc>,
    /// Where the emulator and the endpoints' receive processing run (TUN only).
    steering: Option<Steering>,
}

/// Keeps the endpoints' TCP work off the emulator's threads. A TUN write runs the receiving
/// namespace's stack (`netif_receive_skb`, and for ACKs the sender's `tcp_ack` and
/// `tcp_write_xmit`) inside the writer's thread; with RPS on each TUN's receive queue the
/// write only queues the packet for another CPU's softirq. The emulator is pinned to the
/// first CPU and the receive processing steered to the others. Measured at 5 Gbit/s x
/// 100 ms with 100 flows: the emulator's CPU 43-52% -> 27-28% of a core (docs/PERFORMANCE.md).
#[derive(Debug, Clone, serde::Serialize)]
struct Steering {
    /// CPUs oscil-link runs on (`taskset -c`).
    link_cpus: String,
    /// Hex mask written to each TUN's `queues/rx-0/rps_cpus`.
    rps_cpus: String,
}

impl Steering {
    /// CPU 0 for the emulator, the rest (of the first 32, one word of the mask) for
    /// receive processing; None on one CPU.
    fn for_cpus(cpus: usize) -> Option<Steering> {
        if cpus < 2 {
            return None;
        }
        let others = (1u64 << cpus.min(32)) - 2;
        Some(Steering {
            link_cpus: "0".into(),
            rps_cpus: format!("{others:x}"),
        })
    }
}

fn ip(args: &[&str]) -> Result<String, LabError> {
    let mut argv = vec!["ip"];
    argv.extend(args);
    Ok(Host::Local.run(&argv)?)
}

fn dev(kind: LinkKind) -> &'static str {
    match kind {
        LinkKind::Tun => "osl0",
        LinkKind::Netem => "oslv",
    }
}

impl Netns {
    /// Makes the namespaces and their devices; removed again by `close` (or on drop).
    pub fn new(
        link_kind: LinkKind,
        pcap: bool,
        bin: &Path,
        congestion: &[String],
    ) -> Result<Netns, LabError> {
        // Named after the lab (its PID and start time), so a later lab knows them for
        // leftovers once this one has ended, however it ended.
        let tag = crate::leftovers::tag();
        let (snd, rcv) = (format!("{tag}_snd"), format!("{tag}_rcv"));
        let tmp = super::private_dir()?;
        let key = super::write_key(tmp.path())?.display().to_string();
        let ends = |from: &str, to: &str, addr: &str, port_file: &str| Ends {
            sender: Host::Netns(from.to_owned()),
            receiver: Host::Netns(to.to_owned()),
            daemon_bin: bin.join("oscil-daemon").display().to_string(),
            reader_bin: bin.join("oscil-reader").display().to_string(),
            sender_key: key.clone(),
            receiver_key: key.clone(),
            listen_ip: addr.into(),
            connect_host: addr.into(),
            port_file: tmp.path().join(port_file).display().to_string(),
        };
        let mut lab = Netns {
            link_kind,
            pcap,
            bin: bin.to_owned(),
            ends: ends(&snd, &rcv, SENDER_ADDR, "daemon.port"),
            reverse_ends: ends(&rcv, &snd, RECEIVER_ADDR, "daemon-reverse.port"),
            names: [snd.clone(), rcv.clone()],
            made: Vec::new(),
            fresh: SysctlValues::default(),
            kernel: Host::Local.run(&["uname", "-r"])?,
            warnings: Vec::new(),
            tmp,
            link: None,
            steering: None,
        };
        lab.add_namespaces(&[&snd, &rcv])?;
        lab.make_devices(&snd, &rcv)?;
        lab.fresh = sysctl::read(&lab.ends.sender, &sysctl::recorded())?;
        lab.warnings.extend(congestion_warnings(congestion)?);
        Ok(lab)
    }

    /// Makes the namespaces `names`, loopback up, each with an established-socket hash
    /// table of its own. A namespace takes the size of its table from
    /// `net.ipv4.tcp_child_ehash_entries` of the namespace it is made from (Linux 6.1+), so
    /// they are made from a scratch namespace that has it set, and the host's own setting
    /// is never touched. Where the kernel lacks the setting they share the host's table.
    fn add_namespaces(&mut self, names: &[&str]) -> Result<(), LabError> {
        let parent = format!("{}_parent", crate::leftovers::tag());
        ip(&["netns", "add", &parent])?;
        self.made.push(parent.clone());
        let setting = SysctlValues::from_iter([(
            Sysctl::TcpChildEhashEntries,
            SysctlValue::Integer(OWN_EHASH_BUCKETS.into()),
        )]);
        let own_tables = sysctl::write(&Host::Netns(parent.clone()), &setting).is_ok();
        let from_parent = format!("--net=/run/netns/{parent}");
        for &ns in names {
            if own_tables {
                Host::Local.run(&["nsenter", &from_parent, "ip", "netns", "add", ns])?;
            } else {
                ip(&["netns", "add", ns])?;
            }
            self.made.push(ns.to_owned());
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        ip(&["netns", "del", &parent])?;
        self.made.retain(|ns| *ns != parent);
        Ok(())
    }

    /// Sets RPS on both TUNs (see [`Steering`]); a kernel without RPS or a host without
    /// `taskset` leaves the processing where it was, with a warning, rather than failing
    /// the campaign.
    fn steer_receive(&mut self, dev: &str, names: [&str; 2]) -> Option<Steering> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let steering = Steering::for_cpus(cpus)?;
        let pin = ["taskset", "-c", steering.link_cpus.as_str(), "true"];
        if let Err(e) = Host::Local.run(&pin) {
            self.warnings.push(format!(
                "receive processing not steered off the link emulator (taskset: {e})"
            ));
            return None;
        }
        for ns in names {
            let file = format!("/sys/class/net/{dev}/queues/rx-0/rps_cpus");
            let script = format!("echo {} > {file}", steering.rps_cpus);
            let argv = ["ip", "netns", "exec", ns, "sh", "-c", &script];
            if let Err(e) = Host::Local.run(&argv) {
                self.warnings.push(format!(
                    "receive processing not steered off the link emulator ({ns}: {e})"
                ));
                return None;
            }
        }
        Some(steering)
    }

    fn make_devices(&mut self, snd: &str, rcv: &str) -> Result<(), LabError> {
        let dev = dev(self.link_kind);
        match self.link_kind {
            LinkKind::Tun => {
                for ns in [snd, rcv] {
                    ip(&[
                        "-n", ns, "tuntap", "add", "dev", dev, "mode", "tun", "vnet_hdr",
                    ])?;
                    ip(&["-n", ns, "link", "set", dev, "up", "txqueuelen", "10000"])?;
                }
                self.steering = self.steer_receive(dev, [snd, rcv]);
            }
            LinkKind::Netem => {
                ip(&[
                    "link", "add", dev, "netns", snd, "type", "veth", "peer", "name", dev, "netns",
                    rcv,
                ])?;
                for ns in [snd, rcv] {
                    ip(&["-n", ns, "link", "set", dev, "up"])?;
                }
                // Found out now, not once per run.
                let probe = [
                    "tc", "-n", snd, "qdisc", "replace", "dev", dev, "root", "netem",
                ];
                Host::Local.run(&probe).map_err(|e| {
                    LabError::Setup(format!(
                        "--link netem: this kernel has no netem (sch_netem); use --link tun ({e})"
                    ))
                })?;
            }
        }
        ip(&[
            "-n",
            snd,
            "addr",
            "add",
            &format!("{SENDER_ADDR}/24"),
            "dev",
            dev,
        ])?;
        ip(&[
            "-n",
            rcv,
            "addr",
            "add",
            &format!("{RECEIVER_ADDR}/24"),
            "dev",
            dev,
        ])?;
        Ok(())
    }

    /// Starts the link for one path; the stats file is fresh, so a link that did not
    /// start is noticed instead of passing on the previous run's file.
    fn start_link(&mut self, path: &PathSettings, logs: &Path) -> Result<LinkRecord, LabError> {
        let one_way_us = path.rtt_us / 2;
        let (queue_limit, queue_counts) = match self.link_kind {
            LinkKind::Tun => self.start_tun_link(path, one_way_us, logs)?,
            LinkKind::Netem => self.start_netem(path, one_way_us)?,
        };
        let one_way_ms = one_way_us as f64 / 1000.0;
        Ok(LinkRecord {
            kind: self.link_kind,
            emulator: self.link_kind.emulator().into(),
            rate_bps: path.rate_bps,
            rtt_ms: path.rtt_us as f64 / 1000.0,
            one_way_delay_ms: OneWay {
                sender_to_receiver: one_way_ms,
                receiver_to_sender: one_way_ms,
            },
            rtt_split: "the RTT is split into two equal one-way delays, one per direction".into(),
            queue_limit,
            queue_counts,
            loss_pct: path.loss_pct,
            bdp_bytes: bdp_bytes(path.rate_bps, path.rtt_us),
        })
    }

    fn stats_path(&self) -> PathBuf {
        self.tmp.path().join("link.json")
    }

    fn start_tun_link(
        &mut self,
        path: &PathSettings,
        one_way_us: u64,
        logs: &Path,
    ) -> Result<(u64, String), LabError> {
        let stats = self.stats_path();
        let _ = std::fs::remove_file(&stats);
        let [snd, rcv] = self.names.clone();
        let (rate, delay, loss) = (
            BitRate::from_bps(path.rate_bps).to_string(),
            format!("{one_way_us}us"),
            path.loss_pct.to_string(),
        );
        let link_bin = self.bin.join("oscil-link").display().to_string();
        let stats_arg = stats.display().to_string();
        let pcap_dir = self.tmp.path().display().to_string();
        let mut argv = match &self.steering {
            Some(steering) => vec!["taskset", "-c", steering.link_cpus.as_str()],
            None => Vec::new(),
        };
        argv.extend([
            link_bin.as_str(),
            "--a-netns",
            &snd,
            "--b-netns",
            &rcv,
            "--a-dev",
            "osl0",
            "--b-dev",
            "osl0",
            "--rate",
            &rate,
            "--delay",
            &delay,
            "--loss",
            &loss,
            "--stats",
            &stats_arg,
        ]);
        let queue = path.queue_packets.map(|q| q.to_string());
        if let Some(queue) = &queue {
            argv.extend(["--queue", queue]);
        }
        if self.pcap {
            argv.extend(["--pcap", &pcap_dir]);
        }
        // Loss hits whole packets read from TUN; without GSO those are wire packets, and
        // one-MTU reads keep up at moderate rates.
        if path.loss_pct > 0.0 && path.rate_bps <= 200_000_000 {
            argv.push("--no-gso");
        }
        let log = std::fs::File::create(logs.join("link.log"))
            .map_err(|source| LabError::io("cannot write", logs.join("link.log"), source))?;
        let mut link = Host::Local.spawn(&argv, &log)?;
        let deadline = Instant::now() + Duration::from_secs(5);
        let text = loop {
            if let Some(status) = link.try_wait() {
                let why = crate::campaign::session::last_line(&logs.join("link.log"));
                return Err(LabError::Setup(format!(
                    "oscil-link exited ({status}): {why}"
                )));
            }
            match std::fs::read_to_string(&stats) {
                Ok(text) if !text.is_empty() => break text,
                _ if Instant::now() > deadline => {
                    return Err(LabError::Setup(
                        "oscil-link did not start within 5 s".into(),
                    ))
                }
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        self.link = Some(link);
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| LabError::Setup(format!("{}: not JSON: {e}", stats.display())))?;
        let queue_limit = value["queue_limit"].as_u64().unwrap_or(0);
        let counts = "segments waiting for or in serialization at the bottleneck (a GSO packet counts each segment); not packets in the delay line";
        Ok((queue_limit, counts.into()))
    }

    fn start_netem(&self, path: &PathSettings, one_way_us: u64) -> Result<(u64, String), LabError> {
        let queue = u64::from(
            path.queue_packets
                .unwrap_or_else(|| default_queue_limit(path.rate_bps)),
        );
        // netem's limit counts skbs in netem, the delay line included: add the path's BDP.
        let bdp_packets = path.rate_bps * one_way_us / 1_000_000 / 12112 + 1;
        let limit = (queue + bdp_packets).to_string();
        let (delay, rate, loss) = (
            format!("{one_way_us}us"),
            BitRate::from_bps(path.rate_bps).to_string(),
            format!("{}%", path.loss_pct),
        );
        for ns in &self.names {
            let mut argv = vec![
                "tc", "-n", ns, "qdisc", "replace", "dev", "oslv", "root", "netem",
            ];
            argv.extend(["delay", &delay, "rate", &rate, "limit", &limit]);
            if path.loss_pct > 0.0 {
                argv.extend(["loss", &loss]);
            }
            Host::Local.run(&argv)?;
        }
        let counts = format!("netem limit {limit} skbs = queue {queue} + one-way BDP {bdp_packets}; skbs may carry several segments (GSO)");
        Ok((queue, counts))
    }

    /// Stops the link and leaves its statistics in `dest` (when given).
    fn stop_link(&mut self, dest: Option<&Path>) -> Result<(), LabError> {
        if let Some(mut link) = self.link.take() {
            link.stop(Duration::from_secs(5));
        }
        let Some(dest) = dest else { return Ok(()) };
        let text = match self.link_kind {
            LinkKind::Tun => std::fs::read(self.stats_path())
                .map_err(|source| LabError::io("cannot read", self.stats_path(), source))?,
            LinkKind::Netem => {
                let mut qdiscs = BTreeMap::new();
                for (side, ns) in [("sender", &self.names[0]), ("receiver", &self.names[1])] {
                    let json = Host::Local
                        .run(&["tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev", "oslv"])?;
                    qdiscs.insert(
                        side,
                        serde_json::from_str::<serde_json::Value>(&json).unwrap_or_default(),
                    );
                }
                serde_json::to_vec_pretty(
                    &serde_json::json!({"emulator": "netem", "qdisc": qdiscs}),
                )
                .expect("JSON serializes")
            }
        };
        Ok(oscil_rundir::safe_fs::write_atomic(dest, &text, 0o644)?)
    }
}

impl Netns {
    /// With `--pcap`, moves the stopped link's capture files into the run's directory
    /// (copied: the private directory may be on another file system), then removes them.
    fn keep_captures(&self, run_dir: &Path) -> Result<(), LabError> {
        if !self.pcap || self.link_kind != LinkKind::Tun || !run_dir.is_dir() {
            return Ok(());
        }
        for name in CAPTURE_FILES {
            let (from, to) = (self.tmp.path().join(name), run_dir.join(name));
            let (mut source, _) = oscil_rundir::safe_fs::open_regular(&from)?;
            match std::fs::remove_file(&to) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(LabError::io("cannot replace", to, e))
                }
                _ => {}
            }
            let mut dest = oscil_rundir::safe_fs::create_new(&to, 0o644)?;
            std::io::copy(&mut source, &mut dest)
                .map_err(|e| LabError::io("cannot write", to.clone(), e))?;
            std::fs::remove_file(&from).map_err(|e| LabError::io("cannot remove", from, e))?;
        }
        Ok(())
    }
}

/// Congestion controls the daemon will be asked for that this kernel does not have.
fn congestion_warnings(congestion: &[String]) -> Result<Vec<String>, LabError> {
    let mut warnings = Vec::new();
    let available =
        Host::Local.run(&["cat", "/proc/sys/net/ipv4/tcp_available_congestion_control"])?;
    for cc in congestion {
        if !available.split_whitespace().any(|a| a == cc) {
            warnings.push(format!(
                "congestion control {cc} is not available on this host (have: {available})"
            ));
        }
    }
    Ok(warnings)
}

impl Backend for Netns {
    fn ends(&self) -> Sides<String> {
        Sides {
            sender: self.names[0].clone(),
            receiver: self.names[1].clone(),
        }
    }

    fn facts(&self) -> serde_json::Value {
        serde_json::json!({"kernel": self.kernel, "fresh_namespace_sysctls": self.fresh, "link": self.link_kind, "receive_steering": self.steering})
    }

    fn per_run_overhead(&self) -> Duration {
        crate::config::NETNS_RUN_OVERHEAD
    }

    fn receiver_kernel(&self) -> &str {
        &self.kernel
    }

    fn run(
        &mut self,
        run: &CampaignRun,
        run_dir: &Path,
        logs: &Path,
        tick: &mut dyn FnMut(Duration),
    ) -> Result<ReaderEnd, LabError> {
        let s = &run.settings;
        // Each sysctl goes to the side its pair needs it on; a `both` run's reverse pair
        // runs under the forward pair's (docs/lab.md).
        let (ends, other) = match s.direction {
            Direction::Reverse => (&self.reverse_ends, &self.ends),
            Direction::Forward | Direction::Both => (&self.ends, &self.reverse_ends),
        };
        // The other way round first, at the fresh values: what an earlier run of the other
        // direction set on each side does not stay.
        let unset = oscil_model::campaign::RunSettings::default();
        other.set_sysctls(&unset, [&self.fresh, &self.fresh])?;
        ends.set_sysctls(s, [&self.fresh, &self.fresh])?;
        let path = s
            .path
            .as_ref()
            .ok_or_else(|| LabError::Setup("a lab run needs a path".into()))?;
        let link = self.start_link(path, logs)?;
        let result = self.run_pair(run, run_dir, logs, link, tick);
        let link_json = run_dir.join("link.json");
        let stopped = self.stop_link(run_dir.is_dir().then_some(link_json.as_path()));
        // The link's figures cover both directions: a reverse pair's run has them too.
        let reverse_dir = run_dir.join(REVERSE_DIR);
        if stopped.is_ok() && reverse_dir.is_dir() {
            std::fs::copy(&link_json, reverse_dir.join("link.json"))
                .map_err(|e| LabError::io("cannot write", reverse_dir.join("link.json"), e))?;
        }
        let captured = self.keep_captures(run_dir);
        let end = result?;
        stopped?;
        captured?;
        Ok(end)
    }

    fn close(&mut self) -> Result<(), LabError> {
        let _ = self.stop_link(None);
        for ns in self.made.drain(..) {
            let _ = ip(&["netns", "del", &ns]);
        }
        Ok(())
    }
}

impl Netns {
    fn run_pair(
        &mut self,
        run: &CampaignRun,
        run_dir: &Path,
        logs: &Path,
        link: LinkRecord,
        tick: &mut dyn FnMut(Duration),
    ) -> Result<ReaderEnd, LabError> {
        let reverse = run.settings.direction == Direction::Reverse;
        // A `both` run's pairs are named as the report counts them: LABEL_forward and
        // LABEL_reverse (their readers' --label, their records' configuration).
        let both = run.settings.direction == Direction::Both;
        let named = |suffix: &str| CampaignRun {
            label: format!("{}_{suffix}", run.label),
            ..run.clone()
        };
        let forward_run = both.then(|| named("forward"));
        let run = forward_run.as_ref().unwrap_or(run);
        let record_path = self.write_record(reverse, run, link.clone(), "lab-record.json")?;
        let ends = if reverse {
            &self.reverse_ends
        } else {
            &self.ends
        };
        let files = RunFiles {
            out: &run_dir.display().to_string(),
            lab_record: &record_path.display().to_string(),
            daemon_log: &logs.join("daemon.log"),
            reader_log: &logs.join("reader.log"),
        };
        if !both {
            return super::run_session(ends, run, &files, tick, None);
        }
        let reverse_run = CampaignRun {
            settings: run.settings.reverse_pair(),
            ..named("reverse")
        };
        let reverse_record =
            self.write_record(true, &reverse_run, link, "lab-record-reverse.json")?;
        let reverse_files = RunFiles {
            out: &run_dir.join(REVERSE_DIR).display().to_string(),
            lab_record: &reverse_record.display().to_string(),
            daemon_log: &logs.join(REVERSE_DAEMON_LOG),
            reader_log: &logs.join(REVERSE_READER_LOG),
        };
        let pairs = [
            (&self.ends, run, &files),
            (&self.reverse_ends, &reverse_run, &reverse_files),
        ];
        both_ways(pairs, run_dir, tick)
    }

    /// Writes the lab's record of a run, for the forward pair or the `reverse` one, in the
    /// private directory.
    fn write_record(
        &self,
        reverse: bool,
        run: &CampaignRun,
        link: LinkRecord,
        name: &str,
    ) -> Result<PathBuf, LabError> {
        let ends = if reverse {
            &self.reverse_ends
        } else {
            &self.ends
        };
        let sysctls = ends.sysctls_in_force()?;
        let mut warnings = self.warnings.clone();
        warnings.extend(run_warnings(&run.settings, &sysctls.receiver, &self.kernel));
        let [snd, rcv] = self.names.clone();
        let namespaces = match reverse {
            false => Sides {
                sender: snd,
                receiver: rcv,
            },
            true => Sides {
                sender: rcv,
                receiver: snd,
            },
        };
        let record = LabRecord {
            configuration: run.label.clone(),
            repetition: run.repetition,
            settings: run.settings.clone(),
            link: Some(link),
            sysctls,
            namespaces: Some(namespaces),
            hosts: None,
            kernel: self.kernel.clone(),
            warnings,
        };
        let record_path = self.tmp.path().join(name);
        oscil_rundir::lab::write_record(&record_path, &record)?;
        Ok(record_path)
    }
}

/// A `--direction both` run: both daemons, then the forward reader, then, once it has made
/// the run directory that holds the reverse pair's, the reverse reader; the forward end
/// with the reverse one in it.
fn both_ways(
    pairs: [(&Ends, &CampaignRun, &RunFiles); 2],
    run_dir: &Path,
    tick: &mut dyn FnMut(Duration),
) -> Result<ReaderEnd, LabError> {
    let mut daemons = Vec::new();
    let result = (|| -> Result<ReaderEnd, LabError> {
        let mut ports = Vec::new();
        for (ends, _, files) in pairs {
            let (daemon, port) = ends.start_daemon(files.daemon_log)?;
            daemons.push(daemon);
            ports.push(port);
        }
        let [(forward, run, files), (backward, reverse_run, reverse_files)] = pairs;
        let mut first = forward.spawn_reader(run, ports[0], files)?;
        // The forward reader refuses a run directory that is not empty: the reverse pair's
        // goes in only once the forward one has begun its own (a fraction of a second).
        let deadline = Instant::now() + Duration::from_secs(15);
        while !run_dir.join("run.json").exists()
            && first.try_wait().is_none()
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let second = backward.spawn_reader(reverse_run, ports[1], reverse_files)?;
        let mut ends = crate::campaign::session::supervise(vec![first, second], tick);
        let reverse = ends.pop().map(Box::new);
        let mut end = ends.pop().expect("two readers");
        end.reverse = reverse;
        Ok(end)
    })();
    for mut daemon in daemons {
        daemon.stop(Duration::from_secs(5));
    }
    result
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steering_keeps_cpu_0_for_the_emulator_and_gives_rps_the_rest() {
        assert!(Steering::for_cpus(1).is_none());
        let two = Steering::for_cpus(2).unwrap();
        assert_eq!((two.link_cpus.as_str(), two.rps_cpus.as_str()), ("0", "2"));
        assert_eq!(Steering::for_cpus(8).unwrap().rps_cpus, "fe");
        assert_eq!(Steering::for_cpus(32).unwrap().rps_cpus, "fffffffe");
        assert_eq!(Steering::for_cpus(256).unwrap().rps_cpus, "fffffffe");
    }
}

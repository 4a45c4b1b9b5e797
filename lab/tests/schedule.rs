//! Measurement on a schedule, for real: deploy/ansible with `oscil_schedule` on one of two
//! namespace hosts (each with its own sshd, joined by a veth), idempotent, its systemd units
//! checked by `systemd-analyze verify`; then what the timer would do, at a short period: the
//! service's own ExecStart, started every few seconds in that host's namespace (no systemd
//! there). The first campaign is killed mid-run and the next start resumes it; two more
//! follow; starts that find one running are skipped; no two campaigns overlap; the oldest
//! is pruned (keep 2). A local Prometheus scrapes the textfile directory (served as
//! node_exporter's textfile collector would serve it) all along: each series has a sample
//! from each campaign, and every query of deploy/grafana/oscil.json returns data.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use oscil_testkit::sshd::{
    kill_with_children, lab_lock_held, lacks_sshd, make_keys, recap_changed, run, ssh_options,
    start_sshd, wait_for,
};
use oscil_testkit::{bin_dir, free_port, Netns};

/// The two hosts' addresses on their veth.
const ADDR: [&str; 2] = ["10.252.7.1", "10.252.7.2"];
/// How often the test starts the scheduled job (what the timer does hourly).
const PERIOD: Duration = Duration::from_secs(3);
/// Campaigns kept (`oscil_keep_runs`): fewer than the three run, so one is pruned.
const KEEP: usize = 2;

/// Children killed when the test ends, whichever way (the namespaces go with their own
/// drop, every process in them killed).
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .expect("JSON")
}

fn unix_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Serves what node_exporter's textfile collector would: every `*.prom` file of `dir`, read
/// afresh at each scrape. The collector merges the files' families; Prometheus's text
/// parser takes them one after another as well.
fn serve_textfile(dir: PathBuf) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .map(|d| d.filter_map(|e| Some(e.ok()?.path())).collect())
                .unwrap_or_default();
            files.retain(|f| f.extension().is_some_and(|e| e == "prom"));
            files.sort();
            let body: String = files
                .iter()
                .filter_map(|f| std::fs::read_to_string(f).ok())
                .collect();
            let _ = write!(
                stream,
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// Prometheus (Debian's) on a loopback port with its storage in `dir`, scraping
/// `target_port` every second; its address once ready.
fn start_prometheus(dir: &Path, target_port: u16, children: &mut Children) -> String {
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 1s, scrape_timeout: 900ms}}\nscrape_configs:\n  - job_name: oscil\n    \
             static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n"
        ),
    )
    .unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .arg("--log.level=warn")
        .stdin(Stdio::null())
        .spawn()
        .expect("start prometheus");
    children.0.push(child);
    wait_for("Prometheus to be ready", Duration::from_secs(60), || {
        Command::new("curl")
            .args(["-sf", &format!("http://{addr}/-/ready")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    addr
}

/// An instant query's result (a vector or a matrix) at `time` (unix seconds).
fn query(prometheus: &str, expr: &str, time: f64) -> Vec<serde_json::Value> {
    api(
        prometheus,
        "query",
        &[("query", expr), ("time", &time.to_string())],
    )
}

/// A range query's result from `start` to `end` (unix seconds), a step a second: what
/// Grafana asks for a panel.
fn query_range(prometheus: &str, expr: &str, start: f64, end: f64) -> Vec<serde_json::Value> {
    let (start, end) = (start.to_string(), end.to_string());
    let params = [
        ("query", expr),
        ("start", &start),
        ("end", &end),
        ("step", "1"),
    ];
    api(prometheus, "query_range", &params)
}

/// Prometheus's HTTP API: the `result` of `/api/v1/<endpoint>` with `params`.
fn api(prometheus: &str, endpoint: &str, params: &[(&str, &str)]) -> Vec<serde_json::Value> {
    let mut curl = Command::new("curl");
    curl.args(["-sfG", &format!("http://{prometheus}/api/v1/{endpoint}")]);
    for (key, value) in params {
        curl.arg("--data-urlencode").arg(format!("{key}={value}"));
    }
    let out = curl.output().expect("curl");
    assert!(out.status.success(), "{endpoint} {params:?}: {out:?}");
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(answer["status"], "success", "{params:?}: {answer}");
    answer["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A series' raw samples (unix seconds, value) from a range selector's answer.
fn samples(series: &serde_json::Value) -> Vec<(f64, f64)> {
    series["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(|v| {
            (
                v[0].as_f64().unwrap(),
                v[1].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// A campaign the schedule ran, as its directory and run directories say.
#[derive(Debug)]
struct Ended {
    name: String,
    started_unix_s: u64,
    /// Each complete run's (start, end), unix ms, from its run.json.
    spans_ms: Vec<(u64, u64)>,
    /// The configurations it measured: a run the lab left out of the verdicts (its reader
    /// or sender starved of CPU, twice) has no figures in the campaign's metrics.
    measured: BTreeSet<String>,
}

fn ended(runs: &Path, name: &str) -> Ended {
    let dir = runs.join(name);
    let campaign = json(&dir.join("campaign.json"));
    let (mut spans_ms, mut measured) = (Vec::new(), BTreeSet::new());
    for run in campaign["runs"].as_array().expect("runs") {
        assert_eq!(run["status"], "complete", "{name}: {run}");
        let run_dir = dir.join(run["dir"].as_str().unwrap());
        match oscil_rundir::lab::spoiled(&run_dir) {
            Some(why) => eprintln!("{}: left out of the verdicts, {why}", run_dir.display()),
            None => {
                // The metrics' configuration: the pair's name before the label.
                let label = run["label"].as_str().unwrap();
                measured.insert(match run["pair"].as_str() {
                    Some(pair) => format!("{pair}_{label}"),
                    None => label.to_owned(),
                });
            }
        }
        let meta = json(&run_dir.join("run.json"));
        spans_ms.push((
            meta["started_unix_ms"].as_u64().expect("started"),
            meta["ending"]["ended_unix_ms"].as_u64().expect("ended"),
        ));
    }
    let schedule = json(&dir.join("schedule.json"));
    assert_eq!(schedule["lab_exit_code"], 0, "{name}: {schedule}");
    Ended {
        name: name.into(),
        started_unix_s: schedule["started_unix_s"].as_u64().unwrap(),
        spans_ms,
        measured,
    }
}

/// The campaign directories in `runs`, oldest first.
fn campaigns(runs: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(runs)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with('Z'))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_scheduled_campaign_runs_again_and_again_resumes_prunes_and_feeds_prometheus_and_the_dashboard()
{
    if lacks_sshd() {
        return;
    }
    for tool in ["ansible-playbook", "prometheus", "curl"] {
        if Command::new(tool).arg("--version").output().is_err() {
            oscil_testkit::skip(&format!("no {tool}"));
            return;
        }
    }
    let started = Instant::now();
    let test_start_unix_s = unix_s();
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let hosts = [Netns::new("osch0"), Netns::new("osch1")];
    run(
        "ip",
        &[
            "-n",
            &hosts[0].0,
            "link",
            "add",
            "eth0",
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &hosts[1].0,
        ],
    );
    for (ns, addr) in hosts.iter().zip(ADDR) {
        run(
            "ip",
            &[
                "-n",
                &ns.0,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "eth0",
            ],
        );
        run("ip", &["-n", &ns.0, "link", "set", "eth0", "up"]);
    }
    make_keys(dir);
    let mut children = Children(Vec::new());
    for (ns, addr) in hosts.iter().zip(ADDR) {
        children.0.push(start_sshd(&ns.0, addr, dir, None));
    }

    // h0 is the host with the schedule; its campaign measures h0>h1.
    let root = dir.join("h0");
    let runs = root.join("runs");
    let textfile = root.join("textfile");
    std::fs::create_dir_all(&textfile).unwrap();
    let prometheus = start_prometheus(dir, serve_textfile(textfile.clone()), &mut children);

    // The inventory as `ansible-inventory --list` prints it: the lab reads it itself, with
    // no Python start-up per campaign.
    let fleet = dir.join("fleet.json");
    let host = |addr: &str, bin: PathBuf| serde_json::json!({"ansible_host": addr, "ansible_user": "root", "oscil_bin": bin});
    let inventory = serde_json::json!({
        "_meta": {"hostvars": {"h0": host(ADDR[0], root.join("bin")), "h1": host(ADDR[1], bin_dir())}},
        "all": {"children": ["ungrouped"]},
        "ungrouped": {"hosts": ["h0", "h1"]},
    });
    std::fs::write(&fleet, inventory.to_string()).unwrap();
    let mut campaign_args: Vec<String> = [
        "--inventory",
        fleet.to_str().unwrap(),
        "--pairs",
        "h0>h1",
        "--lowat",
        "default,131072",
        "--slow-rate",
        "2mbit",
        "--fast",
        "1s",
        "--slow",
        "1s",
        "--cycles",
        "1",
    ]
    .map(String::from)
    .into();
    for option in ssh_options(dir) {
        campaign_args.extend(["--ssh-option".into(), option]);
    }
    let deploy = dir.join("deploy");
    std::fs::create_dir_all(deploy.join("host_vars")).unwrap();
    std::fs::write(deploy.join("hosts.ini"), "[lab]\nh0\n").unwrap();
    let vars = serde_json::json!({
        "ansible_host": ADDR[0],
        "ansible_user": "root",
        "ansible_python_interpreter": "/usr/bin/python3",
        "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
        "oscil_bin": root.join("bin"),
        "oscil_etc_dir": root.join("etc"),
        "oscil_unit_dir": root.join("systemd"),
        "oscil_runs_dir": runs,
        "oscil_textfile_dir": textfile,
        "oscil_keep_runs": KEEP,
        "oscil_schedule": "hourly",
        "oscil_schedule_args": campaign_args,
    });
    // JSON is YAML: host_vars as ansible reads them.
    std::fs::write(deploy.join("host_vars/h0.yml"), vars.to_string()).unwrap();
    let playbook = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/ansible/oscil.yml");
    let deploy_once = |extra: &[&str]| {
        let output = Command::new("ip")
            .args(["netns", "exec", &hosts[1].0, "ansible-playbook", "-i"])
            .arg(deploy.join("hosts.ini"))
            .arg(&playbook)
            .arg("-e")
            .arg(format!("oscil_build_dir={}", bin_dir().display()))
            .arg("--private-key")
            .arg(dir.join("user_key"))
            .env("ANSIBLE_NOCOLOR", "1")
            .env("ANSIBLE_PIPELINING", "1")
            .args(extra)
            .output()
            .expect("run ansible-playbook");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        recap_changed(&text)
    };
    let first = deploy_once(&[]);
    assert!(first.len() == 1 && first[0] > 0, "{first:?}");
    // Again, the schedule's tasks only (tests/fleet.rs holds the rest to the same).
    assert_eq!(
        deploy_once(&["--tags", "schedule"]),
        [0],
        "the second run changes nothing"
    );
    eprintln!(
        "deployed twice after {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let units = root.join("systemd");
    let service = std::fs::read_to_string(units.join("oscil-schedule.service")).unwrap();
    let timer = std::fs::read_to_string(units.join("oscil-schedule.timer")).unwrap();
    assert!(timer.contains("\nOnCalendar=hourly\n"), "{timer}");
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok()
    {
        let verify = Command::new("systemd-analyze")
            .arg("verify")
            .arg(units.join("oscil-schedule.service"))
            .arg(units.join("oscil-schedule.timer"))
            .output()
            .unwrap();
        assert!(
            verify.status.success(),
            "systemd-analyze verify: {verify:?}"
        );
    } else {
        eprintln!("no systemd-analyze here: the units were not verified");
    }
    let exec: Vec<String> = service
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart")
        .split_whitespace()
        .map(String::from)
        .collect();
    // Each start's stdout in a file of its own (read at the end: a pipe left unread
    // could fill and stop a campaign).
    let mut started_jobs = 0;
    let mut start_job = || {
        started_jobs += 1;
        let out = dir.join(format!("job-{started_jobs}.out"));
        let child = Command::new("ip")
            .args(["netns", "exec", &hosts[0].0])
            .args(&exec)
            .stdout(std::fs::File::create(&out).unwrap())
            .spawn()
            .expect("start the scheduled job");
        (child, out)
    };

    // The first start, killed with its lab mid-run (a reboot, an OOM kill): the next
    // start must resume it.
    let (mut killed, _) = start_job();
    wait_for(
        "the first campaign's first run",
        Duration::from_secs(90),
        || {
            assert!(killed.try_wait().unwrap().is_none(), "the job ended early");
            campaigns(&runs).first().is_some_and(|c| {
                std::fs::read_to_string(runs.join(c).join("pairs/h0-to-h1/restore.json"))
                    .is_ok_and(|r| r.contains("\"pid\""))
            })
        },
    );
    kill_with_children(&mut killed);
    let killed_name = campaigns(&runs).remove(0);
    // Its hosts' locks go with their holders (the lab's ssh sessions, killed too).
    wait_for(
        "the killed lab's host locks to go",
        Duration::from_secs(30),
        || hosts.iter().all(|ns| !lab_lock_held(&ns.0)),
    );
    eprintln!(
        "killed {killed_name} after {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // The timer, at a short period: a start every PERIOD until three campaigns ended.
    let mut ticks: Vec<(Child, PathBuf)> = Vec::new();
    let mut done: BTreeMap<String, Ended> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut next_tick = Instant::now();
    while done.len() < 3 {
        assert!(
            Instant::now() < deadline,
            "three campaigns in 300 s: {done:?}"
        );
        if Instant::now() >= next_tick {
            ticks.push(start_job());
            next_tick += PERIOD;
        }
        for name in campaigns(&runs) {
            if !done.contains_key(&name) && runs.join(&name).join("schedule.json").exists() {
                eprintln!(
                    "{name} ended after {:.1} s",
                    started.elapsed().as_secs_f64()
                );
                done.insert(name.clone(), ended(&runs, &name));
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let (mut skipped, mut resumed) = (0, 0);
    for (mut tick, out) in ticks {
        let status = tick.wait().unwrap();
        let text = std::fs::read_to_string(out).unwrap();
        assert!(status.success(), "{text}");
        skipped += usize::from(text.contains("still running"));
        resumed +=
            usize::from(text.contains(&format!("resuming {}", runs.join(&killed_name).display())));
    }
    assert_eq!(resumed, 1, "the killed campaign resumed once");
    assert!(
        skipped > 0,
        "every start found the last one ended: no overlap tried"
    );
    let done: Vec<Ended> = done.into_values().collect();
    assert_eq!(done[0].name, killed_name, "the killed campaign was resumed");
    // None overlapping: every run of every campaign, in time order, ends before the next
    // starts.
    let mut spans: Vec<(u64, u64)> = done.iter().flat_map(|e| e.spans_ms.clone()).collect();
    assert_eq!(spans.len(), 3 * 2, "two settings a campaign");
    spans.sort();
    for w in spans.windows(2) {
        assert!(w[0].1 <= w[1].0, "two runs at once: {w:?}");
    }
    // Pruned to the newest KEEP, and the textfile holds the newest's figures.
    let kept: Vec<String> = done[3 - KEEP..].iter().map(|e| e.name.clone()).collect();
    assert_eq!(campaigns(&runs), kept);
    let newest = runs.join(&kept[KEEP - 1]);
    assert_eq!(
        std::fs::read_to_string(textfile.join("oscil-campaign.prom")).unwrap(),
        std::fs::read_to_string(newest.join("metrics/oscil-campaign.prom")).unwrap()
    );
    eprintln!(
        "three campaigns after {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // Prometheus: the scheduled campaigns' start times as it scraped them, and for each
    // series of the dashboard's metrics a sample from each campaign's time in the textfile.
    let third_started = done[2].started_unix_s as f64;
    wait_for(
        "Prometheus to scrape the third campaign",
        Duration::from_secs(30),
        || {
            query(
                &prometheus,
                "oscil_schedule_campaign_started_timestamp_seconds",
                unix_s(),
            )
            .first()
            .is_some_and(|s| s["value"][1].as_str() == Some(&third_started.to_string()))
        },
    );
    std::thread::sleep(Duration::from_secs(2));
    let now = unix_s();
    let window_s = (now - test_start_unix_s).ceil() as u64 + 5;
    let starts = query(
        &prometheus,
        &format!("oscil_schedule_campaign_started_timestamp_seconds[{window_s}s]"),
        now,
    );
    assert_eq!(starts.len(), 1, "{starts:?}");
    let starts = samples(&starts[0]);
    // Each campaign's time in the textfile: from its first sample to the next's.
    let mut windows: Vec<(f64, f64, f64)> = Vec::new();
    for &(t, value) in &starts {
        match windows.last_mut() {
            Some(w) if w.2 == value => w.1 = t,
            _ => windows.push((t, t, value)),
        }
    }
    let seen: Vec<u64> = windows.iter().map(|w| w.2 as u64).collect();
    let expected: Vec<u64> = done.iter().map(|e| e.started_unix_s).collect();
    assert_eq!(
        seen, expected,
        "Prometheus saw each campaign's start, in order"
    );

    let dashboard_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/grafana/oscil.json");
    let dashboard = json(&dashboard_path);
    let mut exprs = Vec::new();
    collect_exprs(&dashboard, &mut exprs);
    assert!(exprs.len() >= 8, "{exprs:?}");
    let names: BTreeSet<String> = exprs
        .iter()
        .flat_map(|e| metric_names(e))
        .filter(|n| n.starts_with("oscil_campaign_"))
        .collect();
    // Every run's figures, whether or not the lab kept the run in its verdicts: each run
    // (pair, run, repetition) has a point from each of the three campaigns. Its other
    // labels may change between campaigns: the lowest RTT measured (`path_rtt_ms`), and
    // `configuration`, which is the run's own label for a run left out of the verdicts.
    let mut run_series = 0;
    for name in &names {
        let run_name = name.replace("oscil_campaign_", "oscil_run_");
        let mut runs: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for one in query(&prometheus, &format!("{run_name}[{window_s}s]"), now) {
            let m = &one["metric"];
            let key = format!("{} {} {}", m["pair"], m["run"], m["repetition"]);
            runs.entry(key)
                .or_default()
                .extend(samples(&one).iter().map(|(t, _)| *t));
        }
        assert_eq!(runs.len(), 2, "{run_name}: a run a setting: {runs:?}");
        for (run, times) in &runs {
            for (from, to, value) in &windows {
                assert!(
                    times.iter().any(|t| from <= t && t <= to),
                    "{run_name} {run}: no sample while campaign {value} was the newest"
                );
            }
        }
        run_series += runs.len();
    }
    // A configuration's figures over the campaigns (what the dashboard draws, by pair and
    // configuration): a point from each campaign that measured it (a run the lab left out
    // of its verdicts, its reader or sender starved of CPU twice, gives none).
    for name in &names {
        let mut configurations: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for one in query(&prometheus, &format!("{name}[{window_s}s]"), now) {
            let configuration = one["metric"]["configuration"]
                .as_str()
                .expect("configuration");
            configurations
                .entry(configuration.to_owned())
                .or_default()
                .extend(samples(&one).iter().map(|(t, _)| *t));
        }
        for (configuration, times) in &configurations {
            let measured_in: Vec<_> = windows
                .iter()
                .zip(&done)
                .filter(|(_, campaign)| campaign.measured.contains(configuration))
                .collect();
            assert!(!measured_in.is_empty(), "{name} {configuration}");
            for ((from, to, value), _) in measured_in {
                assert!(
                    times.iter().any(|t| from <= t && t <= to),
                    "{name} {configuration}: no sample while campaign {value} was the newest"
                );
            }
        }
    }
    // Every query of the dashboard, its variables at "All", returns a series over the
    // campaigns' time, as Grafana asks (query_range).
    for expr in &exprs {
        let expr = expand_variables(expr, &dashboard);
        let result = query_range(&prometheus, &expr, test_start_unix_s, now);
        assert!(
            !result.is_empty(),
            "the dashboard's {expr} returned nothing"
        );
    }
    eprintln!(
        "{} dashboard queries over {} metrics answered, {run_series} run series with a point from each campaign; test took {:.1} s",
        exprs.len(),
        names.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Every `expr` of the dashboard's targets, wherever panels nest them.
fn collect_exprs(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(targets) = map.get("targets").and_then(|t| t.as_array()) {
                out.extend(
                    targets
                        .iter()
                        .filter_map(|t| t["expr"].as_str().map(String::from)),
                );
            }
            map.values().for_each(|v| collect_exprs(v, out));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_exprs(v, out)),
        _ => {}
    }
}

/// The metric names an expression reads (identifiers starting `oscil_`).
fn metric_names(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("oscil_"))
        .map(String::from)
        .collect()
}

/// `$name` of each query variable replaced by its "All" value, as Grafana sends it.
fn expand_variables(expr: &str, dashboard: &serde_json::Value) -> String {
    let mut expr = expr.to_owned();
    for variable in dashboard["templating"]["list"]
        .as_array()
        .expect("templating")
    {
        if variable["type"] == "query" {
            let name = variable["name"].as_str().unwrap();
            let all = variable["allValue"].as_str().expect("allValue");
            expr = expr.replace(&format!("${name}"), all);
        }
    }
    assert!(!expr.contains('$'), "a variable left in {expr}");
    expr
}

//! The command line as people type it, into the job it asks for.

use std::path::PathBuf;

use oscil_kernel::socket::congestion::CongestionControls;
use oscil_model::campaign::{Order, SlowRateBasis};
use oscil_model::pattern::PatternConfig;

use super::job::QUICK;
use super::*;
use crate::config::{BackendSpec, HostsSpec, Job, NewCampaign};
use crate::plan::matrix::configurations;

/// The job, or the line a person reads: clap's usage line for a value a flag cannot take
/// (`oscil-lab: invalid value ... (see oscil-lab --help)`), else the job's error.
fn job(args: &[&str]) -> Result<Job, String> {
    let args = std::iter::once("oscil-lab").chain(args.iter().copied());
    match oscil_cli::parse_from::<Cli, _>(args) {
        Ok(cli) => cli
            .into_job(42, PathBuf::from("lab-default"))
            .map_err(|e| e.to_string()),
        Err(oscil_cli::NotParsed::Usage(line)) => Err(line),
        Err(oscil_cli::NotParsed::Shown(shown)) => panic!("help shown: {shown}"),
    }
}

/// Asserts `args` end in a value clap refuses for `flag` (its own name, whatever alias
/// was typed), saying `why`, in one usage line.
#[track_caller]
fn refused(args: &[&str], flag: &str, why: &str) {
    let line = error(args);
    let value = args.last().expect("a value");
    let start = format!("oscil-lab: invalid value '{value}' for '{flag} <");
    assert!(line.starts_with(&start), "{line}");
    assert!(line.contains(why), "{line}");
    assert!(line.ends_with(" (see oscil-lab --help)"), "{line}");
}

fn new(args: &[&str]) -> NewCampaign {
    match job(args).unwrap() {
        Job::New(campaign) => *campaign,
        other => panic!("not a new campaign: {other:?}"),
    }
}

fn error(args: &[&str]) -> String {
    job(args).unwrap_err()
}

#[test]
fn defaults_are_the_cloudflare_comparison() {
    let campaign = new(&[]);
    let labels: Vec<String> = configurations(&campaign.matrix)
        .into_iter()
        .map(|c| c.label)
        .collect();
    assert_eq!(
        labels,
        [
            "1gbit_466ms_cubic_lowat-default",
            "1gbit_466ms_cubic_lowat-131072"
        ]
    );
    let settings = &configurations(&campaign.matrix)[1].settings;
    assert_eq!(settings.wmem_bytes, Some([4096, 16384, 536870912]));
    assert_eq!(settings.rmem_bytes, Some([8192, 262144, 536870912]));
    assert_eq!(settings.pattern, PatternConfig::CLOUDFLARE);
    assert_eq!((campaign.seed, campaign.repeat), (42, 1));
    assert_eq!(campaign.order, Order::Shuffled);
    assert_eq!(campaign.out, PathBuf::from("lab-default"));
}

#[test]
fn the_slow_rate_is_one_per_path_unless_asked_otherwise() {
    let settings = |args: &[&str]| {
        let s = &configurations(&new(args).matrix)[0].settings;
        (s.slow_rate_bps.map(|r| r.bps()), s.slow_rate_basis)
    };
    // 5% of the default path's 1 Gbit/s.
    assert_eq!(
        settings(&[]),
        (Some(50_000_000), Some(SlowRateBasis::PathRate))
    );
    assert_eq!(
        settings(&["--rate", "100mbit", "--fraction", "10%"]),
        (Some(10_000_000), Some(SlowRateBasis::PathRate))
    );
    let hosts = ["--sender", "root@a", "--receiver", "local"];
    assert_eq!(
        settings(&hosts),
        (None, Some(SlowRateBasis::Calibration { peak_bps: None }))
    );
    assert_eq!(
        settings(&["--slow-rate", "5mbit"]),
        (Some(5_000_000), Some(SlowRateBasis::Given))
    );
    assert_eq!(
        settings(&["--slow-rate", "auto-per-run"]),
        (None, Some(SlowRateBasis::PerRun))
    );
    refused(
        &["--slow-rate", "fast"],
        "--slow-rate",
        "\"fast\" is neither",
    );
}

#[test]
fn values_take_the_binaries_grammar() {
    let campaign = new(&[
        "--lowat",
        "default,128k",
        "--rate",
        "10mbit",
        "--sndbuf",
        "16k,64KiB",
        "--quick",
        "--slow",
        "3s",
        "--loss",
        "0.0",
    ]);
    let configs = configurations(&campaign.matrix);
    assert_eq!(configs.len(), 4);
    assert_eq!(configs[2].label, "10mbit_466ms_cubic_lowat-128k_sndbuf-16k");
    assert_eq!(configs[2].settings.lowat_bytes, Some(131072));
    assert_eq!(configs[3].settings.sndbuf_bytes, Some(65536));
    let pattern = configs[0].settings.pattern;
    assert_eq!(
        (pattern.fast_ms, pattern.slow_ms, pattern.cycles),
        (2000, 3000, 1)
    );
    let path = configs[0].settings.path.as_ref().unwrap();
    assert_eq!(
        (path.rate_bps, path.rtt_us, path.loss_pct),
        (10_000_000, 466_000, 0.0)
    );
}

#[test]
fn buffer_triples_and_patterns_label_only_when_not_default() {
    let campaign = new(&[
        "--wmem",
        "4096:16384:536870912,4096:16384:4M",
        "--pattern",
        "oscillating,full-speed",
        "--lowat",
        "default",
    ]);
    let configs = configurations(&campaign.matrix);
    let labels: Vec<&str> = configs.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "1gbit_466ms_cubic_lowat-default",
            "1gbit_466ms_cubic_lowat-default_full-speed",
            "1gbit_466ms_cubic_lowat-default_wmem-4096-16384-4M",
            "1gbit_466ms_cubic_lowat-default_wmem-4096-16384-4M_full-speed",
        ]
    );
    assert_eq!(configs[2].settings.wmem_bytes, Some([4096, 16384, 4 << 20]));
    assert!(configs[1].settings.pattern.full_speed);
}

#[test]
fn the_writer_is_an_axis_labelled_where_it_is_not_the_daemons_default() {
    let matrix = new(&["--write-mode", "until-eagain,per-wake"]).matrix;
    let modes: Vec<_> = configurations(&matrix)
        .into_iter()
        .map(|c| (c.label.ends_with("_per-wake"), c.settings.write_mode))
        .collect();
    use oscil_model::socket::WriteMode::{PerWake, UntilEagain};
    let expected = [(false, UntilEagain), (true, PerWake)];
    assert_eq!(modes, [expected, expected].concat(), "for each lowat");
    refused(
        &["--write-mode", "eager"],
        "--write-mode",
        "LIST>': \"eager\" is not a write mode (until-eagain or per-wake) (see",
    );
}

#[test]
fn bad_values_name_the_option() {
    refused(&["--cycles", "0"], "--cycles", "count \"0\" is not valid");
    // A bare number is no duration.
    refused(&["--fast", "2"], "--fast", "2s? 2ms?");
    let lowat = "--tcp-notsent-lowat";
    refused(
        &["--lowat", "default,,1"],
        lowat,
        "entry 2 of \"default,,1\" is empty",
    );
    refused(&["--notsent-lowat", "1,1"], lowat, "\"1\" is listed twice");
    refused(
        &[lowat, "8G"],
        lowat,
        "\"8G\" is not a whole number from 1 to 4294967295",
    );
    refused(
        &["--lowat", "default,0"],
        lowat,
        "LIST>': 0 would stall every write",
    );
    refused(&["--rate", "fast"], "--rate", "rate \"fast\" is not valid");
    refused(&["--wmem", "1:2"], "--wmem", "MIN:DEFAULT:MAX");
    refused(&["--wmem", "3:2:1"], "--wmem", "MIN <= DEFAULT <= MAX");
    refused(&["--pattern", "wavy"], "--pattern", "not a pattern");
    refused(&["--cc", "Cubic;"], "--cc", "Cubic;");
    refused(&["--repeat", "0"], "--repeat", "from 1 to 1000");
    refused(
        &["--adv-win-scale", "99"],
        "--adv-win-scale",
        "from -31 to 31",
    );
    refused(&["--seed", "x"], "--seed", "seed \"x\" is not valid");
    refused(
        &["--marker-every", "soon"],
        "--marker-every",
        "duration \"soon\"",
    );
    refused(
        &["--fraction", "0"],
        "--fraction",
        "fraction \"0\" is not valid",
    );
}

/// Two spellings of one value would run one configuration twice under two labels.
#[test]
fn a_value_is_listed_once_however_it_is_spelt() {
    let lowat = "--tcp-notsent-lowat";
    let once = "are one value: list it once";
    refused(
        &["--lowat", "128k,128KiB,131072"],
        lowat,
        &format!("\"128k\" and \"128KiB\" {once}"),
    );
    refused(
        &["--rtt", "100ms,0.1s"],
        "--rtt",
        &format!("\"100ms\" and \"0.1s\" {once}"),
    );
    refused(
        &["--rate", "1gbit,1000mbit"],
        "--rate",
        "\"1gbit\" and \"1000mbit\"",
    );
    refused(&["--wmem", "4096:16384:4M,4k:16k:4194304"], "--wmem", once);
    refused(&["--sndbuf", "default,16k,16384"], "--sndbuf", once);
    // The backend's default is left out of labels by value, too.
    let campaign = new(&["--wmem", "4k:16k:512M", "--lowat", "default"]);
    let configs = configurations(&campaign.matrix);
    assert_eq!(configs[0].label, "1gbit_466ms_cubic_lowat-default");
}

#[test]
fn hosts_refuse_path_options_and_half_pairs() {
    let message = error(&["--sender", "root@a", "--receiver", "local", "--rtt", "40ms"]);
    assert!(
        message.starts_with("--rtt describe the emulated path"),
        "{message}"
    );
    assert!(error(&["--sender", "root@a"]).contains("go together"));
    let line = error(&["--receiver", "local", "--sender=-oProxyCommand=x"]);
    assert!(
        line.starts_with("oscil-lab: invalid value '-oProxyCommand=x' for '--sender <USER@HOST>'"),
        "{line}"
    );
    let line = error(&["--sender", "a", "--receiver=-oX"]);
    assert!(
        line.starts_with("oscil-lab: invalid value '-oX' for '--receiver <"),
        "{line}"
    );
    refused(
        &["--ssh-option", "ProxyCommand=x"],
        "--ssh-option",
        "ProxyCommand",
    );
    let campaign = new(&[
        "--sender",
        "root@a",
        "--receiver",
        "local",
        "--ssh-option",
        "Port=2222",
    ]);
    let configs = configurations(&campaign.matrix);
    assert_eq!(configs[0].label, "cubic_lowat-default");
    assert_eq!(configs[0].settings.path, None);
    assert_eq!(
        configs[0].settings.wmem_bytes, None,
        "hosts keep their own tcp_wmem"
    );
    match campaign.backend {
        BackendSpec::Hosts(hosts) => {
            assert_eq!(hosts.receiver, None);
            assert_eq!(hosts.ssh_options, ["Port=2222"]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_run_is_checked_by_the_session_rules() {
    let message = error(&["--fast", "1s", "--slow", "1s", "--interval", "5s"]);
    assert!(
        message.starts_with("--interval 5000 ms is longer than the shortest phase (1000 ms)"),
        "{message}"
    );
    refused(
        &["--write-size", "0"],
        "--write-size",
        "write size of 0 bytes",
    );
    refused(
        &["--write-size", "4G"],
        "--write-size",
        "1 to 16777216 bytes",
    );
    refused(&["--pacing-rate", "4bit"], "--pacing-rate", "below 8 bit/s");
    refused(
        &["--slow-rate", "4bit"],
        "--slow-rate",
        "would read nothing",
    );
    let message = error(&["--marker-every", "50ms"]);
    assert!(
        message.starts_with("--marker-every 50ms is shorter than the sampling --interval 100ms"),
        "{message}"
    );
    // --quick's 2 s phases hold a 1 s interval; the full-speed control holds anything
    // up to the whole run.
    assert!(job(&["--quick", "--interval", "1s"]).is_ok());
    assert!(error(&["--quick", "--interval", "3s"]).contains("shortest phase (2000 ms)"));
}

#[test]
fn a_congestion_control_the_kernel_lacks_is_named_with_those_it_has() {
    let have = || {
        Ok(CongestionControls::from_lists(
            "reno cubic",
            vec!["tcp_bbr.ko".into()],
        ))
    };
    let plan = job(&["--cc", "cubic,bbr,foo"]).unwrap();
    assert_eq!(
        check_congestion_available(&plan, have).unwrap_err().to_string(),
        "--cc: \"foo\" is not a congestion control this kernel has (it has: reno cubic; as modules: bbr)"
    );
    let plan = job(&["--cc", "cubic,bbr"]).unwrap();
    assert!(check_congestion_available(&plan, have).is_ok());
    // Real hosts: the sender's kernel is not this one.
    let hosts = job(&["--cc", "foo", "--sender", "root@a", "--receiver", "local"]).unwrap();
    let unasked = || -> std::io::Result<CongestionControls> { panic!("not asked") };
    assert!(check_congestion_available(&hosts, unasked).is_ok());
}

#[test]
fn help_shows_the_defaults_the_plan_uses() {
    use clap::CommandFactory;
    let command = Cli::command();
    let help = |long: &str| {
        command
            .get_arguments()
            .find(|a| a.get_long() == Some(long))
            .and_then(|a| a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default()
    };
    let defaults = [
        (
            "fast",
            oscil_cli::request_args::cloudflare::FAST.to_string(),
        ),
        (
            "slow",
            oscil_cli::request_args::cloudflare::SLOW.to_string(),
        ),
        (
            "cycles",
            oscil_cli::request_args::cloudflare::CYCLES.to_string(),
        ),
        (
            "fraction",
            oscil_cli::request_args::cloudflare::FRACTION.to_string(),
        ),
        (
            "interval",
            oscil_cli::request_args::cloudflare::INTERVAL.to_string(),
        ),
    ];
    for (long, default) in defaults {
        let shown = format!("[default: {default}]");
        assert!(help(long).contains(&shown), "--{long}: {}", help(long));
    }
    let q = QUICK;
    let quick = format!(
        "--fast {} --slow {} --cycles {}",
        oscil_cli::request_args::TypedDuration::from_millis(q.fast_ms),
        oscil_cli::request_args::TypedDuration::from_millis(q.slow_ms),
        q.cycles
    );
    assert!(help("quick").contains(&quick), "{}", help("quick"));
}

#[test]
fn resume_and_restore_take_a_directory_only() {
    assert!(matches!(
        job(&["--resume", "d"]).unwrap(),
        Job::Resume { .. }
    ));
    assert!(error(&["--resume", "d", "--rate", "1gbit"]).contains("leave out --rate"));
    assert!(matches!(
        job(&["restore", "d"]).unwrap(),
        Job::Restore { .. }
    ));
}

#[test]
fn the_command_line_reads_the_inventory_and_refuses_what_does_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    // JSON as ansible-inventory prints it: read by the lab, whether Ansible is here or not.
    let inventory = dir.path().join("hosts.json");
    let hostvars = r#""a": {"ansible_host": "10.0.0.1"}, "b": {"ansible_host": "10.0.0.2"}"#;
    std::fs::write(
        &inventory,
        format!(r#"{{"all": {{"hosts": ["a", "b"]}}, "_meta": {{"hostvars": {{{hostvars}}}}}}}"#),
    )
    .unwrap();
    let inv = inventory.to_str().unwrap();
    let Ok(crate::config::Job::New(new)) = job(&["--inventory", inv, "--pairs", "b>a"]) else {
        panic!("a fleet job")
    };
    let BackendSpec::Fleet(spec) = &new.backend else {
        panic!("a fleet backend")
    };
    assert_eq!(spec.pairs.len(), 1);
    assert_eq!(spec.hosts[1].address, "10.0.0.2");
    let error = |args: &[&str]| job(args).unwrap_err().to_string();
    assert!(error(&[
        "--inventory",
        inv,
        "--sender",
        "root@x",
        "--receiver",
        "local"
    ])
    .contains("leave out --sender"));
    assert!(error(&["--pairs", "all"]).contains("give --inventory"));
    assert!(error(&["--inventory", inv, "--rtt", "40ms"]).contains("do not apply to real hosts"));
    assert_eq!(
        error(&["--inventory", inv, "--pairs", "a>c"]),
        "--pairs: \"c\" is not in the inventory (it has: a, b)"
    );
    std::fs::write(
        &inventory,
        r#"{"all": {"hosts": {"a": {"ansible_port": "x"}}}}"#,
    )
    .unwrap();
    assert_eq!(
        error(&["--inventory", inv]),
        format!("--inventory: {inv}: group \"all\": its hosts are a list of names")
    );
    std::fs::write(
        &inventory,
        r#"{"_meta": {"hostvars": {"a": {"ansible_port": "x"}}}}"#,
    )
    .unwrap();
    assert_eq!(
        error(&["--inventory", inv]),
        format!("--inventory: {inv}: host \"a\": ansible_port \"x\" is not a port (1-65535)")
    );
    assert!(error(&["--inventory", "/nonexistent/hosts.yml"])
        .starts_with("--inventory: /nonexistent/hosts.yml: "));
}

#[test]
fn pcap_asks_the_tun_link_for_its_capture_and_nothing_else() {
    let spec = |args: &[&str]| new(args).backend;
    let tun = oscil_model::lab::LinkKind::Tun;
    assert_eq!(
        spec(&[]),
        BackendSpec::Netns {
            link: tun,
            pcap: false
        }
    );
    assert_eq!(
        spec(&["--pcap"]),
        BackendSpec::Netns {
            link: tun,
            pcap: true
        }
    );
    assert!(error(&["--pcap", "--link", "netem"]).contains("oscil-link's"));
    let hosts = spec(&["--sender", "root@a", "--receiver", "local", "--pcap"]);
    assert!(matches!(
        hosts,
        BackendSpec::Hosts(HostsSpec { pcap: true, .. })
    ));
}

#[test]
fn groups_are_the_same_in_every_configuration_over_its_settings() {
    let campaign = new(&[
        "--cc",
        "cubic,bbr",
        "--rate",
        "100mbit",
        "--group",
        "flows=4,notsent-lowat=128k",
        "--group",
        "flows=4,congestion=reno",
    ]);
    let configs = configurations(&campaign.matrix);
    assert_eq!(configs.len(), 4, "the groups add no axis");
    for config in &configs {
        let s = &config.settings;
        assert_eq!(s.flows, 8);
        let request = oscil_protocol::request::SessionRequest::of_run(s);
        assert_eq!(request.validate(), Ok(()));
        let [lowat, reno] = &request.groups[..] else {
            panic!("{:?}", request.groups);
        };
        // The configuration's congestion control is the lowat group's default.
        assert_eq!(lowat.sender.congestion, s.congestion);
        assert_eq!(lowat.sender.notsent_lowat_bytes, Some(128 << 10));
        assert_eq!(reno.sender.congestion.as_deref(), Some("reno"));
        // 5% of the path's 100 Mbit/s, shared by the 8 flows.
        assert_eq!(lowat.slow_rate_bps, Some(2_500_000));
        let argv = oscil_cli::invocation::ReaderInvocation {
            connect: "10.0.0.1:1".into(),
            key_file: "/k".into(),
            out: "/o".into(),
            lab_record: None,
            label: None,
            request,
            rcvbuf_bytes: None,
            probe: true,
            trace: false,
            quiet: true,
        }
        .argv();
        let specs: Vec<&String> = argv
            .iter()
            .zip(argv.iter().skip(1))
            .filter(|(flag, _)| *flag == "--group")
            .map(|(_, spec)| spec)
            .collect();
        assert_eq!(specs.len(), 2, "{argv:?}");
        assert!(specs[0].contains("notsent-lowat=131072"), "{specs:?}");
        assert!(!argv.contains(&"--flows".to_string()), "{argv:?}");
    }
    assert!(error(&["--group", "flows=1", "--flows", "2"]).contains("--flows"));
    refused(
        &["--group", "flows=2,cc=bbr"],
        "--group",
        "unknown key \"cc\"",
    );
}

#[test]
fn the_direction_is_an_axis_labelled_where_it_is_not_forward_and_both_has_its_own_groups() {
    use oscil_model::campaign::Direction;
    let campaign = new(&[
        "--tcp-notsent-lowat",
        "default",
        "--direction",
        "forward,both",
        "--group",
        "flows=2",
        "--reverse-group",
        "flows=3,congestion=reno",
    ]);
    let configs = configurations(&campaign.matrix);
    let directions: Vec<(Direction, bool)> = configs
        .iter()
        .map(|c| (c.settings.direction, c.label.ends_with("_both")))
        .collect();
    assert_eq!(
        directions,
        [(Direction::Forward, false), (Direction::Both, true)]
    );
    let both = &configs[1].settings;
    assert!(configs[0].settings.reverse_groups.is_empty());
    let reverse = both.reverse_pair();
    assert_eq!((both.flows, reverse.flows), (2, 3));
    assert_eq!(reverse.direction, Direction::Reverse);
    assert_eq!(reverse.groups[0].sender.congestion.as_deref(), Some("reno"));
    // Without --reverse-group the reverse pair runs the forward pair's flows.
    let same = configurations(&new(&["--direction", "both", "--flows", "4"]).matrix);
    assert!(same.iter().all(|c| c.settings.reverse_groups.is_empty()));
    assert_eq!(same[0].settings.reverse_pair().flows, 4);
    refused(
        &["--direction", "sideways"],
        "--direction",
        "not a direction",
    );
    let hosts = error(&["--sender", "a", "--receiver", "b", "--direction", "both"]);
    assert!(
        hosts.starts_with("--direction both: only in the namespace lab"),
        "{hosts}"
    );
    let alone = error(&["--reverse-group", "flows=1"]);
    assert!(alone.contains("give --direction both"), "{alone}");
}

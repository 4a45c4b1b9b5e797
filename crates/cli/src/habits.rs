//! Flags other tools spell (iperf3, iperf2, netperf, flent) or other oscil binaries take,
//! typed where this binary has no such flag: a line that names what does the job here (or
//! in which binary), instead of clap's nearest spelling (`--bidir` → `--bind`, `--restore`
//! → `--resume`), which would mislead.

use clap::error::{ContextKind, ContextValue};

/// A flag this binary does not take, and what to say of it.
struct Habit {
    /// As typed, without a value: `-u`, `--bidir`; `""` is a positional argument.
    given: &'static str,
    /// Whose habit it is, said first ("iperf3's -u"); empty when it is oscil's own.
    origin: &'static str,
    /// What to say in a binary that has this long flag (or alias); every match is said.
    by_flag: &'static [(&'static str, &'static str)],
    /// What to say in a binary that has none of them; empty: clap's own words.
    elsewhere: &'static str,
}

const ONE_WAY: &str = "oscil always sends one way, from oscil-daemon to oscil-reader: run the daemon on the sending host (a second pair the other way measures the reverse)";
const JSON: &[(&str, &str)] = &[
    ("recommend", "the report writes report.json (every file, figure and warning) into its --out"),
    ("repeat", "a campaign keeps campaign.json and report/report.json in its --out; oscil-reader -J prints one run as JSON"),
    ("listen", "the daemon prints no results: oscil-reader -J prints the run as JSON"),
];
const SERVER_HOST: &[(&str, &str)] = &[
    ("connect", "-c HOST names the daemon"),
    (
        "sender",
        "--sender USER@HOST and --receiver local|USER@HOST run a campaign on real hosts",
    ),
    (
        "listen",
        "oscil-daemon listens (--listen ADDR); oscil-reader -c HOST connects to it",
    ),
];

const HABITS: &[Habit] = &[
    Habit {
        given: "-s",
        origin: "iperf3's -s",
        by_flag: &[("listen", "oscil-daemon is the server already (--listen ADDR sets its address)")],
        elsewhere: "the server is oscil-daemon, run on the sending host",
    },
    Habit { given: "-R", origin: "iperf3's -R", by_flag: &[], elsewhere: ONE_WAY },
    Habit { given: "--reverse", origin: "iperf3's --reverse", by_flag: &[], elsewhere: ONE_WAY },
    Habit { given: "--bidir", origin: "iperf3's --bidir", by_flag: &[], elsewhere: ONE_WAY },
    Habit { given: "-d", origin: "iperf2's -d", by_flag: &[], elsewhere: ONE_WAY },
    Habit {
        given: "-u",
        origin: "iperf3's -u",
        by_flag: &[],
        elsewhere: "oscil measures TCP only: what a TCP sender's buffers do when its reader reads unevenly",
    },
    Habit {
        given: "--udp",
        origin: "iperf3's --udp",
        by_flag: &[],
        elsewhere: "oscil measures TCP only: what a TCP sender's buffers do when its reader reads unevenly",
    },
    Habit {
        given: "-i",
        origin: "iperf3's -i",
        by_flag: &[("interval", "--interval DUR sets how often both ends are sampled (the summary is per phase)")],
        elsewhere: "oscil-reader --interval DUR sets how often both ends are sampled",
    },
    Habit {
        given: "-w",
        origin: "iperf3's -w",
        by_flag: &[
            ("sndbuf", "--sndbuf BYTES sets the daemon's SO_SNDBUF"),
            ("rcvbuf", "--rcvbuf BYTES sets the reader's SO_RCVBUF"),
        ],
        elsewhere: "oscil-reader --sndbuf BYTES and --rcvbuf BYTES",
    },
    Habit {
        given: "-l",
        origin: "iperf3's -l",
        by_flag: &[("write-size", "--write-size BYTES sets the bytes per write of the daemon")],
        elsewhere: "oscil-reader --write-size BYTES",
    },
    Habit {
        given: "-C",
        origin: "iperf3's -C",
        by_flag: &[("congestion", "--congestion NAME")],
        elsewhere: "oscil-reader --congestion NAME",
    },
    Habit {
        given: "-b",
        origin: "iperf3's -b",
        by_flag: &[
            ("pacing-rate", "--pacing-rate RATE sets SO_MAX_PACING_RATE (as tc writes rates: 100mbit)"),
            ("max-rate", "--max-rate RATE caps every session's pacing rate"),
        ],
        elsewhere: "oscil-reader --pacing-rate RATE",
    },
    Habit {
        given: "-Z",
        origin: "iperf3's -Z",
        by_flag: &[("zerocopy", "--zerocopy makes the daemon send with sendfile")],
        elsewhere: "oscil-reader --zerocopy asks the daemon to send with sendfile",
    },
    Habit {
        given: "-t",
        origin: "iperf3's -t",
        by_flag: &[("fast", "every run follows the pattern: --fast, --slow and --cycles set its lengths (--quick: one short cycle), and --pattern full-speed reads at full speed as iperf3 does")],
        elsewhere: "oscil-reader -t DUR makes a full-speed run of that length",
    },
    Habit {
        given: "-P",
        origin: "iperf3's -P",
        by_flag: &[("flows", "--flows N sets the data connections of every run")],
        elsewhere: "oscil-reader -P N (--flows) opens N data connections",
    },
    Habit { given: "-J", origin: "iperf3's -J", by_flag: JSON, elsewhere: "" },
    Habit { given: "--json", origin: "iperf3's --json", by_flag: JSON, elsewhere: "" },
    Habit {
        given: "-O",
        origin: "iperf3's -O",
        by_flag: &[],
        elsewhere: "oscil-report judges cycles 2 and later by default, leaving out the first's slow start (--whole-run keeps it)",
    },
    Habit { given: "-c", origin: "iperf3's -c", by_flag: SERVER_HOST, elsewhere: "" },
    Habit { given: "-H", origin: "netperf's and flent's -H", by_flag: SERVER_HOST, elsewhere: "" },
    Habit {
        given: "-B",
        origin: "iperf3's -B",
        by_flag: &[("listen", "--listen ADDR sets the address the daemon listens on")],
        elsewhere: "",
    },
    Habit {
        given: "--restore",
        origin: "",
        by_flag: &[("resume", "restore is a command, not a flag: oscil-lab restore DIR puts back what a campaign changed (--resume DIR continues one)")],
        elsewhere: "",
    },
    Habit {
        given: "",
        origin: "",
        by_flag: &[
            ("connect", "the daemon's address goes after -c: -c HOST"),
            ("listen", "the address to listen on goes after --listen: --listen ADDR"),
            ("resume", "oscil-lab takes no directory alone: --out DIR starts a campaign there, --resume DIR continues one, restore DIR puts back its settings"),
        ],
        elsewhere: "",
    },
];

/// What to say of the argument `error` found unexpected in `command`, when it is a habit.
pub(crate) fn pointer(command: &clap::Command, error: &clap::Error) -> Option<String> {
    let has = |long: &str| {
        command.get_arguments().any(|a| {
            a.get_long() == Some(long) || a.get_all_aliases().is_some_and(|all| all.contains(&long))
        })
    };
    let given = match (
        error.get(ContextKind::InvalidArg),
        error.get(ContextKind::InvalidSubcommand),
    ) {
        (Some(ContextValue::String(given)), _) | (_, Some(ContextValue::String(given))) => given,
        _ => return None,
    };
    let flag = given.split('=').next().unwrap_or(given);
    let key = if flag.starts_with('-') { flag } else { "" };
    let habit = HABITS.iter().find(|h| h.given == key)?;
    let here: Vec<&str> = habit
        .by_flag
        .iter()
        .filter(|(long, _)| has(long))
        .map(|(_, say)| *say)
        .collect();
    let what = match (here.is_empty(), habit.elsewhere) {
        (false, _) => here.join("; "),
        (true, "") => return None,
        (true, elsewhere) => elsewhere.to_owned(),
    };
    let what = match habit.origin {
        "" => what,
        origin => format!("{origin}: {what}"),
    };
    Some(format!("unexpected argument '{given}': {what}"))
}

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
    /// A key names a flag of one binary only (`gen-key`: the daemon; `busy-retry`: the
    /// reader), since `--listen` and `--connect` are on both.
    by_flag: &'static [(&'static str, &'static str)],
    /// What to say in a binary that has none of them; empty: clap's own words.
    elsewhere: &'static str,
}

const ONE_WAY: &str = "oscil always sends one way, from oscil-daemon to oscil-reader: run the daemon on the sending host (a second pair the other way measures the reverse; oscil-lab --direction reverse or both runs it over the emulated link)";
const JSON: &[(&str, &str)] = &[
    ("recommend", "the report writes report.json (every file, figure and warning) into its --out"),
    ("repeat", "a campaign keeps campaign.json and report/report.json in its --out; oscil-reader -J prints one run as JSON"),
    ("gen-key", "the daemon prints no results: oscil-reader -J prints the run as JSON"),
];
const SERVER_HOST: &[(&str, &str)] = &[
    ("busy-retry", "-c HOST names the daemon"),
    (
        "sender",
        "--sender USER@HOST and --receiver local|USER@HOST run a campaign on real hosts",
    ),
    (
        "gen-key",
        "oscil-daemon listens (--listen ADDR); oscil-reader -c HOST connects to it",
    ),
];

const PACING: &[(&str, &str)] = &[
    (
        "pacing-rate",
        "--pacing-rate RATE sets SO_MAX_PACING_RATE (as tc writes rates: 100mbit)",
    ),
    (
        "max-rate",
        "--max-rate RATE caps every session's pacing rate",
    ),
];
const LOWAT: &[(&str, &str)] = &[
    ("tcp-notsent-lowat", "--tcp-notsent-lowat LIST sets the sysctl net.ipv4.tcp_notsent_lowat for every socket of the sender (oscil-reader --notsent-lowat sets the socket option)"),
    ("notsent-lowat", "--notsent-lowat BYTES (e.g. 128k) sets the socket option on each of the daemon's sockets"),
];
const WINDOW: &[(&str, &str)] = &[
    ("sndbuf", "--sndbuf BYTES sets the daemon's SO_SNDBUF"),
    ("rcvbuf", "--rcvbuf BYTES sets the reader's SO_RCVBUF"),
];
const LENGTH: &[(&str, &str)] = &[(
    "write-size",
    "--write-size BYTES sets the bytes per write of the daemon",
)];
const TIME: &[(&str, &str)] = &[("fast", "every run follows the pattern: --fast, --slow and --cycles set its lengths (--quick: one short cycle), and --pattern full-speed reads at full speed as iperf3 does")];
const FLOWS: &[(&str, &str)] = &[("flows", "--flows N sets the data connections of every run")];
const SERVER: &[(&str, &str)] = &[(
    "gen-key",
    "oscil-daemon is the server already (--listen ADDR sets its address)",
)];
const NO_MSS: &str =
    "oscil sets no MSS: the path's MTU decides it (oscil-lab's link sets the path)";
const NO_DELAY: &str =
    "oscil sets no TCP_NODELAY: the daemon's writes are large, so Nagle never holds one back";
const BY_TIME: &str =
    "a run lasts a time, not a byte count: --fast, --slow and --cycles (or oscil-reader -t DUR)";
const FORMAT: &str =
    "the summary is in Mbit/s and bytes; oscil-reader -J prints the figures as JSON";
const DAEMONIZE: &str = "oscil-daemon stays in the foreground: run it under systemd, nohup or tmux";

const HABITS: &[Habit] = &[
    Habit {
        given: "-s",
        origin: "iperf3's -s",
        by_flag: SERVER,
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
        by_flag: WINDOW,
        elsewhere: "oscil-reader --sndbuf BYTES and --rcvbuf BYTES",
    },
    Habit {
        given: "-l",
        origin: "iperf3's -l",
        by_flag: LENGTH,
        elsewhere: "oscil-reader --write-size BYTES",
    },
    Habit {
        given: "-C",
        origin: "iperf3's -C",
        by_flag: &[("congestion", "--congestion NAME")],
        elsewhere: "oscil-reader --congestion NAME",
    },
    Habit { given: "-b", origin: "iperf3's -b", by_flag: PACING, elsewhere: "oscil-reader --pacing-rate RATE" },
    Habit { given: "--bitrate", origin: "iperf3's --bitrate", by_flag: PACING, elsewhere: "oscil-reader --pacing-rate RATE" },
    Habit { given: "--fq-rate", origin: "iperf3's --fq-rate", by_flag: PACING, elsewhere: "oscil-reader --pacing-rate RATE" },
    Habit { given: "--tcp-write-prefetch", origin: "iperf2's --tcp-write-prefetch (TCP_NOTSENT_LOWAT)", by_flag: LOWAT, elsewhere: "oscil-reader --notsent-lowat BYTES" },
    Habit { given: "--window", origin: "iperf3's --window", by_flag: WINDOW, elsewhere: "oscil-reader --sndbuf BYTES and --rcvbuf BYTES" },
    Habit { given: "--length", origin: "iperf3's --length", by_flag: LENGTH, elsewhere: "oscil-reader --write-size BYTES" },
    Habit { given: "-M", origin: "iperf3's -M", by_flag: &[], elsewhere: NO_MSS },
    Habit { given: "--set-mss", origin: "iperf3's --set-mss", by_flag: &[], elsewhere: NO_MSS },
    Habit { given: "--mss", origin: "iperf2's --mss", by_flag: &[], elsewhere: NO_MSS },
    Habit { given: "-N", origin: "iperf3's -N", by_flag: &[], elsewhere: NO_DELAY },
    Habit { given: "--no-delay", origin: "iperf3's --no-delay", by_flag: &[], elsewhere: NO_DELAY },
    Habit { given: "--nodelay", origin: "iperf2's --nodelay", by_flag: &[], elsewhere: NO_DELAY },
    Habit { given: "-n", origin: "iperf3's -n", by_flag: &[], elsewhere: BY_TIME },
    Habit { given: "--bytes", origin: "iperf3's --bytes", by_flag: &[], elsewhere: BY_TIME },
    Habit { given: "-k", origin: "iperf3's -k", by_flag: &[], elsewhere: BY_TIME },
    Habit { given: "--blockcount", origin: "iperf3's --blockcount", by_flag: &[], elsewhere: BY_TIME },
    Habit { given: "-f", origin: "iperf3's -f", by_flag: &[], elsewhere: FORMAT },
    Habit { given: "--format", origin: "iperf3's --format", by_flag: &[], elsewhere: FORMAT },
    Habit { given: "--logfile", origin: "iperf3's --logfile", by_flag: &[], elsewhere: "what a run records goes into its directory (-o); the lines on stderr go where 2>FILE sends them" },
    Habit { given: "--cport", origin: "iperf3's --cport", by_flag: &[("bind", "the kernel picks the reader's ports; -B ADDR picks its local address")], elsewhere: "oscil-reader -B ADDR picks the reader's local address; the kernel its ports" },
    Habit { given: "--omit", origin: "iperf3's --omit", by_flag: &[], elsewhere: "oscil-report judges cycles 2 and later by default, leaving out the first's slow start (--whole-run keeps it)" },
    Habit { given: "--time", origin: "iperf3's --time", by_flag: TIME, elsewhere: "oscil-reader -t DUR makes a full-speed run of that length" },
    Habit { given: "--parallel", origin: "iperf3's --parallel", by_flag: FLOWS, elsewhere: "oscil-reader -P N (--flows) opens N data connections" },
    Habit { given: "--server", origin: "iperf3's --server", by_flag: SERVER, elsewhere: "the server is oscil-daemon, run on the sending host" },
    Habit { given: "--client", origin: "iperf3's --client", by_flag: SERVER_HOST, elsewhere: "" },
    Habit { given: "-D", origin: "iperf3's -D", by_flag: &[], elsewhere: DAEMONIZE },
    Habit { given: "--daemon", origin: "iperf3's --daemon", by_flag: &[], elsewhere: DAEMONIZE },
    Habit {
        given: "-Z",
        origin: "iperf3's -Z",
        by_flag: &[("zerocopy", "--zerocopy makes the daemon send with sendfile")],
        elsewhere: "oscil-reader --zerocopy asks the daemon to send with sendfile",
    },
    Habit {
        given: "-t",
        origin: "iperf3's -t",
        by_flag: TIME,
        elsewhere: "oscil-reader -t DUR makes a full-speed run of that length",
    },
    Habit {
        given: "-P",
        origin: "iperf3's -P",
        by_flag: FLOWS,
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
        by_flag: &[("gen-key", "--listen ADDR sets the address the daemon listens on")],
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
            ("busy-retry", "the daemon's address goes after -c: -c HOST"),
            ("gen-key", "the address to listen on goes after --listen: --listen ADDR"),
            ("resume", "oscil-lab takes no directory alone: --out DIR starts a campaign there, --resume DIR continues one, restore DIR puts back its settings"),
        ],
        elsewhere: "",
    },
];

/// What to say of the argument `error` found unexpected in `command`, when it is a habit.
pub(crate) fn pointer(command: &clap::Command, error: &clap::Error) -> Option<String> {
    let named = |long: &str| command.get_arguments().any(|a| a.get_long() == Some(long));
    let aliased = |long: &str| {
        command
            .get_arguments()
            .any(|a| a.get_all_aliases().is_some_and(|all| all.contains(&long)))
    };
    let given = given(error)?;
    let flag = given.split('=').next().unwrap_or(given);
    let key = if flag.starts_with('-') { flag } else { "" };
    let habit = HABITS.iter().find(|h| h.given == key)?;
    // A flag this binary names wins over another's alias (the lab's --notsent-lowat is an
    // alias of its sysctl, not the reader's socket option).
    let by_name: Vec<&str> = habit
        .by_flag
        .iter()
        .filter(|(long, _)| named(long))
        .map(|(_, say)| *say)
        .collect();
    let here = match by_name.is_empty() {
        false => by_name,
        true => habit
            .by_flag
            .iter()
            .filter(|(long, _)| aliased(long))
            .map(|(_, say)| *say)
            .collect(),
    };
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

/// The argument clap found unexpected, as typed.
fn given(error: &clap::Error) -> Option<&str> {
    match (
        error.get(ContextKind::InvalidArg),
        error.get(ContextKind::InvalidSubcommand),
    ) {
        (Some(ContextValue::String(given)), _) | (_, Some(ContextValue::String(given))) => {
            Some(given)
        }
        _ => None,
    }
}

/// `unexpected argument '--x' found`, without clap's tip.
pub(crate) fn unexpected(error: &clap::Error) -> String {
    format!("unexpected argument '{}' found", given(error).unwrap_or(""))
}

/// True when clap's "a similar argument exists" names a flag too far from the one typed to
/// be a slip of the finger (`--fq-rate` → `--slow-rate`, `--bitrate` → `--trace`): more
/// edits than a third of the name (at least one). A slip (`--fats` → `--fast`) keeps it.
pub(crate) fn far_suggestion(error: &clap::Error) -> bool {
    let suggested = match error.get(ContextKind::SuggestedArg) {
        Some(ContextValue::String(suggested)) => suggested.clone(),
        Some(ContextValue::Strings(all)) => match all.first() {
            Some(first) => first.clone(),
            None => return false,
        },
        _ => return false,
    };
    let Some(typed) = given(error) else {
        return false;
    };
    let typed = typed
        .split('=')
        .next()
        .unwrap_or(typed)
        .trim_start_matches('-');
    let suggested = suggested.split_whitespace().next().unwrap_or("");
    let suggested = suggested.trim_start_matches('-');
    edits(typed, suggested) > (typed.chars().count() / 3).max(1)
}

/// The edits (insertions, deletions, substitutions, swaps of neighbours) from `a` to `b`.
fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::edits;

    #[test]
    fn slips_are_near_and_other_words_far() {
        assert_eq!(edits("fats", "fast"), 1);
        assert_eq!(edits("intreval", "interval"), 1);
        assert!(edits("fq-rate", "slow-rate") > 2);
        assert!(edits("bitrate", "trace") > 2);
    }
}

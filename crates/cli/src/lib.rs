//! What every oscil binary does the same way at its command line: exit codes, how a usage
//! error is printed, and the placeholders its help shows.

pub mod address;
pub mod files;
pub mod group;
mod habits;
pub mod invocation;
pub mod list;
pub mod path_args;
pub mod request_args;
pub mod rlimit;
pub mod stdout;
#[allow(unsafe_code)]
mod sys;
pub mod units;

use std::ffi::OsString;

/// Exit codes, the same in every binary and the lab.
pub mod exit {
    /// The run, campaign or report finished.
    pub const OK: u8 = 0;
    /// It could not start (or could not finish writing): address in use, daemon refused, ...
    pub const FAILED_START: u8 = 1;
    /// Bad flags or values: nothing was started.
    pub const USAGE: u8 = 2;
    /// A run was cut short (Ctrl-C, peer gone); what was recorded up to then is kept.
    pub const CUT_SHORT: u8 = 3;
}

/// `-p`, `-4` and `-6`, the same in every binary that takes an address.
#[derive(Debug, Clone, clap::Args)]
pub struct AddressFlags {
    /// Port (overrides the one in the address).
    #[arg(long, short = 'p', value_parser = units::whole("port", 1, u16::MAX), value_name = "PORT")]
    pub port: Option<u16>,
    /// IPv4 only.
    #[arg(short = '4', long = "ipv4", conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// IPv6 only.
    #[arg(short = '6', long = "ipv6")]
    pub ipv6: bool,
}

impl AddressFlags {
    /// The address family asked for.
    pub fn family(&self) -> crate::address::IpFamily {
        use crate::address::IpFamily;
        match (self.ipv4, self.ipv6) {
            (true, _) => IpFamily::V4,
            (_, true) => IpFamily::V6,
            _ => IpFamily::Any,
        }
    }

    /// `endpoint` with the port `-p` names, if it names one.
    pub fn with_port(&self, endpoint: &crate::address::Endpoint) -> crate::address::Endpoint {
        let mut endpoint = endpoint.clone();
        if let Some(port) = self.port {
            endpoint.port = port;
        }
        endpoint
    }
}

/// Placeholders the help texts use, so every binary names a value the same way.
pub mod placeholder {
    pub const ADDR: &str = "ADDR";
    pub const BYTES: &str = "BYTES";
    pub const RATE: &str = "RATE";
    pub const DUR: &str = "DUR";
    pub const FILE: &str = "FILE";
    pub const DIR: &str = "DIR";
    pub const N: &str = "N";
}

/// Lines the reader and the daemon print on stderr before starting, for flags that work
/// but likely not as meant: `--notsent-lowat 0` (the kernel reads a socket's 0 as unset and
/// uses the net.ipv4.tcp_notsent_lowat sysctl) and a key file others can read.
pub fn start_warnings(
    program: &str,
    lowat_bytes: Option<u32>,
    key_file: Option<&std::path::Path>,
) -> Vec<String> {
    let lowat = (lowat_bytes == Some(0)).then(|| {
        "warning: --notsent-lowat 0 leaves the socket unset: the kernel then uses the net.ipv4.tcp_notsent_lowat sysctl".to_owned()
    });
    let key = key_file.and_then(oscil_protocol::key::exposed_key_warning);
    lowat
        .into_iter()
        .chain(key)
        .map(|warning| format!("{program}: {warning}"))
        .collect()
}

/// Parses the command line. Help and version print as clap prints them (exit 0); anything
/// else prints one line, `PROG: what is wrong (hint)`, and exits with [`exit::USAGE`].
///
/// Two extra forms, taken before the binary's own flags are checked, write what packagers
/// install: `PROG --completions bash|zsh|fish|elvish|powershell` prints a shell completion
/// script and `PROG --man` a man page, both generated from the same clap definition.
pub fn parse<T: clap::Parser>() -> T {
    let args: Vec<OsString> = std::env::args_os().collect();
    let name = command::<T>().get_name().to_owned();
    let exit_with = |code: u8| -> ! { std::process::exit(stdout::settle(&name, code).into()) };
    if let Some(code) = generate_extras::<T>(&args) {
        exit_with(code);
    }
    let json = asks_for_json(&command::<T>(), &args);
    match parse_from(args) {
        Ok(parsed) => parsed,
        Err(outcome) => {
            if let (true, NotParsed::Usage(line)) = (json, &outcome) {
                let what = line.strip_prefix(&format!("{name}: ")).unwrap_or(line);
                outln!("{}", json_error(exit::USAGE, what));
            }
            exit_with(outcome.print())
        }
    }
}

/// The object a binary with `--json` prints on stdout when it fails, as iperf3 -J does
/// (docs/json.md): `error` is the stderr line without the program's name.
pub fn json_error(code: u8, line: &str) -> String {
    serde_json::to_string_pretty(&json_error_object(code, line))
        .expect("an error object serializes")
}

/// The error object of [`json_error`], to print in another form.
pub fn json_error_object(code: u8, line: &str) -> serde_json::Value {
    serde_json::json!({ "status": "error", "exit_code": code, "error": line })
}

/// True when `command` has a `--json` flag and `args` give it (`--json`, its short form
/// alone or in a cluster such as `-qJ`), before any `--`: a usage error is then an error
/// object too, though the flags did not parse.
fn asks_for_json(command: &clap::Command, args: &[OsString]) -> bool {
    let Some(flag) = command
        .get_arguments()
        .find(|a| a.get_long() == Some("json"))
    else {
        return false;
    };
    let short = flag.get_short();
    args.iter()
        .skip(1)
        .filter_map(|a| a.to_str())
        .take_while(|a| *a != "--")
        .any(|a| match a.strip_prefix("--") {
            Some(long) => long == "json",
            None => match (a.strip_prefix('-'), short) {
                (Some(cluster), Some(short)) => {
                    cluster.chars().all(|c| c.is_ascii_alphabetic()) && cluster.contains(short)
                }
                _ => false,
            },
        })
}

/// The binary's command with `--completions SHELL` and `--man` added, so its `--help`, man
/// page and completions list them; each must be given alone ([`generate_extras`] runs them).
fn command<T: clap::CommandFactory>() -> clap::Command {
    use clap::{Arg, ArgAction};
    T::command()
        .arg(
            Arg::new("completions")
                .long("completions")
                .value_name("SHELL")
                .exclusive(true)
                .help("Print a shell completion script (bash, zsh, fish, elvish, powershell) and exit"),
        )
        .arg(
            Arg::new("man")
                .long("man")
                .action(ArgAction::SetTrue)
                .exclusive(true)
                .help("Print a man page and exit"),
        )
}

/// Handles `--completions SHELL` and `--man`, written through [`stdout`] (clap_complete
/// panics on a failed write, so both are made in memory first); `None` when the arguments
/// are neither.
fn generate_extras<T: clap::Parser>(args: &[OsString]) -> Option<u8> {
    let mut command = command::<T>();
    let name = command.get_name().to_owned();
    let mut text = Vec::new();
    match args.get(1).and_then(|a| a.to_str()) {
        Some("--man") if args.len() == 2 => {
            clap_mangen::Man::new(command)
                .render(&mut text)
                .expect("a man page renders into memory");
        }
        Some("--completions") if args.len() == 3 => {
            let shell = args[2]
                .to_str()
                .and_then(|s| s.parse::<clap_complete::Shell>().ok());
            let Some(shell) = shell else {
                eprintln!("{name}: --completions takes bash, zsh, fish, elvish or powershell");
                return Some(exit::USAGE);
            };
            clap_complete::generate(shell, &mut command, name, &mut text);
        }
        _ => return None,
    }
    stdout::write_bytes(&text);
    Some(exit::OK)
}

/// What `parse` does instead of returning: help to print, or a usage error.
#[derive(Debug)]
pub enum NotParsed {
    /// `--help` or `--version`: clap's own text, then exit 0.
    Shown(clap::Error),
    /// One line for stderr.
    Usage(String),
}

impl NotParsed {
    /// Prints and returns the process's exit code (a failed write of the help is kept for
    /// [`stdout::finish`]).
    pub fn print(&self) -> u8 {
        match self {
            NotParsed::Shown(shown) => {
                shown.print().unwrap_or_else(stdout::failed);
                exit::OK
            }
            NotParsed::Usage(line) => {
                eprintln!("{line}");
                exit::USAGE
            }
        }
    }
}

/// `parse` without exiting: testable.
pub fn parse_from<T, I>(args: I) -> Result<T, NotParsed>
where
    T: clap::Parser,
    I: IntoIterator,
    I::Item: Into<OsString> + Clone,
{
    let command = command::<T>();
    let name = command.get_name().to_owned();
    let args = negative_values_glued(&command, args.into_iter().map(Into::into).collect());
    let parsed = command
        .clone()
        .try_get_matches_from(args)
        .and_then(|matches| T::from_arg_matches(&matches));
    parsed.map_err(|error| {
        use clap::error::ErrorKind;
        match error.kind() {
            ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => NotParsed::Shown(error),
            ErrorKind::UnknownArgument | ErrorKind::InvalidSubcommand => {
                match habits::pointer(&command, &error) {
                    Some(pointer) => {
                        NotParsed::Usage(format!("{name}: {pointer} (see {name} --help)"))
                    }
                    None if habits::far_suggestion(&error) => NotParsed::Usage(format!(
                        "{name}: {} (see {name} --help)",
                        habits::unexpected(&error)
                    )),
                    None => NotParsed::Usage(usage_line(&name, &error)),
                }
            }
            _ => NotParsed::Usage(usage_line(&name, &error)),
        }
    })
}

/// `--fast -5s` as `--fast=-5s`: clap would read `-5s` as a flag (only plain numbers such as
/// `-5` count as values), though a negative value is what was typed; the value's parser
/// then says it cannot be negative. A defined flag (`-4`) is left alone.
fn negative_values_glued(command: &clap::Command, args: Vec<OsString>) -> Vec<OsString> {
    let looks_negative = |a: &str| {
        let mut chars = a.chars();
        chars.next() == Some('-') && chars.next().is_some_and(|c| c.is_ascii_digit() || c == '.')
    };
    let is_flag = |a: &str| {
        a.strip_prefix('-')
            .and_then(|short| short.parse::<char>().ok())
            .is_some_and(|short| {
                command
                    .get_arguments()
                    .any(|f| f.get_short() == Some(short))
            })
    };
    let takes_value = |a: &str| -> Option<String> {
        let found = match a.strip_prefix("--") {
            Some(long) => command.get_arguments().find(|f| f.get_long() == Some(long)),
            None => {
                let short = a.strip_prefix('-')?.parse::<char>().ok()?;
                command
                    .get_arguments()
                    .find(|f| f.get_short() == Some(short))
            }
        }?;
        let long = found.get_long()?;
        found
            .get_action()
            .takes_values()
            .then(|| format!("--{long}"))
    };
    let mut glued = Vec::with_capacity(args.len());
    let mut rest = args.into_iter();
    while let Some(arg) = rest.next() {
        let Some(text) = arg.to_str() else {
            glued.push(arg);
            continue;
        };
        if text == "--" {
            glued.push(arg);
            glued.extend(rest);
            break;
        }
        let long = takes_value(text);
        let next = rest.as_slice().first().and_then(|n| n.to_str());
        match (long, next) {
            (Some(long), Some(value)) if looks_negative(value) && !is_flag(value) => {
                glued.push(format!("{long}={value}").into());
                rest.next();
            }
            _ => glued.push(arg),
        }
    }
    glued
}

/// Clap's several lines folded into one: the error, then its tip if it has one.
fn usage_line(name: &str, error: &clap::Error) -> String {
    let text = error.render().to_string();
    // The message runs until the first blank line (its indented lines list, e.g., the
    // missing arguments); a tip may follow later.
    let message: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
        .collect();
    let message = message.join(" ");
    let message = message.trim_start_matches("error: ");
    let tip = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("tip: "))
        .map(|tip| format!(" ({tip})"))
        .unwrap_or_default();
    format!("{name}: {message}{tip} (see {name} --help)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    /// A command set up as every oscil binary is.
    #[derive(Debug, Parser)]
    #[command(
        name = "demo",
        allow_negative_numbers = true,
        args_override_self = true
    )]
    struct Demo {
        #[arg(long, value_parser = crate::units::parse_bytes, value_name = placeholder::BYTES)]
        size: Option<u64>,
        #[arg(long)]
        fast: Option<String>,
    }

    fn usage(args: &[&str]) -> String {
        match parse_from::<Demo, _>(std::iter::once("demo").chain(args.iter().copied())) {
            Err(NotParsed::Usage(line)) => line,
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn usage_errors_are_one_line_with_the_tip() {
        let line = usage(&["--fats", "1"]);
        assert!(!line.contains('\n'), "{line}");
        assert!(
            line.starts_with("demo: unexpected argument '--fats'"),
            "{line}"
        );
        assert!(line.contains("--fast"), "{line}");
        assert!(line.ends_with("(see demo --help)"), "{line}");
    }

    #[test]
    fn negative_numbers_are_values_and_repeats_take_the_last() {
        let line = usage(&["--size", "-5"]);
        assert!(line.contains("invalid value '-5'"), "{line}");
        let parsed: Demo = parse_from(["demo", "--size", "1k", "--size", "2k"]).unwrap();
        assert_eq!(parsed.size, Some(2048));
    }

    #[test]
    fn json_is_asked_alone_or_in_a_cluster() {
        #[derive(Debug, Parser)]
        #[command(name = "j")]
        struct WithJson {
            #[arg(long, short = 'J')]
            json: bool,
            #[arg(short = 'q')]
            quiet: bool,
            #[arg(long)]
            label: Option<String>,
        }
        let asks = |args: &[&str]| {
            let args: Vec<OsString> = args.iter().map(OsString::from).collect();
            asks_for_json(&WithJson::command(), &args)
        };
        assert!(asks(&["j", "-J", "-t", "5"]));
        assert!(asks(&["j", "-qJ"]));
        assert!(asks(&["j", "--json"]));
        assert!(!asks(&["j", "-q"]));
        assert!(!asks(&["j", "--", "-J"]));
        assert!(!asks(&["j", "--label", "JSON-run"]));
        assert!(!asks_for_json(
            &Demo::command(),
            &["demo".into(), "-J".into()]
        ));
    }

    #[test]
    fn negative_values_are_values_not_flags() {
        let parsed: Demo = parse_from(["demo", "--fast", "-5s"]).unwrap();
        assert_eq!(parsed.fast.as_deref(), Some("-5s"));
        let line = usage(&["--size", "-5k"]);
        assert!(
            line.contains("no minus sign: a size cannot be negative"),
            "{line}"
        );
        let line = usage(&["--fast", "-x"]);
        assert!(line.contains("'-x'"), "{line}");
    }

    #[test]
    fn only_a_zero_lowat_is_warned_about() {
        let warnings = start_warnings("p", Some(0), None);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("p: warning: --notsent-lowat 0 "));
        assert!(warnings[0].ends_with("net.ipv4.tcp_notsent_lowat sysctl"));
        assert!(start_warnings("p", Some(1), None).is_empty());
        assert!(start_warnings("p", None, None).is_empty());
    }

    #[test]
    fn help_is_shown_not_an_error() {
        assert!(matches!(
            parse_from::<Demo, _>(["demo", "--help"]),
            Err(NotParsed::Shown(_))
        ));
    }
}

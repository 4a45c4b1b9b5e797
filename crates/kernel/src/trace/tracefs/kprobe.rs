//! Entry and return probes of oscil's own on kernel functions (kprobe events): defined in
//! tracefs's `kprobe_events` under a group only their owner uses, enabled only in its own
//! instance (they then appear in every instance, disabled), and removed when dropped. A
//! killed owner's group is removed by the next start ([`remove_leftover_probes`]).
//! `kprobe_events` is appended to, never truncated: truncating it would remove every other
//! tool's probes too.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::Tracepoint;

/// The events of one function: `<group>/<function>_entry` and `<group>/<function>_return`.
pub const ENTRY: &str = "_entry";
pub const RETURN: &str = "_return";

/// Why a function gets no probes.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The kernel was built without kprobe events (`CONFIG_KPROBE_EVENTS`).
    #[error("the kernel has no kprobe events (no {0})")]
    NoKprobeEvents(PathBuf),
    /// `available_filter_functions` does not list it: inlined, renamed, or not in this
    /// kernel.
    #[error("{function} is not in this kernel's available_filter_functions (inlined or absent)")]
    NoFunction { function: String },
    /// The kernel refused the definition (its words are in tracefs's `error_log`).
    #[error("{function}: the kernel refused its kprobe ({source})")]
    Refused { function: String, source: io::Error },
}

/// Entry and return probes on some functions, removed when dropped (after the instance
/// that enabled them: the kernel keeps an enabled probe).
#[derive(Debug)]
pub struct FunctionProbes {
    kprobe_events: PathBuf,
    group: String,
    /// Each function probed, as asked, with its events' base name.
    functions: Vec<(String, String)>,
}

impl FunctionProbes {
    /// Probes each of `functions` that `root`'s kernel can probe, under `group` (letters,
    /// digits and `_`; the owner's tag); the errors say why the others are not. An entry
    /// probe records the function's first argument as `sk` (every function asked for here
    /// takes the socket first).
    pub fn create(
        root: &Path,
        group: &str,
        functions: &[&str],
    ) -> Result<(FunctionProbes, Vec<ProbeError>), ProbeError> {
        let kprobe_events = root.join("kprobe_events");
        if !kprobe_events.is_file() {
            return Err(ProbeError::NoKprobeEvents(kprobe_events));
        }
        // Unreadable (lockdown) or absent (no dynamic ftrace): each probe is tried anyway.
        let listed = fs::read_to_string(root.join("available_filter_functions")).ok();
        let mut probes = FunctionProbes {
            kprobe_events,
            group: group.to_owned(),
            functions: Vec::new(),
        };
        let mut refused = Vec::new();
        for &function in functions {
            let symbol = match &listed {
                Some(text) => match symbol_of(text, function) {
                    Some(symbol) => symbol,
                    None => {
                        refused.push(ProbeError::NoFunction {
                            function: function.to_owned(),
                        });
                        continue;
                    }
                },
                None => function.to_owned(),
            };
            match probes.define(function, &symbol) {
                Ok(()) => probes
                    .functions
                    .push((function.to_owned(), function.to_owned())),
                Err(source) => refused.push(ProbeError::Refused {
                    function: function.to_owned(),
                    source,
                }),
            }
        }
        Ok((probes, refused))
    }

    fn define(&self, event: &str, symbol: &str) -> io::Result<()> {
        let group = &self.group;
        append(
            &self.kprobe_events,
            &format!("p:{group}/{event}{ENTRY} {symbol} sk=$arg1:x64"),
        )?;
        let ret = append(
            &self.kprobe_events,
            &format!("r:{group}/{event}{RETURN} {symbol}"),
        );
        if ret.is_err() {
            let _ = append(&self.kprobe_events, &format!("-:{group}/{event}{ENTRY}"));
        }
        ret
    }

    /// The functions probed, as asked.
    pub fn functions(&self) -> impl Iterator<Item = &str> {
        self.functions.iter().map(|(f, _)| f.as_str())
    }

    /// The events to enable in an instance: each function's entry and return.
    pub fn events(&self) -> Vec<Tracepoint> {
        self.functions
            .iter()
            .flat_map(|(_, event)| [ENTRY, RETURN].map(|end| self.event_name(event, end)))
            .map(|name| Tracepoint { name, filter: None })
            .collect()
    }

    fn event_name(&self, event: &str, end: &str) -> String {
        format!("{}/{event}{end}", self.group)
    }

    /// Which function and end an event of this group is (`tcp_collapse`, true at entry).
    pub fn which(&self, event_name: &str) -> Option<(&str, bool)> {
        let rest = event_name.strip_prefix(&self.group)?.strip_prefix('/')?;
        self.functions.iter().find_map(|(function, event)| {
            let end = rest.strip_prefix(event.as_str())?;
            match end {
                ENTRY => Some((function.as_str(), true)),
                RETURN => Some((function.as_str(), false)),
                _ => None,
            }
        })
    }
}

impl Drop for FunctionProbes {
    fn drop(&mut self) {
        for (_, event) in &self.functions {
            for end in [ENTRY, RETURN] {
                let name = self.event_name(event, end);
                let _ = append(&self.kprobe_events, &format!("-:{name}"));
            }
        }
    }
}

/// Appends one definition (or `-:` removal) to `kprobe_events`.
fn append(path: &Path, line: &str) -> io::Result<()> {
    let mut file = OpenOptions::new().append(true).open(path)?;
    file.write_all(format!("{line}\n").as_bytes())
}

/// The symbol `available_filter_functions` lists for `function`: itself, or a copy the
/// compiler made of it (`tcp_collapse.isra.0`, `.constprop.0`).
fn symbol_of(listed: &str, function: &str) -> Option<String> {
    let mut copy = None;
    for line in listed.lines() {
        let symbol = line.split_whitespace().next().unwrap_or_default();
        if symbol == function {
            return Some(symbol.to_owned());
        }
        if copy.is_none()
            && symbol
                .strip_prefix(function)
                .is_some_and(|rest| rest.starts_with('.'))
        {
            copy = Some(symbol.to_owned());
        }
    }
    copy
}

/// Removes the probes of every group under `root` that `is_leftover` says a process that
/// has ended left behind (killed before it could remove them), disabling them in every
/// instance first (the kernel keeps an enabled probe); returns the events removed.
pub fn remove_leftover_probes(
    root: &Path,
    is_leftover: impl Fn(&str) -> bool,
) -> io::Result<Vec<String>> {
    let kprobe_events = root.join("kprobe_events");
    let text = match fs::read_to_string(&kprobe_events) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut removed = Vec::new();
    for name in text.lines().filter_map(event_of_definition) {
        let group = name.split('/').next().unwrap_or_default();
        if !is_leftover(group) {
            continue;
        }
        for instance in instances(root) {
            let _ = fs::write(instance.join("events").join(name).join("enable"), "0");
        }
        if append(&kprobe_events, &format!("-:{name}")).is_ok() {
            removed.push(name.to_owned());
        }
    }
    Ok(removed)
}

/// `p:group/event symbol args` (or `r:`, `p2:`...) → `group/event`.
fn event_of_definition(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once(':')?;
    rest.split_whitespace().next()
}

/// The root and every instance under it: where an event may be enabled.
fn instances(root: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![root.to_path_buf()];
    if let Ok(entries) = fs::read_dir(root.join("instances")) {
        dirs.extend(entries.filter_map(|e| Some(e.ok()?.path())));
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_or_a_copy_the_compiler_made_of_it_is_found() {
        let listed = "tcp_collapse_ofo_queue\ntcp_collapse.isra.0\ntcp_prune_queue [tcp]\n";
        assert_eq!(
            symbol_of(listed, "tcp_collapse").as_deref(),
            Some("tcp_collapse.isra.0")
        );
        assert_eq!(
            symbol_of(listed, "tcp_prune_queue").as_deref(),
            Some("tcp_prune_queue")
        );
        assert_eq!(symbol_of(listed, "tcp_prune_ofo_queue"), None);
        assert_eq!(
            symbol_of("tcp_collapse_ofo_queue\n", "tcp_collapse"),
            None,
            "another function that starts alike"
        );
    }

    /// A stand-in tracefs: a regular `kprobe_events` file, as the kernel's takes lines.
    fn stand_in() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        fs::write(root.path().join("kprobe_events"), "").unwrap();
        fs::write(
            root.path().join("available_filter_functions"),
            "tcp_prune_queue\ntcp_collapse.isra.0\n",
        )
        .unwrap();
        root
    }

    #[test]
    fn probes_are_defined_under_the_group_named_by_event_and_removed_on_drop() {
        let root = stand_in();
        let functions = ["tcp_collapse", "tcp_prune_queue", "tcp_prune_ofo_queue"];
        let (probes, refused) =
            FunctionProbes::create(root.path(), "oscil_t_1", &functions).unwrap();
        assert_eq!(
            probes.functions().collect::<Vec<_>>(),
            ["tcp_collapse", "tcp_prune_queue"]
        );
        assert_eq!(refused.len(), 1);
        assert!(refused[0]
            .to_string()
            .starts_with("tcp_prune_ofo_queue is not in"));
        let written = fs::read_to_string(root.path().join("kprobe_events")).unwrap();
        assert!(written.starts_with(
            "p:oscil_t_1/tcp_collapse_entry tcp_collapse.isra.0 sk=$arg1:x64\nr:oscil_t_1/tcp_collapse_return tcp_collapse.isra.0\n"
        ), "{written}");
        let events: Vec<String> = probes.events().into_iter().map(|e| e.name).collect();
        assert_eq!(events[1], "oscil_t_1/tcp_collapse_return");
        assert_eq!(
            probes.which("oscil_t_1/tcp_prune_queue_entry"),
            Some(("tcp_prune_queue", true))
        );
        assert_eq!(
            probes.which("oscil_t_1/tcp_collapse_return"),
            Some(("tcp_collapse", false))
        );
        assert_eq!(probes.which("other/tcp_collapse_return"), None);
        drop(probes);
        let written = fs::read_to_string(root.path().join("kprobe_events")).unwrap();
        assert!(
            written.ends_with(
                "-:oscil_t_1/tcp_prune_queue_entry\n-:oscil_t_1/tcp_prune_queue_return\n"
            ),
            "{written}"
        );
    }

    #[test]
    fn without_kprobe_events_nothing_is_probed_and_the_error_says_so() {
        let root = tempfile::tempdir().unwrap();
        let err = FunctionProbes::create(root.path(), "g", &["tcp_collapse"]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("the kernel has no kprobe events (no "),
            "{err}"
        );
    }

    #[test]
    fn only_the_groups_said_to_be_left_over_are_removed() {
        let root = stand_in();
        fs::write(
            root.path().join("kprobe_events"),
            "p:oscil_dead/tcp_collapse_entry tcp_collapse sk=di\nr:oscil_dead/tcp_collapse_return tcp_collapse\np:perf/x y\n",
        )
        .unwrap();
        let removed = remove_leftover_probes(root.path(), |g| g == "oscil_dead").unwrap();
        assert_eq!(
            removed,
            [
                "oscil_dead/tcp_collapse_entry",
                "oscil_dead/tcp_collapse_return"
            ]
        );
        assert_eq!(event_of_definition("r2:g/e f"), Some("g/e"));
    }
}

//! What a lab killed before it could clean up left behind: its namespaces, the processes
//! in them (and the link joining them) and its private directory holding the campaign key.
//! Each is named after its owner (`oscil_lab_<pidns>_<pid>_<start>_...`, the tag tracefs
//! instances carry, `oscil_kernel::trace::tracefs::Owner`), so a starting lab removes those whose
//! owner has ended, and never another live lab's.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use oscil_kernel::trace::tracefs::Owner;

use crate::remote::host::Host;
use crate::sys;

const PROGRAM: &str = "lab";
/// Where `ip netns add` names namespaces.
const NETNS_DIR: &str = "/run/netns";
/// What follows the tag in the name of the lab's private directory.
pub const KEY_DIR_KIND: &str = "key_";

/// This lab's tag, what every name of a thing it makes starts with. Without `/proc` (where
/// nothing would work anyway) a tag of PID namespace 0, which no later lab takes as ended.
pub fn tag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| match Owner::this_process(PROGRAM) {
        Ok(owner) => owner.tag(),
        Err(_) => format!("oscil_{PROGRAM}_0_{}_0", std::process::id()),
    })
}

/// What [`remove`] removed.
#[derive(Debug, Default)]
pub struct Removed {
    pub namespaces: Vec<String>,
    pub processes: usize,
    pub directories: Vec<PathBuf>,
}

impl Removed {
    /// One line, or none when there was nothing.
    pub fn line(&self) -> Option<String> {
        if self.namespaces.is_empty() && self.processes == 0 && self.directories.is_empty() {
            return None;
        }
        Some(format!(
            "oscil-lab: removed what a lab no longer running left: {} namespace(s) ({}), {} process(es), {} private directory(ies) with its key",
            self.namespaces.len(),
            self.namespaces.join(", "),
            self.processes,
            self.directories.len()
        ))
    }
}

/// Removes every namespace, process and key directory of labs that have ended.
pub fn remove() -> Removed {
    let mut removed = Removed::default();
    for name in ended_names(Path::new(NETNS_DIR)) {
        removed.processes += kill_users_of(&name);
        if Host::Local.run(&["ip", "netns", "del", &name]).is_ok() {
            removed.namespaces.push(name);
        }
    }
    let tmp = std::env::temp_dir();
    for name in ended_names(&tmp) {
        let Some((_, kind)) = Owner::of_tagged(&name, PROGRAM) else {
            continue;
        };
        let path = tmp.join(&name);
        if kind.starts_with(KEY_DIR_KIND)
            && is_own_dir(&path)
            && std::fs::remove_dir_all(&path).is_ok()
        {
            removed.directories.push(path);
        }
    }
    removed
}

/// The names in `dir` of things a lab that has ended made, in name order.
fn ended_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| {
            Owner::of_tagged(name, PROGRAM)
                .is_some_and(|(owner, _)| owner.has_ended().unwrap_or(false))
        })
        .collect();
    names.sort();
    names
}

/// A real directory (not a link) of this process's user: what the lab made, never one
/// another user planted under a lab's name.
fn is_own_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.file_type().is_dir() && m.uid() == sys::effective_uid())
}

/// SIGKILLs the processes inside namespace `name` and those outside it whose command line
/// names it (the link joining two namespaces); how many.
fn kill_users_of(name: &str) -> usize {
    let inside = Host::Local
        .run(&["ip", "netns", "pids", name])
        .unwrap_or_default();
    let mut pids: Vec<u32> = inside
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    pids.extend(naming(name));
    pids.sort_unstable();
    pids.dedup();
    pids.into_iter()
        .filter(|&pid| sys::kill(pid, sys::SIGKILL).is_ok())
        .count()
}

/// Processes with `word` as one of their arguments.
fn naming(word: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|argv| argv.split(|&b| b == 0).any(|arg| arg == word.as_bytes()))
        })
        .collect()
}

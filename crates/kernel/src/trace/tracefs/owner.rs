//! Whose a tracefs instance is, in its name, so that one a killed process left behind can
//! be told from one in use, and removed: `oscil_<program>_<pidns>_<pid>_<start>_<n>`, the
//! owner's PID namespace, PID and start time (clock ticks after boot, `/proc/PID/stat`),
//! which no other process has, alive or later. Only letters, digits and `_`, so the same
//! tag ([`Owner::tag`]) can name a kprobe event group (`p:<tag>/<event> ...`): dynamic
//! events made under an owner's tag are its leftovers too, and join [`remove_leftovers`]
//! beside the instances.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A process that owns tracefs instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    program: String,
    pid_ns: u64,
    pid: u32,
    start_ticks: u64,
}

const PREFIX: &str = "oscil_";

/// This process's PID namespace (the inode `/proc/self/ns/pid` names).
fn this_pid_ns() -> io::Result<u64> {
    Ok(fs::metadata("/proc/self/ns/pid")?.ino())
}

/// When process `pid` started, in clock ticks after boot (`/proc/PID/stat`, field 22);
/// `None` when there is no such process.
fn start_ticks(pid: u32) -> io::Result<Option<u64>> {
    let stat = match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    // After the command name, which may hold anything but ends at the last ')', field 3 on.
    let fields = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks = fields
        .split_whitespace()
        .nth(19)
        .and_then(|t| t.parse().ok());
    ticks
        .map(Some)
        .ok_or_else(|| io::Error::other(format!("/proc/{pid}/stat has no start time")))
}

impl Owner {
    /// This process, as `program` (a short name of letters: `daemon`, `reader`).
    pub fn this_process(program: &str) -> io::Result<Owner> {
        let pid = std::process::id();
        Ok(Owner {
            program: program.to_owned(),
            pid_ns: this_pid_ns()?,
            pid,
            start_ticks: start_ticks(pid)?.ok_or_else(|| io::Error::other("no /proc/self"))?,
        })
    }

    /// `oscil_<program>_<pidns>_<pid>_<start>`: what every name of this owner's starts with.
    pub fn tag(&self) -> String {
        format!(
            "{PREFIX}{}_{}_{}_{}",
            self.program, self.pid_ns, self.pid, self.start_ticks
        )
    }

    /// The name of this owner's instance number `n`.
    pub fn instance_name(&self, n: u64) -> String {
        format!("{}_{n}", self.tag())
    }

    /// The owner `name` says, when it is an instance of `program`'s.
    pub fn of_name(name: &str, program: &str) -> Option<Owner> {
        let (owner, n) = Owner::of_tagged(name, program)?;
        n.parse::<u64>().ok()?;
        Some(owner)
    }

    /// The owner a name starting with its [`tag`](Owner::tag) and `_` says, with the rest
    /// of the name: how other things a process makes (a lab's namespaces and directories)
    /// carry their owner.
    pub fn of_tagged<'a>(name: &'a str, program: &str) -> Option<(Owner, &'a str)> {
        let rest = name.strip_prefix(PREFIX)?.strip_prefix(program)?;
        let mut fields = rest.strip_prefix('_')?.splitn(4, '_');
        let mut number = || fields.next()?.parse::<u64>().ok();
        let (pid_ns, pid, start_ticks) = (number()?, number()?, number()?);
        let rest = fields.next()?;
        Some((
            Owner {
                program: program.to_owned(),
                pid_ns,
                pid: u32::try_from(pid).ok()?,
                start_ticks,
            },
            rest,
        ))
    }

    /// True when this owner is known to have ended (see [`Owner::is_gone`]).
    pub fn has_ended(&self) -> io::Result<bool> {
        self.is_gone(this_pid_ns()?)
    }

    /// True when this owner is known to have ended: a process of this PID namespace that
    /// is gone, or whose PID another process now has. One of another namespace cannot be
    /// told, and is taken as alive.
    fn is_gone(&self, here_pid_ns: u64) -> io::Result<bool> {
        if self.pid_ns != here_pid_ns {
            return Ok(false);
        }
        Ok(start_ticks(self.pid)? != Some(self.start_ticks))
    }
}

/// Removes the instances under `root` that a process of `program`'s, now ended, left
/// behind (killed before it could); returns their names. An instance whose owner lives,
/// or cannot be told, stays, and so does one still in use (the kernel refuses to remove
/// an instance with a file open in it).
pub fn remove_leftovers(root: &Path, program: &str) -> io::Result<Vec<String>> {
    let instances = root.join("instances");
    let entries = match fs::read_dir(&instances) {
        Ok(entries) => entries,
        // No tracefs, or none this process may use: nothing it could have left.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
            ) =>
        {
            return Ok(Vec::new())
        }
        Err(e) => return Err(e),
    };
    let here = this_pid_ns()?;
    let mut removed = Vec::new();
    for entry in entries {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(owner) = Owner::of_name(&name, program) else {
            continue;
        };
        if owner.is_gone(here)? && fs::remove_dir(instances.join(&name)).is_ok() {
            removed.push(name);
        }
    }
    removed.sort();
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_says_its_owner_and_only_names_of_the_program_are_read() {
        let me = Owner::this_process("daemon").unwrap();
        let name = me.instance_name(3);
        assert!(name.starts_with(&format!(
            "oscil_daemon_{}_{}_",
            me.pid_ns,
            std::process::id()
        )));
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{name}"
        );
        assert_eq!(Owner::of_name(&name, "daemon"), Some(me.clone()));
        let snd = format!("{}_snd", me.tag());
        assert_eq!(Owner::of_tagged(&snd, "daemon"), Some((me.clone(), "snd")));
        assert_eq!(Owner::of_tagged(&snd, "lab"), None);
        assert!(!me.has_ended().unwrap());
        for other in [
            "oscil-daemon-1234-0",
            "oscil_reader_1_2_3_4",
            "oscil_daemon_1_2_3",
            "oscil_daemon_1_2_3_4_5",
            "oscil_daemon_x_2_3_4",
            "oscil_daemon_1_2_3_x",
            "netem_daemon_1_2_3_4",
        ] {
            assert_eq!(Owner::of_name(other, "daemon"), None, "{other}");
        }
    }

    #[test]
    fn only_instances_of_ended_owners_of_this_namespace_are_removed() {
        let root = tempfile::tempdir().unwrap();
        let instances = root.path().join("instances");
        let me = Owner::this_process("daemon").unwrap();
        // PID 4194304 is past the kernel's pid_max limit: no process has it.
        let gone = Owner {
            pid: 4_194_304,
            ..me.clone()
        };
        let reborn = Owner {
            start_ticks: me.start_ticks + 1,
            ..me.clone()
        };
        let elsewhere = Owner {
            pid_ns: me.pid_ns + 1,
            ..gone.clone()
        };
        let names = [
            gone.instance_name(0),
            gone.instance_name(1),
            reborn.instance_name(0),
            me.instance_name(0),
            elsewhere.instance_name(0),
            "oscil_reader_1_4194304_1_0".to_string(),
            "someone-else".to_string(),
        ];
        for name in &names {
            fs::create_dir_all(instances.join(name)).unwrap();
        }
        let removed = remove_leftovers(root.path(), "daemon").unwrap();
        let mut expected = vec![names[0].clone(), names[1].clone(), names[2].clone()];
        expected.sort();
        assert_eq!(removed, expected);
        for kept in &names[3..] {
            assert!(instances.join(kept).is_dir(), "{kept}");
        }
        let none = tempfile::tempdir().unwrap();
        assert_eq!(
            remove_leftovers(none.path(), "daemon").unwrap(),
            Vec::<String>::new()
        );
    }
}

//! `ansible-inventory -i SOURCE --list`, run as Ansible would run it, bounded in time and
//! in what it may print; its JSON read like any other.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::model::{InventoryError, InventoryHost, Plugins, MAX_INVENTORY_BYTES, STATIC_PLUGINS};
use super::tree;

/// What to install for inventories only Ansible reads.
pub const WANTED: &str =
    "ansible-inventory reads these (Debian's ansible-core), and it is not on the PATH";
/// Ansible takes a second or two; a cloud plugin listing many hosts, longer.
const TIME: Duration = Duration::from_secs(120);
/// Enough of its standard error for the reason it gives.
const STDERR_BYTES: u64 = 64 << 10;

/// `ansible-inventory` on the PATH, if there.
pub fn find() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("ansible-inventory"))
        .find(|p| p.is_file())
}

/// Variables plugins: only the one that reads `group_vars/` and `host_vars/` files, whatever
/// an `ansible.cfg` enables.
const STATIC_VARS_PLUGINS: &str = "host_group_vars";

/// The hosts `program` lists for `source`, with the inventory plugins `plugins` allows.
pub fn list(
    program: &Path,
    source: &Path,
    plugins: Plugins,
) -> Result<Vec<InventoryHost>, InventoryError> {
    let failed = |why: String| InventoryError::Ansible(why);
    let mut command = Command::new(program);
    if plugins == Plugins::StaticOnly {
        command
            .env("ANSIBLE_INVENTORY_ENABLED", STATIC_PLUGINS)
            .env("ANSIBLE_VARS_ENABLED", STATIC_VARS_PLUGINS);
    }
    let mut child = command
        .arg("-i")
        .arg(source)
        .arg("--list")
        // An inventory no plugin can read is an error, not an empty inventory.
        .env("ANSIBLE_INVENTORY_UNPARSED_FAILED", "true")
        .env("ANSIBLE_NOCOLOR", "true")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| failed(format!("cannot run {}: {e}", program.display())))?;
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || read_up_to(stdout, MAX_INVENTORY_BYTES));
    let err = std::thread::spawn(move || read_up_to(stderr, STDERR_BYTES));
    let deadline = Instant::now() + TIME;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let out = out.join().expect("reader thread");
    let err = String::from_utf8_lossy(&err.join().expect("reader thread")).into_owned();
    let Some(status) = status else {
        return Err(failed(format!(
            "stopped after {}s, its time limit",
            TIME.as_secs()
        )));
    };
    if !status.success() {
        return Err(failed(reason(&err).unwrap_or_else(|| status.to_string())));
    }
    if out.len() as u64 > MAX_INVENTORY_BYTES {
        return Err(failed(format!(
            "printed more than {MAX_INVENTORY_BYTES} bytes"
        )));
    }
    let text = String::from_utf8(out).map_err(|_| failed("printed what is not UTF-8".into()))?;
    tree::json(&text)?.resolve()
}

fn read_up_to(from: impl Read, limit: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    let _ = from.take(limit + 1).read_to_end(&mut bytes);
    bytes
}

/// The reason in Ansible's words: its first plugin's "Failed to parse ... plugin: WHY"
/// (Ansible wraps its warnings at 80 columns; they are joined again), else its `ERROR!`.
fn reason(stderr: &str) -> Option<String> {
    let text = stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    let why = text
        .split("[WARNING]:")
        .find_map(|w| w.trim().strip_prefix("* Failed to parse "))
        .and_then(|w| w.split_once(" plugin: "))
        .map(|(_, why)| why.split(" ERROR! ").next().unwrap_or(why))
        .or_else(|| text.split("ERROR! ").nth(1))?;
    let why = why.trim();
    Some(match why.char_indices().nth(300) {
        Some((i, _)) => format!("{}...", &why[..i]),
        None => why.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_is_ansibles_own_first_line() {
        let stderr = "[WARNING]:  * Failed to parse /x/bad.ini with ini plugin:\n\
            /x/bad.ini:4: Expected key=value host variable assignment, got:\nansible_host\n\
            [WARNING]: Unable to parse /x/bad.ini as an inventory source\n\
            ERROR! No inventory was parsed, please check your configuration and options.\n";
        assert_eq!(
            reason(stderr).unwrap(),
            "/x/bad.ini:4: Expected key=value host variable assignment, got: ansible_host"
        );
        assert_eq!(
            reason("ERROR! the field 'hosts' is required\n").unwrap(),
            "the field 'hosts' is required"
        );
        assert_eq!(reason(""), None);
    }
}

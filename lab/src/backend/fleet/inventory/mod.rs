//! The hosts of a fleet, from the inventory operators already keep. Ansible's own view
//! first: the JSON `ansible-inventory --list` prints (a file, or `-` for standard input),
//! or, where `ansible-inventory` is on the PATH, that command run on the inventory, so
//! `group_vars/`, `host_vars/`, ranges, plugins and Ansible's precedence all apply.
//! Without it, a small reader of Ansible's INI (`ini`) and YAML (`tree`, through a YAML
//! crate) inventories. Every reader feeds one [`model`], which expands children once each,
//! refuses cycles and nesting past a bound, and checks each host's name, address and user;
//! a file is read only when it is regular and at most [`MAX_INVENTORY_BYTES`].

mod ansible;
mod ini;
mod model;
mod tree;

use std::io::Read;
use std::path::Path;

use oscil_rundir::safe_fs::{self, SafeFsError};

pub use model::{InventoryError, InventoryHost, Plugins, MAX_INVENTORY_BYTES};

/// Which reader gave the hosts, said when the inventory is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// `ansible-inventory -i FILE --list`, run by the lab.
    Ansible,
    /// JSON as `ansible-inventory --list` prints it.
    Json,
    /// The lab's own INI or YAML reader.
    BuiltIn,
}

impl Reader {
    pub fn text(self) -> &'static str {
        match self {
            Reader::Ansible => "through ansible-inventory",
            Reader::Json => "as ansible-inventory JSON",
            Reader::BuiltIn => {
                "by the lab's own INI/YAML reader (ansible-inventory is not on the PATH)"
            }
        }
    }
}

/// Whether `source` names standard input (`-`).
fn is_stdin(source: &Path) -> bool {
    source == Path::new("-")
}

/// `source` in words: a path, or standard input.
pub fn source_name(source: &Path) -> String {
    match is_stdin(source) {
        true => "standard input".into(),
        false => source.display().to_string(),
    }
}

/// The hosts of the inventory at `source` (`-`: standard input), and which reader read it;
/// `ansible-inventory` runs only the inventory plugins `plugins` allows.
pub fn load(
    source: &Path,
    plugins: Plugins,
) -> Result<(Vec<InventoryHost>, Reader), InventoryError> {
    if is_stdin(source) {
        let mut bytes = Vec::new();
        std::io::stdin()
            .take(MAX_INVENTORY_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| InventoryError::File(format!("standard input: {e}")))?;
        return from_bytes(bytes).and_then(|text| with_reader(&text));
    }
    // A link is followed once, here; what it names must then be a regular file.
    let path = std::fs::canonicalize(source).map_err(|e| InventoryError::File(e.to_string()))?;
    let program = ansible::find();
    if path.is_dir() {
        let Some(program) = program else {
            return Err(InventoryError::File(format!(
                "a directory: {}",
                ansible::WANTED
            )));
        };
        return Ok((ansible::list(&program, &path, plugins)?, Reader::Ansible));
    }
    let bytes = safe_fs::read_bounded(&path, MAX_INVENTORY_BYTES).map_err(file_error)?;
    let text = from_bytes(bytes)?;
    if plugins == Plugins::StaticOnly {
        if let Some(name) = named_plugin(&text) {
            return Err(InventoryError::Plugin(name));
        }
    }
    match program {
        Some(program) if !is_json(&text) => {
            Ok((ansible::list(&program, &path, plugins)?, Reader::Ansible))
        }
        _ => with_reader(&text),
    }
}

fn with_reader(text: &str) -> Result<(Vec<InventoryHost>, Reader), InventoryError> {
    let reader = if is_json(text) {
        Reader::Json
    } else {
        Reader::BuiltIn
    };
    Ok((parse(text)?, reader))
}

fn file_error(e: SafeFsError) -> InventoryError {
    InventoryError::File(match e {
        SafeFsError::NotRegular { kind, .. } => format!("not a regular file but a {kind}; refused"),
        SafeFsError::TooLarge { limit_bytes, .. } => {
            format!("larger than {limit_bytes} bytes; refused")
        }
        SafeFsError::Io { source, .. } => source.to_string(),
        other => other.to_string(),
    })
}

fn from_bytes(bytes: Vec<u8>) -> Result<String, InventoryError> {
    if bytes.len() as u64 > MAX_INVENTORY_BYTES {
        return Err(InventoryError::File(format!(
            "larger than {MAX_INVENTORY_BYTES} bytes; refused"
        )));
    }
    String::from_utf8(bytes).map_err(|e| InventoryError::File(format!("not UTF-8 text: {e}")))
}

/// The plugin a YAML inventory names (`plugin: NAME` at the top level), which Ansible's
/// `auto` plugin would load and run: said at once, in one line, rather than left to
/// Ansible's static readers to fail on.
fn named_plugin(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix("plugin:")?.trim();
        let value = value.split(" #").next().unwrap_or(value).trim();
        Some(
            value
                .trim_matches(|c| c == '"' || c == '\'')
                .chars()
                .take(100)
                .collect(),
        )
    })
}

fn is_json(text: &str) -> bool {
    text.trim_start().starts_with('{')
}

/// The hosts of an inventory's text: JSON (`ansible-inventory --list`), YAML or INI, told
/// apart by the first line that says something (YAML's is `key:` or `key: value`; INI's
/// `[group]`, `NAME`, `NAME:PORT` or `NAME key=value`). Hosts in name order.
pub fn parse(text: &str) -> Result<Vec<InventoryHost>, InventoryError> {
    if is_json(text) {
        return tree::json(text)?.resolve();
    }
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';') && *l != "---");
    let model = match first {
        None => return Err(InventoryError::Empty),
        Some(l) if !l.starts_with('[') && (l.ends_with(':') || l.contains(": ")) => {
            tree::yaml(text)?
        }
        Some(_) => ini::parse(text)?,
    };
    model.resolve()
}

#[cfg(test)]
mod tests;

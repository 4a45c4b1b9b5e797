//! The hosts of a fleet, read from the inventory people already keep: Ansible's YAML
//! (`all: hosts: NAME: {ansible_host, ansible_user, ansible_port}`, groups under
//! `children:`, `vars:`) or INI (`NAME ansible_host=… ansible_user=…`, `[group]`,
//! `[group:vars]`, `[group:children]`), plus `oscil_bin`, the host's directory of oscil
//! binaries. A small hand parser for that subset (no YAML anchors, lists or multi-line
//! strings), so every error names its line. And `--pairs`: which ordered pairs to measure.
//! Pure code: text in, hosts out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::host::check_ssh_target;

/// One host of the inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryHost {
    /// The inventory's name for it: names its pairs and their directories.
    pub name: String,
    /// `ansible_host`, else the name.
    pub address: String,
    /// `ansible_user`; `None`: ssh's own default.
    pub user: Option<String>,
    /// `ansible_port`; `None`: ssh's own default.
    pub port: Option<u16>,
    /// `oscil_bin`: where the oscil binaries are on it; `None`: `--remote-bin`, else PATH.
    pub bin_dir: Option<String>,
}

impl InventoryHost {
    /// `user@address`, as ssh takes it (the port goes as an ssh option).
    pub fn target(&self) -> String {
        match &self.user {
            Some(user) => format!("{user}@{}", self.address),
            None => self.address.clone(),
        }
    }
}

/// A line of the inventory that cannot be used, or an inventory without hosts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InventoryError {
    #[error("line {line}: {why}")]
    Line { line: usize, why: String },
    #[error("no hosts in the inventory")]
    Empty,
}

fn at(line: usize, why: impl Into<String>) -> InventoryError {
    InventoryError::Line {
        line,
        why: why.into(),
    }
}

/// Host variables as written, each with its line.
type Vars = BTreeMap<String, (String, usize)>;

/// Reads an inventory, YAML or INI (told apart by the first line that says something: INI
/// starts with `[group]` or `NAME key=value`, YAML with `key:`). Hosts in name order.
pub fn parse(text: &str) -> Result<Vec<InventoryHost>, InventoryError> {
    let first = text
        .lines()
        .map(|l| l.trim())
        .find(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';') && *l != "---");
    let hosts = match first {
        None => return Err(InventoryError::Empty),
        Some(l) if l.starts_with('[') || !l.contains(':') || l.contains('=') => parse_ini(text)?,
        Some(_) => parse_yaml(text)?,
    };
    if hosts.is_empty() {
        return Err(InventoryError::Empty);
    }
    let mut out = Vec::new();
    for (name, (vars, line)) in hosts {
        out.push(host_from_vars(&name, &vars, line)?);
    }
    Ok(out)
}

/// The names the lab gives directories to: letters, digits, `-_.`.
fn is_host_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

fn host_from_vars(name: &str, vars: &Vars, line: usize) -> Result<InventoryHost, InventoryError> {
    if !is_host_name(name) {
        return Err(at(
            line,
            format!("host name {name:?}: only letters, digits, '-', '_' and '.'"),
        ));
    }
    let get = |key: &str| vars.get(key).map(|(v, l)| (v.clone(), *l));
    let port = match get("ansible_port") {
        None => None,
        Some((v, l)) => Some(
            v.parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| at(l, format!("ansible_port {v:?} is not a port (1-65535)")))?,
        ),
    };
    let host = InventoryHost {
        name: name.to_owned(),
        address: get("ansible_host").map_or_else(|| name.to_owned(), |(v, _)| v),
        user: get("ansible_user").map(|(v, _)| v),
        port,
        bin_dir: get("oscil_bin").map(|(v, _)| v),
    };
    let target_line = get("ansible_host").map_or(line, |(_, l)| l);
    check_ssh_target(&host.target()).map_err(|why| at(target_line, format!("{name}: {why}")))?;
    if let Some((dir, l)) = get("oscil_bin") {
        if !dir.starts_with('/') || dir.chars().any(|c| c.is_control() || c == '\'') {
            return Err(at(l, format!("oscil_bin {dir:?} is not an absolute path")));
        }
    }
    Ok(host)
}

/// Adds `vars` to `host`'s (those it has stay: a host's own beat its groups').
fn merge(hosts: &mut BTreeMap<String, (Vars, usize)>, host: &str, line: usize, vars: &Vars) {
    let entry = hosts
        .entry(host.to_owned())
        .or_insert_with(|| (Vars::new(), line));
    for (k, v) in vars {
        entry.0.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

// ---- INI ----

/// `key=value` words after a host name (values may be quoted).
fn ini_vars(words: &str, line: usize) -> Result<Vars, InventoryError> {
    let mut vars = Vars::new();
    for word in split_words(words) {
        let (k, v) = word
            .split_once('=')
            .ok_or_else(|| at(line, format!("{word:?} is not key=value")))?;
        vars.insert(k.trim().to_owned(), (unquote(v.trim()).to_owned(), line));
    }
    Ok(vars)
}

/// Splits on white space outside quotes.
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    for c in text.chars() {
        match (quote, c) {
            (None, '"' | '\'') => {
                quote = Some(c);
                word.push(c)
            }
            (Some(q), c) if c == q => {
                quote = None;
                word.push(c)
            }
            (None, c) if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            _ => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

fn unquote(v: &str) -> &str {
    let quoted = v.len() >= 2
        && ((v.starts_with('"') && v.ends_with('"')) || (v.starts_with('\'') && v.ends_with('\'')));
    if quoted {
        &v[1..v.len() - 1]
    } else {
        v
    }
}

#[derive(Default)]
struct IniGroup {
    hosts: Vec<(String, usize)>,
    children: Vec<String>,
    vars: Vars,
}

fn parse_ini(text: &str) -> Result<BTreeMap<String, (Vars, usize)>, InventoryError> {
    let mut groups: BTreeMap<String, IniGroup> = BTreeMap::new();
    let mut hosts: BTreeMap<String, (Vars, usize)> = BTreeMap::new();
    let (mut group, mut kind) = ("ungrouped".to_owned(), "hosts");
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(section) = l.strip_prefix('[') {
            let section = section
                .strip_suffix(']')
                .ok_or_else(|| at(line, format!("{l:?}: a section is [group]")))?;
            let (name, k) = section.split_once(':').unwrap_or((section, "hosts"));
            if !["hosts", "vars", "children"].contains(&k) {
                return Err(at(
                    line,
                    format!("[{section}]: :vars or :children, not :{k}"),
                ));
            }
            (group, kind) = (name.trim().to_owned(), k);
            groups.entry(group.clone()).or_default();
            continue;
        }
        let entry = groups.entry(group.clone()).or_default();
        match kind {
            "vars" => {
                let vars = ini_vars(l, line)?;
                entry.vars.extend(vars);
            }
            "children" => entry.children.push(l.to_owned()),
            _ => {
                let (name, rest) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
                let vars = ini_vars(rest, line)?;
                merge(&mut hosts, name, line, &vars);
                entry.hosts.push((name.to_owned(), line));
            }
        }
    }
    // Group vars reach the group's hosts and its children's, nearest group first.
    // `all`'s vars come last: every other group is nearer its hosts.
    let names: Vec<String> = groups.keys().filter(|n| *n != "all").cloned().collect();
    for name in &names {
        for host in members(&groups, name, 0) {
            if let Some((_, line)) = hosts.get(&host).map(|(v, l)| (v.clone(), *l)) {
                merge(&mut hosts, &host, line, &groups[name].vars);
            }
        }
    }
    if let Some(all) = groups.get("all") {
        let every: Vec<String> = hosts.keys().cloned().collect();
        for host in every {
            merge(&mut hosts, &host, 0, &all.vars);
        }
    }
    Ok(hosts)
}

/// Every host of `group`, through its children (a cycle stops at depth 16).
fn members(groups: &BTreeMap<String, IniGroup>, group: &str, depth: usize) -> Vec<String> {
    let Some(g) = groups.get(group).filter(|_| depth < 16) else {
        return Vec::new();
    };
    let mut out: Vec<String> = g.hosts.iter().map(|(h, _)| h.clone()).collect();
    for child in &g.children {
        out.extend(members(groups, child, depth + 1));
    }
    out
}

// ---- YAML (the subset inventories use) ----

/// A YAML node: a mapping (keys in order, each with its line) or a scalar (empty: null).
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Map(Vec<(String, usize, Node)>),
    Scalar(String),
}

/// Lines that say something: (line number, indent, text without comment).
fn yaml_lines(text: &str) -> Result<Vec<(usize, usize, String)>, InventoryError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim() == "---" || raw.trim() == "..." {
            continue;
        }
        let body = strip_comment(raw);
        if body.trim().is_empty() {
            continue;
        }
        if body.starts_with('\t') || body.trim_start().starts_with('\t') {
            return Err(at(
                line,
                "a tab in the indentation (YAML indents with spaces)",
            ));
        }
        let indent = body.len() - body.trim_start().len();
        if body.trim_start().starts_with("- ") || body.trim() == "-" {
            return Err(at(
                line,
                "a list: an inventory's hosts are a mapping (NAME: {…})",
            ));
        }
        out.push((line, indent, body.trim().to_owned()));
    }
    Ok(out)
}

/// The text before a `#` that starts a comment (outside quotes, after a space).
fn strip_comment(raw: &str) -> String {
    let mut quote = None;
    let mut prev = ' ';
    for (i, c) in raw.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if prev.is_whitespace() => return raw[..i].trim_end().to_owned(),
            _ => {}
        }
        prev = c;
    }
    raw.trim_end().to_owned()
}

/// The block of lines from `*pos` indented exactly `indent`, as a mapping.
fn yaml_block(
    lines: &[(usize, usize, String)],
    pos: &mut usize,
    indent: usize,
) -> Result<Node, InventoryError> {
    let mut entries = Vec::new();
    while let Some((line, ind, text)) = lines.get(*pos).cloned() {
        if ind < indent {
            break;
        }
        if ind > indent {
            return Err(at(line, "indented deeper than the line above opens"));
        }
        let (key, value) =
            split_key(&text).ok_or_else(|| at(line, format!("{text:?} is not key: value")))?;
        *pos += 1;
        let node = if !value.is_empty() {
            yaml_value(value, line)?
        } else {
            match lines.get(*pos) {
                Some((_, deeper, _)) if *deeper > indent => yaml_block(lines, pos, *deeper)?,
                _ => Node::Scalar(String::new()),
            }
        };
        if entries.iter().any(|(k, _, _)| *k == key) {
            return Err(at(line, format!("{key:?} appears twice in one mapping")));
        }
        entries.push((key, line, node));
    }
    Ok(Node::Map(entries))
}

/// `key: value` (`key:` alone opens a block); keys may be quoted.
fn split_key(text: &str) -> Option<(String, &str)> {
    let (key, value) =
        if let Some(rest) = text.strip_prefix('"').or_else(|| text.strip_prefix('\'')) {
            let q = text.chars().next()?;
            let end = rest.find(q)?;
            let after = rest[end + 1..].trim_start().strip_prefix(':')?;
            (rest[..end].to_owned(), after)
        } else {
            let i = text
                .find(": ")
                .or_else(|| text.strip_suffix(':').map(|k| k.len()))?;
            (
                text[..i].trim().to_owned(),
                &text[(i + 1).min(text.len())..],
            )
        };
    (!key.is_empty()).then(|| (key, value.trim()))
}

/// A scalar, or a one-line flow mapping `{a: b, c: d}`.
fn yaml_value(value: &str, line: usize) -> Result<Node, InventoryError> {
    if let Some(inner) = value.strip_prefix('{') {
        let inner = inner
            .strip_suffix('}')
            .ok_or_else(|| at(line, "a { mapping } must close on its line"))?;
        let mut entries = Vec::new();
        for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) =
                split_key(part).ok_or_else(|| at(line, format!("{part:?} is not key: value")))?;
            entries.push((k, line, Node::Scalar(unquote(v).to_owned())));
        }
        return Ok(Node::Map(entries));
    }
    if value.starts_with('[')
        || value.starts_with('&')
        || value.starts_with('*')
        || value.starts_with('|')
        || value.starts_with('>')
    {
        return Err(at(
            line,
            format!("{value:?}: lists, anchors and block strings are not read here"),
        ));
    }
    let v = unquote(value);
    Ok(Node::Scalar(if v == "~" || v == "null" {
        String::new()
    } else {
        v.to_owned()
    }))
}

fn parse_yaml(text: &str) -> Result<BTreeMap<String, (Vars, usize)>, InventoryError> {
    let lines = yaml_lines(text)?;
    let mut pos = 0;
    let indent = lines.first().map_or(0, |l| l.1);
    let root = yaml_block(&lines, &mut pos, indent)?;
    if let Some((line, _, _)) = lines.get(pos) {
        return Err(at(*line, "indented less than the first line"));
    }
    let mut hosts = BTreeMap::new();
    let Node::Map(groups) = root else {
        unreachable!("a block is a mapping")
    };
    for (name, line, group) in &groups {
        yaml_group(name, *line, group, &Vars::new(), &mut hosts, 0)?;
    }
    Ok(hosts)
}

/// A group: its `hosts`, its `vars` (for its hosts and children), its `children` groups.
fn yaml_group(
    name: &str,
    line: usize,
    group: &Node,
    inherited: &Vars,
    hosts: &mut BTreeMap<String, (Vars, usize)>,
    depth: usize,
) -> Result<(), InventoryError> {
    let entries = match group {
        Node::Map(entries) => entries,
        Node::Scalar(s) if s.is_empty() => return Ok(()),
        Node::Scalar(_) => return Err(at(line, format!("group {name:?} is not a mapping"))),
    };
    if depth > 16 {
        return Err(at(line, "groups nested more than 16 deep"));
    }
    let mut vars = inherited.clone();
    if let Some((_, _, node)) = entries.iter().find(|(k, _, _)| k == "vars") {
        // Nearer groups' vars win over the ones they inherit.
        vars.extend(scalars(node, line)?);
    }
    for (key, line, node) in entries {
        match key.as_str() {
            "hosts" => {
                let Node::Map(list) = node else {
                    if matches!(node, Node::Scalar(s) if s.is_empty()) {
                        continue;
                    }
                    return Err(at(*line, "hosts: is a mapping of NAME: {ansible_host: …}"));
                };
                for (host, hline, host_vars) in list {
                    let own = match host_vars {
                        Node::Scalar(s) if s.is_empty() => Vars::new(),
                        other => scalars(other, *hline)?,
                    };
                    merge(hosts, host, *hline, &own);
                    merge(hosts, host, *hline, &vars);
                }
            }
            "children" => match node {
                Node::Map(children) => {
                    for (child, cline, body) in children {
                        yaml_group(child, *cline, body, &vars, hosts, depth + 1)?;
                    }
                }
                Node::Scalar(s) if s.is_empty() => {}
                Node::Scalar(_) => return Err(at(*line, "children: is a mapping of groups")),
            },
            "vars" => {}
            other => {
                return Err(at(
                    *line,
                    format!("{other:?} in group {name:?}: a group holds hosts, vars and children"),
                ))
            }
        }
    }
    Ok(())
}

/// A mapping of plain values (a host's or a group's variables).
fn scalars(node: &Node, line: usize) -> Result<Vars, InventoryError> {
    let Node::Map(entries) = node else {
        return Err(at(line, "expected a mapping of key: value"));
    };
    let mut vars = Vars::new();
    for (k, l, v) in entries {
        match v {
            Node::Scalar(s) => {
                vars.insert(k.clone(), (s.clone(), *l));
            }
            // Nested variables (dictionaries) mean nothing to the lab.
            Node::Map(_) => {}
        }
    }
    Ok(vars)
}

// ---- pairs ----

/// An ordered pair of inventory hosts: the sender runs oscil-daemon, the receiver
/// oscil-reader.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Pair {
    pub sender: String,
    pub receiver: String,
}

impl Pair {
    /// `a-to-b`: names the pair's directories.
    pub fn dir_name(&self) -> String {
        format!("{}-to-{}", self.sender, self.receiver)
    }
}

impl std::fmt::Display for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}>{}", self.sender, self.receiver)
    }
}

/// Why `--pairs` names no pairs this inventory can measure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PairsError {
    #[error("{name:?} is not in the inventory (it has: {has})")]
    NotInInventory { name: String, has: String },
    #[error("{0:?} is not SENDER>RECEIVER (or all, hub:NAME)")]
    NotPair(String),
    #[error("{0:?}: a host paired with itself")]
    WithItself(String),
    #[error("{0} is listed twice")]
    Twice(String),
    #[error("{0:?} names no pair (the inventory needs two hosts)")]
    None(String),
}

/// `--pairs`: `all` (every ordered pair), `hub:NAME` (NAME to and from each other host) or
/// `A>B,C>D`; every name must be in the inventory, no pair twice, no host with itself.
pub fn parse_pairs(text: &str, hosts: &[InventoryHost]) -> Result<Vec<Pair>, PairsError> {
    let known = |name: &str| -> Result<String, PairsError> {
        match hosts.iter().any(|h| h.name == name) {
            true => Ok(name.to_owned()),
            false => Err(PairsError::NotInInventory {
                name: name.to_owned(),
                has: hosts
                    .iter()
                    .map(|h| h.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    };
    let pair = |s: &str, r: &str| Pair {
        sender: s.to_owned(),
        receiver: r.to_owned(),
    };
    let text = text.trim();
    let pairs: Vec<Pair> = if text == "all" {
        hosts
            .iter()
            .flat_map(|s| {
                hosts
                    .iter()
                    .filter(move |r| r.name != s.name)
                    .map(move |r| pair(&s.name, &r.name))
            })
            .collect()
    } else if let Some(hub) = text.strip_prefix("hub:") {
        let hub = known(hub.trim())?;
        hosts
            .iter()
            .filter(|h| h.name != hub)
            .flat_map(|h| [pair(&hub, &h.name), pair(&h.name, &hub)])
            .collect()
    } else {
        let mut list = Vec::new();
        for item in text.split(',').map(str::trim) {
            let (s, r) = item
                .split_once('>')
                .ok_or_else(|| PairsError::NotPair(item.to_owned()))?;
            let p = pair(&known(s.trim())?, &known(r.trim())?);
            if p.sender == p.receiver {
                return Err(PairsError::WithItself(item.to_owned()));
            }
            if list.contains(&p) {
                return Err(PairsError::Twice(p.to_string()));
            }
            list.push(p);
        }
        list
    };
    if pairs.is_empty() {
        return Err(PairsError::None(text.to_owned()));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, address: &str, user: Option<&str>, port: Option<u16>) -> InventoryHost {
        InventoryHost {
            name: name.into(),
            address: address.into(),
            user: user.map(Into::into),
            port,
            bin_dir: None,
        }
    }

    #[test]
    fn yaml_hosts_groups_vars_and_flow_mappings() {
        let text = "\
---
# the lab's sites
all:
  vars:
    ansible_user: ops
  hosts:
    fra:
      ansible_host: 192.0.2.10   # Frankfurt
      ansible_port: 2222
      oscil_bin: /opt/oscil/bin
    sin: {ansible_host: 192.0.2.20, ansible_user: root}
  children:
    us:
      vars: {ansible_user: 'usr'}
      hosts:
        nyc:
          ansible_host: \"192.0.2.30\"
        sfo:
";
        let hosts = parse(text).unwrap();
        let mut fra = host("fra", "192.0.2.10", Some("ops"), Some(2222));
        fra.bin_dir = Some("/opt/oscil/bin".into());
        assert_eq!(
            hosts,
            vec![
                fra,
                host("nyc", "192.0.2.30", Some("usr"), None),
                host("sfo", "sfo", Some("usr"), None),
                host("sin", "192.0.2.20", Some("root"), None),
            ]
        );
        assert_eq!(hosts[0].target(), "ops@192.0.2.10");
    }

    #[test]
    fn ini_hosts_sections_and_group_vars() {
        let text = "\
; sites
fra ansible_host=192.0.2.10 ansible_port=2222 oscil_bin=/opt/oscil/bin
[asia]
sin ansible_host=192.0.2.20 ansible_user=root
[us]
nyc ansible_host=\"192.0.2.30\"
[us:vars]
ansible_user=usr
[all:vars]
ansible_user=ops
";
        let hosts = parse(text).unwrap();
        let names: Vec<(&str, &str, Option<&str>)> = hosts
            .iter()
            .map(|h| (h.name.as_str(), h.address.as_str(), h.user.as_deref()))
            .collect();
        assert_eq!(
            names,
            [
                ("fra", "192.0.2.10", Some("ops")),
                ("nyc", "192.0.2.30", Some("usr")),
                ("sin", "192.0.2.20", Some("root")),
            ]
        );
        assert_eq!(hosts[0].port, Some(2222));
        assert_eq!(hosts[0].bin_dir.as_deref(), Some("/opt/oscil/bin"));
    }

    #[test]
    fn errors_name_their_line() {
        let bad = |text: &str| parse(text).unwrap_err().to_string();
        assert_eq!(
            bad("all:\n  hosts:\n    a:\n      ansible_port: http\n"),
            "line 4: ansible_port \"http\" is not a port (1-65535)"
        );
        assert_eq!(
            bad("all:\n  hosts:\n    - a\n"),
            "line 3: a list: an inventory's hosts are a mapping (NAME: {…})"
        );
        assert!(bad("all:\n  hosts:\n    a:\n        x: 1\n      y: 2\n").starts_with("line 5:"));
        assert_eq!(
            bad("[web\na ansible_host=x\n"),
            "line 1: \"[web\": a section is [group]"
        );
        assert_eq!(
            bad("a ansible_host\n"),
            "line 1: \"ansible_host\" is not key=value"
        );
        assert!(
            bad("all:\n  hosts:\n    a:\n      ansible_host: -oProxyCommand=x\n")
                .starts_with("line 4: a: ")
        );
        assert!(bad("a/b ansible_host=x\n").starts_with("line 1: host name"));
        assert_eq!(bad("# nothing\n"), "no hosts in the inventory");
        assert_eq!(bad("all:\n  hosts:\n"), "no hosts in the inventory");
    }

    #[test]
    fn pairs_all_hub_and_lists() {
        let hosts = parse("a\nb\nc\n").unwrap();
        let shown = |text: &str| -> Vec<String> {
            parse_pairs(text, &hosts)
                .unwrap()
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(shown("all"), ["a>b", "a>c", "b>a", "b>c", "c>a", "c>b"]);
        assert_eq!(shown("hub:b"), ["b>a", "a>b", "b>c", "c>b"]);
        assert_eq!(shown("a>b, c>a"), ["a>b", "c>a"]);
        assert!(parse_pairs("a>d", &hosts)
            .unwrap_err()
            .to_string()
            .contains("\"d\" is not in the inventory"));
        assert!(parse_pairs("a>a", &hosts)
            .unwrap_err()
            .to_string()
            .contains("itself"));
        assert!(parse_pairs("a>b,a>b", &hosts)
            .unwrap_err()
            .to_string()
            .contains("twice"));
        assert!(parse_pairs("a-b", &hosts)
            .unwrap_err()
            .to_string()
            .contains("SENDER>RECEIVER"));
        assert!(parse_pairs("hub:z", &hosts).is_err());
        let one = parse("a\n").unwrap();
        assert!(parse_pairs("all", &one)
            .unwrap_err()
            .to_string()
            .contains("names no pair"));
    }
}

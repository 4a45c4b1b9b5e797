//! The inventory as Ansible models it (groups of hosts and of groups, each with variables),
//! whichever format it came in, and the one step that turns it into the hosts the lab
//! reaches: children expanded once each, cycles refused, group variables applied in
//! Ansible's order (shallower groups first, then `ansible_group_priority`, then name; a
//! host's own last). Only the variables the lab uses are kept.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::remote::host::{check_bin_dir, check_host_name, check_user_name, HostArgError};

/// Groups nested deeper than this are refused: Ansible's own inventories rarely pass 5.
pub const MAX_GROUP_DEPTH: usize = 64;
/// The most hosts an inventory may name (after ranges are expanded).
pub const MAX_HOSTS: usize = 100_000;

/// The largest inventory read (a file, standard input, or what ansible-inventory prints):
/// some 1.4 million hosts of INI, far past any fleet.
pub const MAX_INVENTORY_BYTES: u64 = 16 << 20;

/// One host of the inventory, as the lab will reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryHost {
    /// The inventory's name for it: names its pairs and their directories.
    pub name: String,
    /// `ansible_ssh_host`, else `ansible_host`, else the name.
    pub address: String,
    /// `ansible_ssh_user`, else `ansible_user`; `None`: ssh's own default.
    pub user: Option<String>,
    /// `ansible_ssh_port`, else `ansible_port`; `None`: ssh's own default.
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

/// Why an inventory cannot be used, in one line that names the place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InventoryError {
    #[error("line {line}: {why}")]
    Line { line: usize, why: String },
    /// The YAML or JSON parser's own words (they name the line and column).
    #[error("{0}")]
    Syntax(String),
    #[error("group {group:?}: {why}")]
    Group { group: String, why: String },
    #[error("host {host:?}: {why}")]
    Host { host: String, why: String },
    #[error("groups in a cycle: {0}")]
    Cycle(String),
    #[error("groups nested more than {MAX_GROUP_DEPTH} deep (under {0:?})")]
    TooDeep(String),
    #[error("more than {MAX_HOSTS} hosts")]
    TooManyHosts,
    #[error("no hosts in the inventory")]
    Empty,
    /// The file itself: not regular, too large, unreadable.
    #[error("{0}")]
    File(String),
    /// A YAML inventory that names a plugin (`plugin: NAME`), without `--inventory-plugins`.
    #[error("names the inventory plugin {0:?}, which runs code as this user; refused (--inventory-plugins lets ansible-inventory run it)")]
    Plugin(String),
    /// `ansible-inventory` failed or said something that is not an inventory.
    #[error("ansible-inventory: {0}")]
    Ansible(String),
}

/// The inventory plugins that only read the file they are given: `auto` (which loads the
/// plugin a file names), `script` (which runs the file) and every other plugin run code.
pub const STATIC_PLUGINS: &str = "ini,yaml,toml,host_list";

/// Which inventory plugins `ansible-inventory` may run. An inventory is data unless the
/// operator says otherwise: a plugin (`auto`, `script`, a cloud's, `generator` with its
/// `lookup('pipe', ...)`) runs code, as root when the lab is root, even for `--dry-run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plugins {
    /// Only [`STATIC_PLUGINS`], which read the file and run nothing.
    StaticOnly,
    /// Every plugin Ansible enables (`--inventory-plugins`).
    Allowed,
}

impl Plugins {
    /// How the inventory was read, for the line that says so.
    pub fn text(self) -> String {
        match self {
            Plugins::StaticOnly => format!(
                "static inventory plugins only ({}; --inventory-plugins runs the plugin an inventory names)",
                STATIC_PLUGINS.replace(',', ", ")
            ),
            Plugins::Allowed => {
                "every inventory plugin Ansible enables (--inventory-plugins: they run code as this user)".into()
            }
        }
    }
}

pub fn at(line: usize, why: impl Into<String>) -> InventoryError {
    InventoryError::Line {
        line,
        why: why.into(),
    }
}

/// The variables the lab reads; every other is dropped as it is read.
const KNOWN: [&str; 9] = [
    "ansible_host",
    "ansible_ssh_host",
    "ansible_user",
    "ansible_ssh_user",
    "ansible_port",
    "ansible_ssh_port",
    "ansible_connection",
    "ansible_group_priority",
    "oscil_bin",
];

/// A host's or a group's variables that the lab reads, each as text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vars(BTreeMap<&'static str, String>);

impl Vars {
    /// Sets `key` to `value` when the lab reads `key` (a later value wins).
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        if let Some(known) = KNOWN.iter().find(|k| **k == key) {
            self.0.insert(known, value.into());
        }
    }

    /// True for the variables the lab reads.
    pub fn reads(key: &str) -> bool {
        KNOWN.contains(&key)
    }

    /// `other`'s values over these.
    fn extend(&mut self, other: &Vars) {
        self.0.extend(other.0.iter().map(|(k, v)| (*k, v.clone())));
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }
}

#[derive(Debug, Default)]
struct Group {
    name: String,
    vars: Vars,
    children: Vec<usize>,
    has_parent: bool,
}

#[derive(Debug, Default)]
struct HostEntry {
    vars: Vars,
    groups: BTreeSet<usize>,
}

/// Groups and hosts as read; `all` is group 0.
#[derive(Debug)]
pub struct Model {
    groups: Vec<Group>,
    index: HashMap<String, usize>,
    edges: HashSet<(usize, usize)>,
    hosts: BTreeMap<String, HostEntry>,
}

impl Default for Model {
    fn default() -> Self {
        let mut model = Model {
            groups: Vec::new(),
            index: HashMap::new(),
            edges: HashSet::new(),
            hosts: BTreeMap::new(),
        };
        model.group("all");
        model
    }
}

impl Model {
    /// The group called `name`, made when new.
    pub fn group(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        self.groups.push(Group {
            name: name.to_owned(),
            ..Group::default()
        });
        self.index.insert(name.to_owned(), self.groups.len() - 1);
        self.groups.len() - 1
    }

    /// `child` (made when new) becomes a child of `parent`, once however often it is listed.
    pub fn child(&mut self, parent: usize, child: &str) {
        let c = self.group(child);
        if self.edges.insert((parent, c)) {
            self.groups[parent].children.push(c);
            self.groups[c].has_parent = true;
        }
    }

    pub fn group_vars(&mut self, group: usize) -> &mut Vars {
        &mut self.groups[group].vars
    }

    /// Host `name` in `group`, with `vars` over the ones it has (a later definition wins,
    /// as in Ansible).
    pub fn host(&mut self, group: usize, name: &str, vars: &Vars) -> Result<(), InventoryError> {
        if !self.hosts.contains_key(name) && self.hosts.len() >= MAX_HOSTS {
            return Err(InventoryError::TooManyHosts);
        }
        let entry = self.hosts.entry(name.to_owned()).or_default();
        entry.vars.extend(vars);
        entry.groups.insert(group);
        Ok(())
    }

    /// The hosts, in name order, each with its variables resolved.
    pub fn resolve(self) -> Result<Vec<InventoryHost>, InventoryError> {
        if self.hosts.is_empty() {
            return Err(InventoryError::Empty);
        }
        let depth = self.depths()?;
        let parents = self.parents();
        let mut resolved: HashMap<Vec<usize>, Vars> = HashMap::new();
        let mut out = Vec::with_capacity(self.hosts.len());
        for (name, entry) in &self.hosts {
            let direct: Vec<usize> = entry.groups.iter().copied().collect();
            let group_vars = match resolved.get(&direct) {
                Some(vars) => vars.clone(),
                None => {
                    let vars = self.group_vars_of(&direct, &parents, &depth)?;
                    resolved.insert(direct, vars.clone());
                    vars
                }
            };
            let mut vars = group_vars;
            vars.extend(&entry.vars);
            out.push(host_from_vars(name, &vars)?);
        }
        Ok(out)
    }

    /// Every group's parents; a group no other lists is a child of `all`.
    fn parents(&self) -> Vec<Vec<usize>> {
        let mut parents = vec![Vec::new(); self.groups.len()];
        for (p, g) in self.groups.iter().enumerate() {
            for &c in &g.children {
                parents[c].push(p);
            }
        }
        for (i, g) in self.groups.iter().enumerate().skip(1) {
            if !g.has_parent {
                parents[i].push(0);
            }
        }
        parents
    }

    /// Each group's depth (its longest path from `all`), refusing cycles and nesting past
    /// [`MAX_GROUP_DEPTH`]; linear in groups and edges (Kahn's order).
    fn depths(&self) -> Result<Vec<usize>, InventoryError> {
        if self.groups[0].has_parent {
            return Err(InventoryError::Group {
                group: "all".into(),
                why: "holds every host; it cannot be another group's child".into(),
            });
        }
        let parents = self.parents();
        let mut waiting: Vec<usize> = parents.iter().map(Vec::len).collect();
        let mut children: Vec<Vec<usize>> =
            self.groups.iter().map(|g| g.children.clone()).collect();
        for (i, p) in parents.iter().enumerate() {
            if p == &[0] && !self.groups[i].has_parent {
                children[0].push(i);
            }
        }
        let mut depth = vec![0usize; self.groups.len()];
        let mut ready = vec![0usize];
        let mut done = 0;
        while let Some(g) = ready.pop() {
            done += 1;
            for &c in &children[g] {
                depth[c] = depth[c].max(depth[g] + 1);
                if depth[c] > MAX_GROUP_DEPTH {
                    return Err(InventoryError::TooDeep(self.groups[g].name.clone()));
                }
                waiting[c] -= 1;
                if waiting[c] == 0 {
                    ready.push(c);
                }
            }
        }
        if done < self.groups.len() {
            return Err(InventoryError::Cycle(self.cycle(&waiting, &parents)));
        }
        Ok(depth)
    }

    /// A cycle among the groups Kahn's order could not reach, as `a > b > a`: every such
    /// group waits on a parent that could not be reached either, so walking up those
    /// parents must come back to a group it passed.
    fn cycle(&self, waiting: &[usize], parents: &[Vec<usize>]) -> String {
        let stuck = |g: usize| waiting[g] > 0;
        let mut g = (0..self.groups.len()).find(|&g| stuck(g)).unwrap_or(0);
        let mut seen = HashMap::new();
        let mut path = Vec::new();
        while let Some(p) = parents[g].iter().copied().find(|&p| stuck(p)) {
            seen.insert(g, path.len());
            path.push(g);
            if let Some(&from) = seen.get(&p) {
                path.drain(..from);
                path.push(p);
                break;
            }
            g = p;
        }
        let names: Vec<&str> = path
            .iter()
            .rev()
            .map(|&g| self.groups[g].name.as_str())
            .collect();
        names.join(" > ")
    }

    /// The variables of every group a host in `direct` belongs to (through children), in
    /// Ansible's order: depth, then `ansible_group_priority`, then name.
    fn group_vars_of(
        &self,
        direct: &[usize],
        parents: &[Vec<usize>],
        depth: &[usize],
    ) -> Result<Vars, InventoryError> {
        let mut seen: HashSet<usize> = direct.iter().copied().collect();
        let mut todo: Vec<usize> = direct.to_vec();
        while let Some(g) = todo.pop() {
            for &p in &parents[g] {
                if seen.insert(p) {
                    todo.push(p);
                }
            }
        }
        seen.insert(0);
        let mut groups = Vec::with_capacity(seen.len());
        for g in seen {
            let group = &self.groups[g];
            let priority = match group.vars.get("ansible_group_priority") {
                None => 1,
                Some(text) => text.parse::<i64>().map_err(|_| InventoryError::Group {
                    group: group.name.clone(),
                    why: format!("ansible_group_priority {text:?} is not a whole number"),
                })?,
            };
            groups.push((depth[g], priority, group.name.as_str(), &group.vars));
        }
        groups.sort_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
        let mut vars = Vars::default();
        for (_, _, _, v) in groups {
            vars.extend(v);
        }
        Ok(vars)
    }
}

/// The names the lab gives directories to: letters, digits, `-_.`.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

fn host_from_vars(name: &str, vars: &Vars) -> Result<InventoryHost, InventoryError> {
    let bad = |why: String| InventoryError::Host {
        host: name.to_owned(),
        why,
    };
    let arg = |e: HostArgError| bad(e.to_string());
    if !is_plain_name(name) {
        return Err(bad(
            "a host name is letters, digits, '-', '_' and '.' (it names directories)".into(),
        ));
    }
    // As Ansible's ssh connection has it: the ssh-specific spelling wins when both are set.
    let first =
        |keys: [&'static str; 2]| keys.into_iter().find_map(|k| vars.get(k).map(|v| (k, v)));
    if let Some(c) = vars.get("ansible_connection").filter(|c| *c != "ssh") {
        return Err(bad(format!(
            "ansible_connection {c:?}: the lab reaches hosts over ssh only"
        )));
    }
    let port = match first(["ansible_ssh_port", "ansible_port"]) {
        None => None,
        Some((key, v)) => Some(
            v.parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| bad(format!("{key} {v:?} is not a port (1-65535)")))?,
        ),
    };
    let address = first(["ansible_ssh_host", "ansible_host"]).map_or(name, |(_, v)| v);
    check_host_name(address).map_err(arg)?;
    let user = first(["ansible_ssh_user", "ansible_user"]).map(|(_, v)| v.to_owned());
    if let Some(user) = &user {
        check_user_name(user).map_err(arg)?;
    }
    let bin_dir = vars.get("oscil_bin").map(str::to_owned);
    if let Some(dir) = &bin_dir {
        check_bin_dir(dir).map_err(|why| bad(format!("oscil_bin {why}")))?;
    }
    Ok(InventoryHost {
        name: name.to_owned(),
        address: address.to_owned(),
        user,
        port,
        bin_dir,
    })
}

/// Why a host pattern's range cannot be expanded; each names the pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("{0:?}: a range [a:b] is not closed")]
    NotClosed(String),
    #[error("{0:?}: a range is [a:b] or [a:b:step]")]
    NotRange(String),
    #[error("{pattern:?}: the step {step:?} is not a positive number")]
    Step { pattern: String, step: String },
    #[error("{0:?}: more than {MAX_HOSTS} hosts")]
    TooMany(String),
    #[error("{0:?}: a range runs from a number to a larger one, or a letter to a later one")]
    Backwards(String),
}

/// The host names a pattern stands for: each `[a:b]` or `[a:b:step]` range (numbers, with
/// their leading zeros kept, or single letters) expanded, left to right, as Ansible does.
pub fn expand_range(pattern: &str) -> Result<Vec<String>, RangeError> {
    let Some(open) = pattern.find('[') else {
        return Ok(vec![pattern.to_owned()]);
    };
    let close = pattern[open..]
        .find(']')
        .map(|i| open + i)
        .ok_or_else(|| RangeError::NotClosed(pattern.to_owned()))?;
    let (head, range, tail) = (
        &pattern[..open],
        &pattern[open + 1..close],
        &pattern[close + 1..],
    );
    let parts: Vec<&str> = range.split(':').collect();
    let (from, to, step) = match parts[..] {
        [a, b] => (a, b, "1"),
        [a, b, s] => (a, b, s),
        _ => return Err(RangeError::NotRange(pattern.to_owned())),
    };
    let step: usize = step
        .parse()
        .ok()
        .filter(|&s| s > 0)
        .ok_or_else(|| RangeError::Step {
            pattern: pattern.to_owned(),
            step: step.to_owned(),
        })?;
    let items: Vec<String> = match (from.parse::<u64>(), to.parse::<u64>()) {
        (Ok(a), Ok(b)) if a <= b => {
            if (b - a) / step as u64 >= MAX_HOSTS as u64 {
                return Err(RangeError::TooMany(pattern.to_owned()));
            }
            let width = if from.len() > 1 && from.starts_with('0') {
                from.len()
            } else {
                0
            };
            (a..=b)
                .step_by(step)
                .map(|n| format!("{n:0width$}"))
                .collect()
        }
        _ => {
            let letter = |s: &str| {
                let mut c = s.chars();
                match (c.next(), c.next()) {
                    (Some(l), None) if l.is_ascii_alphabetic() => Some(l),
                    _ => None,
                }
            };
            match (letter(from), letter(to)) {
                (Some(a), Some(b)) if a <= b => (a..=b).step_by(step).map(String::from).collect(),
                _ => return Err(RangeError::Backwards(pattern.to_owned())),
            }
        }
    };
    let rest = expand_range(tail)?;
    if items.len().saturating_mul(rest.len()) > MAX_HOSTS {
        return Err(RangeError::TooMany(pattern.to_owned()));
    }
    Ok(items
        .iter()
        .flat_map(|item| rest.iter().map(move |r| format!("{head}{item}{r}")))
        .collect())
}

/// `NAME` or `NAME:PORT` (Ansible's short form for `ansible_port`), ranges expanded, each
/// with the port among its variables.
pub fn host_pattern(pattern: &str, vars: &mut Vars) -> Result<Vec<String>, RangeError> {
    // The port follows the last range, if any: `web[01:03]:2222`.
    let after = pattern.rfind(']').map_or(0, |i| i + 1);
    let name = match pattern[after..].rfind(':') {
        Some(i) => {
            let (name, port) = (&pattern[..after + i], &pattern[after + i + 1..]);
            vars.set("ansible_port", port);
            name
        }
        None => pattern,
    };
    expand_range(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_expand_as_ansible_does() {
        assert_eq!(
            expand_range("web[01:03]").unwrap(),
            ["web01", "web02", "web03"]
        );
        assert_eq!(
            expand_range("db-[a:c]-[1:2].x").unwrap(),
            ["db-a-1.x", "db-a-2.x", "db-b-1.x", "db-b-2.x", "db-c-1.x", "db-c-2.x"]
        );
        assert_eq!(expand_range("h[0:10:5]").unwrap(), ["h0", "h5", "h10"]);
        assert_eq!(expand_range("plain").unwrap(), ["plain"]);
        for bad in [
            "h[1:",
            "h[3:1]",
            "h[a:3]",
            "h[1:2:0]",
            "h[1]",
            "h[0:99999999]",
        ] {
            assert!(expand_range(bad).is_err(), "{bad}");
        }
        for (bad, error) in [
            ("h[1:", RangeError::NotClosed("h[1:".into())),
            ("h[1]", RangeError::NotRange("h[1]".into())),
            ("h[3:1]", RangeError::Backwards("h[3:1]".into())),
        ] {
            assert_eq!(expand_range(bad), Err(error));
        }
        let mut vars = Vars::default();
        assert_eq!(
            host_pattern("h[1:2]:2222", &mut vars).unwrap(),
            ["h1", "h2"]
        );
        assert_eq!(vars.get("ansible_port"), Some("2222"));
    }

    fn model_of(edges: &[(&str, &str)], hosts: &[(&str, &str)]) -> Model {
        let mut model = Model::default();
        for (parent, child) in edges {
            let p = model.group(parent);
            model.child(p, child);
        }
        for (group, host) in hosts {
            let g = model.group(group);
            model.host(g, host, &Vars::default()).unwrap();
        }
        model
    }

    #[test]
    fn cycles_are_refused_and_named() {
        let err = model_of(&[("x", "x")], &[("x", "h")])
            .resolve()
            .unwrap_err();
        assert_eq!(err.to_string(), "groups in a cycle: x > x");
        let err = model_of(&[("a", "b"), ("b", "c"), ("c", "a")], &[("a", "h")])
            .resolve()
            .unwrap_err();
        assert!(err.to_string().starts_with("groups in a cycle: "), "{err}");
    }

    #[test]
    fn nesting_is_bounded() {
        let chain: Vec<(String, String)> = (0..MAX_GROUP_DEPTH + 1)
            .map(|i| (format!("g{i}"), format!("g{}", i + 1)))
            .collect();
        let edges: Vec<(&str, &str)> = chain
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let err = model_of(&edges, &[("g1", "h")]).resolve().unwrap_err();
        assert!(matches!(err, InventoryError::TooDeep(_)), "{err}");
    }

    #[test]
    fn group_vars_apply_shallow_first_then_priority_then_name_then_the_host() {
        let mut model = model_of(&[("all", "a"), ("a", "deep"), ("all", "b")], &[]);
        let set = |model: &mut Model, group: &str, key: &str, value: &str| {
            let g = model.group(group);
            model.group_vars(g).set(key, value);
        };
        set(&mut model, "all", "ansible_user", "everyone");
        set(&mut model, "a", "ansible_user", "from-a");
        set(&mut model, "b", "ansible_user", "from-b");
        set(&mut model, "deep", "ansible_port", "2200");
        set(&mut model, "b", "ansible_port", "2300");
        let deep = model.group("deep");
        let b = model.group("b");
        model.host(deep, "h1", &Vars::default()).unwrap();
        model.host(b, "h1", &Vars::default()).unwrap();
        let mut own = Vars::default();
        own.set("ansible_ssh_host", "10.0.0.9");
        own.set("ansible_host", "10.0.0.8");
        own.set("some_other_var", "x");
        model.host(b, "h2", &own).unwrap();
        let hosts = model.resolve().unwrap();
        // h1: a and b are as deep; b sorts after a and wins; deep is deeper than both.
        assert_eq!(hosts[0].user.as_deref(), Some("from-b"));
        assert_eq!(hosts[0].port, Some(2200));
        assert_eq!(hosts[1].address, "10.0.0.9");
        assert_eq!(hosts[1].user.as_deref(), Some("from-b"));
    }
}

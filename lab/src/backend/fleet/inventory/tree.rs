//! The two inventories that are trees of data: Ansible's YAML inventory (groups nesting
//! their `children`, read by a YAML crate) and the JSON `ansible-inventory --list` prints
//! (the documented dynamic-inventory format: groups with `hosts`, `children` and `vars`,
//! `_meta.hostvars`), into the one [`Model`].

use serde_json::Value as Json;
use serde_yaml_ng::Value as Yaml;

use super::model::{at, host_pattern, InventoryError, Model, Vars, MAX_GROUP_DEPTH};

fn group_error(group: &str, why: impl Into<String>) -> InventoryError {
    InventoryError::Group {
        group: group.to_owned(),
        why: why.into(),
    }
}

/// A YAML inventory: top-level keys are groups (usually `all`), each a mapping of `hosts`
/// (NAME: variables), `vars` and `children` (groups, nested the same way).
pub fn yaml(text: &str) -> Result<Model, InventoryError> {
    check_nesting(text)?;
    let root: Yaml =
        serde_yaml_ng::from_str(text).map_err(|e| InventoryError::Syntax(e.to_string()))?;
    let mut model = Model::default();
    match root {
        Yaml::Null => {}
        Yaml::Mapping(groups) => {
            for (name, body) in &groups {
                yaml_group(&mut model, None, &yaml_key(name, "a group")?, body, 0)?;
            }
        }
        _ => {
            return Err(InventoryError::Syntax(
                "the inventory is not a mapping of groups".into(),
            ))
        }
    }
    Ok(model)
}

/// Flow collections nested deeper than this, or lines indented further, are refused before
/// the YAML crate reads them: its time grows with the square of the depth (16 s for
/// 14,000 levels), and no inventory comes near (64 groups deep is 512 columns).
const MAX_FLOW_DEPTH: usize = 128;
const MAX_INDENT: usize = 1024;

fn check_nesting(text: &str) -> Result<(), InventoryError> {
    let too_deep = |line| {
        at(
            line,
            format!("nested more than {MAX_FLOW_DEPTH} deep: the lab does not read this"),
        )
    };
    let mut depth = 0usize;
    for (i, l) in text.lines().enumerate() {
        if l.len() - l.trim_start_matches(' ').len() > MAX_INDENT {
            return Err(too_deep(i + 1));
        }
        let mut quote = None;
        let mut prev = ' ';
        for c in l.chars() {
            match (quote, c) {
                (None, '#') if prev.is_whitespace() => break,
                (None, '"' | '\'') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (None, '{' | '[') => depth += 1,
                (None, '}' | ']') => depth = depth.saturating_sub(1),
                _ => {}
            }
            if depth > MAX_FLOW_DEPTH {
                return Err(too_deep(i + 1));
            }
            prev = c;
        }
    }
    Ok(())
}

fn yaml_key(key: &Yaml, what: &str) -> Result<String, InventoryError> {
    match key {
        Yaml::String(s) => Ok(s.clone()),
        Yaml::Number(n) => Ok(n.to_string()),
        other => Err(InventoryError::Syntax(format!(
            "{what} named by {other:?}, not by a string"
        ))),
    }
}

fn yaml_group(
    model: &mut Model,
    parent: Option<usize>,
    name: &str,
    body: &Yaml,
    depth: usize,
) -> Result<(), InventoryError> {
    if depth > MAX_GROUP_DEPTH {
        return Err(InventoryError::TooDeep(name.to_owned()));
    }
    let g = model.group(name);
    if let Some(p) = parent {
        model.child(p, name);
    }
    let entries = match body {
        Yaml::Null => return Ok(()),
        Yaml::Mapping(m) => m,
        _ => {
            return Err(group_error(
                name,
                "is not a mapping of hosts, vars and children",
            ))
        }
    };
    for (key, value) in entries {
        match (yaml_key(key, "a group's entry")?.as_str(), value) {
            (_, Yaml::Null) => {}
            ("vars", vars) => {
                *model.group_vars(g) =
                    yaml_vars(vars).map_err(|why| group_error(name, why.to_string()))?;
            }
            ("hosts", Yaml::Mapping(hosts)) => {
                for (pattern, vars) in hosts {
                    let pattern = yaml_key(pattern, "a host")?;
                    let mut vars = yaml_vars(vars).map_err(|why| InventoryError::Host {
                        host: pattern.clone(),
                        why: why.to_string(),
                    })?;
                    let names = host_pattern(&pattern, &mut vars)
                        .map_err(|why| group_error(name, why.to_string()))?;
                    for host in names {
                        model.host(g, &host, &vars)?;
                    }
                }
            }
            ("children", Yaml::Mapping(children)) => {
                for (child, body) in children {
                    yaml_group(
                        model,
                        Some(g),
                        &yaml_key(child, "a group")?,
                        body,
                        depth + 1,
                    )?;
                }
            }
            ("hosts" | "children", _) => {
                return Err(group_error(name, format!("{key:?} is a mapping of names")))
            }
            (other, _) => {
                return Err(group_error(
                    name,
                    format!("{other:?}: a group holds hosts, vars and children"),
                ))
            }
        }
    }
    Ok(())
}

/// Variables the lab cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum VarsError {
    /// The YAML value could not be read as JSON's: the converter's words.
    #[error("variables: {0}")]
    Yaml(String),
    #[error("{0} is not a plain value")]
    NotPlain(String),
    #[error("variables are an object")]
    NotObject,
}

/// A mapping of variables, read as the JSON reader reads them (YAML's values are JSON's).
fn yaml_vars(vars: &Yaml) -> Result<Vars, VarsError> {
    let json = serde_json::to_value(vars).map_err(|e| VarsError::Yaml(e.to_string()))?;
    json_vars(&json)
}

/// A variable's value as the lab reads it.
enum Plain {
    Text(String),
    /// `~` or `null`: as if unset.
    Null,
    /// A list or a mapping.
    Not,
}

/// The variables the lab reads among `entries`; one of them that is not a plain value is
/// refused (a list where a port should be), the others are left alone.
fn plain_vars<'a>(entries: impl Iterator<Item = (&'a str, Plain)>) -> Result<Vars, VarsError> {
    let mut out = Vars::default();
    for (key, value) in entries {
        match value {
            Plain::Text(text) => out.set(key, text),
            Plain::Null => {}
            Plain::Not if Vars::reads(key) => return Err(VarsError::NotPlain(key.to_owned())),
            Plain::Not => {}
        }
    }
    Ok(out)
}

/// `ansible-inventory --list`'s JSON (or a dynamic inventory script's): groups as objects
/// with `hosts`, `children` and `vars` (or a bare list of hosts), `_meta.hostvars`.
pub fn json(text: &str) -> Result<Model, InventoryError> {
    let root: Json =
        serde_json::from_str(text).map_err(|e| InventoryError::Syntax(e.to_string()))?;
    let Json::Object(groups) = root else {
        return Err(InventoryError::Syntax(
            "the inventory is not a JSON object of groups".into(),
        ));
    };
    let mut model = Model::default();
    for (name, body) in &groups {
        if name == "_meta" {
            continue;
        }
        let g = model.group(name);
        let list = |key: &str| match body.get(key) {
            None | Some(Json::Null) => Ok(None),
            Some(Json::Array(items)) => Ok(Some(items)),
            Some(_) => Err(group_error(name, format!("its {key} are a list of names"))),
        };
        let (hosts, children, vars) = match body {
            Json::Array(hosts) => (Some(hosts), None, None),
            Json::Object(o) => (list("hosts")?, list("children")?, o.get("vars")),
            _ => {
                return Err(group_error(
                    name,
                    "is neither a list of hosts nor an object",
                ))
            }
        };
        if let Some(vars) = vars {
            *model.group_vars(g) =
                json_vars(vars).map_err(|why| group_error(name, why.to_string()))?;
        }
        for host in hosts.into_iter().flatten() {
            let host =
                json_str(host).ok_or_else(|| group_error(name, "a host that is not a string"))?;
            model.host(g, host, &Vars::default())?;
        }
        for child in children.into_iter().flatten() {
            let child = child
                .as_str()
                .ok_or_else(|| group_error(name, "a child that is not a string"))?;
            model.child(g, child);
        }
    }
    let hostvars = groups
        .get("_meta")
        .and_then(|m| m.get("hostvars"))
        .and_then(Json::as_object);
    for (host, vars) in hostvars.into_iter().flatten() {
        let vars = json_vars(vars).map_err(|why| InventoryError::Host {
            host: host.clone(),
            why: why.to_string(),
        })?;
        model.host(0, host, &vars)?;
    }
    Ok(model)
}

/// A string, or one ansible-core 2.14 (Debian 12) printed as `{"__ansible_unsafe": "..."}`,
/// as it prints a host name an inventory plugin templated.
fn json_str(value: &Json) -> Option<&str> {
    match value.as_object() {
        Some(m) if m.len() == 1 => m.get("__ansible_unsafe")?.as_str(),
        _ => value.as_str(),
    }
}

fn json_vars(vars: &Json) -> Result<Vars, VarsError> {
    match vars {
        Json::Null => Ok(Vars::default()),
        Json::Object(m) => plain_vars(m.iter().map(|(k, v)| {
            let text = match v {
                Json::String(s) => Plain::Text(s.clone()),
                Json::Number(n) => Plain::Text(n.to_string()),
                Json::Bool(b) => Plain::Text(b.to_string()),
                Json::Null => Plain::Null,
                _ => Plain::Not,
            };
            (k.as_str(), text)
        })),
        _ => Err(VarsError::NotObject),
    }
}

//! Ansible's INI inventory: `[group]` sections of host lines (`NAME[:PORT] key=value ...`,
//! ranges like `web[01:03]`), `[group:vars]` of `key=value`, `[group:children]` of group
//! names; `#` and `;` start comments. What it does not understand it refuses, naming the
//! line.

use super::model::{at, host_pattern, InventoryError, Model, Vars};

/// The groups and hosts of an INI inventory.
pub fn parse(text: &str) -> Result<Model, InventoryError> {
    let mut model = Model::default();
    let mut group = model.group("ungrouped");
    let mut kind = Section::Hosts;
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
            let (name, suffix) = section.split_once(':').unwrap_or((section, "hosts"));
            kind = match suffix {
                "hosts" => Section::Hosts,
                "vars" => Section::Vars,
                "children" => Section::Children,
                other => {
                    return Err(at(
                        line,
                        format!("[{section}]: a section is [group], [group:vars] or [group:children], not :{other}"),
                    ))
                }
            };
            group = model.group(plain_group(name.trim(), line)?);
            continue;
        }
        match kind {
            Section::Vars => {
                let (key, value) = l
                    .split_once('=')
                    .ok_or_else(|| at(line, format!("{l:?} is not key=value")))?;
                model
                    .group_vars(group)
                    .set(key.trim(), unquote(value.trim()));
            }
            Section::Children => {
                let child = plain_group(l, line)?;
                model.child(group, child);
            }
            Section::Hosts => host_line(&mut model, group, l, line)?,
        }
    }
    Ok(model)
}

#[derive(Clone, Copy)]
enum Section {
    Hosts,
    Vars,
    Children,
}

/// A group's name: one word, no brackets or quotes.
fn plain_group(name: &str, line: usize) -> Result<&str, InventoryError> {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    match plain {
        true => Ok(name),
        false => Err(at(
            line,
            format!("group name {name:?}: letters, digits, '-', '_' and '.'"),
        )),
    }
}

/// `NAME[:PORT] key=value ...` (values may be quoted; `#` after white space ends the line).
fn host_line(model: &mut Model, group: usize, l: &str, line: usize) -> Result<(), InventoryError> {
    let words = split_words(l).map_err(|why| at(line, why.to_string()))?;
    let (pattern, rest) = words.split_first().expect("a line that says something");
    let mut vars = Vars::default();
    for word in rest {
        let (k, v) = word
            .split_once('=')
            .ok_or_else(|| at(line, format!("{word:?} is not key=value")))?;
        vars.set(k, unquote(v));
    }
    let names = host_pattern(pattern, &mut vars).map_err(|why| at(line, why.to_string()))?;
    for name in names {
        model
            .host(group, &name, &vars)
            .map_err(|e| at(line, e.to_string()))?;
    }
    Ok(())
}

/// A line whose quote is not closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a quote is not closed")]
pub struct QuoteNotClosed;

/// Splits on white space outside quotes, up to a `#` that starts a comment.
fn split_words(text: &str) -> Result<Vec<String>, QuoteNotClosed> {
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
            (None, '#') if word.is_empty() => break,
            (None, c) if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            _ => word.push(c),
        }
    }
    if quote.is_some() {
        return Err(QuoteNotClosed);
    }
    if !word.is_empty() {
        words.push(word);
    }
    Ok(words)
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

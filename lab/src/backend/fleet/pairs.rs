//! `--pairs`: which ordered pairs of an inventory's hosts a fleet measures.

use serde::{Deserialize, Serialize};

use super::inventory::InventoryHost;

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
    use crate::backend::fleet::inventory::parse;

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

//! Comma lists of values (`--lowat default,128k`, `--rate 10mbit,1gbit`), parsed once into
//! their type by clap: each entry keeps its spelling (a campaign's labels use it) beside its
//! value. Two spellings of one value (`128k,131072`, `100ms,0.1s`) would run one
//! configuration twice under two labels, so they are refused, as are empty entries.

/// One entry of a list: as typed, and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry<T> {
    pub text: String,
    pub value: T,
}

/// A comma list, each value once, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct List<T>(Vec<Entry<T>>);

impl<T> List<T> {
    /// A list the program spells itself (a flag's default), each value once.
    pub fn of<'a>(entries: impl IntoIterator<Item = (&'a str, T)>) -> List<T> {
        let entries = entries.into_iter();
        List(
            entries
                .map(|(text, value)| Entry {
                    text: text.to_owned(),
                    value,
                })
                .collect(),
        )
    }

    pub fn entries(&self) -> &[Entry<T>] {
        &self.0
    }
}

/// Why a list cannot be used: the entry at fault and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListError<E> {
    #[error("entry {index} of {list:?} is empty")]
    EmptyEntry { index: usize, list: String },
    #[error("{0:?} is listed twice")]
    Twice(String),
    #[error("{first:?} and {again:?} are one value: list it once")]
    SameValue { first: String, again: String },
    #[error(transparent)]
    Value(E),
}

/// `parse` applied to each entry of a comma list, as a clap value parser of [`List<T>`].
pub fn list<T, E, F>(parse: F) -> impl Fn(&str) -> Result<List<T>, ListError<E>> + Clone
where
    T: PartialEq,
    F: Fn(&str) -> Result<T, E> + Clone,
{
    move |text| {
        let mut entries: Vec<Entry<T>> = Vec::new();
        for (i, item) in text.split(',').map(str::trim).enumerate() {
            if item.is_empty() {
                let list = text.to_owned();
                return Err(ListError::EmptyEntry { index: i + 1, list });
            }
            if entries.iter().any(|e| e.text == item) {
                return Err(ListError::Twice(item.to_owned()));
            }
            let value = parse(item).map_err(ListError::Value)?;
            if let Some(first) = entries.iter().find(|e| e.value == value) {
                let (first, again) = (first.text.clone(), item.to_owned());
                return Err(ListError::SameValue { first, again });
            }
            entries.push(Entry {
                text: item.to_owned(),
                value,
            });
        }
        Ok(List(entries))
    }
}

/// The word an entry uses to leave a setting as the kernel (or the host) has it.
pub const DEFAULT: &str = "default";

/// `parse`, with [`DEFAULT`] read as `None`: "leave it alone".
pub fn or_default<T, E, F>(parse: F) -> impl Fn(&str) -> Result<Option<T>, E> + Clone
where
    F: Fn(&str) -> Result<T, E> + Clone,
{
    move |text| match text {
        DEFAULT => Ok(None),
        text => parse(text).map(Some),
    }
}

/// A list of `parse`'s values or `default`, as a clap value parser.
pub fn list_or_default<T, E, F>(
    parse: F,
) -> impl Fn(&str) -> Result<List<Option<T>>, ListError<E>> + Clone
where
    T: PartialEq,
    F: Fn(&str) -> Result<T, E> + Clone,
{
    list(or_default(parse))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{parse_bytes, parse_duration, UnitError};

    fn texts<T>(list: &List<T>) -> Vec<&str> {
        list.entries().iter().map(|e| e.text.as_str()).collect()
    }

    #[test]
    fn entries_keep_their_spelling_and_value() {
        let sizes = list_or_default(parse_bytes)("default, 128k,4M").unwrap();
        assert_eq!(texts(&sizes), ["default", "128k", "4M"]);
        let values: Vec<_> = sizes.entries().iter().map(|e| e.value).collect();
        assert_eq!(values, [None, Some(128 * 1024), Some(4 * 1024 * 1024)]);
    }

    #[test]
    fn a_value_is_listed_once_however_it_is_spelt() {
        let error = list(parse_duration)("100ms,0.1s").unwrap_err();
        assert_eq!(
            error.to_string(),
            "\"100ms\" and \"0.1s\" are one value: list it once"
        );
        let error = list(parse_bytes)("1,1").unwrap_err();
        assert_eq!(error.to_string(), "\"1\" is listed twice");
        let error = list_or_default(parse_bytes)("default,,1").unwrap_err();
        assert_eq!(error.to_string(), "entry 2 of \"default,,1\" is empty");
    }

    #[test]
    fn a_bad_entry_is_said_in_the_values_own_words() {
        let error: ListError<UnitError> = list(parse_bytes)("1,12q").unwrap_err();
        assert_eq!(
            error.to_string(),
            parse_bytes("12q").unwrap_err().to_string()
        );
    }
}

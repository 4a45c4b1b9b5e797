//! A JSON file that did not parse, in words: cut short (a campaign stopped mid-write by
//! hand, a full disk), not JSON at all, or JSON of another shape; each with where.

/// What is wrong with a JSON file, in a phrase with its line (`cut short at line 3`).
pub fn describe(error: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let line = error.line();
    match error.classify() {
        Category::Eof => format!("it is cut short (it ends at line {line} inside the JSON)"),
        Category::Syntax => format!("it is not JSON (line {line}, column {})", error.column()),
        Category::Data => format!("it is JSON of another shape ({error})"),
        Category::Io => format!("it could not be read ({error})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_file_is_called_cut() {
        let cut = serde_json::from_str::<serde_json::Value>("{\"runs\": [\n1,").unwrap_err();
        assert_eq!(
            describe(&cut),
            "it is cut short (it ends at line 2 inside the JSON)"
        );
        let garbage = serde_json::from_str::<serde_json::Value>("runs").unwrap_err();
        assert!(describe(&garbage).starts_with("it is not JSON (line 1"));
    }
}

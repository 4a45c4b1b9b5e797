//! Tests that cannot run here say why, or fail where CI forbids skipping.

/// Set by CI, which runs as root with every package the tests need: there a skip is a
/// failure, so a test that cannot run never passes silently.
pub const NO_SKIP_ENV: &str = "OSCIL_REQUIRE_ROOT";

/// Says why a test does not run here, or fails it where skipping is not allowed.
pub fn skip(reason: &str) {
    if std::env::var_os(NO_SKIP_ENV).is_some() {
        panic!("this test would skip ({reason}), and {NO_SKIP_ENV} is set");
    }
    eprintln!("skipped: {reason}");
}

/// True (after saying so) when a test that needs root must skip.
pub fn lacks_root(what: &str) -> bool {
    if is_root() {
        return false;
    }
    skip(&format!("needs root ({what})"));
    true
}

/// Whether we run as root.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

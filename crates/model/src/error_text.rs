//! Errors said to people: an OS error in words, and an error with its causes on one line.

/// Linux's errno for a socket bound to an address of the other IP version.
const EAFNOSUPPORT: i32 = 97;

/// An OS error said once, in words ("address in use"), without Rust's "(os error 98)"
/// suffix, which an error's cause chain would otherwise print twice.
pub fn os_error(error: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match error.kind() {
        ErrorKind::AddrInUse => "address in use".into(),
        ErrorKind::AddrNotAvailable => "no such address on this host".into(),
        ErrorKind::ConnectionRefused => "connection refused (nothing listens there)".into(),
        ErrorKind::PermissionDenied => "permission denied".into(),
        ErrorKind::NotFound => "no such file or directory".into(),
        ErrorKind::AlreadyExists => "it already exists".into(),
        ErrorKind::StorageFull => "no space left on the device".into(),
        ErrorKind::IsADirectory => "it is a directory".into(),
        _ if error.raw_os_error() == Some(EAFNOSUPPORT) => {
            "address family not supported (-B and the daemon's address must both be IPv4 or both IPv6)".into()
        }
        _ => drop_os_error_codes(&error.to_string()),
    }
}

/// What kind of file `meta` describes, in words (`regular file`, `character device`): for
/// refusing what is not a regular file by name.
pub fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    match () {
        _ if t.is_file() => "regular file",
        _ if t.is_dir() => "directory",
        _ if t.is_symlink() => "symbolic link",
        _ if t.is_fifo() => "FIFO",
        _ if t.is_char_device() => "character device",
        _ if t.is_block_device() => "block device",
        _ if t.is_socket() => "socket",
        _ => "special file",
    }
}

/// An error and its causes on one line, each said once: a cause whose text its parent
/// already holds is skipped, and Rust's " (os error N)" suffixes are dropped.
pub fn error_line(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let text = next.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = next.source();
    }
    drop_os_error_codes(&line)
}

fn drop_os_error_codes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" (os error ") {
        out.push_str(&rest[..at]);
        rest = match rest[at..].find(')') {
            Some(end) => &rest[at + end + 1..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a context line over a cause, as a caller's `context` wraps one.
    #[derive(Debug)]
    struct Context {
        line: &'static str,
        cause: Box<dyn std::error::Error + 'static>,
    }

    impl std::fmt::Display for Context {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.line)
        }
    }

    impl std::error::Error for Context {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&*self.cause)
        }
    }

    #[test]
    fn error_lines_say_each_cause_once() {
        let wrapped = Context {
            line: "cannot connect to 127.0.0.1:5250",
            cause: Box::new(std::io::Error::from_raw_os_error(111)),
        };
        assert_eq!(
            error_line(&wrapped),
            "cannot connect to 127.0.0.1:5250: Connection refused"
        );
        let repeated = Context {
            line: "writing x: File exists (os error 17)",
            cause: "x: File exists (os error 17)".into(),
        };
        assert_eq!(error_line(&repeated), "writing x: File exists");
    }

    #[test]
    fn os_errors_are_said_in_words() {
        let in_use = std::io::Error::from_raw_os_error(98);
        assert_eq!(os_error(&in_use), "address in use");
        let family = std::io::Error::from_raw_os_error(97);
        assert!(os_error(&family).starts_with("address family not supported"));
    }
}

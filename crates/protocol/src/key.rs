//! The pre-shared key both ends prove they hold. It comes from a file (`--key-file`) or the
//! `OSCIL_KEY` environment variable, never from argv, where `ps` would show it to every
//! user of the host.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The environment variable read when no key file is given.
pub const KEY_ENV: &str = "OSCIL_KEY";

/// Shortest key accepted: 128 bits written as hex.
pub const MIN_KEY_CHARS: usize = 32;

/// Longest key file read: a key is a line (`--gen-key` writes 65 bytes), so more is not one.
pub const MAX_KEY_FILE_BYTES: u64 = 4096;

/// Where a key came from, named in every message about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    File(PathBuf),
    Env,
}

impl fmt::Display for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::File(path) => write!(f, "key file {}", path.display()),
            KeySource::Env => write!(f, "${KEY_ENV}"),
        }
    }
}

/// A pre-shared key. `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct Key(String);

impl Key {
    /// Checks a key's text: surrounding white space is dropped, the rest must be long enough.
    pub fn new(text: &str) -> Result<Key, KeyError> {
        let text = text.trim();
        if text.chars().count() < MIN_KEY_CHARS {
            return Err(KeyError::TooShort {
                origin: None,
                found: text.chars().count(),
            });
        }
        Ok(Key(text.to_string()))
    }

    /// [`Key::new`], naming `source` when the text is no key.
    fn from(source: KeySource, text: &str) -> Result<Key, KeyError> {
        Key::new(text).map_err(|e| match e {
            KeyError::TooShort { found, .. } => KeyError::TooShort {
                origin: Some(source),
                found,
            },
            other => other,
        })
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(<redacted>)")
    }
}

/// Why no usable key was found.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key file could not be read, or is not a regular file (a directory, a device).
    #[error("cannot read key file {path}: {detail}")]
    Unreadable { path: String, detail: String },
    /// The key file holds more than any key.
    #[error("key file {path} holds more than {MAX_KEY_FILE_BYTES} bytes: not a key (oscil-daemon --gen-key writes 65)")]
    TooLarge { path: String },
    /// The key is too short to resist guessing.
    #[error("{} has {found} characters; at least {MIN_KEY_CHARS} are needed (oscil-daemon --gen-key makes one)", origin.as_ref().map_or("the key".to_owned(), ToString::to_string))]
    TooShort {
        origin: Option<KeySource>,
        found: usize,
    },
}

/// A fresh key: 256 bits from the kernel's CSPRNG (`getrandom`), as hex.
pub fn generate_key() -> std::io::Result<String> {
    Ok(random_bytes::<32>()?
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// `N` bytes from the kernel's CSPRNG: for keys, nonces and session ids.
pub fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(format!("getrandom: {e}")))?;
    Ok(bytes)
}

/// `--gen-key > FILE`: the shell made FILE with the umask's mode (often 0644), but a key
/// must not be readable by others, so a regular file on stdout is made 0600 (owner only).
pub fn protect_stdout_file() -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let stdout = Path::new("/proc/self/fd/1");
    match std::fs::metadata(stdout)?.is_file() {
        true => std::fs::set_permissions(stdout, std::fs::Permissions::from_mode(0o600)),
        false => Ok(()),
    }
}

/// As ssh does for a private key: a key file that group or others may read is named, with
/// the fix (no refusal: the key may already be shared where it lies).
pub fn exposed_key_warning(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    // Not a regular file: refused by `load_key`, with no advice to chmod it.
    let meta = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    let mode = meta.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| {
        format!(
            "warning: key file {} can be read by others (mode {mode:04o}): chmod 600 {}",
            path.display(),
            path.display()
        )
    })
}

/// The key from `key_file` when given, else from `$OSCIL_KEY`, else none; with where it
/// came from.
pub fn load_key(key_file: Option<&Path>) -> Result<Option<(Key, KeySource)>, KeyError> {
    if let Some(path) = key_file {
        let text = read_key_file(path)?;
        let source = KeySource::File(path.to_owned());
        return Key::from(source.clone(), &text).map(|key| Some((key, source)));
    }
    match std::env::var(KEY_ENV) {
        Ok(text) if !text.trim().is_empty() => {
            Key::from(KeySource::Env, &text).map(|key| Some((key, KeySource::Env)))
        }
        _ => Ok(None),
    }
}

/// A key file's text: a regular file (a link to one is fine) of at most
/// [`MAX_KEY_FILE_BYTES`]; a directory, a device (`/dev/zero`) or a FIFO is refused at once,
/// never read without bound or waited on.
fn read_key_file(path: &Path) -> Result<String, KeyError> {
    use std::os::unix::fs::OpenOptionsExt;
    let unreadable = |detail: String| KeyError::Unreadable {
        path: path.display().to_string(),
        detail,
    };
    let os = |e: std::io::Error| unreadable(oscil_model::error_text::os_error(&e));
    let regular = |meta: &std::fs::Metadata| match file_kind(meta) {
        None => Ok(()),
        Some(kind) => Err(unreadable(kind)),
    };
    regular(&std::fs::metadata(path).map_err(os)?)?;
    // O_NONBLOCK: a FIFO swapped in since the check must not block the open.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(os)?;
    regular(&file.metadata().map_err(os)?)?;
    let mut bytes = Vec::new();
    file.take(MAX_KEY_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(os)?;
    if bytes.len() as u64 > MAX_KEY_FILE_BYTES {
        return Err(KeyError::TooLarge {
            path: path.display().to_string(),
        });
    }
    String::from_utf8(bytes).map_err(|_| unreadable("not text (a key is a line of hex)".into()))
}

/// What a file that is not a regular one is, in words; `None` for a regular file.
fn file_kind(meta: &std::fs::Metadata) -> Option<String> {
    match oscil_model::error_text::file_kind(meta) {
        "regular file" => None,
        "directory" => Some("it is a directory".into()),
        kind => Some(format!("not a regular file (a {kind})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_trimmed_and_must_be_long() {
        let hex = "00112233445566778899aabbccddeeff";
        assert_eq!(
            Key::new(&format!("  {hex}\n")).unwrap().as_bytes(),
            hex.as_bytes()
        );
        assert!(matches!(
            Key::new("short"),
            Err(KeyError::TooShort { found: 5, .. })
        ));
        assert_eq!(format!("{:?}", Key::new(hex).unwrap()), "Key(<redacted>)");
    }

    #[test]
    fn generated_keys_are_long_enough_and_differ() {
        let (a, b) = (generate_key().unwrap(), generate_key().unwrap());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(Key::new(&a).is_ok());
    }

    #[test]
    fn a_key_file_others_can_read_is_named() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        std::fs::write(&path, "0123456789abcdef0123456789abcdef").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let warning = exposed_key_warning(&path).unwrap();
        assert_eq!(
            warning,
            format!(
                "warning: key file {} can be read by others (mode 0644): chmod 600 {}",
                path.display(),
                path.display()
            )
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(exposed_key_warning(&path), None);
    }

    #[test]
    fn key_file_is_read_and_missing_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "ffeeddccbbaa99887766554433221100\n").unwrap();
        assert!(load_key(Some(&path)).unwrap().is_some());
        let missing = dir.path().join("nope");
        let err = load_key(Some(&missing)).unwrap_err().to_string();
        assert!(err.contains("nope"), "{err}");
        std::fs::write(&path, "short\n").unwrap();
        let err = load_key(Some(&path)).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("key file {} has 5 characters; at least 32 are needed (oscil-daemon --gen-key makes one)", path.display())
        );
    }

    #[test]
    fn files_that_are_not_regular_are_refused_at_once() {
        let refused = |path: &str| load_key(Some(Path::new(path))).unwrap_err().to_string();
        assert_eq!(
            refused("/proc"),
            "cannot read key file /proc: it is a directory"
        );
        assert_eq!(
            refused("/dev/zero"),
            "cannot read key file /dev/zero: not a regular file (a character device)"
        );
        assert_eq!(exposed_key_warning(Path::new("/proc")), None);
        assert_eq!(exposed_key_warning(Path::new("/dev/zero")), None);
        let dir = tempfile::tempdir().unwrap();
        let large = dir.path().join("large");
        std::fs::write(&large, vec![b'a'; 5000]).unwrap();
        assert!(load_key(Some(&large))
            .unwrap_err()
            .to_string()
            .ends_with("holds more than 4096 bytes: not a key (oscil-daemon --gen-key writes 65)"));
    }
}

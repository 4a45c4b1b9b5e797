//! The pre-shared key both ends prove they hold. It comes from a file (`--key-file`) or the
//! `OSCIL_KEY` environment variable, never from argv, where `ps` would show it to every
//! user of the host.

use std::fmt;
use std::path::Path;

/// The environment variable read when no key file is given.
pub const KEY_ENV: &str = "OSCIL_KEY";

/// Shortest key accepted: 128 bits written as hex.
pub const MIN_KEY_CHARS: usize = 32;

/// A pre-shared key. `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct Key(String);

impl Key {
    /// Checks a key's text: surrounding white space is dropped, the rest must be long enough.
    pub fn new(text: &str) -> Result<Key, KeyError> {
        let text = text.trim();
        if text.chars().count() < MIN_KEY_CHARS {
            return Err(KeyError::TooShort {
                found: text.chars().count(),
            });
        }
        Ok(Key(text.to_string()))
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
    /// The key file could not be read.
    #[error("cannot read key file {path}: {detail}")]
    Unreadable { path: String, detail: String },
    /// The key is too short to resist guessing.
    #[error("the key has {found} characters; at least {MIN_KEY_CHARS} are needed (oscil-daemon --gen-key makes one)")]
    TooShort { found: usize },
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
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| {
        format!(
            "warning: key file {} can be read by others (mode {mode:04o}): chmod 600 {}",
            path.display(),
            path.display()
        )
    })
}

/// The key from `key_file` when given, else from `$OSCIL_KEY`, else none.
pub fn load_key(key_file: Option<&Path>) -> Result<Option<Key>, KeyError> {
    if let Some(path) = key_file {
        let text = std::fs::read_to_string(path).map_err(|e| KeyError::Unreadable {
            path: path.display().to_string(),
            detail: crate::error_text::os_error(&e),
        })?;
        return Key::new(&text).map(Some);
    }
    match std::env::var(KEY_ENV) {
        Ok(text) if !text.trim().is_empty() => Key::new(&text).map(Some),
        _ => Ok(None),
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
            Err(KeyError::TooShort { found: 5 })
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
    }
}

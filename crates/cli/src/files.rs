//! Paths as the command line gives them: `~/` expanded from `$HOME` (a quoted `"~/runs"`
//! or `--out=~/runs` reaches us unexpanded), and a file a flag will write checked before
//! the work, so a report or a daemon does not find out after the fact that it cannot.

use std::path::{Path, PathBuf};

use oscil_model::error_text::os_error;

/// A path clap could not take as typed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// `~user/...`: another user's home, which only a shell looks up.
    #[error("{0:?}: ~USER is not expanded here: write the full path (/home/USER/...)")]
    OtherHome(String),
    /// `~/...` without `$HOME` to put in its place.
    #[error("{0:?}: ~ stands for $HOME, which is not set: write the full path")]
    NoHome(String),
}

/// A path flag's value parser: `~` and `~/...` from `$HOME`, anything else as given.
pub fn path(input: &str) -> Result<PathBuf, PathError> {
    let Some(rest) = input.strip_prefix('~') else {
        return Ok(PathBuf::from(input));
    };
    if !(rest.is_empty() || rest.starts_with('/')) {
        return Err(PathError::OtherHome(input.to_owned()));
    }
    let home = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .ok_or_else(|| PathError::NoHome(input.to_owned()))?;
    Ok(PathBuf::from(home).join(rest.trim_start_matches('/')))
}

/// Why a file a flag names cannot be written; checked before any work.
#[derive(Debug, thiserror::Error)]
pub enum OutputFileError {
    #[error("{flag} {}: a directory is there, not a file", path.display())]
    Directory { flag: &'static str, path: PathBuf },
    #[error("{flag} {}: a file is there, not a directory", path.display())]
    NotDirectory { flag: &'static str, path: PathBuf },
    #[error("{flag} {}: no directory {} to write it in", path.display(), dir.display())]
    NoDirectory {
        flag: &'static str,
        path: PathBuf,
        dir: PathBuf,
    },
    #[error("{flag} {}: cannot write in {}: {}", path.display(), dir.display(), os_error(source))]
    NotWritable {
        flag: &'static str,
        path: PathBuf,
        dir: PathBuf,
        source: std::io::Error,
    },
}

/// Checks that `dir` (given to `flag`) is a directory new files can be written in, or can
/// be made one: its nearest existing ancestor takes a new file. Nothing is left behind.
pub fn check_writable_dir(flag: &'static str, dir: &Path) -> Result<(), OutputFileError> {
    if dir.is_dir() {
        return check_writable_file(flag, &dir.join(".oscil-probe"));
    }
    if dir.exists() {
        return Err(OutputFileError::NotDirectory {
            flag,
            path: dir.to_owned(),
        });
    }
    let existing = dir
        .ancestors()
        .skip(1)
        .find(|a| a.as_os_str().is_empty() || a.exists())
        .map(|a| match a.as_os_str().is_empty() {
            true => PathBuf::from("."),
            false => a.to_owned(),
        })
        .unwrap_or_else(|| PathBuf::from("/"));
    match existing.is_dir() {
        true => check_writable_file(flag, &existing.join(".oscil-probe")).map_err(|e| match e {
            OutputFileError::NotWritable {
                dir: at, source, ..
            } => OutputFileError::NotWritable {
                flag,
                path: dir.to_owned(),
                dir: at,
                source,
            },
            other => other,
        }),
        false => Err(OutputFileError::NotDirectory {
            flag,
            path: existing,
        }),
    }
}

/// Checks that `path` (given to `flag`) can be written, as a new file beside it and a
/// rename do: its directory exists and takes a new file (one is made and removed), and
/// `path` is not a directory. Nothing else is touched.
pub fn check_writable_file(flag: &'static str, path: &Path) -> Result<(), OutputFileError> {
    if path.is_dir() {
        return Err(OutputFileError::Directory {
            flag,
            path: path.to_owned(),
        });
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(OutputFileError::NoDirectory {
            flag,
            path: path.to_owned(),
            dir,
        });
    }
    let probe = dir.join(format!(".oscil-probe.{}", std::process::id()));
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe);
    match made {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(source) => Err(OutputFileError::NotWritable {
            flag,
            path: path.to_owned(),
            dir,
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tilde_is_home_and_another_users_is_refused() {
        let home = PathBuf::from(std::env::var_os("HOME").expect("tests run with $HOME"));
        assert_eq!(path("~/runs/a"), Ok(home.join("runs/a")));
        assert_eq!(path("~"), Ok(home.clone()));
        assert_eq!(path("runs/~a"), Ok(PathBuf::from("runs/~a")));
        let message = path("~root/x").unwrap_err().to_string();
        assert!(message.contains("~USER is not expanded here"), "{message}");
    }

    #[test]
    fn a_file_that_cannot_be_written_is_found_before_the_work() {
        let dir = tempfile::tempdir().unwrap();
        let fine = dir.path().join("port");
        check_writable_file("--port-file", &fine).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let message = check_writable_file("--port-file", dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            message.ends_with("a directory is there, not a file"),
            "{message}"
        );
        let missing = dir.path().join("no/such/port");
        let message = check_writable_file("--port-file", &missing)
            .unwrap_err()
            .to_string();
        assert!(message.contains("no directory"), "{message}");
        let message = check_writable_file("--stats", Path::new("/proc/oscil.json"))
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("--stats /proc/oscil.json: cannot write in /proc: "),
            "{message}"
        );
        check_writable_dir("--metrics", &dir.path().join("a/b")).unwrap();
        assert!(!dir.path().join("a").exists());
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        let message = check_writable_dir("--metrics", &file.join("x"))
            .unwrap_err()
            .to_string();
        assert!(
            message.ends_with("a file is there, not a directory"),
            "{message}"
        );
        let message = check_writable_dir("--metrics", Path::new("/proc/m"))
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("--metrics /proc/m: cannot write in /proc: "),
            "{message}"
        );
    }
}

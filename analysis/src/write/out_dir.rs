//! The report's output directory: refused when it holds anything unless `--force`, and
//! then only the files a report writes are removed, so a chart of a run from an earlier
//! report never stays beside a new summary, and nothing else of the user's is touched.
//! The directory and every one above it must be root's or this user's and writable by
//! nobody else (`safe_fs::check_trusted_dir`), checked before the work and again at every
//! file written, each file replaced atomically: root never writes through another user's
//! link, and never leaves half a file under a final name.

use std::fs;
use std::path::Path;

use oscil_rundir::safe_fs;

use crate::error::ReportError;

/// True for a file name a report writes.
pub fn is_report_file(name: &str) -> bool {
    const FIXED: &[&str] = &[
        "summary.csv",
        "summary.md",
        "configurations.csv",
        "cycles.csv",
        "index.html",
        "recommendation.md",
        "comparison.png",
        "path.png",
        "mesh.png",
        "mesh.csv",
        "headline.png",
        "report.json",
    ];
    let png = name.ends_with(".png");
    FIXED.contains(&name)
        || (png && (name.starts_with("overlay") || name.starts_with("cycles")))
        || (name.starts_with("run-") && name.ends_with(".png"))
        || (name.starts_with("99-oscil-tcp") && name.ends_with(".conf"))
}

/// Makes `out` ready: created when missing; when it holds anything, refused without
/// `force`, and with it emptied of earlier report files.
pub fn prepare(out: &Path, force: bool) -> Result<(), ReportError> {
    let io = |source| ReportError::Io {
        path: out.to_owned(),
        source,
    };
    safe_fs::check_trusted_dir(out)?;
    fs::create_dir_all(out).map_err(|e| oscil_rundir::RunDirError::cannot_create(out, &e))?;
    // Again: another user may have made a missing part between the check and now.
    safe_fs::check_trusted_dir(out)?;
    let names: Vec<String> = fs::read_dir(out)
        .map_err(io)?
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    if !force {
        return Err(ReportError::OutNotEmpty(out.to_owned()));
    }
    for name in names.iter().filter(|name| is_report_file(name)) {
        let path = out.join(name);
        fs::remove_file(&path).map_err(|source| ReportError::Io { path, source })?;
    }
    Ok(())
}

/// Replaces `path` atomically, never writing through a link left in `--out`.
pub fn write(path: &Path, text: &str) -> Result<(), ReportError> {
    Ok(safe_fs::write_trusted(path, text.as_bytes(), 0o644)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn force_removes_only_report_files() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("report");
        prepare(&out, false).unwrap();
        for name in [
            "run-old.png",
            "summary.csv",
            "99-oscil-tcp-path2.conf",
            "notes.txt",
        ] {
            fs::write(out.join(name), "x").unwrap();
        }
        let refused = prepare(&out, false).unwrap_err().to_string();
        assert!(refused.contains("--force"), "{refused}");
        prepare(&out, true).unwrap();
        let left: Vec<_> = fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, ["notes.txt"]);
    }
}

//! Everything that can stop the lab, each said in one line, with the exit code it means.

use std::path::PathBuf;

use oscil_rundir::campaign::CampaignError;
use oscil_rundir::safe_fs::SafeFsError;

use super::session::SessionError;
use super::sysctl::RestoreError;
use crate::remote::host::HostError;

/// Everything that can stop the lab, each said in one line.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("{0}")]
    Host(#[from] HostError),
    #[error("{0}")]
    Session(#[from] SessionError),
    #[error("{0}")]
    Restore(#[from] RestoreError),
    #[error("{0}")]
    Campaign(#[from] CampaignError),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] SafeFsError),
    #[error(transparent)]
    Unpack(#[from] crate::remote::unpack::UnpackError),
    /// A host another campaign holds, or whose lock could not be taken.
    #[error(transparent)]
    Lock(#[from] crate::remote::lock::LockError),
    #[error("{0}")]
    Setup(String),
    /// A new campaign's `--out` holds something: a bad value, exit 2 as in the reader.
    #[error("{shown} is not empty: --resume {shown} continues its campaign, --force starts afresh there", shown = .0.display())]
    OutInUse(PathBuf),
    /// `--out` cannot be made a directory (a file is there): a bad value, exit 2.
    #[error(transparent)]
    Out(oscil_rundir::RunDirError),
    /// `--resume DIR`'s campaign.json does not say how it ran: another program made it.
    #[error("campaign.json does not say how it ran (no hosts.lab_backend): not a campaign this oscil-lab made, so it cannot be resumed")]
    NotResumable,
}

impl LabError {
    pub fn io(what: &'static str, path: PathBuf, source: std::io::Error) -> LabError {
        LabError::Io { what, path, source }
    }

    /// True when the command line names what cannot work (a used or unmakeable `--out`,
    /// no campaign in `--resume DIR`, no `restore DIR`): exit 2, as in every binary.
    pub fn is_bad_path(&self) -> bool {
        match self {
            LabError::OutInUse(_) | LabError::Out(_) | LabError::NotResumable => true,
            LabError::Campaign(e) => e.is_bad_path(),
            LabError::Restore(e) => matches!(e, RestoreError::NoDir(_)),
            _ => false,
        }
    }
}

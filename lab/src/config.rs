//! What the lab is asked to do, typed: the command line becomes one of these before
//! anything runs, and a campaign's backend is kept in `campaign.json` so `--resume` and
//! `restore` need nothing but the directory.

use std::path::PathBuf;
use std::time::Duration;

use oscil_model::campaign::Order;
use oscil_model::lab::LinkKind;
use serde::{Deserialize, Serialize};

use crate::remote::host::HostArgError;

use crate::plan::matrix::Matrix;

#[derive(Debug)]
pub enum Job {
    /// Boxed: the plan is far larger than the other jobs.
    New(Box<NewCampaign>),
    Resume {
        dir: PathBuf,
        dry_run: bool,
    },
    Restore {
        dir: PathBuf,
    },
}

#[derive(Debug)]
pub struct NewCampaign {
    pub matrix: Matrix,
    pub repeat: u32,
    pub order: Order,
    pub seed: u64,
    pub out: PathBuf,
    pub force: bool,
    pub dry_run: bool,
    pub backend: BackendSpec,
}

/// Where the runs happen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum BackendSpec {
    /// Two network namespaces on this machine joined by an emulated link.
    Netns {
        link: LinkKind,
        /// Keep each run's link capture (`--pcap`); absent in older campaigns.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pcap: bool,
    },
    /// Two real machines over ssh.
    Hosts(HostsSpec),
    /// Many machines from an inventory, pairs of them measured in rounds
    /// (`crate::backend::fleet`).
    Fleet(FleetSpec),
}

/// Time a run takes beyond its pattern and the session's round trips, for estimates, in the
/// namespaces: starting the link and the daemon.
pub const NETNS_RUN_OVERHEAD: Duration = Duration::from_secs(2);

/// The same on real hosts: ssh's round trips and copying the run directory back.
pub const HOSTS_RUN_OVERHEAD: Duration = Duration::from_secs(5);

impl BackendSpec {
    pub fn per_run_overhead(&self) -> Duration {
        match self {
            BackendSpec::Netns { .. } => NETNS_RUN_OVERHEAD,
            BackendSpec::Hosts(_) | BackendSpec::Fleet(_) => HOSTS_RUN_OVERHEAD,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostsSpec {
    /// `user@host` as ssh takes it: runs oscil-daemon.
    pub sender: String,
    /// `user@host`, or `None` for this machine: runs oscil-reader.
    pub receiver: Option<String>,
    /// Each passed to ssh as `-o KEY=VALUE`.
    pub ssh_options: Vec<String>,
    /// Where the binaries are on the hosts; `None`: on the remote PATH.
    pub remote_bin: Option<String>,
    /// Copy this build's binaries to the hosts first.
    pub install: bool,
    /// Capture each run's packets on the sender with tcpdump (`--pcap`); absent in older
    /// campaigns.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pcap: bool,
}

impl HostsSpec {
    /// Why these hosts, read back from `campaign.json`, are not what the command line could
    /// have given: a target ssh would take for an option, an ssh option not on the list.
    pub fn check(&self) -> Result<(), HostArgError> {
        std::iter::once(&self.sender)
            .chain(&self.receiver)
            .try_for_each(|t| crate::remote::host::check_ssh_target(t))?;
        if let Some(dir) = &self.remote_bin {
            crate::remote::host::check_bin_dir(dir)?;
        }
        self.ssh_options
            .iter()
            .try_for_each(|o| crate::remote::host::check_ssh_option(o))
    }
}

/// Why a fleet read back from `campaign.json` is not one an inventory could have given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetError {
    #[error(transparent)]
    Host(#[from] HostArgError),
    #[error("pair {0} names a host not in the inventory")]
    UnknownHost(String),
    #[error("pair {0} is not a plain name")]
    NotPlain(String),
}

/// A many-host campaign: the inventory's hosts, the pairs measured, and how to reach them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetSpec {
    pub hosts: Vec<crate::backend::fleet::inventory::InventoryHost>,
    pub pairs: Vec<crate::backend::fleet::pairs::Pair>,
    /// Each passed to ssh as `-o KEY=VALUE`, for every host.
    pub ssh_options: Vec<String>,
    /// Where the binaries are on hosts whose inventory entry has no `oscil_bin`.
    pub remote_bin: Option<String>,
    pub install: bool,
}

impl FleetSpec {
    /// Why this fleet, read back from `campaign.json`, is not what an inventory and the
    /// command line could have given.
    pub fn check(&self) -> Result<(), FleetError> {
        for host in &self.hosts {
            crate::remote::host::check_ssh_target(&host.target())?;
        }
        for dir in self.hosts.iter().filter_map(|h| h.bin_dir.as_ref()) {
            crate::remote::host::check_bin_dir(dir)?;
        }
        if let Some(dir) = &self.remote_bin {
            crate::remote::host::check_bin_dir(dir)?;
        }
        for pair in &self.pairs {
            for name in [&pair.sender, &pair.receiver] {
                if !self.hosts.iter().any(|h| h.name == *name) {
                    return Err(FleetError::UnknownHost(pair.to_string()));
                }
            }
            if !oscil_model::campaign::is_plain_label(&pair.dir_name()) {
                return Err(FleetError::NotPlain(pair.to_string()));
            }
        }
        self.ssh_options
            .iter()
            .try_for_each(|o| crate::remote::host::check_ssh_option(o))?;
        Ok(())
    }

    pub fn host(&self, name: &str) -> Option<&crate::backend::fleet::inventory::InventoryHost> {
        self.hosts.iter().find(|h| h.name == name)
    }
}

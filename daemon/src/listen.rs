//! What the daemon's process needs around the server: room in the open files limit, the
//! `--port-file`, and the signals that stop it.

use std::path::Path;

use crate::budget::{self, Budget, Demand};
use crate::config::DaemonConfig;

/// `PORT\n` into `path` through a new file beside it (never one already there, nor a link)
/// and a rename: a reader of `path` sees nothing or the whole line.
pub(crate) fn write_port_file(path: &Path, port: u16) -> std::io::Result<()> {
    use std::io::Write;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".{}.tmp", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)?;
    let written = file
        .write_all(format!("{port}\n").as_bytes())
        .and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// Raises the soft open-files limit to the hard one (a flood then meets the caps, not the
/// default 1,024), and shares it out: the flows the daemon serves in all, or why the limits
/// asked for do not fit.
pub(crate) fn fit_to_open_files(
    config: &DaemonConfig,
    flows_asked: Option<u32>,
) -> anyhow::Result<Budget> {
    let (limit_fds, _) = oscil_kernel::raise_nofile_limit()
        .map_err(|e| anyhow::anyhow!("cannot read the open files limit: {e}"))?;
    let open_fds = budget::open_fds_now()
        .map_err(|e| anyhow::anyhow!("cannot count open files (/proc/self/fd): {e}"))?;
    let demand = Demand {
        sessions: config.max_sessions as u64,
        startups: config.max_startups.full as u64,
        flows: flows_asked,
    };
    Ok(budget::plan(limit_fds, open_fds, demand)?)
}

/// Completes on Ctrl-C or SIGTERM.
pub(crate) async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

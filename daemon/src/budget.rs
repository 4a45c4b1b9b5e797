//! What the daemon may hold at once, fitted to the open-files limit it got: a flow, a
//! session and a connection not yet authenticated each cost descriptors, and a daemon that
//! promises more than its limit allows fails in `accept` ("Too many open files") instead of
//! telling a reader it is busy. Pure arithmetic; `main` measures and says the result.

use std::fmt;

/// Descriptors per data connection: its socket, and the writer's second descriptor of it
/// (`latency::Writer` waits on its own registration, apart from tokio's). Measured by
/// `tests/budget.rs`.
pub const FDS_PER_FLOW: u64 = 2;
/// Descriptors per session besides its flows: the control connection, the sampler's
/// sock_diag socket, the file of a write buffer of the session's own size, the scratch
/// socket its options are tried on, and the host's load readings (an rtnetlink socket,
/// `/proc/net/softnet_stat`, `/proc/stat`). Measured by `tests/budget.rs`.
pub const FDS_PER_SESSION: u64 = 7;
/// Descriptors per connection before authentication: its socket.
pub const FDS_PER_STARTUP: u64 = 1;
/// Kept free beyond the sum: what the daemon opens after it has counted (the two `/proc`
/// files and the payload file of `run`, the signal handler's pipe) and a connection
/// accepted only to be turned away.
pub const SPARE_FDS: u64 = 16;
/// Flows in all when `--max-total-flows` is not given and the limit allows this many.
pub const DEFAULT_MAX_TOTAL_FLOWS: u32 = 1024;

/// The daemon's limits, as the budget sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Demand {
    /// `--max-sessions`.
    pub sessions: u64,
    /// The FULL of `--max-startups`.
    pub startups: u64,
    /// `--max-total-flows`, when given.
    pub flows: Option<u32>,
}

/// How the open-files limit is shared out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// RLIMIT_NOFILE's soft limit.
    pub limit_fds: u64,
    /// Descriptors open when the budget was made.
    pub open_fds: u64,
    pub sessions: u64,
    pub startups: u64,
    /// Data connections of all sessions together: `--max-total-flows`.
    pub max_total_flows: u32,
}

/// Why the limits asked for cannot be served within the open-files limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// An explicit `--max-total-flows` needs more descriptors than are left.
    #[error(
        "--max-total-flows {asked} needs {needed_fds} open files ({FDS_PER_FLOW} per flow), \
         but the open files limit {limit_fds} leaves {left_fds} after the sessions, \
         unauthenticated connections and spare: give at most {fits}, or raise the limit \
         (ulimit -n)"
    )]
    Flows {
        asked: u32,
        needed_fds: u64,
        limit_fds: u64,
        left_fds: u64,
        fits: u64,
    },
    /// Not even one flow fits beside the sessions and unauthenticated connections.
    #[error(
        "the open files limit {limit_fds} leaves no room for a flow: {open_fds} open, \
         {SPARE_FDS} spare, {startups} unauthenticated connections (--max-startups) and \
         {sessions} sessions (--max-sessions, {FDS_PER_SESSION} each): lower those, or raise \
         the limit (ulimit -n)"
    )]
    NoRoom {
        limit_fds: u64,
        open_fds: u64,
        startups: u64,
        sessions: u64,
    },
}

/// Fits `demand` into `limit_fds` with `open_fds` already open: the flows a given
/// `--max-total-flows` allows is checked, an absent one is the most that fits (at most
/// [`DEFAULT_MAX_TOTAL_FLOWS`]).
pub fn plan(limit_fds: u64, open_fds: u64, demand: Demand) -> Result<Budget, BudgetError> {
    let fixed = open_fds
        + SPARE_FDS
        + demand.startups * FDS_PER_STARTUP
        + demand.sessions * FDS_PER_SESSION;
    let left_fds = limit_fds.saturating_sub(fixed);
    let fits = left_fds / FDS_PER_FLOW;
    if fits == 0 {
        return Err(BudgetError::NoRoom {
            limit_fds,
            open_fds,
            startups: demand.startups,
            sessions: demand.sessions,
        });
    }
    let max_total_flows = match demand.flows {
        Some(asked) if u64::from(asked) > fits => {
            return Err(BudgetError::Flows {
                asked,
                needed_fds: u64::from(asked) * FDS_PER_FLOW,
                limit_fds,
                left_fds,
                fits,
            })
        }
        Some(asked) => asked,
        None => fits.min(u64::from(DEFAULT_MAX_TOTAL_FLOWS)) as u32,
    };
    Ok(Budget {
        limit_fds,
        open_fds,
        sessions: demand.sessions,
        startups: demand.startups,
        max_total_flows,
    })
}

/// Descriptors this process has open now (`/proc/self/fd`, less the one reading it).
pub fn open_fds_now() -> std::io::Result<u64> {
    let entries = std::fs::read_dir("/proc/self/fd")?.count() as u64;
    Ok(entries.saturating_sub(1))
}

impl Budget {
    /// Descriptors the daemon may hold at most, by this budget.
    pub fn planned_fds(&self) -> u64 {
        self.open_fds
            + SPARE_FDS
            + self.startups * FDS_PER_STARTUP
            + self.sessions * FDS_PER_SESSION
            + u64::from(self.max_total_flows) * FDS_PER_FLOW
    }
}

impl fmt::Display for Budget {
    /// One line for the start-up log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "open files: limit {}, {} open; at most {} unauthenticated, {} sessions x {}, \
             {} flows x {} (--max-total-flows), {} spare: {} in all",
            self.limit_fds,
            self.open_fds,
            self.startups,
            self.sessions,
            FDS_PER_SESSION,
            self.max_total_flows,
            FDS_PER_FLOW,
            SPARE_FDS,
            self.planned_fds()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: Demand = Demand {
        sessions: 16,
        startups: 100,
        flows: None,
    };

    #[test]
    fn a_thousand_descriptors_hold_about_four_hundred_flows() {
        let budget = plan(1024, 10, DEFAULTS).unwrap();
        // 1024 - 10 open - 16 spare - 100 startups - 16 x 7 sessions = 786, 2 per flow.
        assert_eq!(budget.max_total_flows, 393);
        assert!(budget.planned_fds() <= 1024);
        assert_eq!(
            budget.to_string(),
            "open files: limit 1024, 10 open; at most 100 unauthenticated, 16 sessions x 7, \
             393 flows x 2 (--max-total-flows), 16 spare: 1024 in all"
        );
    }

    #[test]
    fn a_large_limit_keeps_the_default_and_an_explicit_count_is_checked() {
        let roomy = plan(1 << 20, 10, DEFAULTS).unwrap();
        assert_eq!(roomy.max_total_flows, DEFAULT_MAX_TOTAL_FLOWS);
        let asked = Demand {
            flows: Some(1024),
            ..DEFAULTS
        };
        assert_eq!(plan(1 << 20, 10, asked).unwrap().max_total_flows, 1024);
        let error = plan(1024, 10, asked).unwrap_err();
        assert!(
            matches!(error, BudgetError::Flows { fits: 393, .. }),
            "{error}"
        );
        assert!(error.to_string().contains("give at most 393"), "{error}");
    }

    #[test]
    fn no_room_for_one_flow_is_an_error_naming_the_other_limits() {
        let error = plan(128, 10, DEFAULTS).unwrap_err();
        assert!(matches!(error, BudgetError::NoRoom { .. }), "{error}");
        assert!(error.to_string().contains("--max-startups"), "{error}");
    }
}

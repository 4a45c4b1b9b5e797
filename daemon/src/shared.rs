//! What every connection task of a running daemon shares: the configuration, the slots,
//! the sessions waiting for their data connections, the `/proc` files and the payload.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use oscil_kernel::{ProcFile, TcpExt};
use oscil_model::host::Sockstat;
use oscil_protocol::control::DataHello;
use oscil_protocol::proof::{DataKey, SessionId};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};

use crate::config::DaemonConfig;
use crate::flow::payload::Payload;

/// A data connection handed to the session it names.
pub(crate) struct DataConn {
    pub(crate) flow: u32,
    pub(crate) stream: TcpStream,
}

/// Where a session waiting for its data connections takes them, and from whom.
pub(crate) struct Route {
    /// The control connection's address: data connections from elsewhere are refused.
    pub(crate) peer: IpAddr,
    pub(crate) key: DataKey,
    pub(crate) tx: mpsc::Sender<DataConn>,
}

/// The `/proc` files every session's sampler reads, opened once at start so that no flood
/// of connections can take the descriptors they need.
pub(crate) struct ProcFiles {
    pub(crate) sockstat: Mutex<ProcFile<Sockstat>>,
    pub(crate) netstat: Mutex<ProcFile<TcpExt>>,
}

impl ProcFiles {
    pub(crate) fn tcpext(&self) -> Result<TcpExt, oscil_kernel::ReadError> {
        self.netstat
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .read()
    }
}

/// What every connection task shares.
pub(crate) struct Shared {
    pub(crate) config: DaemonConfig,
    pub(crate) sessions: Arc<Semaphore>,
    pub(crate) flows: Arc<Semaphore>,
    pub(crate) admission: Arc<crate::gate::admission::Admission>,
    pub(crate) refusals: crate::gate::refusals::Refusals,
    /// Sessions waiting for data connections, by session id.
    pub(crate) routes: Mutex<HashMap<SessionId, Route>>,
    pub(crate) proc: Arc<ProcFiles>,
    /// The bytes every write offers; their content does not matter.
    pub(crate) payload: Payload,
    /// Who may trace, and the room the traces share.
    pub(crate) trace: crate::trace::TraceBudget,
    /// The listening reader this daemon dials (`--connect`): it opens every data
    /// connection itself.
    pub(crate) dial: Option<std::net::SocketAddr>,
}

impl Shared {
    /// The session a data hello is for and its data key, if the hello was signed with that
    /// key and comes from the session's address.
    pub(crate) fn route_for(
        &self,
        hello: &DataHello,
        peer: IpAddr,
    ) -> Option<(mpsc::Sender<DataConn>, DataKey)> {
        let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        let route = routes.get(&hello.session_id)?;
        (route.peer == peer && hello.is_signed_by(&route.key))
            .then(|| (route.tx.clone(), route.key.clone()))
    }

    /// Where a session's data connections go and its data key, while it waits for them.
    pub(crate) fn route_of(
        &self,
        session_id: &SessionId,
    ) -> Option<(mpsc::Sender<DataConn>, DataKey)> {
        let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        let route = routes.get(session_id)?;
        Some((route.tx.clone(), route.key.clone()))
    }
}

impl Shared {
    pub(crate) fn new(config: DaemonConfig) -> std::io::Result<Shared> {
        let proc_error = |e: oscil_kernel::ReadError| std::io::Error::other(e.to_string());
        let payload = Payload::new(config.write_chunk_bytes)?;
        Ok(Shared {
            sessions: Arc::new(Semaphore::new(config.max_sessions)),
            flows: Arc::new(Semaphore::new(config.max_total_flows as usize)),
            admission: crate::gate::admission::Admission::new(
                config.max_startups,
                config.max_startups_per_source,
                crate::gate::admission::Graces::of(config.preauth_timeout),
            ),
            refusals: crate::gate::refusals::Refusals::default(),
            routes: Mutex::new(HashMap::new()),
            proc: Arc::new(ProcFiles {
                sockstat: Mutex::new(oscil_kernel::host::sockstat::open().map_err(proc_error)?),
                netstat: Mutex::new(oscil_kernel::host::netstat::open().map_err(proc_error)?),
            }),
            payload,
            trace: crate::trace::TraceBudget::new(&config, oscil_kernel::online_cpus()),
            config,
            dial: None,
        })
    }
}

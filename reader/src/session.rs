//! Opening a test session: the control connection, the hello, and the data connections.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use oscil_kernel::{sockopt, OptionsInForce};
use oscil_protocol::address::IpFamily;
use oscil_protocol::cli;
use oscil_protocol::control::{
    Connection, DaemonMessage, DataHello, Hello, ReaderMessage, Welcome, PROTOCOL_VERSION,
};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{lookup_host, TcpSocket, TcpStream};
use tokio::time::timeout;

use crate::{ReaderConfig, ReaderError};

/// How long connecting and the daemon's answer may take before the reader gives up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A session the daemon accepted, with every data connection open.
pub struct Session {
    pub control_rx: Connection<OwnedReadHalf>,
    pub control_tx: Connection<OwnedWriteHalf>,
    pub welcome: Welcome,
    pub data: Vec<TcpStream>,
    pub reader_options: OptionsInForce,
}

pub async fn open(config: &ReaderConfig) -> Result<Session, ReaderError> {
    let addr = resolve(&config.connect, config.family).await?;
    let connect_error = |source| ReaderError::Connect {
        addr: config.connect.clone(),
        source,
    };
    let socket = new_socket(addr, config.bind).map_err(connect_error)?;
    let stream = timeout(HANDSHAKE_TIMEOUT, socket.connect(addr))
        .await
        .map_err(|_| ReaderError::Timeout("connecting to the daemon"))?
        .map_err(connect_error)?;
    stream.set_nodelay(true).map_err(connect_error)?;
    let (rx, tx) = stream.into_split();
    let (mut control_rx, mut control_tx) = (Connection::new(rx), Connection::new(tx));

    control_tx
        .write(&ReaderMessage::Hello(Hello {
            version: PROTOCOL_VERSION,
            software: crate::SOFTWARE.into(),
            token: config
                .key
                .as_ref()
                .map(|k| String::from_utf8_lossy(k.as_bytes()).into_owned()),
            flows: config.flows,
            options: config.sender_request.clone(),
            interval_us: config.interval.as_micros() as u64,
            duration_us: config.pattern.total().as_micros() as u64,
        }))
        .await?;
    let answer = timeout(HANDSHAKE_TIMEOUT, control_rx.read::<DaemonMessage>())
        .await
        .map_err(|_| ReaderError::Timeout("waiting for the daemon's answer"))??;
    let welcome = match answer {
        Some(DaemonMessage::Welcome(welcome)) => welcome,
        Some(DaemonMessage::Refused { reason }) => return Err(ReaderError::Refused(reason)),
        Some(_) => return Err(ReaderError::Unexpected("an answer to the hello")),
        None => return Err(ReaderError::ClosedEarly),
    };
    if welcome.version != PROTOCOL_VERSION {
        return Err(ReaderError::Version {
            daemon: welcome.version,
        });
    }

    let mut data = Vec::with_capacity(config.flows as usize);
    let mut reader_options = None;
    for flow in 0..config.flows {
        let (stream, in_force) = open_flow(addr, config, welcome.session_id, flow).await?;
        reader_options.get_or_insert(in_force);
        data.push(stream);
    }
    Ok(Session {
        control_rx,
        control_tx,
        welcome,
        data,
        reader_options: reader_options.unwrap_or_default(),
    })
}

async fn resolve(connect: &str, family: IpFamily) -> Result<SocketAddr, ReaderError> {
    let resolve_error = |detail: String| ReaderError::Address {
        addr: connect.to_owned(),
        detail,
    };
    let mut addrs = lookup_host(connect)
        .await
        .map_err(|e| resolve_error(cli::os_error(&e)))?;
    addrs
        .find(|addr| family.allows(addr.ip()))
        .ok_or_else(|| resolve_error("no address of the family asked (-4/-6)".into()))
}

/// A socket of `addr`'s family, bound to `bind` when the user named a source address.
fn new_socket(addr: SocketAddr, bind: Option<IpAddr>) -> std::io::Result<TcpSocket> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4(),
        SocketAddr::V6(_) => TcpSocket::new_v6(),
    }?;
    if let Some(ip) = bind {
        socket.bind(SocketAddr::new(ip, 0))?;
    }
    Ok(socket)
}

/// Opens one data connection; the reader's own options (SO_RCVBUF) go on before connect so
/// that the window scale is chosen with them.
async fn open_flow(
    addr: SocketAddr,
    config: &ReaderConfig,
    session_id: u64,
    flow: u32,
) -> Result<(TcpStream, OptionsInForce), ReaderError> {
    let io_error = |source| ReaderError::Data { flow, source };
    let socket = new_socket(addr, config.bind).map_err(io_error)?;
    let in_force = sockopt::apply(&socket, &config.reader_request)?;
    let mut stream = timeout(HANDSHAKE_TIMEOUT, socket.connect(addr))
        .await
        .map_err(|_| ReaderError::Timeout("opening a data connection"))?
        .map_err(io_error)?;
    stream
        .write_all(&DataHello { session_id, flow }.encode())
        .await
        .map_err(io_error)?;
    Ok((stream, in_force))
}

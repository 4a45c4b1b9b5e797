//! `oscil-daemon`: the sender end of an oscil test. Flags become a `DaemonConfig`; the
//! library does the rest.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use oscil_daemon::{DaemonConfig, StartupLimits};
use oscil_kernel::SocketOptions;
use oscil_protocol::units::{parse_bytes_u32, parse_positive_duration, parse_rate_bps};

/// Serve oscil test sessions: stream at full speed on every data connection, with the socket
/// options each session asks for, and send samples of the sender's side to the reader.
#[derive(Debug, Parser)]
#[command(name = "oscil-daemon", version)]
struct Cli {
    /// Address to listen on for control and data connections (IPv4 or IPv6, e.g. [::]:5250).
    #[arg(long, default_value = "127.0.0.1:5250")]
    listen: SocketAddr,
    /// TCP_NOTSENT_LOWAT for sessions that do not ask (e.g. 128k); unset: the sysctl applies.
    #[arg(long, value_parser = parse_bytes_u32)]
    notsent_lowat: Option<u32>,
    /// SO_SNDBUF for sessions that do not ask (the kernel doubles it; disables autotuning).
    #[arg(long, value_parser = parse_bytes_u32)]
    sndbuf: Option<u32>,
    /// Congestion control for sessions that do not ask (e.g. cubic, bbr, reno).
    #[arg(long)]
    congestion: Option<String>,
    /// File holding the pre-shared key readers must prove they hold (else $OSCIL_KEY; never
    /// on the command line).
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// Serve anyone on a non-loopback address without a key.
    #[arg(long)]
    insecure_no_auth: bool,
    /// Print a fresh key (for --key-file) and exit.
    #[arg(long)]
    gen_key: bool,
    /// Sessions served at once; more are refused as busy.
    #[arg(long, default_value_t = 16)]
    max_sessions: usize,
    /// Data connections one session may open.
    #[arg(long, default_value_t = 256)]
    max_flows: u32,
    /// Data connections of all sessions together.
    #[arg(long, default_value_t = 1024)]
    max_total_flows: u32,
    /// A session's total pacing rate (100mbit, 1gbit), split evenly over its flows and set
    /// as each flow's SO_MAX_PACING_RATE; a reader may ask for less, never more.
    #[arg(long, value_parser = parse_rate_bps, value_name = "RATE")]
    max_rate: Option<u64>,
    /// Longest session served.
    #[arg(long, default_value = "15m", value_parser = parse_positive_duration)]
    max_session: Duration,
    /// Unauthenticated connections held at once, as sshd's MaxStartups START:RATE:FULL: from
    /// START on, refuse new ones with probability RATE%, rising to 100% at FULL.
    #[arg(long, default_value = "10:30:100", value_name = "START:RATE:FULL")]
    max_startups: StartupLimits,
    /// Unauthenticated connections held at once from one address (IPv6: one /64).
    #[arg(long, default_value_t = 10)]
    per_source_max_startups: usize,
    /// Time a connection has to authenticate (or, for a data connection, to name its session).
    #[arg(long, default_value = "3s", value_parser = parse_positive_duration)]
    preauth_timeout: Duration,
    /// Time allowed after authentication for the data connections and start, and for each
    /// control write.
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration)]
    handshake_timeout: Duration,
}

impl Cli {
    fn into_config(self) -> anyhow::Result<DaemonConfig> {
        let key = oscil_protocol::key::load_key(self.key_file.as_deref())?;
        if key.is_none() && !self.listen.ip().is_loopback() && !self.insecure_no_auth {
            anyhow::bail!(
                "refusing to listen on {} without a key: give --key-file or $OSCIL_KEY \
                 (oscil-daemon --gen-key makes one), or --insecure-no-auth",
                self.listen
            );
        }
        Ok(DaemonConfig {
            default_options: SocketOptions {
                notsent_lowat_bytes: self.notsent_lowat,
                sndbuf_bytes: self.sndbuf,
                congestion: self.congestion,
                ..Default::default()
            },
            key,
            max_sessions: self.max_sessions,
            max_flows: self.max_flows,
            max_total_flows: self.max_total_flows,
            max_rate_bps: self.max_rate,
            max_session: self.max_session,
            max_startups: self.max_startups,
            max_startups_per_source: self.per_source_max_startups,
            preauth_timeout: self.preauth_timeout,
            handshake_timeout: self.handshake_timeout,
            ..Default::default()
        })
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    match serve(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("oscil-daemon: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(cli: Cli) -> anyhow::Result<()> {
    if cli.gen_key {
        println!("{}", oscil_protocol::key::generate_key()?);
        return Ok(());
    }
    let listen = cli.listen;
    let config = cli.into_config()?;
    // A flood then meets the caps above, not the default soft limit of 1,024 descriptors.
    match oscil_kernel::raise_nofile_limit() {
        Ok((soft, _)) => eprintln!("oscil-daemon: up to {soft} open files"),
        Err(e) => eprintln!("oscil-daemon: cannot raise the open files limit: {e}"),
    }
    if let Err(e) = oscil_daemon::check_default_options(&config, listen.is_ipv6()) {
        anyhow::bail!("default socket options: {e}");
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    eprintln!("oscil-daemon: listening on {}", listener.local_addr()?);
    oscil_daemon::run(listener, config, shutdown_signal()).await?;
    eprintln!("oscil-daemon: stopped");
    Ok(())
}

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
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

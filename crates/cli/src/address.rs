//! The address grammar every oscil binary and the lab accept, as iperf3 users type it:
//! `HOST`, `HOST:PORT`, `[V6]:PORT`, `[V6]` or a bare IPv6 literal, with port 5250 when none
//! is given. A listening address also takes `PORT` and `:PORT` (every address).

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

/// The port oscil listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 5250;

/// Which IP version to use (`-4`, `-6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IpFamily {
    #[default]
    Any,
    V4,
    V6,
}

impl IpFamily {
    pub fn allows(self, ip: IpAddr) -> bool {
        match self {
            IpFamily::Any => true,
            IpFamily::V4 => ip.is_ipv4(),
            IpFamily::V6 => ip.is_ipv6(),
        }
    }
}

/// A host (name or literal) and a port, not yet resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    /// The literal address when the host is one (no lookup needed), without its scope.
    pub fn ip(&self) -> Option<IpAddr> {
        let (address, _) = split_scope(&self.host);
        address.parse().ok()
    }

    /// `HOST:PORT`, with brackets around IPv6 literals and a link-local scope as the
    /// interface's index (`[fe80::1%2]:5250`): what `lookup_host` takes.
    pub fn lookup_form(&self) -> String {
        match (self.ip(), split_scope(&self.host).1) {
            (Some(IpAddr::V6(ip)), Some(zone)) => {
                let index = interface_index(zone).unwrap_or(0);
                format!("[{ip}%{index}]:{}", self.port)
            }
            _ => self.to_string(),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let zone = split_scope(&self.host).1.map(|z| format!("%{z}"));
        match self.ip() {
            Some(IpAddr::V6(ip)) => write!(f, "[{ip}{}]:{}", zone.unwrap_or_default(), self.port),
            _ => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

/// `fe80::1%eth0` into the address and its scope (an interface's name or index).
fn split_scope(host: &str) -> (&str, Option<&str>) {
    match host.split_once('%') {
        Some((address, zone)) => (address, Some(zone)),
        None => (host, None),
    }
}

/// The index of the interface a scope names: a number, or a name this host has.
fn interface_index(zone: &str) -> Option<u32> {
    if let Ok(index) = zone.parse::<u32>() {
        return Some(index);
    }
    let safe = !zone.is_empty() && !zone.contains('/') && zone != "." && zone != "..";
    let text = std::fs::read_to_string(format!("/sys/class/net/{zone}/ifindex")).ok();
    text.filter(|_| safe)?.trim().parse().ok()
}

/// An IPv6 literal with a scope (`fe80::1%eth0`), checked: the address is IPv6 and the
/// interface is on this host; `None` when `host` has no scope.
fn scoped_v6(host: &str) -> Option<Result<String, String>> {
    let (address, zone) = split_scope(host);
    let zone = zone?;
    if address.parse::<Ipv6Addr>().is_err() {
        return Some(Err(
            "a %SCOPE follows an IPv6 address only (fe80::1%eth0)".into()
        ));
    }
    Some(match interface_index(zone) {
        Some(_) => Ok(host.to_owned()),
        None => Err(format!(
            "no interface {zone:?} on this host for the scope of {address}"
        )),
    })
}

/// An address that does not fit the grammar; the message shows the forms expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("address {input:?} is not valid: {problem}; expected {expected}")]
pub struct AddressError {
    input: String,
    problem: String,
    expected: &'static str,
}

const CONNECT_FORMS: &str =
    "HOST, HOST:PORT, [IPV6]:PORT or a bare IPv6 address (e.g. sender.example.net, 10.0.0.1:5250, [2001:db8::1]:5250)";
const LISTEN_FORMS: &str =
    "PORT, :PORT, HOST:PORT or [IPV6]:PORT (e.g. 5250, :5250, 127.0.0.1:5250, [::]:5250)";

/// Parses the address a client connects to.
pub fn parse_connect(input: &str) -> Result<Endpoint, AddressError> {
    parse_host_port(input, CONNECT_FORMS, false)
}

/// Parses a local address to connect from (`-B`): an IP address alone, since the kernel
/// picks the local port; `127.0.0.1:5999` and `[::1]:5999` are refused saying so.
pub fn parse_bind(input: &str) -> Result<IpAddr, AddressError> {
    const BIND_FORMS: &str =
        "an IP address of this host, without a port (e.g. 10.0.0.2, 2001:db8::2)";
    let trimmed = input.trim();
    if let Ok(ip) = trimmed.parse::<IpAddr>() {
        return Ok(ip);
    }
    if let (address, Some(_)) = split_scope(trimmed) {
        if address.parse::<Ipv6Addr>().is_ok() {
            return Err(AddressError {
                input: input.to_owned(),
                problem: format!("-B takes no %SCOPE: give the scope with the daemon's address (-c fe80::...%IFACE) and -B {address}, or leave out -B"),
                expected: BIND_FORMS,
            });
        }
    }
    let problem = match trimmed.parse::<std::net::SocketAddr>() {
        Ok(with_port) => format!(
            "-B takes no port (the kernel picks the local one); write {}",
            with_port.ip()
        ),
        Err(_) => "not an IP address".to_owned(),
    };
    Err(AddressError {
        input: input.to_owned(),
        problem,
        expected: BIND_FORMS,
    })
}

/// Parses the address a server listens on; `PORT` and `:PORT` mean every address (IPv6
/// and, where the host allows it, IPv4 too).
pub fn parse_listen(input: &str) -> Result<Endpoint, AddressError> {
    let trimmed = input.trim();
    let port_only = trimmed.strip_prefix(':').unwrap_or(trimmed);
    if !port_only.is_empty() && port_only.bytes().all(|b| b.is_ascii_digit()) {
        let port = parse_port(input, port_only, LISTEN_FORMS, true)?;
        return Ok(Endpoint {
            host: Ipv6Addr::UNSPECIFIED.to_string(),
            port,
        });
    }
    parse_host_port(input, LISTEN_FORMS, true)
}

/// `any_port`: port 0 (the kernel picks a free one) makes sense only for listening.
fn parse_host_port(
    input: &str,
    expected: &'static str,
    any_port: bool,
) -> Result<Endpoint, AddressError> {
    let error = |problem: &str| AddressError {
        input: input.to_owned(),
        problem: problem.to_owned(),
        expected,
    };
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Err(error("it is empty"));
    }
    // A URL (`http://host:5250/`): the host and port in it, without the scheme or path.
    if let Some((scheme, rest)) = trimmed.split_once("://") {
        let authority = rest.split('/').next().unwrap_or_default();
        let authority = authority.rsplit('@').next().unwrap_or_default();
        return Err(error(&format!(
            "a URL, but oscil speaks its own protocol, not {scheme}: give the host alone ({})",
            if authority.is_empty() {
                "HOST"
            } else {
                authority
            }
        )));
    }
    if let Some(rest) = trimmed.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| error("a '[' without its ']'"))?;
        if let Some(scoped) = scoped_v6(host) {
            scoped.map_err(|problem| error(&problem))?;
        } else if host.parse::<Ipv6Addr>().is_err() {
            return Err(error("brackets hold an IPv6 address only"));
        }
        let port = match after {
            "" => DEFAULT_PORT,
            _ => match after.strip_prefix(':') {
                Some(port) => parse_port(input, port, expected, any_port)?,
                None => return Err(error("text after ']' that is not :PORT")),
            },
        };
        return Ok(Endpoint {
            host: host.to_owned(),
            port,
        });
    }
    if let Some(scoped) = scoped_v6(trimmed) {
        let host = scoped.map_err(|problem| error(&problem))?;
        return Ok(Endpoint {
            host,
            port: DEFAULT_PORT,
        });
    }
    if trimmed.parse::<Ipv6Addr>().is_ok() {
        if let Some((head, port)) = looks_like_port(trimmed) {
            return Err(error(&format!(
                "it reads as an IPv6 address or as [{head}]:{port}; write [{head}]:{port} for a port, [{trimmed}] for the address"
            )));
        }
        return Ok(Endpoint {
            host: trimmed.to_owned(),
            port: DEFAULT_PORT,
        });
    }
    match trimmed.split_once(':') {
        None => check_host(trimmed).map_err(error).map(|host| Endpoint {
            host,
            port: DEFAULT_PORT,
        }),
        Some((_, rest)) if rest.contains(':') => Err(error(
            "an IPv6 address with a port needs brackets, as in [::1]:5250",
        )),
        Some((host, port)) => Ok(Endpoint {
            host: check_host(host).map_err(error)?,
            port: parse_port(input, port, expected, any_port)?,
        }),
    }
}

/// `::1:5250` is a valid IPv6 address, but a port was surely meant: the last group is a
/// decimal number and what precedes it is an address of its own.
fn looks_like_port(v6: &str) -> Option<(&str, &str)> {
    let (head, last) = v6.rsplit_once(':')?;
    let decimal = (1..=5).contains(&last.len()) && last.bytes().all(|b| b.is_ascii_digit());
    let head_is_address = head.parse::<Ipv6Addr>().is_ok() && !head.ends_with(':');
    (decimal && head_is_address && v6.contains("::")).then_some((head, last))
}

fn check_host(host: &str) -> Result<String, &'static str> {
    let valid = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
    if valid {
        Ok(host.to_owned())
    } else {
        Err("the host is not a name or an address")
    }
}

fn parse_port(
    input: &str,
    port: &str,
    expected: &'static str,
    any_port: bool,
) -> Result<u16, AddressError> {
    match port.parse::<u16>() {
        Ok(port) if port > 0 || any_port => Ok(port),
        _ => Err(AddressError {
            input: input.to_owned(),
            problem: "the port must be a number from 1 to 65535".into(),
            expected,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(host: &str, port: u16) -> Result<Endpoint, AddressError> {
        Ok(Endpoint {
            host: host.into(),
            port,
        })
    }

    #[test]
    fn connect_forms_as_iperf3_users_type_them() {
        assert_eq!(parse_connect("localhost"), ok("localhost", 5250));
        assert_eq!(parse_connect("localhost:5201"), ok("localhost", 5201));
        assert_eq!(parse_connect("10.0.0.1"), ok("10.0.0.1", 5250));
        assert_eq!(parse_connect("::1"), ok("::1", 5250));
        assert_eq!(parse_connect("[::1]"), ok("::1", 5250));
        assert_eq!(parse_connect("[2001:db8::1]:9000"), ok("2001:db8::1", 9000));
        assert_eq!(
            parse_connect(" sender.example.net "),
            ok("sender.example.net", 5250)
        );
    }

    #[test]
    fn connect_errors_name_the_problem_and_the_forms() {
        let message = |input| parse_connect(input).unwrap_err().to_string();
        assert!(message("::1:5250").contains("write [::1]:5250 for a port"));
        assert!(message("host:1:2").contains("needs brackets"));
        assert!(message("host:0").contains("1 to 65535"));
        assert!(message("host:http").contains("1 to 65535"));
        assert!(message("[::1").contains("without its ']'"));
        assert!(message("[host]:1").contains("IPv6 address only"));
        assert!(message("a b").contains("not a name"));
        assert!(message("").contains("empty"));
        assert!(message("[::1]x").contains(":PORT"));
        assert!(message("x:").contains("[IPV6]:PORT"));
        assert!(message("http://sender.example:5250/").contains(
            "a URL, but oscil speaks its own protocol, not http: give the host alone (sender.example:5250)"
        ));
    }

    #[test]
    fn listen_also_takes_a_bare_port() {
        assert_eq!(parse_listen("5250"), ok("::", 5250));
        assert_eq!(parse_listen(":6000"), ok("::", 6000));
        assert_eq!(parse_listen("127.0.0.1:5250"), ok("127.0.0.1", 5250));
        assert_eq!(parse_listen("[::]:5250"), ok("::", 5250));
        assert_eq!(parse_listen("localhost"), ok("localhost", 5250));
        assert!(parse_listen("70000").is_err());
        assert_eq!(
            parse_listen("127.0.0.1:0"),
            ok("127.0.0.1", 0),
            "any free port"
        );
        assert!(parse_listen("::1:5250").is_err());
    }

    #[test]
    fn bind_takes_an_address_without_a_port() {
        assert_eq!(parse_bind("10.0.0.2"), Ok("10.0.0.2".parse().unwrap()));
        assert_eq!(parse_bind("::1"), Ok("::1".parse().unwrap()));
        let message = parse_bind("127.0.0.1:5999").unwrap_err().to_string();
        assert!(
            message.contains("-B takes no port (the kernel picks the local one); write 127.0.0.1"),
            "{message}"
        );
        let message = parse_bind("[::1]:5999").unwrap_err().to_string();
        assert!(message.contains("write ::1"), "{message}");
        let message = parse_bind("host.example").unwrap_err().to_string();
        assert!(message.contains("not an IP address"), "{message}");
    }

    #[test]
    fn link_local_addresses_keep_their_scope() {
        let bare = parse_connect("fe80::1%lo").unwrap();
        assert_eq!(bare.port, DEFAULT_PORT);
        assert_eq!(bare.to_string(), "[fe80::1%lo]:5250");
        assert_eq!(bare.lookup_form(), "[fe80::1%1]:5250");
        let bracketed = parse_connect("[fe80::1%lo]:6000").unwrap();
        assert_eq!(bracketed.lookup_form(), "[fe80::1%1]:6000");
        assert!(parse_listen("[fe80::1%1]:0").is_ok());
        let message = parse_connect("fe80::1%nosuchif0").unwrap_err().to_string();
        assert!(
            message.contains("no interface \"nosuchif0\" on this host"),
            "{message}"
        );
        let message = parse_bind("fe80::1%lo").unwrap_err().to_string();
        assert!(message.contains("-B takes no %SCOPE"), "{message}");
    }

    #[test]
    fn display_brackets_ipv6_for_lookup() {
        assert_eq!(parse_connect("::1").unwrap().lookup_form(), "[::1]:5250");
        assert_eq!(parse_connect("h:1").unwrap().to_string(), "h:1");
    }
}

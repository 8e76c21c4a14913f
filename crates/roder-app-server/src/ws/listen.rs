//! Where to listen, as a person types it: `127.0.0.1:8080`, `localhost:0`,
//! `[::1]:8080`, `0.0.0.0:8080`. A host name is resolved once, here, and the
//! server binds (and applies its loopback rule to) the address it resolved
//! to, never the name: a name that resolves elsewhere later changes nothing.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs as _};

/// Why a listen address was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListenAddressError {
    #[error(
        "listen address {text:?} {why}; write HOST:PORT, for example 127.0.0.1:8080, localhost:0 or [::1]:8080"
    )]
    Malformed { text: String, why: &'static str },
    #[error("listen address {text:?}: cannot resolve the host name {host:?}: {reason}")]
    Unresolved {
        text: String,
        host: String,
        reason: String,
    },
}

/// The host part of a listen address, before resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Host<'a> {
    Ip(IpAddr),
    Name(&'a str),
}

/// Resolves a listen address to the one socket address to bind: an IP
/// address as given, or the first address a host name resolves to.
///
/// Blocking: a host name is resolved with the system resolver. Call it
/// before the async runtime starts (the CLI does, while parsing its
/// arguments) or from a blocking task.
///
/// ```
/// use roder_app_server::resolve_listen_address;
///
/// let any = resolve_listen_address("0.0.0.0:8080").unwrap();
/// assert_eq!(any.port(), 8080);
/// assert!(resolve_listen_address("[::1]:0").unwrap().ip().is_loopback());
/// assert!(resolve_listen_address("localhost").is_err()); // no port
/// ```
pub fn resolve_listen_address(text: &str) -> Result<SocketAddr, ListenAddressError> {
    let malformed = |why| ListenAddressError::Malformed {
        text: text.to_string(),
        why,
    };
    let (host, port) = split(text).map_err(malformed)?;
    let name = match host {
        Host::Ip(ip) => return Ok(SocketAddr::new(ip, port)),
        Host::Name(name) => name,
    };
    let unresolved = |reason: String| ListenAddressError::Unresolved {
        text: text.to_string(),
        host: name.to_string(),
        reason,
    };
    (name, port)
        .to_socket_addrs()
        .map_err(|error| unresolved(error.to_string()))?
        .next()
        .ok_or_else(|| unresolved("it has no address".to_string()))
}

/// `HOST:PORT` or `[IPV6]:PORT`, split and checked without resolving.
fn split(text: &str) -> Result<(Host<'_>, u16), &'static str> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inside, port) = rest
            .split_once("]:")
            .ok_or("has a [ without a closing ]:PORT")?;
        let ip = inside
            .parse::<std::net::Ipv6Addr>()
            .map_err(|_| "has brackets around something that is not an IPv6 address")?;
        (Host::Ip(IpAddr::V6(ip)), port)
    } else {
        let (host, port) = text.rsplit_once(':').ok_or("has no :PORT")?;
        let host = if let Ok(ip) = host.parse::<IpAddr>() {
            if ip.is_ipv6() {
                return Err("is an IPv6 address without brackets");
            }
            Host::Ip(ip)
        } else if host.is_empty() {
            return Err("has no host");
        } else if host.contains(':') {
            return Err("is an IPv6 address without brackets");
        } else if host
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '/')
        {
            return Err("has a host that is not a host name");
        } else {
            Host::Name(host)
        };
        (host, port)
    };
    if port.is_empty() || !port.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err("has a port that is not a number");
    }
    let port = port.parse().map_err(|_| "has a port above 65535")?;
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_and_addresses_split_into_host_and_port() {
        assert_eq!(split("localhost:0"), Ok((Host::Name("localhost"), 0)));
        assert_eq!(
            split("[::1]:8080"),
            Ok((Host::Ip("::1".parse().unwrap()), 8080))
        );
        assert_eq!(
            split("0.0.0.0:8080"),
            Ok((Host::Ip("0.0.0.0".parse().unwrap()), 8080))
        );
        for (text, why) in [
            ("localhost", "has no :PORT"),
            (":8080", "has no host"),
            ("localhost:", "has a port that is not a number"),
            ("localhost:+80", "has a port that is not a number"),
            ("localhost:65536", "has a port above 65535"),
            ("::1:8080", "is an IPv6 address without brackets"),
            ("[::1]8080", "has a [ without a closing ]:PORT"),
            (
                "[localhost]:80",
                "has brackets around something that is not an IPv6 address",
            ),
            ("local host:80", "has a host that is not a host name"),
        ] {
            assert_eq!(split(text), Err(why), "{text}");
        }
    }

    #[test]
    fn host_names_resolve_once_to_an_address() {
        let local = resolve_listen_address("localhost:0").unwrap();
        assert!(local.ip().is_loopback(), "{local}");
        let error = resolve_listen_address("no-such-host.invalid:80")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("cannot resolve the host name \"no-such-host.invalid\""),
            "{error}"
        );
        let error = resolve_listen_address("localhost").unwrap_err().to_string();
        assert!(
            error.contains("\"localhost\" has no :PORT") && error.contains("[::1]:8080"),
            "{error}"
        );
    }

    proptest! {
        #[test]
        fn any_text_is_split_or_refused_without_panicking(text in "\\PC{0,40}") {
            let _ = split(&text);
        }

        #[test]
        fn every_socket_address_round_trips(ip in any::<IpAddr>(), port in any::<u16>()) {
            let address = SocketAddr::new(ip, port);
            prop_assert_eq!(resolve_listen_address(&address.to_string()), Ok(address));
        }

        #[test]
        fn names_keep_their_text(name in "[a-z][a-z0-9.-]{0,30}", port in any::<u16>()) {
            let text = format!("{name}:{port}");
            prop_assert_eq!(split(&text), Ok((Host::Name(&name), port)));
        }
    }
}

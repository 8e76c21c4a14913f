//! Who may open a WebSocket connection.
//!
//! With a token, only requests bearing it are upgraded: in
//! `Authorization: Bearer <token>` (programs), or, from the served web page
//! (a browser cannot set that header on a WebSocket), as the subprotocol
//! `roder.token.<hex of the token>` next to `roder.v1`. Everything else gets
//! 401 before any method can run. A token never travels in a URL, so it is
//! never in a history, a log or a `Referer`.
//!
//! A request with an `Origin` header comes from a web page. It is accepted
//! only from the server's own page: the origin must be `http://` + the
//! request's `Host`, so another site a visitor opens cannot drive the API
//! from their browser. Without a token (loopback only) the `Host` must also
//! name a loopback address (`localhost`, `127.0.0.1`, `[::1]`): a site that
//! rebinds its own name to 127.0.0.1 is same-origin with itself, but its
//! `Host` is its own name, so it is refused too.

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::codes;

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    MissingToken,
    WrongToken,
    BrowserOrigin,
}

/// The subprotocol the page offers, and the one the server then selects (a
/// browser fails a connection that offered subprotocols when none is
/// selected).
pub(crate) const SUBPROTOCOL: &str = "roder.v1";
/// Prefix of the subprotocol that carries the token, hex-encoded (a
/// subprotocol is an HTTP token: hex always fits).
const TOKEN_SUBPROTOCOL: &str = "roder.token.";

pub(crate) fn check(headers: &HeaderMap, token: Option<&str>) -> Result<(), Refusal> {
    if let Some(expected) = token {
        let presented = presented_token(headers).ok_or(Refusal::MissingToken)?;
        if !constant_time_eq(presented.as_bytes(), expected.as_bytes()) {
            return Err(Refusal::WrongToken);
        }
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let host = headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .unwrap_or("");
    let own_page = origin
        .to_str()
        .ok()
        .and_then(|origin| origin.strip_prefix("http://"))
        .is_some_and(|origin_host| !host.is_empty() && origin_host.eq_ignore_ascii_case(host));
    if !own_page {
        return Err(Refusal::BrowserOrigin);
    }
    if token.is_none() && !host_is_loopback(host) {
        return Err(Refusal::BrowserOrigin);
    }
    Ok(())
}

/// Whether a `Host` header names a loopback address (what a page served
/// without a token must be opened from).
pub(crate) fn host_is_loopback(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or("", |(inside, _)| inside),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The token from `Authorization: Bearer` or from the page's subprotocol.
fn presented_token(headers: &HeaderMap) -> Option<String> {
    if let Some(bearer) = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
    {
        return Some(bearer.trim().to_string());
    }
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .find_map(|protocol| protocol.trim().strip_prefix(TOKEN_SUBPROTOCOL))
        .and_then(decode_hex)
}

/// Hex to a UTF-8 string, on bytes; `None` for anything else.
fn decode_hex(text: &str) -> Option<String> {
    let digit = |byte: u8| {
        char::from(byte)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    let decoded = bytes
        .chunks_exact(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(decoded).ok()
}

/// Compares without returning early, so timing does not reveal how much of
/// a guessed token was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut difference = a.len() ^ b.len();
    for (index, byte) in b.iter().enumerate() {
        difference |= usize::from(a.get(index).copied().unwrap_or(0) ^ byte);
    }
    difference == 0
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            Refusal::MissingToken => (
                StatusCode::UNAUTHORIZED,
                "unauthorized: this server needs `Authorization: Bearer <token>`",
            ),
            Refusal::WrongToken => (
                StatusCode::UNAUTHORIZED,
                "unauthorized: the bearer token is wrong",
            ),
            Refusal::BrowserOrigin => (
                StatusCode::FORBIDDEN,
                "forbidden: a web page may connect only from this server's own page, opened at a loopback address unless the server has a token",
            ),
        };
        let body = json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": { "code": codes::UNAUTHORIZED, "message": message },
        });
        let mut response = (status, axum::Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(name.clone(), value.parse().unwrap());
        }
        map
    }

    #[test]
    fn a_token_must_be_presented_exactly() {
        let token = Some("s3cret");
        assert_eq!(check(&headers(&[]), token), Err(Refusal::MissingToken));
        assert_eq!(
            check(&headers(&[(header::AUTHORIZATION, "Bearer s3cre")]), token),
            Err(Refusal::WrongToken)
        );
        assert_eq!(
            check(
                &headers(&[(header::AUTHORIZATION, "Bearer s3cret!")]),
                token
            ),
            Err(Refusal::WrongToken)
        );
        assert_eq!(
            check(&headers(&[(header::AUTHORIZATION, "Basic s3cret")]), token),
            Err(Refusal::MissingToken)
        );
        assert_eq!(
            check(&headers(&[(header::AUTHORIZATION, "Bearer s3cret")]), token),
            Ok(())
        );
    }

    #[test]
    fn without_a_token_only_the_own_page_on_loopback_connects() {
        assert_eq!(check(&headers(&[]), None), Ok(()));
        assert_eq!(
            check(&headers(&[(header::ORIGIN, "https://example.test")]), None),
            Err(Refusal::BrowserOrigin)
        );
        let own = |host: &str, origin: &str| {
            check(
                &headers(&[(header::HOST, host), (header::ORIGIN, origin)]),
                None,
            )
        };
        assert_eq!(own("127.0.0.1:8080", "http://127.0.0.1:8080"), Ok(()));
        assert_eq!(own("localhost:8080", "http://localhost:8080"), Ok(()));
        assert_eq!(own("[::1]:8080", "http://[::1]:8080"), Ok(()));
        // Another site, another port, another scheme.
        assert_eq!(
            own("127.0.0.1:8080", "http://evil.test"),
            Err(Refusal::BrowserOrigin)
        );
        assert_eq!(
            own("127.0.0.1:8080", "http://127.0.0.1:8081"),
            Err(Refusal::BrowserOrigin)
        );
        assert_eq!(
            own("127.0.0.1:8080", "https://127.0.0.1:8080"),
            Err(Refusal::BrowserOrigin)
        );
        assert_eq!(own("", "http://"), Err(Refusal::BrowserOrigin));
        // DNS rebinding: same origin as itself, but not a loopback Host.
        assert_eq!(
            own("evil.test:8080", "http://evil.test:8080"),
            Err(Refusal::BrowserOrigin)
        );
    }

    #[test]
    fn the_page_presents_its_token_as_a_subprotocol() {
        let token = Some("s3cret");
        let hex: String = "s3cret".bytes().map(|byte| format!("{byte:02x}")).collect();
        let offered = format!("roder.v1, roder.token.{hex}");
        let page = |origin: &str, protocols: &str| {
            check(
                &headers(&[
                    (header::HOST, "10.0.0.5:8080"),
                    (header::ORIGIN, origin),
                    (header::SEC_WEBSOCKET_PROTOCOL, protocols),
                ]),
                token,
            )
        };
        assert_eq!(page("http://10.0.0.5:8080", &offered), Ok(()));
        assert_eq!(
            page("http://10.0.0.5:8080", "roder.v1"),
            Err(Refusal::MissingToken)
        );
        assert_eq!(
            page("http://10.0.0.5:8080", "roder.v1, roder.token.7333"),
            Err(Refusal::WrongToken)
        );
        // The right token from another site's page is still refused.
        assert_eq!(
            page("http://evil.test", &offered),
            Err(Refusal::BrowserOrigin)
        );
    }

    #[test]
    fn hosts_are_loopback_by_their_address_or_localhost() {
        for host in [
            "127.0.0.1:1",
            "localhost:80",
            "LOCALHOST",
            "[::1]:9",
            "127.9.9.9",
        ] {
            assert!(host_is_loopback(host), "{host}");
        }
        for host in [
            "10.0.0.5:80",
            "evil.test:80",
            "[::2]:1",
            "",
            "[::1",
            "localhost.evil:1",
        ] {
            assert!(!host_is_loopback(host), "{host}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_header_text_is_judged_without_panicking(text in "\\PC{0,40}") {
            let _ = decode_hex(&text);
            let _ = host_is_loopback(&text);
            if let Ok(value) = text.parse::<header::HeaderValue>() {
                let mut map = HeaderMap::new();
                map.insert(header::SEC_WEBSOCKET_PROTOCOL, value.clone());
                map.insert(header::ORIGIN, value.clone());
                map.insert(header::HOST, value);
                let _ = check(&map, Some("t"));
                let _ = check(&map, None);
            }
        }
    }
}

//! Who may open a WebSocket connection.
//!
//! With a token, only requests bearing it (`Authorization: Bearer <token>`)
//! are upgraded; everything else gets 401 before any method can run. Without
//! one (loopback only), requests that carry an `Origin` header are refused:
//! they come from a web page, and any page the user opens could otherwise
//! drive a local agent that runs shell commands.

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

pub(crate) fn check(headers: &HeaderMap, token: Option<&str>) -> Result<(), Refusal> {
    match token {
        Some(expected) => {
            let presented = headers
                .get(header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.strip_prefix("Bearer "))
                .ok_or(Refusal::MissingToken)?;
            if constant_time_eq(presented.trim().as_bytes(), expected.as_bytes()) {
                Ok(())
            } else {
                Err(Refusal::WrongToken)
            }
        }
        None if headers.contains_key(header::ORIGIN) => Err(Refusal::BrowserOrigin),
        None => Ok(()),
    }
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
                "forbidden: connections from web pages (an Origin header) need the server to run with a token",
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
    fn without_a_token_web_pages_are_refused() {
        assert_eq!(check(&headers(&[]), None), Ok(()));
        assert_eq!(
            check(&headers(&[(header::ORIGIN, "https://example.test")]), None),
            Err(Refusal::BrowserOrigin)
        );
    }
}

//! The web page the WebSocket server serves at `/` and `/threads/ID`: one
//! HTML document, its scripts (one file per part: the connection, the
//! thread list, one thread, rendering, the timeline, actions) and one style
//! sheet under `/assets/`, built into the binary (`include_str!`), so the
//! page works on a machine without the internet and nothing is fetched from
//! elsewhere.
//!
//! The page is a client like any other: it speaks the same JSON-RPC over a
//! WebSocket to this server, under the same token rules (`ws/auth.rs`).
//! The responses carry a strict Content-Security-Policy (scripts, styles
//! and connections from this origin only, no inline code, no framing), so
//! even text a model wrote cannot run as script in the page.
//!
//! Serving the files needs no token: they hold no secret, and the page asks
//! for the token before it connects. Without a token the server listens on
//! loopback only, and the page is served only to requests whose `Host` is a
//! loopback address (a site rebinding its name to 127.0.0.1 gets 403).

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::ws::auth::host_is_loopback;

const INDEX_HTML: &str = include_str!("assets/index.html");

/// The files under `/assets/`, by name, with their content type.
const FILES: &[(&str, &str, &str)] = &[
    ("rpc.js", include_str!("assets/rpc.js"), JS),
    ("threads.js", include_str!("assets/threads.js"), JS),
    ("thread.js", include_str!("assets/thread.js"), JS),
    ("render.js", include_str!("assets/render.js"), JS),
    ("timeline.js", include_str!("assets/timeline.js"), JS),
    ("actions.js", include_str!("assets/actions.js"), JS),
    (
        "app.css",
        include_str!("assets/app.css"),
        "text/css; charset=utf-8",
    ),
];
const JS: &str = "text/javascript; charset=utf-8";

/// No inline script or style, nothing from another origin, no framing, no
/// form posts, no plugins. `connect-src 'self'` covers the page's own
/// `ws://` origin.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// A file of the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asset {
    /// The document, for `/` and `/threads/ID`.
    Page,
    /// A file under `/assets/`: its body and content type.
    File(&'static str, &'static str),
}

impl Asset {
    /// The file `/assets/NAME`, if there is one.
    pub(crate) fn named(name: &str) -> Option<Asset> {
        FILES
            .iter()
            .find(|(file, _, _)| *file == name)
            .map(|(_, body, kind)| Asset::File(body, kind))
    }

    fn body(self) -> &'static str {
        match self {
            Asset::Page => INDEX_HTML,
            Asset::File(body, _) => body,
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Asset::Page => "text/html; charset=utf-8",
            Asset::File(_, kind) => kind,
        }
    }
}

/// Serves `asset` to a request with `headers`, on a server that has a
/// token or not.
pub(crate) fn serve(asset: Asset, headers: &HeaderMap, has_token: bool) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .unwrap_or("");
    if !has_token && !host_is_loopback(host) {
        return (
            StatusCode::FORBIDDEN,
            "this server has no token, so its page is served at a loopback address only \
             (open http://127.0.0.1:PORT/, or run it with --token-env)",
        )
            .into_response();
    }
    let mut response = asset.body().into_response();
    let set = response.headers_mut();
    set.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type()),
    );
    set.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    set.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    set.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    set.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    set.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Whether a request to `/` asks for a WebSocket (rather than the page).
pub(crate) fn wants_websocket(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.eq_ignore_ascii_case("websocket"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_host(host: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, host.parse().unwrap());
        headers
    }

    #[test]
    fn the_page_is_served_with_a_strict_policy() {
        let response = serve(Asset::Page, &with_host("127.0.0.1:9"), false);
        assert_eq!(response.status(), StatusCode::OK);
        let csp = response.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap();
        assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe"));
        assert!(csp.contains("frame-ancestors 'none'"));
        assert_eq!(response.headers()[header::X_FRAME_OPTIONS], "DENY");
    }

    #[test]
    fn without_a_token_the_page_is_for_loopback_hosts_only() {
        let script = Asset::named("rpc.js").unwrap();
        let rebound = serve(script, &with_host("evil.test:9"), false);
        assert_eq!(rebound.status(), StatusCode::FORBIDDEN);
        let with_token = serve(script, &with_host("10.1.2.3:9"), true);
        assert_eq!(with_token.status(), StatusCode::OK);
    }

    #[test]
    fn the_page_loads_every_file_it_names_and_nothing_from_elsewhere() {
        for (name, _, _) in FILES {
            assert!(
                INDEX_HTML.contains(&format!("\"/assets/{name}\"")),
                "{name}"
            );
        }
        assert_eq!(Asset::named("../Cargo.toml"), None);
        let files = FILES.iter().map(|(name, _, _)| Asset::named(name).unwrap());
        for asset in std::iter::once(Asset::Page).chain(files) {
            let body = asset.body();
            assert!(
                !body.contains("http://") && !body.contains("https://"),
                "{asset:?}"
            );
            assert!(!body.contains("<script>"), "no inline script: {asset:?}");
        }
    }
}

//! Bad input gets the right JSON-RPC error and the server keeps serving:
//! each case is followed by a request that must still work.

mod support;

use std::net::SocketAddr;

use roder_app_server::{ConnectionLimits, WsServerConfig, bind_ws, codes};
use serde_json::{Value, json};
use support::{Client, Harness};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite;

/// Sends raw text and returns the error it gets (the next message).
async fn error_for(client: &mut Client, text: &str) -> Value {
    client.send_raw(text);
    let message = client.next_message().await;
    assert_eq!(message["jsonrpc"], "2.0", "{message}");
    message
}

async fn still_serving(client: &mut Client) {
    let listed = client.call("runners/list", json!({})).await;
    assert_eq!(listed["runners"][0]["providerId"], "mock");
    assert_eq!(
        listed["sandbox"],
        json!([{"backend": "test-backend", "protections": [
            {"name": "network", "active": true, "detail": "network Off"}
        ]}])
    );
}

async fn bad_input_is_answered_and_the_server_keeps_serving(client: &mut Client, limit: usize) {
    // Before initialize, only initialize works.
    let early = client.call_err("thread/list", json!({})).await;
    assert_eq!(early["code"], codes::NOT_INITIALIZED);
    client.initialize().await;
    let twice = client.call_err("initialize", json!({})).await;
    assert_eq!(twice["code"], codes::INVALID_REQUEST);
    still_serving(client).await;

    let malformed = error_for(client, r#"{"jsonrpc":"2.0","id":1,"method":"#).await;
    assert_eq!(malformed["id"], Value::Null);
    assert_eq!(malformed["error"]["code"], codes::PARSE_ERROR);
    still_serving(client).await;

    let batch = error_for(
        client,
        r#"[{"jsonrpc":"2.0","id":1,"method":"runners/list"}]"#,
    )
    .await;
    assert_eq!(batch["error"]["code"], codes::INVALID_REQUEST);
    let wrong_version = error_for(
        client,
        r#"{"jsonrpc":"1.0","id":"v","method":"runners/list"}"#,
    )
    .await;
    assert_eq!(wrong_version["id"], "v");
    assert_eq!(wrong_version["error"]["code"], codes::INVALID_REQUEST);
    still_serving(client).await;

    let unknown = client.call_err("thread/explode", json!({})).await;
    assert_eq!(unknown["code"], codes::METHOD_NOT_FOUND);
    assert!(
        unknown["message"]
            .as_str()
            .unwrap()
            .contains("thread/explode")
    );
    still_serving(client).await;

    let missing = client
        .call_err("turn/start", json!({"message": "hi"}))
        .await;
    assert_eq!(missing["code"], codes::INVALID_PARAMS);
    assert_eq!(missing["data"]["field"], "threadId");
    assert!(missing["message"].as_str().unwrap().contains("threadId"));
    let wrong_type = client
        .call_err("thread/events", json!({"threadId": "t", "cursor": "zero"}))
        .await;
    assert_eq!(wrong_type["code"], codes::INVALID_PARAMS);
    assert_eq!(wrong_type["data"]["field"], "cursor");
    let snake = client
        .call_err("thread/read", json!({"thread_id": "t"}))
        .await;
    assert_eq!(snake["data"]["field"], "thread_id");
    let both = client
        .call_err(
            "thread/start",
            json!({"runner": {"providerId": "mock", "workspace": "/w"}, "workdir": {"claim": {"id": "x"}}}),
        )
        .await;
    assert_eq!(both["data"]["field"], "workdir");
    still_serving(client).await;

    let oversized = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"thread/start","params":{{"title":"{}"}}}}"#,
        "x".repeat(limit)
    );
    let too_large = error_for(client, &oversized).await;
    assert_eq!(too_large["error"]["code"], codes::MESSAGE_TOO_LARGE);
    assert_eq!(too_large["error"]["data"]["limit"], limit);
    still_serving(client).await;

    // A notification (no id) gets no answer at all, even when unknown.
    client.send_raw(r#"{"jsonrpc":"2.0","method":"no/such/notification"}"#);
    still_serving(client).await;

    let not_installed = client
        .call_err(
            "thread/start",
            json!({"runner": {"providerId": "nope", "workspace": "/w"}}),
        )
        .await;
    assert_eq!(not_installed["code"], codes::RUNTIME_ERROR);
    assert!(not_installed["message"].as_str().unwrap().contains("nope"));
    still_serving(client).await;
}

const LIMIT: usize = 16 * 1024;

#[tokio::test]
async fn bad_input_over_websocket() {
    let harness = Harness::new(vec![]);
    let addr = harness
        .serve_ws(WsServerConfig {
            max_message_bytes: LIMIT,
            ..WsServerConfig::default()
        })
        .await;
    let mut client = Client::ws(addr, None).await.unwrap();
    bad_input_is_answered_and_the_server_keeps_serving(&mut client, LIMIT).await;
}

#[tokio::test]
async fn bad_input_over_stdio() {
    let harness = Harness::new(vec![]);
    let mut client = Client::stdio(
        harness.runtime.clone(),
        ConnectionLimits {
            max_message_bytes: LIMIT,
            ..ConnectionLimits::default()
        },
    );
    bad_input_is_answered_and_the_server_keeps_serving(&mut client, LIMIT).await;
    // Far past the limit, a line is skipped as it streams, not buffered.
    client.send_raw("y".repeat(LIMIT * 64));
    let skipped = client.next_message().await;
    assert_eq!(skipped["error"]["code"], codes::MESSAGE_TOO_LARGE);
    still_serving(&mut client).await;
}

fn status_of(error: tungstenite::Error) -> u16 {
    match error {
        tungstenite::Error::Http(response) => response.status().as_u16(),
        other => panic!("expected an HTTP refusal, got {other}"),
    }
}

#[tokio::test]
async fn a_token_is_checked_before_any_method_runs() {
    let harness = Harness::new(vec![]);
    let addr = harness
        .serve_ws(WsServerConfig {
            token: Some("s3cret-token".to_string()),
            ..WsServerConfig::default()
        })
        .await;
    let missing = Client::ws(addr, None).await.err().expect("refused");
    assert_eq!(status_of(missing), 401);
    let wrong = Client::ws(addr, Some("guess"))
        .await
        .err()
        .expect("refused");
    assert_eq!(status_of(wrong), 401);
    // Nothing ran: no thread was created by the refused connections.
    assert!(harness.runtime.list_threads().await.unwrap().is_empty());

    let mut client = Client::ws(addr, Some("s3cret-token")).await.unwrap();
    client.initialize().await;
    still_serving(&mut client).await;
    // The refusal body is a JSON-RPC error.
    let (status, body) = http_get(addr, "/", &UPGRADE).await;
    assert_eq!(status, 401);
    // Without asking to upgrade, `/` is the web page, which holds no secret
    // and asks for the token before it connects.
    let (status, page) = http_get(addr, "/", &[]).await;
    assert_eq!(status, 200);
    assert!(page.contains("<title>Roder</title>"), "{page}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], codes::UNAUTHORIZED);
}

#[tokio::test]
async fn without_a_token_web_pages_cannot_connect() {
    let harness = Harness::new(vec![]);
    let addr = harness.serve_ws(WsServerConfig::default()).await;
    let (status, _) = http_get(
        addr,
        "/",
        &[&[("Origin", "https://evil.example")], UPGRADE.as_slice()].concat(),
    )
    .await;
    assert_eq!(status, 403);
    // The server's own page (same origin, loopback Host) is let in.
    let own = format!("http://{addr}");
    let (status, _) = http_get(
        addr,
        "/",
        &[&[("Origin", own.as_str())], UPGRADE.as_slice()].concat(),
    )
    .await;
    assert_eq!(status, 101);
}

/// The headers of a WebSocket upgrade request.
const UPGRADE: [(&str, &str); 4] = [
    ("Connection", "Upgrade"),
    ("Upgrade", "websocket"),
    ("Sec-WebSocket-Version", "13"),
    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
];

#[tokio::test]
async fn a_non_loopback_address_needs_a_token() {
    let harness = Harness::new(vec![]);
    let error = bind_ws(
        harness.runtime.clone(),
        WsServerConfig {
            listen: "0.0.0.0:0".parse().unwrap(),
            ..WsServerConfig::default()
        },
    )
    .await
    .err()
    .expect("refused");
    let message = error.to_string();
    assert!(message.contains("without a token"), "{message}");
    assert!(message.contains("--token-env"), "{message}");
    let empty = bind_ws(
        harness.runtime.clone(),
        WsServerConfig {
            token: Some("  ".to_string()),
            ..WsServerConfig::default()
        },
    )
    .await
    .err()
    .expect("refused");
    assert!(empty.to_string().contains("empty"));
}

#[tokio::test]
async fn health_and_readiness() {
    let harness = Harness::new(vec![]);
    let addr = harness
        .serve_ws(WsServerConfig {
            token: Some("t0ken".to_string()),
            ..WsServerConfig::default()
        })
        .await;
    let (status, body) = http_get(addr, "/healthz", &[]).await;
    assert_eq!((status, body.contains("\"ok\"")), (200, true), "{body}");
    let (status, body) = http_get(addr, "/readyz", &[]).await;
    assert_eq!((status, body.contains("\"ready\"")), (200, true), "{body}");
}

/// A bare HTTP/1.1 GET over a real socket; returns status and body.
async fn http_get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if !headers.iter().any(|(name, _)| *name == "Connection") {
        request.push_str("Connection: close\r\n");
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let mut buffer = [0u8; 4096];
    // Read until the headers and the body announced by Content-Length are in.
    loop {
        let read = tokio::time::timeout(support::WAIT, stream.read(&mut buffer))
            .await
            .unwrap()
            .unwrap();
        response.extend_from_slice(&buffer[..read]);
        let text = String::from_utf8_lossy(&response).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if body.len() >= length || read == 0 {
                let status = head.split(' ').nth(1).unwrap().parse().unwrap();
                return (status, body.to_string());
            }
        }
        assert!(read > 0, "connection closed before a full response");
    }
}

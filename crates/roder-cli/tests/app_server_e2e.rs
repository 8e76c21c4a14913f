//! `roder app-server` as a process: JSON-RPC over stdio, and a WebSocket
//! listener that prints its address and answers `/healthz`.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

fn command(home: &std::path::Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"));
    command
        .env("RODER_HOME", home)
        .env_remove("RODER_MODEL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    command
}

#[tokio::test]
async fn stdio_answers_initialize_and_errors_by_code() {
    let home = tempfile::tempdir().unwrap();
    let mut child = command(home.path())
        .args(["app-server", "-C", home.path().to_str().unwrap()])
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = async |line: &str| -> serde_json::Value {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let reply = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        serde_json::from_str(&reply).unwrap()
    };
    let before = ask(r#"{"jsonrpc":"2.0","id":1,"method":"thread/list","params":{}}"#).await;
    assert_eq!(before["error"]["code"], -32005);
    let init = ask(r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{}}"#).await;
    assert_eq!(init["result"]["serverInfo"]["name"], "roder-app-server");
    let garbage = ask("{not json").await;
    assert_eq!(garbage["error"]["code"], -32700);
    let unknown = ask(r#"{"jsonrpc":"2.0","id":3,"method":"nope/nope","params":{}}"#).await;
    assert_eq!(unknown["error"]["code"], -32601);
    let list = ask(r#"{"jsonrpc":"2.0","id":4,"method":"thread/list","params":{}}"#).await;
    assert!(list["result"].is_object(), "{list}");
}

/// Starts `app-server --listen LISTEN` and asks the address it prints for
/// `/healthz`; returns that address.
async fn serves_health(home: &std::path::Path, listen: &str) -> String {
    let mut child = command(home)
        .args([
            "app-server",
            "--listen",
            listen,
            "-C",
            home.to_str().unwrap(),
        ])
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let address = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap_or_else(|| panic!("--listen {listen}: no address printed"));
    let host = address.strip_prefix("ws://").expect("a ws:// address");
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    stream
        .write_all(
            format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let mut response = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        stream.read_to_string(&mut response),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{listen}: {response}");
    address
}

#[tokio::test]
async fn listen_prints_the_address_and_serves_health() {
    let home = tempfile::tempdir().unwrap();
    let address = serves_health(home.path(), "127.0.0.1:0").await;
    assert!(address.starts_with("ws://127.0.0.1:"), "{address}");

    // A public address without a token is refused before listening.
    let refused = command(home.path())
        .args(["app-server", "--listen", "0.0.0.0:0"])
        .stderr(std::process::Stdio::piped())
        .output()
        .await
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("token"));
}

#[tokio::test]
async fn listen_takes_host_names_and_applies_the_loopback_rule_to_their_address() {
    let home = tempfile::tempdir().unwrap();
    // Resolved once, to a loopback address: served without a token.
    let address = serves_health(home.path(), "localhost:0").await;
    let bound: std::net::SocketAddr = address["ws://".len()..].parse().unwrap();
    assert!(bound.ip().is_loopback(), "{address}");
    let address = serves_health(home.path(), "[::1]:0").await;
    assert!(address.starts_with("ws://[::1]:"), "{address}");

    // "0" is a name to Rust, but the resolver reads it as 0.0.0.0, every
    // address: the loopback rule sees what it resolved to, so it needs a
    // token (exit 1: refused when binding, not when parsing).
    for (listen, code, says) in [
        ("no-such-host.invalid:80", 2, "cannot resolve the host name"),
        ("localhost", 2, "has no :PORT"),
        ("::1:80", 2, "without brackets"),
        ("0:0", 1, "refusing to listen on 0.0.0.0:0 without a token"),
    ] {
        let refused = command(home.path())
            .args(["app-server", "--listen", listen])
            .stderr(std::process::Stdio::piped())
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(code), "{listen}: {stderr}");
        assert!(
            stderr.contains(says) && stderr.contains(listen),
            "{listen}: {stderr}"
        );
    }
}

//! The streamable HTTP transport against a server written with the `mcp`
//! SDK, started by the test on 127.0.0.1 and guarded by a bearer token that
//! Roder reads from a named variable.

mod support;

use std::path::Path;
use std::time::Duration;

use roder_ext_mcp::{McpServerConfig, McpToolSource, McpTransport, ServerStatus};
use tokio::io::AsyncBufReadExt as _;

const TOKEN: &str = "token-for-the-toy-server";

fn http(name: &str, port: u16, token_env: &str) -> McpServerConfig {
    let mut config = McpServerConfig::http(name, format!("http://127.0.0.1:{port}/mcp"));
    if let McpTransport::Http(server) = &mut config.transport {
        server.bearer_token_env = Some(token_env.into());
    }
    config.startup_timeout = Duration::from_secs(90);
    config
}

/// One test in this binary: it sets variables before any other thread of
/// it reads the environment.
#[tokio::test]
async fn an_http_server_with_a_bearer_token() {
    if !support::have_sdk() {
        return;
    }
    // SAFETY: the only test of this binary, before it starts any thread or
    // process that reads the environment.
    unsafe {
        std::env::set_var("RODER_TEST_MCP_TOKEN", TOKEN);
        std::env::set_var("RODER_TEST_MCP_WRONG_TOKEN", "not-the-token");
    }
    let script = support::toy_server();
    let mut server = tokio::process::Command::new("python3")
        .arg(&script)
        .args(["http", "TOY_TOKEN"])
        .env("TOY_TOKEN", TOKEN)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(server.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(90), lines.next_line())
        .await
        .expect("the server prints its port")
        .unwrap()
        .unwrap();
    let port: u16 = first.strip_prefix("PORT ").unwrap().parse().unwrap();

    let source = McpToolSource::start(
        vec![
            http("web", port, "RODER_TEST_MCP_TOKEN"),
            http("wrong", port, "RODER_TEST_MCP_WRONG_TOKEN"),
            http("unset", port, "RODER_TEST_MCP_UNSET_TOKEN"),
        ],
        Path::new("."),
    )
    .await
    .unwrap();
    let statuses = source.statuses();
    assert!(
        matches!(statuses[0].1, ServerStatus::Ready { tools: 8 }),
        "{statuses:?}"
    );
    let ServerStatus::Failed { error, .. } = &statuses[1].1 else {
        panic!("a wrong token must not connect: {statuses:?}");
    };
    assert!(!error.contains("not-the-token"), "{error}");
    let ServerStatus::Failed { error, .. } = &statuses[2].1 else {
        panic!("{statuses:?}");
    };
    assert!(
        error.contains("RODER_TEST_MCP_UNSET_TOKEN is not set"),
        "{error}"
    );

    let echo = support::call(
        &source,
        "mcp__web__echo",
        serde_json::json!({"text": "over http"}),
    )
    .await;
    assert!(!echo.is_error, "{}", echo.text);
    assert_eq!(echo.text, "echo: over http");
    let measured = support::call(
        &source,
        "mcp__web__measure",
        serde_json::json!({"text": "a b"}),
    )
    .await;
    assert_eq!(measured.data["structured_content"]["words"], 2);
    let failed = support::call(
        &source,
        "mcp__web__fail",
        serde_json::json!({"message": "no"}),
    )
    .await;
    assert!(failed.is_error);

    server.kill().await.unwrap();
    let gone = support::call(&source, "mcp__web__echo", serde_json::json!({"text": "x"})).await;
    assert!(gone.is_error, "{}", gone.text);
}

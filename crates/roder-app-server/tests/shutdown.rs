//! Shutting the WebSocket server down closes its sessions and returns,
//! while a turn a client started goes on in the runtime. The stdio server
//! stops as soon as its stdout fails, even while stdin stays open.

mod support;

use roder_api::events::RoderEvent;
use roder_app_server::{WsServerConfig, bind_ws};
use roder_testkit::{final_round, tool_round};
use serde_json::json;
use support::{Client, Harness, WAIT, wait_on_bus};

#[tokio::test]
async fn shutdown_closes_sessions_and_turns_go_on() {
    let harness = Harness::new(vec![
        tool_round(&[("call-1", "gate", "{}")]),
        final_round("after shutdown"),
    ]);
    let server = bind_ws(harness.runtime.clone(), WsServerConfig::default())
        .await
        .unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve_with_shutdown(async move {
        let _ = stopped.await;
    }));

    let mut client = Client::ws(addr, None).await.unwrap();
    client.initialize().await;
    let thread_id = client
        .call(
            "thread/start",
            json!({"externalTools": [{"name": "gate", "description": "wait"}]}),
        )
        .await["thread"]["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    let mut bus = harness.runtime.subscribe_events();
    client
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "go"}),
        )
        .await;
    let requested = wait_on_bus(&mut bus, &thread_id, |event| {
        matches!(event, RoderEvent::ExternalToolCallRequested(_))
    })
    .await;

    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, serving)
        .await
        .expect("the server returns despite an open session")
        .unwrap()
        .unwrap();
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the listener is closed"
    );
    client.until_closed().await;

    // The turn is still waiting for its external call, and finishes when
    // it is answered directly through the runtime.
    let RoderEvent::ExternalToolCallRequested(call) = requested.event else {
        unreachable!()
    };
    harness
        .runtime
        .resolve_external_tool_call(
            &call.request_id,
            roder_core::ExternalToolResolution {
                output: "ok".to_string(),
                is_error: false,
            },
        )
        .await
        .unwrap();
    let end = wait_on_bus(&mut bus, &thread_id, RoderEvent::is_terminal).await;
    assert!(matches!(end.event, RoderEvent::TurnCompleted(_)));
}

#[tokio::test]
async fn stdio_stops_when_stdout_fails_though_stdin_stays_open() {
    use tokio::io::AsyncWriteExt as _;
    let harness = Harness::new(vec![]);
    let (mut client_out, server_in) = tokio::io::duplex(1024);
    // Nobody reads the server's stdout any more.
    let (server_out, client_in) = tokio::io::duplex(1024);
    drop(client_in);
    let serving = tokio::spawn(roder_app_server::serve_stdio(
        harness.runtime.clone(),
        server_in,
        server_out,
    ));
    client_out
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n")
        .await
        .unwrap();
    let served = tokio::time::timeout(WAIT, serving)
        .await
        .expect("serving ends once the answer cannot be written")
        .unwrap();
    let error = format!("{:#}", served.unwrap_err());
    assert!(error.contains("writing stdout"), "{error}");
    drop(client_out);
}

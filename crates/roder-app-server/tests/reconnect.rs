//! Nothing is lost: a client that disconnects mid-turn recovers every event
//! by cursor, and a client too slow to read is cut off from live events
//! (never slowing the runtime) and told where to resume.

mod support;

use std::sync::Arc;

use roder_api::events::RoderEvent;
use roder_app_server::{ConnectionLimits, codes, serve_stdio_with};
use roder_testkit::{ScriptedRound, final_round, tool_round};
use serde_json::{Value, json};
use support::{
    Client, Harness, WAIT, assert_contiguous, event_type, is_transient_type, seq, wait_on_bus,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn gated_turn() -> Vec<ScriptedRound> {
    vec![
        tool_round(&[("call-1", "write_file", r#"{"path":"a.txt","content":"a"}"#)]),
        tool_round(&[("call-2", "gate", "{}")]),
        final_round("through the gate"),
    ]
}

const GATE: &str = r#"[{"name": "gate", "description": "Waits for the client", "parameters": {"type": "object"}}]"#;

async fn disconnect_mid_turn_and_recover_by_cursor(transport: &str) {
    let harness = Harness::new(gated_turn());
    let addr = harness.serve_ws(Default::default()).await;
    let connect = || async {
        match transport {
            "ws" => Client::ws(addr, None).await.unwrap(),
            _ => harness.stdio_client(),
        }
    };
    let mut bus = harness.runtime.subscribe_events();

    let mut first = connect().await;
    first.initialize().await;
    let thread_id = first
        .call(
            "thread/start",
            json!({"externalTools": serde_json::from_str::<Value>(GATE).unwrap()}),
        )
        .await["thread"]["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    first
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "go"}),
        )
        .await;
    let before = first.events_until(&thread_id, "turn_started").await;
    let last_seen = seq(before.last().unwrap());
    drop(first);

    // With no client connected, the turn goes on until it needs the client.
    let requested = wait_on_bus(&mut bus, &thread_id, |event| {
        matches!(event, RoderEvent::ExternalToolCallRequested(_))
    })
    .await;
    assert!(requested.seq > last_seen);

    let mut second = connect().await;
    second.initialize().await;
    // Read what was missed by cursor, a small page at a time...
    let missed = second.read_events(&thread_id, last_seen, 2).await;
    let request_id = missed
        .iter()
        .find(|event| event["event"]["type"] == "external_tool_call_requested")
        .map(|event| event["event"]["request_id"].as_str().unwrap().to_string())
        .expect("the external call was persisted");
    let read_through = missed.last().unwrap()["seq"].as_u64().unwrap();
    // ...then follow live from there.
    let resumed = second
        .call(
            "thread/resume",
            json!({"threadId": thread_id, "afterSeq": read_through}),
        )
        .await;
    assert!(resumed["lastSeq"].as_u64().unwrap() >= read_through);
    second
        .call(
            "tools/resolve",
            json!({"requestId": request_id, "output": "open"}),
        )
        .await;
    let live = second.events_until(&thread_id, "turn_completed").await;

    let mut recovered: Vec<Value> = before.iter().map(|n| n["params"].clone()).collect();
    recovered.extend(missed);
    recovered.extend(live.iter().map(|n| n["params"].clone()));
    // Live deltas are transient: never in the log, so not part of the replay.
    recovered.retain(|e| !is_transient_type(e["event"]["type"].as_str().unwrap_or("")));
    let seqs: Vec<u64> = recovered
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_contiguous(&seqs);
    assert_eq!(recovered, second.read_events(&thread_id, 0, 500).await);
    assert!(
        !recovered
            .iter()
            .any(|e| e["event"]["type"] == "turn_interrupted"),
        "a disconnect must not interrupt the turn"
    );
}

#[tokio::test]
async fn disconnect_mid_turn_and_recover_by_cursor_over_websocket() {
    disconnect_mid_turn_and_recover_by_cursor("ws").await;
}

#[tokio::test]
async fn disconnect_mid_turn_and_recover_by_cursor_over_stdio() {
    disconnect_mid_turn_and_recover_by_cursor("stdio").await;
}

#[tokio::test]
async fn a_cursor_past_the_end_is_refused() {
    let harness = Harness::new(vec![]);
    let mut client = harness.ws_client().await;
    client.initialize().await;
    let thread_id = client.call("thread/start", json!({})).await["thread"]["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    let error = client
        .call_err(
            "thread/events",
            json!({"threadId": thread_id, "cursor": 99}),
        )
        .await;
    assert_eq!(error["code"], codes::CURSOR_OUT_OF_RANGE);
    assert_eq!(error["data"]["lastSeq"], 1);
    let error = client
        .call_err(
            "thread/resume",
            json!({"threadId": thread_id, "afterSeq": 99}),
        )
        .await;
    assert_eq!(error["code"], codes::CURSOR_OUT_OF_RANGE);
}

/// A stdio client on a tiny pipe that stops reading: the runtime finishes
/// its turn regardless, the client's queue overflows, and once it reads
/// again it finds its notifications up to the overflow, then a -32008 error
/// naming that exact seq, from which it recovers everything.
#[tokio::test]
async fn a_slow_client_is_told_to_resume_and_never_blocks_the_runtime() {
    // Big arguments make each event large, so the pipe fills fast.
    let content = "x".repeat(4096);
    let arguments = json!({"path": "big.txt", "content": content}).to_string();
    let rounds: Vec<ScriptedRound> = (0..6)
        .map(|i| {
            tool_round(&[(
                format!("call-{i}").as_str(),
                "write_file",
                arguments.as_str(),
            )])
        })
        .chain([final_round("done")])
        .collect();
    let harness = Harness::new(rounds);
    let limits = ConnectionLimits {
        client_queue: 2,
        ..ConnectionLimits::default()
    };
    let (mut client_out, server_in) = tokio::io::duplex(1024);
    let (server_out, client_in) = tokio::io::duplex(1024);
    tokio::spawn(serve_stdio_with(
        Arc::clone(&harness.runtime),
        server_in,
        server_out,
        limits,
    ));
    let mut lines = BufReader::new(client_in).lines();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        serde_json::from_str(&line).unwrap()
    };
    let mut send = async |message: Value| {
        client_out
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    };

    send(json!({"jsonrpc":"2.0","id":1,"method":"initialize"})).await;
    assert_eq!(next().await["id"], 1);
    send(json!({"jsonrpc":"2.0","id":2,"method":"thread/start","params":{}})).await;
    let created = next().await;
    assert_eq!(event_type(&created), "thread_created");
    let started = next().await;
    let thread_id = started["result"]["thread"]["threadId"]
        .as_str()
        .unwrap()
        .to_string();

    let mut bus = harness.runtime.subscribe_events();
    send(json!({"jsonrpc":"2.0","id":3,"method":"turn/start",
        "params":{"threadId": thread_id, "message": "write big files"}}))
    .await;
    // The client reads nothing; the turn ends anyway.
    let end = wait_on_bus(&mut bus, &thread_id, RoderEvent::is_terminal).await;
    assert!(matches!(end.event, RoderEvent::TurnCompleted(_)));

    let mut received = vec![seq(&created)];
    let lagged = loop {
        let message = next().await;
        if message.get("error").is_some() {
            break message;
        }
        if message["id"] == 3 || is_transient_type(event_type(&message)) {
            continue;
        }
        received.push(seq(&message));
    };
    assert_eq!(lagged["id"], Value::Null);
    assert_eq!(lagged["error"]["code"], codes::CLIENT_LAGGED);
    let cursor = &lagged["error"]["data"]["threads"][0];
    assert_eq!(cursor["threadId"], thread_id.as_str());
    assert_eq!(
        cursor["lastSeq"].as_u64().unwrap(),
        *received.last().unwrap(),
        "the error names the last seq the client actually got"
    );
    assert!(
        (received.len() as u64) < end.seq,
        "the queue overflowed before the turn's end"
    );

    // Resume from the last seq received: the rest arrives, nothing repeats.
    send(json!({"jsonrpc":"2.0","id":4,"method":"thread/resume",
        "params":{"threadId": thread_id, "afterSeq": received.last().unwrap()}}))
    .await;
    loop {
        let message = next().await;
        if message["id"] == 4 {
            assert_eq!(message["result"]["lastSeq"], end.seq);
            break;
        }
        if message["id"] == 3 || is_transient_type(event_type(&message)) {
            continue;
        }
        received.push(seq(&message));
    }
    assert_contiguous(&received);
    assert_eq!(*received.last().unwrap(), end.seq);
}

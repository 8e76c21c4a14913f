//! Turns driven through the protocol, over WebSocket and stdio: tool calls
//! and their notifications, external tools resolved by the client,
//! interrupts and busy threads.

mod support;

use roder_app_server::codes;
use roder_app_server::protocol::{ThreadEvent, ThreadResult, TurnStartResult};
use roder_testkit::{ScriptedRound, final_round, tool_round};
use serde_json::json;
use support::{Client, Harness, assert_contiguous, event_type, is_transient_type, seq};

fn tool_turn() -> Vec<ScriptedRound> {
    vec![
        tool_round(&[(
            "call-1",
            "write_file",
            r#"{"path":"notes.txt","content":"hello"}"#,
        )]),
        tool_round(&[("call-2", "read_file", r#"{"path":"notes.txt"}"#)]),
        final_round("notes.txt says hello"),
    ]
}

async fn full_turn_with_tool_calls(transport: &str) {
    let harness = Harness::new(tool_turn());
    let mut client = harness.client(transport).await;
    let init = client.initialize().await;
    assert_eq!(init["serverInfo"]["name"], "roder-app-server");
    assert!(
        init["methods"]
            .as_array()
            .unwrap()
            .contains(&json!("turn/start"))
    );

    let started = client
        .call(
            "thread/start",
            json!({"workspace": harness.workspace_path()}),
        )
        .await;
    // Results deserialize into the protocol's own types (the schema's source).
    let started: ThreadResult = serde_json::from_value(started).unwrap();
    let thread_id = started.thread.thread_id;
    let turn = client
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "write and read notes"}),
        )
        .await;
    let turn: TurnStartResult = serde_json::from_value(turn).unwrap();

    let notifications = client.events_until(&thread_id, "turn_completed").await;
    let seqs: Vec<u64> = notifications
        .iter()
        .filter(|n| !is_transient_type(event_type(n)))
        .map(seq)
        .collect();
    assert_contiguous(&seqs);
    assert_eq!(event_type(&notifications[0]), "thread_created");
    let completed: Vec<&serde_json::Value> = notifications
        .iter()
        .filter(|n| event_type(n) == "tool_call_completed")
        .collect();
    assert_eq!(completed.len(), 2, "two tool calls complete");
    for call in &completed {
        assert_eq!(call["params"]["event"]["is_error"], false, "{call}");
        assert_eq!(call["params"]["turnId"], turn.turn_id.as_str());
    }
    assert!(
        completed[1]["params"]["event"]["output"]
            .as_str()
            .unwrap()
            .contains("hello")
    );
    let last = notifications.last().unwrap();
    assert_eq!(
        last["params"]["event"]["final_message"],
        "notes.txt says hello"
    );
    assert_eq!(
        std::fs::read_to_string(harness.workspace.path().join("notes.txt")).unwrap(),
        "hello"
    );

    // The notifications are the persisted log, event for event, plus the
    // transient deltas, which are live only.
    let persisted = client.read_events(&thread_id, 0, 4).await;
    let pushed: Vec<serde_json::Value> = notifications
        .iter()
        .filter(|n| !is_transient_type(event_type(n)))
        .map(|n| n["params"].clone())
        .collect();
    assert_eq!(persisted, pushed);
    for event in &persisted {
        let _: ThreadEvent = serde_json::from_value(event.clone()).unwrap();
    }

    let read = client
        .call("thread/read", json!({"threadId": thread_id}))
        .await;
    assert_eq!(read["lastSeq"], json!(seqs.len()));
    assert_eq!(read["runningTurnId"], json!(null));
    // The scripted model reports no tokens: the thread's total says so.
    assert_eq!(
        read["thread"]["usage"],
        json!({"inputTokens": 0, "cachedInputTokens": 0, "outputTokens": 0, "reasoningTokens": 0})
    );
}

#[tokio::test]
async fn full_turn_with_tool_calls_over_websocket() {
    full_turn_with_tool_calls("ws").await;
}

#[tokio::test]
async fn full_turn_with_tool_calls_over_stdio() {
    full_turn_with_tool_calls("stdio").await;
}

async fn external_tool_resolved_by_the_client(transport: &str) {
    let harness = Harness::new(vec![
        tool_round(&[("call-1", "ask_user", r#"{"question":"favourite colour?"}"#)]),
        final_round("you like blue"),
    ]);
    let mut client = harness.client(transport).await;
    client.initialize().await;
    let started = client
        .call(
            "thread/start",
            json!({
                "workspace": harness.workspace_path(),
                "externalTools": [{
                    "name": "ask_user",
                    "description": "Ask the user a question",
                    "parameters": {"type": "object", "properties": {"question": {"type": "string"}}}
                }]
            }),
        )
        .await;
    let thread_id = started["thread"]["threadId"].as_str().unwrap().to_string();
    assert_eq!(started["thread"]["externalTools"][0]["name"], "ask_user");
    client
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "ask me"}),
        )
        .await;

    let until_request = client
        .events_until(&thread_id, "external_tool_call_requested")
        .await;
    let requested = &until_request.last().unwrap()["params"]["event"];
    assert_eq!(requested["tool_name"], "ask_user");
    let request_id = requested["request_id"].as_str().unwrap().to_string();

    let resolved = client
        .call(
            "tools/resolve",
            json!({"requestId": request_id, "output": "blue"}),
        )
        .await;
    assert_eq!(resolved, json!({}));
    let rest = client.events_until(&thread_id, "turn_completed").await;
    assert!(
        rest.iter()
            .any(|n| event_type(n) == "external_tool_call_resolved")
    );
    assert_eq!(
        rest.last().unwrap()["params"]["event"]["final_message"],
        "you like blue"
    );
    // The model's second request carried the client's answer.
    let requests = harness.engine.requests();
    assert_eq!(requests.len(), 2);
    let transcript = format!("{:?}", requests[1].transcript);
    assert!(transcript.contains("blue"), "{transcript}");

    // A second answer to the same call has nobody waiting for it.
    let error = client
        .call_err(
            "tools/resolve",
            json!({"requestId": request_id, "output": "again"}),
        )
        .await;
    assert_eq!(error["code"], codes::EXTERNAL_CALL_NOT_FOUND);
}

#[tokio::test]
async fn external_tool_resolved_by_the_client_over_websocket() {
    external_tool_resolved_by_the_client("ws").await;
}

#[tokio::test]
async fn external_tool_resolved_by_the_client_over_stdio() {
    external_tool_resolved_by_the_client("stdio").await;
}

#[tokio::test]
async fn busy_thread_and_interrupt_have_their_own_codes() {
    let harness = Harness::new(vec![ScriptedRound::Hang]);
    let mut client = harness.ws_client().await;
    client.initialize().await;
    let started = client.call("thread/start", json!({})).await;
    let thread_id = started["thread"]["threadId"].as_str().unwrap().to_string();
    let turn = client
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "hang"}),
        )
        .await;
    let turn_id = turn["turnId"].as_str().unwrap().to_string();

    let busy = client
        .call_err(
            "turn/start",
            json!({"threadId": thread_id, "message": "again"}),
        )
        .await;
    assert_eq!(busy["code"], codes::THREAD_BUSY);
    assert_eq!(busy["data"]["turnId"], turn_id.as_str());
    assert!(busy["message"].as_str().unwrap().contains("busy"));

    let read = client
        .call("thread/read", json!({"threadId": thread_id}))
        .await;
    assert_eq!(read["runningTurnId"], turn_id.as_str());

    let interrupted = client
        .call(
            "turn/interrupt",
            json!({"threadId": thread_id, "turnId": turn_id}),
        )
        .await;
    assert_eq!(interrupted, json!({}));
    client.events_until(&thread_id, "turn_interrupted").await;

    let not_running = client
        .call_err(
            "turn/interrupt",
            json!({"threadId": thread_id, "turnId": turn_id}),
        )
        .await;
    assert_eq!(not_running["code"], codes::TURN_NOT_RUNNING);

    let missing = client
        .call_err(
            "turn/start",
            json!({"threadId": "no-such-thread", "message": "hi"}),
        )
        .await;
    assert_eq!(missing["code"], codes::THREAD_NOT_FOUND);
    assert_eq!(missing["data"]["threadId"], "no-such-thread");
}

#[tokio::test]
async fn one_client_sees_only_the_threads_it_subscribed_to() {
    let harness = Harness::new(vec![final_round("first"), final_round("second")]);
    let addr = harness.serve_ws(Default::default()).await;
    let mut mine = Client::ws(addr, None).await.unwrap();
    let mut other = Client::ws(addr, None).await.unwrap();
    mine.initialize().await;
    other.initialize().await;
    let my_thread = mine.call("thread/start", json!({})).await["thread"]["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    let other_thread = other.call("thread/start", json!({})).await["thread"]["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    mine.call("turn/start", json!({"threadId": my_thread, "message": "a"}))
        .await;
    mine.events_until(&my_thread, "turn_completed").await;
    other
        .call(
            "turn/start",
            json!({"threadId": other_thread, "message": "b"}),
        )
        .await;
    let theirs = other.events_until(&other_thread, "turn_completed").await;
    assert!(
        theirs
            .iter()
            .all(|n| n["params"]["threadId"] == other_thread.as_str())
    );
    // After unsubscribing, a whole turn of the thread sends nothing.
    let last_seen = mine
        .call("thread/read", json!({"threadId": my_thread}))
        .await["lastSeq"]
        .as_u64()
        .unwrap();
    let was = mine
        .call("thread/unsubscribe", json!({"threadId": my_thread}))
        .await;
    assert_eq!(was["wasSubscribed"], true);
    let mut bus = harness.runtime.subscribe_events();
    mine.call(
        "turn/start",
        json!({"threadId": my_thread, "message": "quiet"}),
    )
    .await;
    support::wait_on_bus(&mut bus, &my_thread, |event| event.is_terminal()).await;
    let listed = mine.call("thread/list", json!({})).await;
    assert_eq!(listed["threads"].as_array().unwrap().len(), 2);
    assert_eq!(mine.take_kept(), Vec::<serde_json::Value>::new());
    // Resuming replays exactly what was missed.
    let resumed = mine
        .call(
            "thread/resume",
            json!({"threadId": my_thread, "afterSeq": last_seen}),
        )
        .await;
    let replayed = mine.take_kept();
    let seqs: Vec<u64> = replayed.iter().map(seq).collect();
    let expected: Vec<u64> = (last_seen + 1..=resumed["lastSeq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, expected);
    assert_eq!(event_type(replayed.last().unwrap()), "turn_completed");
}

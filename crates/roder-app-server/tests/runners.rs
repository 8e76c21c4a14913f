//! A runner-bound thread paused, resumed, detached and rejoined through the
//! protocol, checked against what reached the provider and what the thread
//! persisted; and working directories.

mod support;

use std::sync::atomic::Ordering;

use roder_app_server::codes;
use roder_testkit::{final_round, tool_round};
use serde_json::json;
use support::{Harness, event_type};

async fn runner_lifecycle(transport: &str) {
    let harness = Harness::new(vec![
        tool_round(&[("call-1", "exec_command", r#"{"cmd":"echo hi"}"#)]),
        final_round("ran it"),
    ]);
    let mut client = harness.client(transport).await;
    client.initialize().await;

    let listed = client.call("runners/list", json!({})).await;
    let mock = &listed["runners"][0];
    assert_eq!(mock["providerId"], "mock");
    assert_eq!(mock["capabilities"]["pausable"], true);
    assert_eq!(mock["capabilities"]["detachable"], true);
    assert_eq!(mock["capabilities"]["commandExec"], true);
    assert_eq!(mock["setupHint"], "set MOCK_RUNNER_TOKEN");

    let started = client
        .call(
            "thread/start",
            json!({"runner": {"providerId": "mock", "workspace": "/sandbox", "readRoots": ["/data"]}}),
        )
        .await;
    let thread = &started["thread"];
    let thread_id = thread["threadId"].as_str().unwrap().to_string();
    assert_eq!(thread["runner"]["providerId"], "mock");
    assert_eq!(thread["runner"]["workspace"], "/sandbox");
    assert_eq!(thread["runner"]["readRoots"], json!(["/data"]));
    assert_eq!(
        thread["runner"]["destinationId"],
        format!("thread-{thread_id}")
    );

    let paused = client
        .call("runners/pause", json!({"threadId": thread_id}))
        .await;
    assert_eq!(paused["state"]["sessionId"], "sandbox-1");
    assert_eq!(paused["state"]["metadata"]["status"], "paused");
    let resumed = client
        .call("runners/resume", json!({"threadId": thread_id}))
        .await;
    assert_eq!(resumed["state"]["metadata"]["status"], "running");
    let detached = client
        .call("runners/detach", json!({"threadId": thread_id}))
        .await;
    assert_eq!(detached["state"]["metadata"]["status"], "detached");
    let read = client
        .call("thread/read", json!({"threadId": thread_id}))
        .await;
    assert_eq!(
        read["thread"]["runnerState"]["metadata"]["status"],
        "detached"
    );

    let rejoined = client
        .call("runners/rejoin", json!({"threadId": thread_id}))
        .await;
    assert_eq!(rejoined["state"]["sessionId"], "sandbox-1");
    assert_eq!(rejoined["state"]["metadata"]["status"], "rejoined");
    assert_eq!(harness.runner.creates.load(Ordering::SeqCst), 1);
    assert_eq!(harness.runner.rejoins.load(Ordering::SeqCst), 1);

    // A turn after the rejoin runs in the rejoined sandbox, creating nothing.
    client
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "run"}),
        )
        .await;
    let events = client.events_until(&thread_id, "turn_completed").await;
    let output = events
        .iter()
        .find(|n| event_type(n) == "tool_call_completed")
        .map(|n| n["params"]["event"]["output"].as_str().unwrap().to_string())
        .unwrap();
    assert!(output.contains("ran in sandbox-1"), "{output}");
    assert_eq!(harness.runner.creates.load(Ordering::SeqCst), 1);
    assert_eq!(harness.runner.commands.load(Ordering::SeqCst), 1);

    // Every lifecycle step was a notification, in order.
    let actions: Vec<String> = client
        .read_events(&thread_id, 0, 100)
        .await
        .iter()
        .filter(|e| e["event"]["type"] == "runner_lifecycle")
        .map(|e| e["event"]["action"].as_str().unwrap().to_string())
        .collect();
    let expected = ["paused", "woken", "detached", "rejoined"];
    let mut at = 0;
    for action in &actions {
        if at < expected.len() && action == expected[at] {
            at += 1;
        }
    }
    assert_eq!(at, expected.len(), "lifecycle order: {actions:?}");

    let unbound = client.call("thread/start", json!({})).await["thread"]["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    let error = client
        .call_err("runners/pause", json!({"threadId": unbound}))
        .await;
    assert_eq!(error["code"], codes::RUNTIME_ERROR);
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains(&unbound) && message.contains("runner"),
        "{error}"
    );
}

#[tokio::test]
async fn runner_lifecycle_over_websocket() {
    runner_lifecycle("ws").await;
}

#[tokio::test]
async fn runner_lifecycle_over_stdio() {
    runner_lifecycle("stdio").await;
}

#[tokio::test]
async fn working_directories_through_the_protocol() {
    let harness = Harness::new(vec![]);
    let mut client = harness.ws_client().await;
    client.initialize().await;

    let created = client
        .call(
            "workdirs/create",
            json!({"repository": "/repos/app", "selector": "main", "id": "wd-a"}),
        )
        .await;
    assert_eq!(created["workdir"]["id"], "wd-a");
    assert_eq!(created["workdir"]["status"], "active");
    assert_eq!(created["workdir"]["selector"], "main");

    // A thread that materializes its own working directory.
    let started = client
        .call(
            "thread/start",
            json!({"workdir": {"request": {"repository": "/repos/app", "id": "wd-b"}}}),
        )
        .await;
    let thread_id = started["thread"]["threadId"].as_str().unwrap().to_string();
    assert_eq!(started["thread"]["runner"]["config"]["worktree_id"], "wd-b");
    let got = client.call("workdirs/get", json!({"id": "wd-b"})).await;
    assert_eq!(got["workdir"]["primaryThreadId"], thread_id.as_str());

    // One that claims an existing one, in a subdirectory.
    let claimed = client
        .call(
            "thread/start",
            json!({"workdir": {"claim": {"id": "wd-a", "relativeCwd": "src"}}}),
        )
        .await;
    assert!(
        claimed["thread"]["runner"]["workspace"]
            .as_str()
            .unwrap()
            .ends_with("wd-a/checkout/src")
    );

    let listed = client.call("workdirs/list", json!({})).await;
    assert_eq!(listed["workdirs"].as_array().unwrap().len(), 2);
    let refused = client
        .call_err("workdirs/cleanup", json!({"id": "wd-b"}))
        .await;
    assert!(refused["message"].as_str().unwrap().contains("bound"));
    let missing = client.call("workdirs/get", json!({"id": "nope"})).await;
    assert_eq!(missing["workdir"]["status"], "not_found");
}

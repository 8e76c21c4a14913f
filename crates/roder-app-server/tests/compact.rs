//! `thread/compact`: a manual compaction through the protocol.

mod support;

use roder_testkit::{ScriptedRound, final_round};
use serde_json::json;
use support::Harness;

#[tokio::test]
async fn thread_compact_summarizes_between_turns_and_refuses_a_busy_thread() {
    let note = "a long note from the user. ".repeat(300);
    // Two turns answer, then the summary request, then a turn that hangs.
    let harness = Harness::new(vec![
        final_round("first answer"),
        final_round("second answer"),
        final_round("the user sent two long notes"),
        ScriptedRound::Hang,
    ]);
    let mut client = harness.ws_client().await;
    client.initialize().await;
    let started = client
        .call(
            "thread/start",
            json!({"workspace": harness.workspace_path()}),
        )
        .await;
    let thread_id = started["thread"]["threadId"].as_str().unwrap().to_string();
    for turn in 0..2 {
        client
            .call(
                "turn/start",
                json!({"threadId": thread_id, "message": format!("{turn} {note}")}),
            )
            .await;
        client.events_until(&thread_id, "turn_completed").await;
    }
    let compacted = client
        .call("thread/compact", json!({"threadId": thread_id}))
        .await;
    assert_eq!(compacted["summary"], "the user sent two long notes");
    assert!(compacted["replacedItems"].as_u64().unwrap() > 0);
    assert!(
        compacted["tokensAfter"].as_u64().unwrap() < compacted["tokensBefore"].as_u64().unwrap()
    );
    let events = client.events_until(&thread_id, "context_compacted").await;
    assert!(!events.is_empty());

    client
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "hang"}),
        )
        .await;
    client.events_until(&thread_id, "inference_started").await;
    let busy = client
        .call_err("thread/compact", json!({"threadId": thread_id}))
        .await;
    assert_eq!(busy["code"], -32002, "{busy}");
    let missing = client
        .call_err("thread/compact", json!({"threadId": "nope"}))
        .await;
    assert_ne!(missing["code"], -32002, "{missing}");
}

//! The agent loop over several rounds, with the builtin tools on a local
//! workspace, and the way bad model output becomes readable tool errors.

mod support;

use roder_api::events::RoderEvent;
use roder_api::transcript::TranscriptItem;
use roder_testkit::{ScriptedRound, final_round, tool_round};
use support::{Harness, completed_tools, until_turn_ends};

#[tokio::test]
async fn several_rounds_feed_tool_results_back_to_the_model() {
    let harness = Harness::new(vec![
        tool_round(&[(
            "w",
            "write_file",
            r#"{"path":"notes/a.txt","content":"alpha\n"}"#,
        )]),
        tool_round(&[(
            "e",
            "edit",
            r#"{"path":"notes/a.txt","old_string":"alpha","new_string":"beta"}"#,
        )]),
        tool_round(&[("x", "exec_command", r#"{"cmd":"cat notes/a.txt"}"#)]),
        final_round("all done"),
    ]);
    let thread_id = harness.thread().await;
    let mut events = harness.runtime.subscribe_events();
    harness.start(&thread_id, "write, edit, check").await;
    let seen = until_turn_ends(&mut events, &thread_id).await;

    match &seen.last().unwrap().event {
        RoderEvent::TurnCompleted(done) => {
            assert_eq!(done.final_message.as_deref(), Some("all done"))
        }
        other => panic!("unexpected terminal event {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(harness.path("notes/a.txt")).unwrap(),
        "beta\n"
    );
    let tools = completed_tools(&seen);
    assert_eq!(tools.len(), 3);
    assert!(tools.iter().all(|call| !call.is_error), "{tools:?}");
    assert!(tools[2].output.as_deref().unwrap().contains("beta"));

    // Four model requests; each later one carries the previous tool result.
    let requests = harness.engine.requests();
    assert_eq!(requests.len(), 4);
    let last = &requests[3].transcript;
    let results: Vec<&TranscriptItem> = last
        .iter()
        .filter(|item| matches!(item, TranscriptItem::ToolResult { .. }))
        .collect();
    assert_eq!(results.len(), 3);
    assert!(matches!(
        &last[0],
        TranscriptItem::UserMessage { text, .. } if text == "write, edit, check"
    ));
    // Local edits publish a preview with the diff.
    assert!(seen.iter().any(|envelope| matches!(
        &envelope.event,
        RoderEvent::FileChangePreviewReady(preview) if preview.diff.contains("+beta")
    )));
    // Persisted seqs are consecutive; a transient delta repeats the seq of
    // the persisted event before it.
    let persisted: Vec<_> = seen
        .iter()
        .filter(|envelope| !envelope.event.is_transient())
        .collect();
    for pair in persisted.windows(2) {
        assert_eq!(pair[1].seq, pair[0].seq + 1);
    }
    assert!(seen.iter().any(|envelope| envelope.event.is_transient()));
}

#[tokio::test]
async fn a_second_turn_sees_the_first_turns_transcript() {
    let harness = Harness::new(vec![
        final_round("first answer"),
        final_round("second answer"),
    ]);
    let thread_id = harness.thread().await;
    let mut events = harness.runtime.subscribe_events();
    harness.start(&thread_id, "one").await;
    until_turn_ends(&mut events, &thread_id).await;
    harness.start(&thread_id, "two").await;
    until_turn_ends(&mut events, &thread_id).await;

    let requests = harness.engine.requests();
    let second = &requests[1].transcript;
    assert_eq!(second.len(), 3, "{second:?}");
    assert!(
        matches!(&second[1], TranscriptItem::AssistantMessage { text } if text == "first answer")
    );
}

#[tokio::test]
async fn malformed_and_unknown_tool_calls_become_error_results() {
    let harness = Harness::new(vec![
        tool_round(&[
            ("bad-json", "write_file", r#"{"path": "x.txt", "content": "#),
            ("not-object", "write_file", "[1,2]"),
            ("unknown", "launch_rockets", "{}"),
            ("missing-arg", "write_file", r#"{"path":"x.txt"}"#),
        ]),
        final_round("recovered"),
    ]);
    let thread_id = harness.thread().await;
    let mut events = harness.runtime.subscribe_events();
    harness.start(&thread_id, "go").await;
    let seen = until_turn_ends(&mut events, &thread_id).await;

    assert!(matches!(
        seen.last().unwrap().event,
        RoderEvent::TurnCompleted(_)
    ));
    let tools = completed_tools(&seen);
    assert_eq!(tools.len(), 4);
    assert!(tools.iter().all(|call| call.is_error));
    let output = |id: &str| {
        tools
            .iter()
            .find(|call| call.call_id == id)
            .and_then(|call| call.output.clone())
            .unwrap()
    };
    assert!(output("bad-json").contains("not valid JSON"));
    assert!(output("not-object").contains("must be a JSON object"));
    assert!(output("unknown").contains("unknown tool \"launch_rockets\""));
    assert!(output("missing-arg").contains("content"));
    assert!(!harness.path("x.txt").exists());
}

#[tokio::test]
async fn plan_mode_refuses_changes_and_offers_only_reading_tools() {
    let harness = Harness::with_config(
        vec![
            tool_round(&[("w", "write_file", r#"{"path":"x.txt","content":"no"}"#)]),
            final_round("ok"),
        ],
        |config| config.policy_mode = roder_api::policy_mode::PolicyMode::ReadOnly,
    );
    let thread_id = harness.thread().await;
    let mut events = harness.runtime.subscribe_events();
    harness.start(&thread_id, "try to write").await;
    let seen = until_turn_ends(&mut events, &thread_id).await;
    let tools = completed_tools(&seen);
    assert!(tools[0].is_error);
    assert!(
        tools[0]
            .output
            .as_deref()
            .unwrap()
            .contains("which the plan mode forbids")
    );
    assert!(!harness.path("x.txt").exists());
    let offered: Vec<String> = harness.engine.requests()[0]
        .tools
        .iter()
        .map(|tool| tool.name.clone())
        .collect();
    assert!(offered.contains(&"read_file".to_string()));
    assert!(!offered.contains(&"write_file".to_string()));
    assert!(!offered.contains(&"exec_command".to_string()));
}

#[tokio::test]
async fn a_failed_model_request_fails_the_turn_and_keeps_the_thread_usable() {
    let harness = Harness::new(vec![
        ScriptedRound::Fail("model unavailable".to_string()),
        final_round("back"),
    ]);
    let thread_id = harness.thread().await;
    let mut events = harness.runtime.subscribe_events();
    harness.start(&thread_id, "one").await;
    let seen = until_turn_ends(&mut events, &thread_id).await;
    match &seen.last().unwrap().event {
        RoderEvent::TurnFailed(failed) => assert!(failed.error.contains("model unavailable")),
        other => panic!("unexpected {other:?}"),
    }
    harness.start(&thread_id, "two").await;
    let seen = until_turn_ends(&mut events, &thread_id).await;
    assert!(matches!(
        seen.last().unwrap().event,
        RoderEvent::TurnCompleted(_)
    ));
}

#[tokio::test]
async fn without_local_workspaces_an_unbound_thread_gets_no_file_tools_and_touches_nothing() {
    let harness = Harness::with_config(
        vec![
            tool_round(&[("w", "write_file", r#"{"path":"x.txt","content":"no"}"#)]),
            final_round("ok"),
        ],
        |config| config.allow_local_workspaces = false,
    );
    let thread_id = harness.thread().await;
    let mut events = harness.runtime.subscribe_events();
    harness.start(&thread_id, "try").await;
    let seen = until_turn_ends(&mut events, &thread_id).await;
    let tools = completed_tools(&seen);
    assert!(tools[0].is_error);
    assert!(
        tools[0]
            .output
            .as_deref()
            .unwrap()
            .contains("local workspace execution is disabled")
    );
    assert!(!harness.path("x.txt").exists());
    assert!(harness.engine.requests()[0].tools.is_empty());
}

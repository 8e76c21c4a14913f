//! Turns that end early: interrupted during inference or during a command,
//! and turns whose deadline passes.

mod support;

use std::time::Duration;

use roder_api::events::RoderEvent;
use roder_api::transcript::TranscriptItem;
use roder_testkit::{ScriptedRound, final_round, tool_round};
use support::{Harness, completed_tools, until_turn_ends, wait_for};

#[tokio::test]
async fn interrupt_during_inference_ends_the_turn_and_frees_the_thread() {
    let harness = Harness::new(vec![ScriptedRound::Hang, final_round("after")]);
    let thread_id = harness.thread().await;
    let mut events = harness.runtime.subscribe_events();
    let turn_id = harness.start(&thread_id, "think forever").await;
    harness.engine.wait_for_requests(1).await;

    harness
        .runtime
        .interrupt_turn(&thread_id, &turn_id)
        .await
        .unwrap();
    let seen = until_turn_ends(&mut events, &thread_id).await;
    assert!(matches!(
        seen.last().unwrap().event,
        RoderEvent::TurnInterrupted(_)
    ));
    assert_eq!(
        harness.runtime.running_turn(&thread_id).await.unwrap(),
        None
    );

    harness.start(&thread_id, "again").await;
    let seen = until_turn_ends(&mut events, &thread_id).await;
    assert!(matches!(
        seen.last().unwrap().event,
        RoderEvent::TurnCompleted(_)
    ));
}

fn process_alive(pid: i32) -> bool {
    // A zombie still has /proc/<pid>; its state letter is Z.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

async fn read_pid(path: &std::path::Path) -> i32 {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Ok(text) = tokio::fs::read_to_string(path).await
                && let Ok(pid) = text.trim().parse()
            {
                return pid;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the command should write its pid")
}

#[tokio::test]
async fn interrupt_during_a_command_kills_it_and_answers_the_open_call() {
    let harness = Harness::new(vec![
        tool_round(&[(
            "sleep",
            "exec_command",
            r#"{"cmd":"sleep 30 & echo $! > bg.pid; wait"}"#,
        )]),
        final_round("after"),
    ]);
    let thread_id = harness.thread().await;
    let mut events = harness.runtime.subscribe_events();
    let turn_id = harness.start(&thread_id, "sleep").await;
    wait_for(&mut events, &thread_id, |event| {
        matches!(event, RoderEvent::ToolCallStarted(_))
    })
    .await;
    let pid = read_pid(&harness.path("bg.pid")).await;
    assert!(process_alive(pid));

    harness
        .runtime
        .interrupt_turn(&thread_id, &turn_id)
        .await
        .unwrap();
    let seen = until_turn_ends(&mut events, &thread_id).await;
    assert!(matches!(
        seen.last().unwrap().event,
        RoderEvent::TurnInterrupted(_)
    ));
    let tools = completed_tools(&seen);
    assert_eq!(tools.len(), 1);
    assert!(tools[0].is_error);
    tokio::time::timeout(Duration::from_secs(5), async {
        while process_alive(pid) {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the background process of the command should be killed");

    // The next turn runs, and its transcript answers the interrupted call.
    harness.start(&thread_id, "again").await;
    let seen = until_turn_ends(&mut events, &thread_id).await;
    assert!(matches!(
        seen.last().unwrap().event,
        RoderEvent::TurnCompleted(_)
    ));
    let requests = harness.engine.requests();
    let transcript = &requests.last().unwrap().transcript;
    assert!(transcript.iter().any(|item| matches!(
        item,
        TranscriptItem::ToolResult { id, is_error: true, .. } if id == "sleep"
    )));
}

#[tokio::test]
async fn a_turn_past_its_deadline_ends_with_deadline_exceeded() {
    let harness = Harness::with_config(vec![ScriptedRound::Hang, final_round("next")], |config| {
        config.turn_deadline_seconds = Some(1);
    });
    let thread_id = harness.thread().await;
    let mut events = harness.runtime.subscribe_events();
    harness.start(&thread_id, "slow").await;
    let seen = until_turn_ends(&mut events, &thread_id).await;
    match &seen.last().unwrap().event {
        RoderEvent::TurnDeadlineExceeded(exceeded) => assert_eq!(exceeded.deadline_seconds, 1),
        other => panic!("unexpected {other:?}"),
    }
    harness.start(&thread_id, "next").await;
    let seen = until_turn_ends(&mut events, &thread_id).await;
    assert!(matches!(
        seen.last().unwrap().event,
        RoderEvent::TurnCompleted(_)
    ));
}

#[tokio::test]
async fn interrupting_a_finished_turn_says_it_is_not_running() {
    let harness = Harness::new(vec![final_round("quick")]);
    let thread_id = harness.thread().await;
    let mut events = harness.runtime.subscribe_events();
    let turn_id = harness.start(&thread_id, "hi").await;
    until_turn_ends(&mut events, &thread_id).await;
    let error = harness
        .runtime
        .interrupt_turn(&thread_id, &turn_id)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("is not running"), "{error}");
}

use proptest::prelude::*;
use roder_api::events::*;
use roder_api::inference::TokenUsage;
use roder_api::transcript::TranscriptItem;
use serde_json::Value;

use super::*;

const T: &str = "thread-1";
const U: &str = "turn-1";

fn agent() -> AgentInfo {
    AgentInfo {
        name: "roder".into(),
        version: "0.1.0".into(),
    }
}

fn log(events: Vec<RoderEvent>) -> Vec<EventEnvelope> {
    events
        .into_iter()
        .enumerate()
        .map(|(index, event)| EventEnvelope {
            seq: index as u64 + 1,
            timestamp: OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(index as i64),
            thread_id: T.into(),
            turn_id: Some(U.into()),
            event,
        })
        .collect()
}

fn started() -> RoderEvent {
    RoderEvent::TurnStarted(TurnStarted {
        thread_id: T.into(),
        turn_id: U.into(),
        message: "do it".into(),
        provider: "fake".into(),
        model: "m".into(),
    })
}

fn item(item: TranscriptItem) -> RoderEvent {
    RoderEvent::TranscriptItemAppended(TranscriptItemAppended {
        thread_id: T.into(),
        turn_id: U.into(),
        item,
    })
}

fn user(text: &str) -> RoderEvent {
    item(TranscriptItem::UserMessage {
        text: text.into(),
        images: vec![],
    })
}

fn inference(round: u32) -> RoderEvent {
    RoderEvent::InferenceStarted(InferenceStarted {
        thread_id: T.into(),
        turn_id: U.into(),
        round,
    })
}

fn usage(input: u64, output: u64, cached: u64) -> RoderEvent {
    let usage = TokenUsage {
        input_tokens: input,
        output_tokens: output,
        cached_input_tokens: cached,
        reasoning_tokens: 0,
    };
    RoderEvent::UsageUpdated(UsageUpdated {
        thread_id: T.into(),
        turn_id: U.into(),
        usage: usage.clone(),
        turn_total: usage,
    })
}

fn call(id: &str, arguments: &str) -> RoderEvent {
    item(TranscriptItem::ToolCall {
        id: id.into(),
        name: "shell".into(),
        arguments: arguments.into(),
    })
}

fn result(id: &str, output: &str) -> RoderEvent {
    item(TranscriptItem::ToolResult {
        id: id.into(),
        name: "shell".into(),
        output: output.into(),
        is_error: false,
    })
}

fn completed_call(id: &str, duration_ms: u64) -> RoderEvent {
    RoderEvent::ToolCallCompleted(ToolCallCompleted {
        thread_id: T.into(),
        turn_id: U.into(),
        call_id: id.into(),
        tool_name: Some("shell".into()),
        output: Some("out".into()),
        is_error: false,
        data: Value::Null,
        duration_ms,
    })
}

fn completed(answer: &str) -> RoderEvent {
    RoderEvent::TurnCompleted(TurnCompleted {
        thread_id: T.into(),
        turn_id: U.into(),
        final_message: Some(answer.into()),
        usage: TokenUsage::default(),
        stop_reason: None,
        thread_usage: TokenUsage::default(),
        incomplete: None,
    })
}

fn compacted() -> RoderEvent {
    RoderEvent::ContextCompacted(ContextCompacted {
        thread_id: T.into(),
        turn_id: Some(U.into()),
        summary: "We did things.".into(),
        transcript: vec![],
        replaced_through_seq: 3,
        replaced_items: 4,
        tokens_before: 1000,
        tokens_after: 100,
        trigger: CompactionTrigger::Auto,
        thread_usage: None,
    })
}

fn export(events: Vec<RoderEvent>) -> Value {
    let trajectory = trajectory(T, &log(events), agent()).unwrap();
    serde_json::to_value(trajectory).unwrap()
}

#[test]
fn a_turn_with_reasoning_and_a_call_is_user_then_one_agent_step_per_request() {
    let json = export(vec![
        started(),
        user("do it"),
        inference(1),
        item(TranscriptItem::Reasoning {
            text: "Let me look.".into(),
            provider_data: None,
        }),
        call("c1", r#"{"command":"ls"}"#),
        usage(100, 10, 40),
        completed_call("c1", 7),
        result("c1", "a.txt"),
        inference(2),
        usage(120, 5, 100),
        completed("Done."),
    ]);
    assert_eq!(json["schema_version"], "ATIF-v1.7");
    assert_eq!(json["session_id"], T);
    assert_eq!(json["agent"]["model_name"], "fake/m");
    let steps = json["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3, "{json:#}");
    assert_eq!(steps[0]["source"], "user");
    assert_eq!(steps[0]["message"], "do it");
    let first = &steps[1];
    assert_eq!(first["source"], "agent");
    assert_eq!(first["llm_call_count"], 1);
    assert_eq!(first["reasoning_content"], "Let me look.");
    assert_eq!(first["tool_calls"][0]["tool_call_id"], "c1");
    assert_eq!(first["tool_calls"][0]["arguments"]["command"], "ls");
    let observed = &first["observation"]["results"][0];
    assert_eq!(observed["source_call_id"], "c1");
    assert_eq!(observed["content"], "a.txt");
    assert_eq!(observed["extra"]["duration_ms"], 7);
    assert_eq!(first["metrics"]["prompt_tokens"], 100);
    assert_eq!(first["metrics"]["cached_tokens"], 40);
    assert_eq!(steps[2]["message"], "Done.");
    assert_eq!(steps[2]["metrics"]["completion_tokens"], 5);
    for (index, step) in steps.iter().enumerate() {
        assert_eq!(step["step_id"], index + 1);
    }
    let totals = &json["final_metrics"];
    assert_eq!(totals["total_prompt_tokens"], 220);
    assert_eq!(totals["total_completion_tokens"], 15);
    assert_eq!(totals["total_cached_tokens"], 140);
    assert_eq!(totals["total_steps"], 3);
    assert!(
        json.get("notes").is_none(),
        "a completed thread has no notes"
    );
    assert_eq!(json["extra"]["turns"][0]["outcome"]["status"], "completed");
}

#[test]
fn a_compaction_inside_a_request_goes_before_its_step_with_the_summary_usage() {
    let json = export(vec![
        started(),
        user("do it"),
        inference(1),
        usage(900, 50, 0), // the summary request
        compacted(),
        usage(150, 5, 0), // the request itself
        completed("Done."),
    ]);
    let steps = json["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3, "{json:#}");
    assert_eq!(steps[1]["source"], "system");
    assert_eq!(steps[1]["message"], "We did things.");
    assert_eq!(steps[1]["extra"]["event"], "context_compacted");
    assert_eq!(steps[1]["extra"]["summary_usage"]["input_tokens"], 900);
    assert!(
        steps[1].get("metrics").is_none(),
        "system steps carry no metrics"
    );
    assert_eq!(steps[2]["source"], "agent");
    assert_eq!(steps[2]["metrics"]["prompt_tokens"], 150);
    assert_eq!(json["final_metrics"]["total_prompt_tokens"], 1050);
}

#[test]
fn an_interrupted_turn_is_a_system_step_and_a_note() {
    let json = export(vec![
        started(),
        user("sleep"),
        inference(1),
        call("c1", r#"{"command":"sleep 30"}"#),
        usage(10, 1, 0),
        completed_call("c1", 0),
        result("c1", "stopped before it finished"),
        RoderEvent::TurnInterrupted(TurnInterrupted {
            thread_id: T.into(),
            turn_id: U.into(),
        }),
    ]);
    let steps = json["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3, "{json:#}");
    assert_eq!(
        steps[1]["observation"]["results"][0]["content"],
        "stopped before it finished"
    );
    assert_eq!(steps[2]["source"], "system");
    assert_eq!(steps[2]["extra"]["event"], "turn_interrupted");
    assert_eq!(json["notes"], format!("turn {U} ended: interrupted"));
    assert_eq!(
        json["extra"]["turns"][0]["outcome"]["status"],
        "interrupted"
    );
}

#[test]
fn arguments_that_are_not_an_object_are_kept_raw() {
    let json = export(vec![
        started(),
        inference(1),
        call("c1", r#"{"command":"ec"#),
        call("c2", "[1,2]"),
    ]);
    let calls = &json["steps"][0]["tool_calls"];
    assert_eq!(calls[0]["arguments"]["raw"], r#"{"command":"ec"#);
    assert_eq!(calls[1]["arguments"]["raw"], "[1,2]");
    assert_eq!(json["extra"]["turns"][0]["outcome"]["status"], "unfinished");
}

#[test]
fn a_result_without_its_call_is_a_system_step_naming_no_call() {
    let json = export(vec![started(), user("x"), result("ghost", "out")]);
    let step = &json["steps"][1];
    assert_eq!(step["source"], "system");
    let observed = &step["observation"]["results"][0];
    assert!(observed.get("source_call_id").is_none(), "{json:#}");
    assert_eq!(observed["extra"]["call_id"], "ghost");
}

#[test]
fn a_completion_whose_result_never_came_still_answers_its_call() {
    let json = export(vec![
        started(),
        inference(1),
        call("c1", "{}"),
        completed_call("c1", 3),
    ]);
    let observed = &json["steps"][0]["observation"]["results"][0];
    assert_eq!(observed["source_call_id"], "c1");
    assert_eq!(observed["content"], "out");
    assert_eq!(observed["extra"]["duration_ms"], 3);
}

#[test]
fn a_thread_without_a_turn_is_refused() {
    let error = trajectory(T, &[], agent()).unwrap_err();
    assert_eq!(
        error,
        ExportError::NoSteps {
            thread_id: T.into()
        }
    );
    assert!(error.to_string().contains("at least one step"));
}

fn checkpoint() -> roder_api::checkpoint::WorkspaceCheckpoint {
    roder_api::checkpoint::WorkspaceCheckpoint {
        checkpointer: "git".into(),
        id: "abc".into(),
        reference: None,
        metadata: Value::Null,
    }
}

#[test]
fn a_fork_starts_with_its_copied_conversation_marked_as_copied() {
    let forked = RoderEvent::ThreadForked(roder_api::checkpoint::ThreadForked {
        thread_id: T.into(),
        source_thread_id: "source".into(),
        at_turn: 1,
        checkpoint: checkpoint(),
        transcript: vec![
            TranscriptItem::UserMessage {
                text: "before".into(),
                images: vec![],
            },
            TranscriptItem::ToolCall {
                id: "old".into(),
                name: "shell".into(),
                arguments: "{}".into(),
            },
            TranscriptItem::ToolResult {
                id: "old".into(),
                name: "shell".into(),
                output: "done".into(),
                is_error: false,
            },
        ],
    });
    let json = export(vec![
        forked,
        started(),
        user("after"),
        inference(1),
        completed("ok"),
    ]);
    let steps = json["steps"].as_array().unwrap();
    assert_eq!(steps[0]["is_copied_context"], true, "{json:#}");
    assert_eq!(steps[1]["is_copied_context"], true);
    assert_eq!(
        steps[1]["observation"]["results"][0]["source_call_id"],
        "old"
    );
    assert!(
        steps[1].get("llm_call_count").is_none(),
        "no request made it here"
    );
    assert_eq!(steps[2]["extra"]["event"], "thread_forked");
    assert_eq!(steps[2]["extra"]["source_thread_id"], "source");
    assert!(steps[3].get("is_copied_context").is_none());
    assert_eq!(steps[4]["message"], "ok");
}

#[test]
fn a_rollback_a_failure_and_a_deadline_are_system_steps() {
    let json = export(vec![
        started(),
        user("one"),
        RoderEvent::TurnFailed(TurnFailed {
            thread_id: T.into(),
            turn_id: U.into(),
            error: "the provider said no".into(),
        }),
        RoderEvent::ThreadRolledBack(roder_api::checkpoint::ThreadRolledBack {
            thread_id: T.into(),
            to_turn: 0,
            rolled_back_turns: vec![U.into()],
            checkpoint: checkpoint(),
            transcript: vec![],
        }),
        started(),
        RoderEvent::TurnDeadlineExceeded(TurnDeadlineExceeded {
            thread_id: T.into(),
            turn_id: U.into(),
            deadline_seconds: 9,
        }),
    ]);
    let events: Vec<&Value> = json["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|step| step["source"] == "system")
        .map(|step| &step["extra"]["event"])
        .collect();
    assert_eq!(
        events,
        [
            "turn_failed",
            "thread_rolled_back",
            "turn_deadline_exceeded"
        ]
    );
    assert!(json["notes"].as_str().unwrap().contains("failed"));
}

/// An arbitrary log of the events the converter reads, in any order (a
/// log cut by a crash, an old format, a hostile file).
fn any_event() -> impl Strategy<Value = RoderEvent> {
    let id = prop::sample::select(vec!["c1", "c2", "c3"]);
    prop_oneof![
        Just(started()),
        Just(user("u")),
        (1u32..4).prop_map(inference),
        (0u64..50, 0u64..50).prop_map(|(input, output)| usage(input, output, 0)),
        (id.clone(), "\\PC{0,12}").prop_map(|(id, arguments)| call(id, &arguments)),
        id.clone().prop_map(|id| result(id, "r")),
        id.prop_map(|id| completed_call(id, 1)),
        Just(compacted()),
        Just(completed("a")),
        Just(RoderEvent::TurnInterrupted(TurnInterrupted {
            thread_id: T.into(),
            turn_id: U.into()
        })),
        Just(item(TranscriptItem::Reasoning {
            text: "r".into(),
            provider_data: None
        })),
        Just(item(TranscriptItem::AssistantMessage { text: "m".into() })),
    ]
}

proptest! {
    /// What Harbor's validator checks across fields holds for any log:
    /// step ids 1..=n, results naming only calls of their own step,
    /// agent-only fields on agent steps only, totals equal to the usage.
    #[test]
    fn any_log_gives_a_trajectory_harbor_accepts(events in prop::collection::vec(any_event(), 0..40)) {
        let sum: u64 = events.iter().map(|event| match event {
            RoderEvent::UsageUpdated(updated) => updated.usage.input_tokens,
            _ => 0,
        }).sum();
        let Ok(trajectory) = trajectory(T, &log(events), agent()) else {
            return Ok(());
        };
        prop_assert!(!trajectory.steps.is_empty());
        prop_assert_eq!(trajectory.final_metrics.total_prompt_tokens, sum);
        prop_assert_eq!(trajectory.final_metrics.total_steps, trajectory.steps.len());
        for (index, step) in trajectory.steps.iter().enumerate() {
            prop_assert_eq!(step.step_id, index + 1);
            if step.source != Source::Agent {
                prop_assert!(step.model_name.is_none() && step.reasoning_content.is_none()
                    && step.tool_calls.is_none() && step.metrics.is_none());
            }
            let calls: Vec<&str> = step.tool_calls.iter().flatten()
                .map(|call| call.tool_call_id.as_str()).collect();
            for observed in step.observation.iter().flat_map(|observation| &observation.results) {
                if let Some(id) = &observed.source_call_id {
                    prop_assert!(calls.contains(&id.as_str()), "{} not in step {}", id, step.step_id);
                }
            }
        }
    }
}

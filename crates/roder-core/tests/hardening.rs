//! The runtime's invariants at the edges of one process: panics, interrupts
//! that race finished calls, truncated and refused answers, phases, a second
//! writer, and a turn a dead process left open.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use roder_api::events::{
    EventEnvelope, IncompleteAnswer, RoderEvent, ToolCallRequested, ToolCallStarted,
    TranscriptItemAppended, TurnStarted,
};
use roder_api::extension::ExtensionRegistryBuilder;
use roder_api::inference::{
    CompletionMetadata, InferenceEvent, MessageDelta, MessagePhase, ToolCallArgumentsDelta,
};
use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerProviderId, RemoteRunnerSession, RunnerCapabilities,
    RunnerDestination, RunnerSessionState,
};
use roder_api::stop_reason::StopReason;
use roder_api::thread::ThreadStore;
use roder_api::tools::{
    ToolContributor, ToolExecutionContext, ToolExecutor, ToolRegistry, ToolResult, ToolSpec,
};
use roder_api::transcript::TranscriptItem;
use roder_api::writer_lease::ThreadWriterBusy;
use roder_core::{
    CreateThreadRequest, Runtime, RuntimeConfig, StartTurnRequest, ThreadRunnerSelection,
};
use roder_ext_jsonl_thread_store::store::{JsonlThreadStore, JsonlThreadStoreFactory};
use roder_testkit::{MockRunnerProvider, ScriptedEngine, ScriptedRound, final_round, tool_round};
use support::{Harness, completed_tools, until_turn_ends, wait_for};

fn completed(stop_reason: &str) -> InferenceEvent {
    InferenceEvent::Completed(CompletionMetadata {
        stop_reason: Some(stop_reason.to_string()),
        provider_response_id: None,
    })
}

fn text(text: &str, phase: Option<MessagePhase>) -> InferenceEvent {
    InferenceEvent::MessageDelta(MessageDelta {
        text: text.to_string(),
        phase,
    })
}

fn transcript_of(events: &[EventEnvelope]) -> Vec<TranscriptItem> {
    events
        .iter()
        .filter_map(|envelope| match &envelope.event {
            RoderEvent::TranscriptItemAppended(appended) => Some(appended.item.clone()),
            _ => None,
        })
        .collect()
}

/// Every tool call in `transcript` is followed by exactly one result.
fn assert_well_formed(transcript: &[TranscriptItem]) {
    for (index, item) in transcript.iter().enumerate() {
        if let TranscriptItem::ToolCall { id, .. } = item {
            let results = transcript[index..]
                .iter()
                .filter(|later| matches!(later, TranscriptItem::ToolResult { id: result, .. } if result == id))
                .count();
            assert_eq!(
                results, 1,
                "tool call {id} needs exactly one result: {transcript:#?}"
            );
        }
    }
}

struct PanickingTool;

#[async_trait::async_trait]
impl ToolExecutor for PanickingTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "explode".into(),
            description: "panics".into(),
            parameters: serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false}),
        }
    }

    async fn execute(
        &self,
        _ctx: ToolExecutionContext,
        _call: roder_api::tools::ToolCall,
    ) -> anyhow::Result<ToolResult> {
        panic!("the tool exploded on purpose");
    }
}

struct PanickingTools;

impl ToolContributor for PanickingTools {
    fn id(&self) -> roder_api::extension::ToolProviderId {
        "panicking".into()
    }

    fn contribute(&self, registry: &mut ToolRegistry) -> anyhow::Result<()> {
        registry.register(Arc::new(PanickingTool))
    }
}

#[tokio::test]
async fn a_panicking_tool_is_an_error_result_and_the_thread_goes_on() {
    let engine = ScriptedEngine::new(vec![
        tool_round(&[("p1", "explode", "{}")]),
        final_round("recovered"),
        final_round("second turn"),
    ]);
    let store = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(engine.clone());
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
        base_path: store.path().to_path_buf(),
    }));
    builder.tool_contributor(Arc::new(PanickingTools));
    let runtime = Arc::new(
        Runtime::new(
            builder.build().unwrap(),
            RuntimeConfig {
                workspace: Some(workspace.path().display().to_string()),
                ..RuntimeConfig::default()
            },
        )
        .unwrap(),
    );
    let thread_id = runtime.create_thread(None).await.unwrap().thread_id;
    let mut events = runtime.subscribe_events();
    runtime
        .start_turn(StartTurnRequest::new(&thread_id, "go"))
        .await
        .unwrap();
    let seen = until_turn_ends(&mut events, &thread_id).await;
    let tools = completed_tools(&seen);
    assert_eq!(tools.len(), 1);
    assert!(tools[0].is_error);
    let output = tools[0].output.clone().unwrap_or_default();
    assert!(
        output.contains("panicked") && output.contains("exploded on purpose"),
        "{output}"
    );
    assert!(matches!(
        seen.last().unwrap().event,
        RoderEvent::TurnCompleted(_)
    ));
    assert_well_formed(&engine.requests()[1].transcript);

    runtime
        .start_turn(StartTurnRequest::new(&thread_id, "again"))
        .await
        .unwrap();
    let seen = until_turn_ends(&mut events, &thread_id).await;
    assert!(matches!(
        seen.last().unwrap().event,
        RoderEvent::TurnCompleted(_)
    ));
}

/// A provider whose first `create_session` panics.
#[derive(Clone, Default)]
struct PanicsOnce {
    inner: MockRunnerProvider,
    panicked: Arc<AtomicBool>,
}

#[async_trait::async_trait]
impl RemoteRunnerProvider for PanicsOnce {
    fn id(&self) -> RemoteRunnerProviderId {
        self.inner.id()
    }

    fn capabilities(&self) -> RunnerCapabilities {
        self.inner.capabilities()
    }

    async fn create_session(
        &self,
        destination: RunnerDestination,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        if !self.panicked.swap(true, Ordering::SeqCst) {
            panic!("provider set-up panicked on purpose");
        }
        self.inner.create_session(destination).await
    }

    async fn resume_session(
        &self,
        state: RunnerSessionState,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        self.inner.resume_session(state).await
    }
}

#[tokio::test]
async fn a_panicking_provider_fails_that_provisioning_and_the_next_call_retries() {
    let engine = ScriptedEngine::new(vec![
        tool_round(&[("w1", "write_file", r#"{"path": "a.txt", "content": "one"}"#)]),
        tool_round(&[("w2", "write_file", r#"{"path": "a.txt", "content": "two"}"#)]),
        final_round("done"),
    ]);
    let provider = PanicsOnce::default();
    let store = tempfile::tempdir().unwrap();
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(engine.clone());
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
        base_path: store.path().to_path_buf(),
    }));
    builder.tool_contributor(roder_tools::builtin_coding_tools_contributor("/").unwrap());
    builder.remote_runner_provider(Arc::new(provider.clone()));
    let runtime =
        Arc::new(Runtime::new(builder.build().unwrap(), RuntimeConfig::default()).unwrap());
    let thread = runtime
        .create_thread_with(CreateThreadRequest {
            runner: Some(ThreadRunnerSelection {
                provider_id: provider.id(),
                config: serde_json::json!({}),
                workspace: "/mock/workspace".into(),
                read_roots: Vec::new(),
            }),
            ..CreateThreadRequest::in_workspace("/tmp")
        })
        .await
        .unwrap();
    let mut events = runtime.subscribe_events();
    runtime
        .start_turn(StartTurnRequest::new(&thread.thread_id, "write twice"))
        .await
        .unwrap();
    let seen = until_turn_ends(&mut events, &thread.thread_id).await;
    let tools = completed_tools(&seen);
    assert_eq!(tools.len(), 2);
    assert!(tools[0].is_error);
    let first = tools[0].output.clone().unwrap_or_default();
    assert!(first.contains("panicked on purpose"), "{first}");
    assert!(
        !tools[1].is_error,
        "the retry provisions: {:?}",
        tools[1].output
    );
    assert_eq!(
        MockRunnerProvider::count(&provider.inner.counters.created),
        1
    );
    assert!(matches!(
        seen.last().unwrap().event,
        RoderEvent::TurnCompleted(_)
    ));
}

#[tokio::test]
async fn an_interrupt_keeps_the_real_output_of_a_call_that_finished() {
    let harness = Harness::new(vec![tool_round(&[
        ("fast", "exec_command", r#"{"cmd": "echo finished-output"}"#),
        ("slow", "exec_command", r#"{"cmd": "sleep 30"}"#),
    ])]);
    let thread_id = harness.thread().await;
    let mut events = harness.runtime.subscribe_events();
    let turn_id = harness.start(&thread_id, "two at once").await;
    wait_for(
        &mut events,
        &thread_id,
        |event| matches!(event, RoderEvent::ToolCallCompleted(done) if done.call_id == "fast"),
    )
    .await;
    harness
        .runtime
        .interrupt_turn(&thread_id, &turn_id)
        .await
        .unwrap();

    let log = harness
        .runtime
        .read_thread_events(&thread_id, 0)
        .await
        .unwrap()
        .events;
    let completions: Vec<_> = completed_tools(&log);
    let fast: Vec<_> = completions.iter().filter(|c| c.call_id == "fast").collect();
    let slow: Vec<_> = completions.iter().filter(|c| c.call_id == "slow").collect();
    assert_eq!(fast.len(), 1, "reported once: {completions:#?}");
    assert_eq!(slow.len(), 1, "reported once: {completions:#?}");
    assert!(!fast[0].is_error);
    assert!(
        fast[0]
            .output
            .as_deref()
            .unwrap_or_default()
            .contains("finished-output")
    );
    assert!(slow[0].is_error);
    let transcript = transcript_of(&log);
    assert_well_formed(&transcript);
    let fast_result = transcript.iter().find_map(|item| match item {
        TranscriptItem::ToolResult { id, output, .. } if id == "fast" => Some(output.clone()),
        _ => None,
    });
    assert!(fast_result.unwrap_or_default().contains("finished-output"));
    assert!(matches!(
        log.last().unwrap().event,
        RoderEvent::TurnInterrupted(_)
    ));
}

#[tokio::test]
async fn an_answer_cut_off_by_the_output_limit_is_incomplete() {
    let harness = Harness::new(vec![
        ScriptedRound::Events(vec![text("half an ans", None), completed("length")]),
        ScriptedRound::Events(vec![
            text("I can't help with that.", None),
            completed("refusal"),
        ]),
        ScriptedRound::Events(vec![text("all of it", None), completed("stop")]),
    ]);
    let thread_id = harness.thread().await;
    let mut events = harness.runtime.subscribe_events();
    let mut outcomes = Vec::new();
    for message in ["one", "two", "three"] {
        harness.start(&thread_id, message).await;
        let seen = until_turn_ends(&mut events, &thread_id).await;
        let RoderEvent::TurnCompleted(done) = &seen.last().unwrap().event else {
            panic!("completed: {seen:#?}");
        };
        outcomes.push((
            done.final_message.clone(),
            done.stop_reason.clone(),
            done.incomplete.clone(),
        ));
    }
    assert_eq!(
        outcomes,
        vec![
            (
                Some("half an ans".into()),
                Some(StopReason::MaxOutputTokens),
                Some(IncompleteAnswer::MaxOutputTokens)
            ),
            (
                Some("I can't help with that.".into()),
                Some(StopReason::Refusal),
                Some(IncompleteAnswer::Refusal)
            ),
            (Some("all of it".into()), Some(StopReason::EndTurn), None),
        ]
    );
}

#[tokio::test]
async fn a_tool_call_cut_off_mid_arguments_is_reported_and_not_run() {
    let harness = Harness::new(vec![ScriptedRound::Events(vec![
        text("Writing the file.", None),
        InferenceEvent::ToolCallArgumentsDelta(ToolCallArgumentsDelta {
            id: "cut".into(),
            name: Some("write_file".into()),
            delta: r#"{"path": "big.txt", "content": "aaaa"#.into(),
        }),
        completed("max_tokens"),
    ])]);
    let thread_id = harness.thread().await;
    let mut events = harness.runtime.subscribe_events();
    harness.start(&thread_id, "write").await;
    let seen = until_turn_ends(&mut events, &thread_id).await;
    let RoderEvent::TurnCompleted(done) = &seen.last().unwrap().event else {
        panic!("completed: {seen:#?}");
    };
    assert_eq!(
        done.incomplete,
        Some(IncompleteAnswer::ToolCallTruncated {
            call_id: "cut".into(),
            tool_name: Some("write_file".into())
        })
    );
    assert!(completed_tools(&seen).is_empty());
    assert!(!harness.path("big.txt").exists());
    let log = harness
        .runtime
        .read_thread_events(&thread_id, 0)
        .await
        .unwrap()
        .events;
    assert_well_formed(&transcript_of(&log));
}

#[tokio::test]
async fn commentary_and_the_final_answer_stay_apart_and_deltas_are_not_stored() {
    let harness = Harness::new(vec![ScriptedRound::Events(vec![
        text("Checking the ", Some(MessagePhase::Commentary)),
        text("files.", Some(MessagePhase::Commentary)),
        text("All ", Some(MessagePhase::FinalAnswer)),
        text("good.", Some(MessagePhase::FinalAnswer)),
        completed("stop"),
    ])]);
    let thread_id = harness.thread().await;
    let mut events = harness.runtime.subscribe_events();
    harness.start(&thread_id, "check").await;
    let seen = until_turn_ends(&mut events, &thread_id).await;
    let live_deltas = seen
        .iter()
        .filter(|envelope| matches!(envelope.event, RoderEvent::MessageDelta(_)))
        .count();
    assert_eq!(live_deltas, 4, "deltas are broadcast live");
    let RoderEvent::TurnCompleted(done) = &seen.last().unwrap().event else {
        panic!("completed");
    };
    assert_eq!(done.final_message.as_deref(), Some("All good."));

    let log = harness
        .runtime
        .read_thread_events(&thread_id, 0)
        .await
        .unwrap()
        .events;
    assert!(
        !log.iter().any(|envelope| envelope.event.is_transient()),
        "deltas are not persisted"
    );
    let snapshot = harness
        .runtime
        .load_thread(&thread_id)
        .await
        .unwrap()
        .unwrap();
    let messages: Vec<String> = snapshot
        .transcript()
        .into_iter()
        .filter_map(|item| match item {
            TranscriptItem::AssistantMessage { text } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(
        messages,
        vec!["Checking the files.".to_string(), "All good.".to_string()]
    );
    let stored = std::fs::read_to_string(
        harness
            .store_dir
            .path()
            .join(&thread_id)
            .join("events.jsonl"),
    )
    .unwrap();
    assert_eq!(
        stored.matches("All good.").count(),
        1,
        "the answer is stored once"
    );
    assert_eq!(stored.matches("Checking the files.").count(), 1);
    let seqs: Vec<u64> = log.iter().map(|envelope| envelope.seq).collect();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "persisted seqs stay consecutive");
}

#[tokio::test]
async fn a_second_runtime_on_the_same_store_is_refused_while_a_turn_runs() {
    let harness = Harness::new(vec![ScriptedRound::Hang, final_round("later")]);
    let thread_id = harness.thread().await;
    let mut events = harness.runtime.subscribe_events();
    let turn_id = harness.start(&thread_id, "hang").await;
    harness.engine.wait_for_requests(1).await;

    let log_path = harness
        .store_dir
        .path()
        .join(&thread_id)
        .join("events.jsonl");
    let before = std::fs::read(&log_path).unwrap();
    let other = harness.restart();
    let error = other
        .start_turn(StartTurnRequest::new(&thread_id, "me too"))
        .await
        .expect_err("the thread is being written by the first runtime");
    let busy = error
        .downcast_ref::<ThreadWriterBusy>()
        .unwrap_or_else(|| panic!("a ThreadWriterBusy, got: {error:#}"));
    assert_eq!(busy.holder.pid, std::process::id());
    assert!(error.to_string().contains("busy"), "{error}");
    assert_eq!(
        std::fs::read(&log_path).unwrap(),
        before,
        "nothing was written"
    );

    harness
        .runtime
        .interrupt_turn(&thread_id, &turn_id)
        .await
        .unwrap();
    until_turn_ends(&mut events, &thread_id).await;
    // The first runtime is done writing: the second one may now.
    let mut other_events = other.subscribe_events();
    other
        .start_turn(StartTurnRequest::new(&thread_id, "now me"))
        .await
        .unwrap();
    let seen = until_turn_ends(&mut other_events, &thread_id).await;
    assert!(matches!(
        seen.last().unwrap().event,
        RoderEvent::TurnCompleted(_)
    ));
    let log = other
        .read_thread_events(&thread_id, 0)
        .await
        .unwrap()
        .events;
    let seqs: Vec<u64> = log.iter().map(|envelope| envelope.seq).collect();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "one numbering across both writers");
}

#[tokio::test]
async fn a_turn_left_open_by_a_dead_process_is_closed_before_the_next_one() {
    let harness = Harness::new(vec![final_round("continued")]);
    let thread_id = harness.thread().await;
    // What a process killed during a command leaves: the call announced and
    // started, no result, no terminal event.
    let store = JsonlThreadStore {
        base_path: harness.store_dir.path().to_path_buf(),
    };
    let last = store
        .load_events(&thread_id, 0)
        .await
        .unwrap()
        .last()
        .unwrap()
        .seq;
    let dead_turn = "dead-turn".to_string();
    let events = [
        RoderEvent::TurnStarted(TurnStarted {
            thread_id: thread_id.clone(),
            turn_id: dead_turn.clone(),
            message: "sleep".into(),
            provider: "mock".into(),
            model: "mock".into(),
        }),
        RoderEvent::TranscriptItemAppended(TranscriptItemAppended {
            thread_id: thread_id.clone(),
            turn_id: dead_turn.clone(),
            item: TranscriptItem::UserMessage {
                text: "sleep".into(),
                images: Vec::new(),
            },
        }),
        RoderEvent::TranscriptItemAppended(TranscriptItemAppended {
            thread_id: thread_id.clone(),
            turn_id: dead_turn.clone(),
            item: TranscriptItem::ToolCall {
                id: "sleeper".into(),
                name: "exec_command".into(),
                arguments: r#"{"cmd": "sleep 100"}"#.into(),
            },
        }),
        RoderEvent::ToolCallRequested(ToolCallRequested {
            thread_id: thread_id.clone(),
            turn_id: dead_turn.clone(),
            call_id: "sleeper".into(),
            tool_name: "exec_command".into(),
            arguments: r#"{"cmd": "sleep 100"}"#.into(),
            effects: None,
        }),
        RoderEvent::ToolCallStarted(ToolCallStarted {
            thread_id: thread_id.clone(),
            turn_id: dead_turn.clone(),
            call_id: "sleeper".into(),
            tool_name: "exec_command".into(),
            approved_by: None,
        }),
    ];
    let envelopes: Vec<EventEnvelope> = events
        .into_iter()
        .enumerate()
        .map(|(index, event)| EventEnvelope {
            seq: last + 1 + index as u64,
            timestamp: time::OffsetDateTime::now_utc(),
            thread_id: thread_id.clone(),
            turn_id: Some(dead_turn.clone()),
            event,
        })
        .collect();
    store.append_events(&thread_id, &envelopes).await.unwrap();

    // A new process opens the thread to continue it.
    let runtime = harness.restart();
    let mut events = runtime.subscribe_events();
    let turn_id = runtime
        .start_turn(StartTurnRequest::new(&thread_id, "continue"))
        .await
        .unwrap();
    let ended = wait_for(&mut events, &thread_id, |event| {
        event.is_terminal()
            && !matches!(event, RoderEvent::TurnFailed(failed) if failed.turn_id == "dead-turn")
    })
    .await;
    assert_eq!(ended.turn_id.as_deref(), Some(turn_id.as_str()));
    assert!(
        matches!(ended.event, RoderEvent::TurnCompleted(_)),
        "{ended:#?}"
    );
    let request = harness.engine.requests().pop().unwrap();
    assert_well_formed(&request.transcript);
    let note = request.transcript.iter().find_map(|item| match item {
        TranscriptItem::ToolResult {
            id,
            output,
            is_error: true,
            ..
        } if id == "sleeper" => Some(output.clone()),
        _ => None,
    });
    assert!(
        note.unwrap_or_default()
            .contains("process running this tool call stopped")
    );
    let log = runtime
        .read_thread_events(&thread_id, 0)
        .await
        .unwrap()
        .events;
    let dead_failed = log.iter().any(|envelope| {
        matches!(&envelope.event, RoderEvent::TurnFailed(failed) if failed.turn_id == dead_turn && failed.error.contains("stopped"))
    });
    assert!(dead_failed, "the dead turn got a terminal event");
    let seqs: Vec<u64> = log.iter().map(|envelope| envelope.seq).collect();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected);
}

/// An engine whose request cancels the turn and fails in the same poll: the
/// turn's work sees the cancellation before the driver does.
struct CancelsItsOwnTurn;

#[async_trait::async_trait]
impl roder_api::inference::InferenceEngine for CancelsItsOwnTurn {
    fn id(&self) -> roder_api::extension::InferenceEngineId {
        roder_api::catalog::PROVIDER_MOCK.to_string()
    }

    fn capabilities(&self) -> roder_api::inference::InferenceCapabilities {
        roder_api::inference::InferenceCapabilities::coding_agent_default()
    }

    async fn list_models(
        &self,
        _ctx: roder_api::inference::InferenceProviderContext<'_>,
    ) -> anyhow::Result<Vec<roder_api::inference::ModelDescriptor>> {
        Ok(Vec::new())
    }

    async fn stream_turn(
        &self,
        ctx: roder_api::inference::InferenceTurnContext<'_>,
        _request: roder_api::inference::AgentInferenceRequest,
    ) -> anyhow::Result<roder_api::inference::InferenceEventStream> {
        ctx.cancellation.cancel();
        anyhow::bail!("stopped: the turn was cancelled")
    }
}

#[tokio::test]
async fn work_that_stops_on_a_cancellation_before_the_driver_sees_it_ends_interrupted() {
    let store = tempfile::tempdir().unwrap();
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(Arc::new(CancelsItsOwnTurn));
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
        base_path: store.path().to_path_buf(),
    }));
    let runtime =
        Arc::new(Runtime::new(builder.build().unwrap(), RuntimeConfig::default()).unwrap());
    let thread = runtime
        .create_thread_with(CreateThreadRequest::in_workspace("/tmp"))
        .await
        .unwrap();
    let mut events = runtime.subscribe_events();
    runtime
        .start_turn(StartTurnRequest::new(&thread.thread_id, "go"))
        .await
        .unwrap();
    // The driver once polled the finished work again here and panicked,
    // leaving the thread claimed with no terminal event.
    let seen = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        until_turn_ends(&mut events, &thread.thread_id),
    )
    .await
    .expect("the turn ends");
    assert!(
        matches!(seen.last().unwrap().event, RoderEvent::TurnInterrupted(_)),
        "{:?}",
        seen.last()
    );
    runtime
        .start_turn(StartTurnRequest::new(&thread.thread_id, "again"))
        .await
        .expect("the thread accepts the next turn");
}

//! Long sessions: compaction at a threshold, on a provider's overflow error,
//! on request; a compaction that fails or is interrupted changes nothing;
//! usage totals add up; the history reads in pages.

mod support;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use roder_api::events::{CompactionTrigger, ContextCompacted, RoderEvent};
use roder_api::extension::{ExtensionRegistryBuilder, InferenceEngineId};
use roder_api::inference::{
    AgentInferenceRequest, CompletionMetadata, ContextOverflow, InferenceCapabilities,
    InferenceEngine, InferenceEvent, InferenceEventStream, InferenceProviderContext,
    InferenceTurnContext, MessageDelta, ModelDescriptor, TokenUsage,
};
use roder_api::thread::ThreadStoreFactory as _;
use roder_api::transcript::TranscriptItem;
use roder_core::{
    Runtime, RuntimeConfig, RuntimeError, SUMMARY_INSTRUCTIONS, SUMMARY_PREFIX, StartTurnRequest,
};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use roder_testkit::{ScriptedRound, final_round, tool_round};
use support::until_turn_ends;
use tokio::sync::Notify;

/// How the engine answers summary requests.
#[derive(Clone)]
enum Summary {
    Text(String),
    /// Never answers (until the request is dropped).
    Hang,
}

/// A model with a context window: it refuses every request over `window`
/// estimated tokens (bytes / 4 of its JSON) with `ContextOverflow`, answers
/// summary requests per `summary`, plays `script` for the rest, and reports
/// each request's estimate as its input tokens.
struct WindowEngine {
    window: Option<u64>,
    /// Its tokenizer's count per estimated token (1: bytes / 4).
    count_factor: u64,
    reported_window: Option<u64>,
    summary: Mutex<Summary>,
    script: Mutex<VecDeque<ScriptedRound>>,
    requests: Mutex<Vec<AgentInferenceRequest>>,
    refused: Mutex<usize>,
    summary_started: Notify,
    request_seen: Notify,
}

impl WindowEngine {
    fn new(window: Option<u64>, summary: Summary, script: Vec<ScriptedRound>) -> Arc<Self> {
        Arc::new(Self {
            window,
            count_factor: 1,
            reported_window: None,
            summary: Mutex::new(summary),
            script: Mutex::new(script.into()),
            requests: Mutex::new(Vec::new()),
            refused: Mutex::new(0),
            summary_started: Notify::new(),
            request_seen: Notify::new(),
        })
    }

    fn requests(&self) -> Vec<AgentInferenceRequest> {
        self.requests.lock().unwrap().clone()
    }

    fn turn_requests(&self) -> Vec<AgentInferenceRequest> {
        self.requests()
            .into_iter()
            .filter(|request| request.instructions != SUMMARY_INSTRUCTIONS)
            .collect()
    }

    async fn wait_for_requests(&self, count: usize) {
        loop {
            let seen = self.request_seen.notified();
            if self.requests.lock().unwrap().len() >= count {
                return;
            }
            tokio::time::timeout(Duration::from_secs(20), seen)
                .await
                .unwrap();
        }
    }

    fn summary_requests(&self) -> usize {
        self.requests().len() - self.turn_requests().len()
    }
}

fn estimate(request: &AgentInferenceRequest) -> u64 {
    (serde_json::to_string(request).unwrap().len() / 4) as u64
}

fn events(list: Vec<InferenceEvent>) -> InferenceEventStream {
    futures::stream::iter(list.into_iter().map(Ok)).boxed()
}

#[async_trait::async_trait]
impl InferenceEngine for WindowEngine {
    fn id(&self) -> InferenceEngineId {
        "mock".to_string()
    }

    fn capabilities(&self) -> InferenceCapabilities {
        InferenceCapabilities::coding_agent_default()
    }

    async fn list_models(
        &self,
        _ctx: InferenceProviderContext<'_>,
    ) -> anyhow::Result<Vec<ModelDescriptor>> {
        Ok(vec![ModelDescriptor {
            id: "mock".to_string(),
            display_name: None,
            context_window: self.reported_window,
        }])
    }

    async fn stream_turn(
        &self,
        _ctx: InferenceTurnContext<'_>,
        request: AgentInferenceRequest,
    ) -> anyhow::Result<InferenceEventStream> {
        let tokens = estimate(&request) * self.count_factor;
        let is_summary = request.instructions == SUMMARY_INSTRUCTIONS;
        self.requests.lock().unwrap().push(request);
        self.request_seen.notify_waiters();
        if let Some(window) = self.window
            && tokens > window
        {
            *self.refused.lock().unwrap() += 1;
            return Err(ContextOverflow {
                message: format!("prompt is too long: {tokens} tokens > {window} maximum"),
            }
            .into());
        }
        let usage = InferenceEvent::Usage(TokenUsage {
            input_tokens: tokens,
            output_tokens: 10,
            cached_input_tokens: 0,
            reasoning_tokens: 1,
        });
        if is_summary {
            self.summary_started.notify_waiters();
            let summary = self.summary.lock().unwrap().clone();
            return Ok(match summary {
                Summary::Text(text) => events(vec![
                    InferenceEvent::MessageDelta(MessageDelta { text, phase: None }),
                    usage,
                    completed("stop"),
                ]),
                Summary::Hang => futures::stream::pending().boxed(),
            });
        }
        let round = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| final_round("done"));
        match round {
            ScriptedRound::Events(mut list) => {
                list.insert(0, usage);
                Ok(events(list))
            }
            ScriptedRound::Hang => Ok(futures::stream::pending().boxed()),
            ScriptedRound::Fail(message) => Err(anyhow::anyhow!(message)),
        }
    }
}

fn completed(stop: &str) -> InferenceEvent {
    InferenceEvent::Completed(CompletionMetadata {
        stop_reason: Some(stop.to_string()),
        provider_response_id: None,
    })
}

struct Setup {
    runtime: Arc<Runtime>,
    engine: Arc<WindowEngine>,
    workspace: tempfile::TempDir,
    store: tempfile::TempDir,
}

fn setup(engine: Arc<WindowEngine>, adjust: impl FnOnce(&mut RuntimeConfig)) -> Setup {
    let workspace = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let runtime = runtime_over(&engine, &store, &workspace, adjust);
    Setup {
        runtime,
        engine,
        workspace,
        store,
    }
}

fn runtime_over(
    engine: &Arc<WindowEngine>,
    store: &tempfile::TempDir,
    workspace: &tempfile::TempDir,
    adjust: impl FnOnce(&mut RuntimeConfig),
) -> Arc<Runtime> {
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(engine.clone());
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
        base_path: store.path().to_path_buf(),
    }));
    builder
        .tool_contributor(roder_tools::builtin_coding_tools_contributor(workspace.path()).unwrap());
    let mut config = RuntimeConfig {
        workspace: Some(workspace.path().display().to_string()),
        ..RuntimeConfig::default()
    };
    adjust(&mut config);
    Arc::new(Runtime::new(builder.build().unwrap(), config).unwrap())
}

/// `calls` rounds reading a 6 KiB file, then an answer.
fn reading_script(calls: usize) -> Vec<ScriptedRound> {
    let mut rounds: Vec<ScriptedRound> = (0..calls)
        .map(|index| {
            let id = format!("read-{index}");
            tool_round(&[(id.as_str(), "read_file", r#"{"path":"big.txt"}"#)])
        })
        .collect();
    rounds.push(final_round("read it all"));
    rounds
}

fn write_big_file(setup: &Setup) {
    let line = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";
    std::fs::write(setup.workspace.path().join("big.txt"), line.repeat(96)).unwrap();
}

async fn run_turn(
    setup: &Setup,
    thread_id: &str,
    message: &str,
) -> Vec<roder_api::events::EventEnvelope> {
    let mut events = setup.runtime.subscribe_events();
    setup
        .runtime
        .start_turn(StartTurnRequest::new(thread_id, message))
        .await
        .unwrap();
    until_turn_ends(&mut events, thread_id).await
}

fn compactions(events: &[roder_api::events::EventEnvelope]) -> Vec<ContextCompacted> {
    events
        .iter()
        .filter_map(|envelope| match &envelope.event {
            RoderEvent::ContextCompacted(compacted) => Some(compacted.clone()),
            _ => None,
        })
        .collect()
}

fn completed_turn(events: &[roder_api::events::EventEnvelope]) -> roder_api::events::TurnCompleted {
    match &events.last().unwrap().event {
        RoderEvent::TurnCompleted(done) => done.clone(),
        other => panic!("the turn should complete, got {other:?}"),
    }
}

async fn logged(setup: &Setup, thread_id: &str) -> Vec<roder_api::events::EventEnvelope> {
    setup
        .runtime
        .read_thread_events(thread_id, 0)
        .await
        .unwrap()
        .events
}

#[tokio::test]
async fn a_session_crossing_the_threshold_compacts_and_goes_on() {
    let engine = WindowEngine::new(
        Some(8_000),
        Summary::Text("short".into()),
        reading_script(20),
    );
    let setup = setup(engine, |config| {
        config.auto_compact_token_limit = Some(5_000)
    });
    write_big_file(&setup);
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let events = run_turn(&setup, &thread_id, "read big.txt twenty times").await;
    let done = completed_turn(&events);
    assert_eq!(done.final_message.as_deref(), Some("read it all"));
    let compacted = compactions(&events);
    assert!(
        compacted.len() >= 2,
        "compactions repeat as the session grows: {}",
        compacted.len()
    );
    for compaction in &compacted {
        assert_eq!(compaction.trigger, CompactionTrigger::Auto);
        assert!(compaction.tokens_after < compaction.tokens_before);
        assert_eq!(compaction.turn_id.as_deref(), Some(done.turn_id.as_str()));
    }
    // Every request fit: none was refused, the window was never crossed.
    assert_eq!(*setup.engine.refused.lock().unwrap(), 0);
    assert_eq!(setup.engine.turn_requests().len(), 21);
    // The log keeps every output whole; the model saw old ones as stubs.
    let log = logged(&setup, &thread_id).await;
    let whole = log
        .iter()
        .filter(|envelope| {
            matches!(&envelope.event, RoderEvent::TranscriptItemAppended(a)
            if matches!(&a.item, TranscriptItem::ToolResult { output, .. } if output.len() > 6_000))
        })
        .count();
    assert_eq!(whole, 20);
    assert!(setup.engine.turn_requests().iter().any(|request| {
        request.transcript.iter().any(|item| {
            matches!(item,
        TranscriptItem::ToolResult { output, .. } if output.contains("removed to save context"))
        })
    }));
    // A new process resumes from the compacted transcript.
    let restarted = runtime_over(&setup.engine, &setup.store, &setup.workspace, |config| {
        config.auto_compact_token_limit = Some(5_000)
    });
    let snapshot = restarted.load_thread(&thread_id).await.unwrap().unwrap();
    let transcript = snapshot.transcript();
    assert_eq!(
        transcript.first(),
        compacted.last().unwrap().transcript.first()
    );
}

#[tokio::test]
async fn history_past_pruning_is_summarized_and_the_summary_leads_later_requests() {
    let engine = WindowEngine::new(
        None,
        Summary::Text("SUMMARY: the user sent long notes".into()),
        vec![],
    );
    let setup = setup(engine, |config| {
        config.auto_compact_token_limit = Some(3_000)
    });
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let note = "a long note from the user. ".repeat(150);
    for turn in 0..5 {
        let events = run_turn(&setup, &thread_id, &format!("{turn}: {note}")).await;
        completed_turn(&events);
    }
    let log = logged(&setup, &thread_id).await;
    let compacted = compactions(&log);
    assert!(!compacted.is_empty());
    let summary = compacted
        .iter()
        .find(|c| c.summary.starts_with("SUMMARY"))
        .expect("a summary");
    assert!(summary.replaced_items > 0);
    assert!(setup.engine.summary_requests() > 0);
    let last = setup.engine.turn_requests().pop().unwrap();
    assert!(last.transcript.iter().any(|item| matches!(item,
        TranscriptItem::UserMessage { text, .. } if text.starts_with(SUMMARY_PREFIX))));
    // The latest user message is carried verbatim.
    assert!(last.transcript.iter().any(|item| matches!(item,
        TranscriptItem::UserMessage { text, .. } if text.starts_with("4: "))));
}

#[tokio::test]
async fn an_interrupted_compaction_changes_nothing() {
    let engine = WindowEngine::new(None, Summary::Hang, vec![]);
    let setup = setup(engine, |config| {
        config.auto_compact_token_limit = Some(3_000)
    });
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let note = "a long note from the user. ".repeat(150);
    completed_turn(&run_turn(&setup, &thread_id, &format!("first {note}")).await);
    let before = setup
        .runtime
        .load_thread(&thread_id)
        .await
        .unwrap()
        .unwrap()
        .transcript();
    let mut events = setup.runtime.subscribe_events();
    let started = setup.engine.summary_started.notified();
    let turn_id = setup
        .runtime
        .start_turn(StartTurnRequest::new(&thread_id, format!("second {note}")))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(20), started)
        .await
        .unwrap();
    setup
        .runtime
        .interrupt_turn(&thread_id, &turn_id)
        .await
        .unwrap();
    let seen = until_turn_ends(&mut events, &thread_id).await;
    assert!(matches!(
        seen.last().unwrap().event,
        RoderEvent::TurnInterrupted(_)
    ));
    let log = logged(&setup, &thread_id).await;
    assert!(
        compactions(&log).is_empty(),
        "no ContextCompacted may be written"
    );
    let after = setup
        .runtime
        .load_thread(&thread_id)
        .await
        .unwrap()
        .unwrap()
        .transcript();
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "the earlier transcript is untouched"
    );
    // The thread goes on.
    *setup.engine.summary.lock().unwrap() = Summary::Text("notes".into());
    completed_turn(&run_turn(&setup, &thread_id, "third").await);
}

#[tokio::test]
async fn a_summary_no_shorter_than_the_history_is_no_compaction() {
    let long = "the summary repeats everything. ".repeat(2_000);
    let engine = WindowEngine::new(None, Summary::Text(long), vec![]);
    let setup = setup(engine, |config| {
        config.auto_compact_token_limit = Some(3_000)
    });
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let note = "a long note from the user. ".repeat(150);
    completed_turn(&run_turn(&setup, &thread_id, &format!("first {note}")).await);
    assert_eq!(setup.engine.summary_requests(), 0);
    // Over the threshold: compaction fails, the request still fits the
    // (unknown) window, the turn goes on with the old transcript.
    let done = completed_turn(&run_turn(&setup, &thread_id, &format!("second {note}")).await);
    assert_eq!(done.final_message.as_deref(), Some("done"));
    assert!(compactions(&logged(&setup, &thread_id).await).is_empty());
    assert!(setup.engine.summary_requests() > 0);
    let error = setup
        .runtime
        .compact_thread(&thread_id)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("not shorter than the history"), "{error}");
    assert!(compactions(&logged(&setup, &thread_id).await).is_empty());
}

#[tokio::test]
async fn an_overflow_error_compacts_and_the_turn_succeeds() {
    // No threshold is known: only the provider's refusal triggers it.
    let engine = WindowEngine::new(
        Some(6_000),
        Summary::Text("short".into()),
        reading_script(6),
    );
    let setup = setup(engine, |_| {});
    write_big_file(&setup);
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let events = run_turn(&setup, &thread_id, "read big.txt six times").await;
    let done = completed_turn(&events);
    assert_eq!(done.final_message.as_deref(), Some("read it all"));
    let compacted = compactions(&events);
    assert!(!compacted.is_empty());
    assert!(
        compacted
            .iter()
            .all(|c| c.trigger == CompactionTrigger::Overflow)
    );
    let refused = *setup.engine.refused.lock().unwrap();
    assert_eq!(
        refused,
        compacted.len(),
        "one refusal per compaction, then a retry that fits"
    );
}

#[tokio::test]
async fn usage_totals_add_up_across_turns_and_compactions() {
    let engine = WindowEngine::new(None, Summary::Text("short".into()), reading_script(8));
    let setup = setup(engine, |config| {
        config.auto_compact_token_limit = Some(5_000)
    });
    write_big_file(&setup);
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let first_events = run_turn(&setup, &thread_id, "read").await;
    let first = completed_turn(&first_events);
    let second = completed_turn(&run_turn(&setup, &thread_id, "again").await);
    let manual = setup.runtime.compact_thread(&thread_id).await;
    let log = logged(&setup, &thread_id).await;
    let mut per_turn = std::collections::HashMap::<String, TokenUsage>::new();
    let mut all = TokenUsage::default();
    for envelope in &log {
        if let RoderEvent::UsageUpdated(updated) = &envelope.event {
            per_turn
                .entry(updated.turn_id.clone())
                .or_default()
                .add(&updated.usage);
            all.add(&updated.usage);
        }
    }
    assert_eq!(per_turn[&first.turn_id], first.usage);
    assert_eq!(per_turn[&second.turn_id], second.usage);
    // Every request the engine saw reported usage: the sums match it.
    let requests = setup.engine.requests();
    let expected_input: u64 = requests.iter().map(estimate).sum();
    assert_eq!(all.input_tokens, expected_input);
    assert_eq!(all.output_tokens, 10 * requests.len() as u64);
    let mut both = first.usage.clone();
    both.add(&second.usage);
    assert_eq!(second.thread_usage, both);
    let metadata = setup.runtime.thread_metadata(&thread_id).await.unwrap();
    assert_eq!(metadata.usage, all, "manual compaction: {:?}", manual.err());
}

#[tokio::test]
async fn manual_compaction_is_refused_while_a_turn_runs_and_works_between_turns() {
    let engine = WindowEngine::new(
        None,
        Summary::Text("what happened".into()),
        vec![ScriptedRound::Hang],
    );
    let setup = setup(engine, |_| {});
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let mut events = setup.runtime.subscribe_events();
    let turn_id = setup
        .runtime
        .start_turn(StartTurnRequest::new(&thread_id, "hang"))
        .await
        .unwrap();
    setup.engine.wait_for_requests(1).await;
    let before = logged(&setup, &thread_id).await.len();
    let busy = setup.runtime.compact_thread(&thread_id).await.unwrap_err();
    assert!(
        matches!(
            busy.downcast_ref::<RuntimeError>(),
            Some(RuntimeError::ThreadBusy { .. })
        ),
        "{busy:#}"
    );
    assert_eq!(
        logged(&setup, &thread_id).await.len(),
        before,
        "nothing written"
    );
    setup
        .runtime
        .interrupt_turn(&thread_id, &turn_id)
        .await
        .unwrap();
    until_turn_ends(&mut events, &thread_id).await;
    let note = "a long note from the user. ".repeat(200);
    for turn in 0..3 {
        completed_turn(&run_turn(&setup, &thread_id, &format!("{turn} {note}")).await);
    }
    let compacted = setup.runtime.compact_thread(&thread_id).await.unwrap();
    assert_eq!(compacted.trigger, CompactionTrigger::Manual);
    assert_eq!(compacted.turn_id, None);
    assert_eq!(compacted.summary, "what happened");
    assert!(compacted.tokens_after < compacted.tokens_before);
    let log = logged(&setup, &thread_id).await;
    assert_eq!(compactions(&log), vec![compacted.clone()]);
    // The next turn starts from the compacted transcript.
    completed_turn(&run_turn(&setup, &thread_id, "next").await);
    let last = setup.engine.turn_requests().pop().unwrap();
    assert_eq!(
        last.transcript[..compacted.transcript.len()],
        compacted.transcript[..]
    );
}

#[tokio::test]
async fn the_history_reads_in_bounded_pages() {
    let engine = WindowEngine::new(None, Summary::Text("s".into()), reading_script(5));
    let setup = setup(engine, |_| {});
    write_big_file(&setup);
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    completed_turn(&run_turn(&setup, &thread_id, "read").await);
    let all = logged(&setup, &thread_id).await;
    let mut cursor: Option<String> = None;
    let mut read = Vec::new();
    loop {
        let page = setup
            .runtime
            .read_thread_history(&thread_id, cursor.as_deref(), 7, 10_000)
            .await
            .unwrap();
        assert!(!page.events.is_empty());
        assert!(page.events.len() <= 7);
        let bytes: usize = page
            .events
            .iter()
            .map(|e| serde_json::to_string(e).unwrap().len() + 1)
            .sum();
        assert!(bytes <= 10_000 || page.events.len() == 1, "{bytes}");
        read.extend(page.events);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(read, all);
    let error = setup
        .runtime
        .read_thread_history(&thread_id, Some("bogus"), 7, 10_000)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("bogus"), "{error}");
    let missing = setup
        .runtime
        .read_thread_history("nope", None, 7, 10_000)
        .await
        .unwrap_err();
    assert!(matches!(
        missing.downcast_ref::<RuntimeError>(),
        Some(RuntimeError::ThreadNotFound(_))
    ));
}

/// The JSONL store, recording the `after_seq` of every `load_events`.
struct RecordingStore {
    inner: Arc<dyn roder_api::thread::ThreadStore>,
    loads: Arc<Mutex<Vec<u64>>>,
}

#[async_trait::async_trait]
impl roder_api::thread::ThreadStore for RecordingStore {
    async fn create_thread(
        &self,
        metadata: roder_api::thread::ThreadMetadata,
    ) -> anyhow::Result<()> {
        self.inner.create_thread(metadata).await
    }
    async fn update_thread_metadata(
        &self,
        metadata: roder_api::thread::ThreadMetadata,
    ) -> anyhow::Result<()> {
        self.inner.update_thread_metadata(metadata).await
    }
    async fn load_metadata(
        &self,
        thread_id: &str,
    ) -> anyhow::Result<Option<roder_api::thread::ThreadMetadata>> {
        self.inner.load_metadata(thread_id).await
    }
    async fn append_events(
        &self,
        thread_id: &str,
        events: &[roder_api::events::EventEnvelope],
    ) -> anyhow::Result<()> {
        self.inner.append_events(thread_id, events).await
    }
    async fn load_events(
        &self,
        thread_id: &str,
        after_seq: u64,
    ) -> anyhow::Result<Vec<roder_api::events::EventEnvelope>> {
        self.loads.lock().unwrap().push(after_seq);
        self.inner.load_events(thread_id, after_seq).await
    }
    async fn list_threads(&self) -> anyhow::Result<Vec<roder_api::thread::ThreadMetadata>> {
        self.inner.list_threads().await
    }
    async fn delete_thread(&self, thread_id: &str) -> anyhow::Result<()> {
        self.inner.delete_thread(thread_id).await
    }
    async fn acquire_writer_lease(
        &self,
        thread_id: &str,
        request: roder_api::writer_lease::WriterLeaseRequest,
    ) -> anyhow::Result<roder_api::writer_lease::WriterLeaseOutcome> {
        self.inner.acquire_writer_lease(thread_id, request).await
    }
    async fn append_events_leased(
        &self,
        lease: &dyn roder_api::writer_lease::WriterLease,
        thread_id: &str,
        events: &[roder_api::events::EventEnvelope],
    ) -> anyhow::Result<()> {
        self.inner
            .append_events_leased(lease, thread_id, events)
            .await
    }
}

struct RecordingFactory(Arc<RecordingStore>);

#[async_trait::async_trait]
impl roder_api::thread::ThreadStoreFactory for RecordingFactory {
    fn id(&self) -> String {
        "recording-jsonl".into()
    }
    fn open(&self) -> anyhow::Result<Arc<dyn roder_api::thread::ThreadStore>> {
        Ok(self.0.clone())
    }
}

#[tokio::test]
async fn a_reopened_thread_is_rebuilt_from_its_last_compaction_not_its_whole_log() {
    let engine = WindowEngine::new(None, Summary::Text("short".into()), reading_script(20));
    let setup = setup(engine, |config| {
        config.auto_compact_token_limit = Some(5_000)
    });
    write_big_file(&setup);
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let first = completed_turn(&run_turn(&setup, &thread_id, "read it twenty times").await);
    let log = logged(&setup, &thread_id).await;
    let last_compaction = log
        .iter()
        .rev()
        .find(|envelope| matches!(envelope.event, RoderEvent::ContextCompacted(_)))
        .expect("the turn compacted")
        .seq;
    assert!(
        last_compaction > 10,
        "history precedes it: {last_compaction}"
    );
    let metadata = setup.runtime.thread_metadata(&thread_id).await.unwrap();
    assert_eq!(metadata.last_compaction_seq, Some(last_compaction));
    // What a full read rebuilds, to compare the shortcut with.
    let full_transcript = setup
        .runtime
        .load_thread(&thread_id)
        .await
        .unwrap()
        .unwrap()
        .transcript();

    // A new process: every read of the log starts at the compaction.
    let loads = Arc::new(Mutex::new(Vec::new()));
    let store = Arc::new(RecordingStore {
        inner: JsonlThreadStoreFactory {
            base_path: setup.store.path().to_path_buf(),
        }
        .open()
        .unwrap(),
        loads: loads.clone(),
    });
    setup
        .engine
        .script
        .lock()
        .unwrap()
        .push_back(final_round("again"));
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(setup.engine.clone());
    builder.thread_store_factory(Arc::new(RecordingFactory(store)));
    let restarted = Arc::new(
        Runtime::new(
            builder.build().unwrap(),
            RuntimeConfig {
                workspace: Some(setup.workspace.path().display().to_string()),
                ..RuntimeConfig::default()
            },
        )
        .unwrap(),
    );
    let mut events = restarted.subscribe_events();
    let requests_before = setup.engine.turn_requests().len();
    restarted
        .start_turn(StartTurnRequest::new(&thread_id, "once more"))
        .await
        .unwrap();
    let second = completed_turn(&until_turn_ends(&mut events, &thread_id).await);
    let reads = loads.lock().unwrap().clone();
    assert!(!reads.is_empty());
    assert!(
        reads.iter().all(|after| *after + 1 >= last_compaction),
        "reads after seqs {reads:?}; the last compaction is at {last_compaction}"
    );
    // The shortcut rebuilt what the whole log does: the same transcript went
    // out, and the thread's usage total continues from the first turn's.
    let request = &setup.engine.turn_requests()[requests_before];
    assert_eq!(
        request.transcript[..full_transcript.len()],
        full_transcript[..]
    );
    let mut both = first.usage.clone();
    both.add(&second.usage);
    assert_eq!(second.thread_usage, both);
}

#[tokio::test]
async fn the_threshold_is_checked_in_the_models_own_count() {
    // A tokenizer that counts twice bytes / 4: checked against the estimate
    // alone, requests would cross the window before any compaction.
    let mut engine = WindowEngine::new(
        Some(8_000),
        Summary::Text("short".into()),
        reading_script(20),
    );
    Arc::get_mut(&mut engine).unwrap().count_factor = 2;
    let setup = setup(engine, |config| {
        config.auto_compact_token_limit = Some(5_000)
    });
    write_big_file(&setup);
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let events = run_turn(&setup, &thread_id, "read big.txt twenty times").await;
    assert_eq!(
        completed_turn(&events).final_message.as_deref(),
        Some("read it all")
    );
    assert!(!compactions(&events).is_empty());
    assert_eq!(
        *setup.engine.refused.lock().unwrap(),
        0,
        "every request stayed inside the window as the model counts it"
    );
    // And every turn request after the first stayed under the threshold.
    for request in setup.engine.turn_requests() {
        assert!(estimate(&request) * 2 <= 8_000);
    }
}

//! Shared set-up of roder-core's own integration tests: a runtime over a
//! scripted engine, the builtin tools and a JSONL store in temp directories.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use roder_api::events::{EventEnvelope, RoderEvent};
use roder_api::extension::ExtensionRegistryBuilder;
use roder_core::{Runtime, RuntimeConfig, StartTurnRequest};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use roder_testkit::{ScriptedEngine, ScriptedRound};
use tokio::sync::broadcast;

pub struct Harness {
    pub runtime: Arc<Runtime>,
    pub engine: Arc<ScriptedEngine>,
    pub workspace: tempfile::TempDir,
    pub store_dir: tempfile::TempDir,
}

impl Harness {
    pub fn new(rounds: Vec<ScriptedRound>) -> Self {
        Self::with_config(rounds, |_| {})
    }

    pub fn with_config(
        rounds: Vec<ScriptedRound>,
        adjust: impl FnOnce(&mut RuntimeConfig),
    ) -> Self {
        let workspace = tempfile::tempdir().unwrap();
        let store_dir = tempfile::tempdir().unwrap();
        let engine = ScriptedEngine::new(rounds);
        let mut config = RuntimeConfig {
            workspace: Some(workspace.path().display().to_string()),
            ..RuntimeConfig::default()
        };
        adjust(&mut config);
        let runtime = runtime_over(engine.clone(), store_dir.path(), workspace.path(), config);
        Self {
            runtime,
            engine,
            workspace,
            store_dir,
        }
    }

    pub fn path(&self, relative: &str) -> std::path::PathBuf {
        self.workspace.path().join(relative)
    }

    /// A new runtime over the same store and engine (a restart).
    pub fn restart(&self) -> Arc<Runtime> {
        runtime_over(
            self.engine.clone(),
            self.store_dir.path(),
            self.workspace.path(),
            RuntimeConfig {
                workspace: Some(self.workspace.path().display().to_string()),
                ..RuntimeConfig::default()
            },
        )
    }

    pub async fn thread(&self) -> String {
        self.runtime.create_thread(None).await.unwrap().thread_id
    }

    pub async fn start(&self, thread_id: &str, message: &str) -> String {
        self.runtime
            .start_turn(StartTurnRequest::new(thread_id, message))
            .await
            .unwrap()
    }
}

pub fn runtime_over(
    engine: Arc<ScriptedEngine>,
    store_dir: &Path,
    workspace: &Path,
    config: RuntimeConfig,
) -> Arc<Runtime> {
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(engine);
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
        base_path: store_dir.to_path_buf(),
    }));
    builder.tool_contributor(roder_tools::builtin_coding_tools_contributor(workspace).unwrap());
    Arc::new(Runtime::new(builder.build().unwrap(), config).unwrap())
}

/// Collects events of `thread_id` until its turn ends; returns them all.
pub async fn until_turn_ends(
    events: &mut broadcast::Receiver<EventEnvelope>,
    thread_id: &str,
) -> Vec<EventEnvelope> {
    let mut seen = Vec::new();
    loop {
        let envelope = tokio::time::timeout(Duration::from_secs(20), events.recv())
            .await
            .expect("the turn should end within 20 s")
            .expect("the event bus should not lag in tests");
        if envelope.thread_id != thread_id {
            continue;
        }
        let terminal = envelope.event.is_terminal();
        seen.push(envelope);
        if terminal {
            return seen;
        }
    }
}

/// Waits for the first event of `thread_id` that `predicate` accepts.
pub async fn wait_for(
    events: &mut broadcast::Receiver<EventEnvelope>,
    thread_id: &str,
    predicate: impl Fn(&RoderEvent) -> bool,
) -> EventEnvelope {
    loop {
        let envelope = tokio::time::timeout(Duration::from_secs(20), events.recv())
            .await
            .expect("the event should arrive within 20 s")
            .expect("the event bus should not lag in tests");
        if envelope.thread_id == thread_id && predicate(&envelope.event) {
            return envelope;
        }
    }
}

pub fn completed_tools(events: &[EventEnvelope]) -> Vec<roder_api::events::ToolCallCompleted> {
    events
        .iter()
        .filter_map(|envelope| match &envelope.event {
            RoderEvent::ToolCallCompleted(call) => Some(call.clone()),
            _ => None,
        })
        .collect()
}

//! A real runtime over the docker runner, for the tests that drive threads
//! through it (`runtime.rs`, `escape.rs`, `debian_e2e.rs`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use roder_api::events::{EventEnvelope, RoderEvent};
use roder_api::extension::ExtensionRegistryBuilder;
use roder_core::{Runtime, RuntimeConfig};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use roder_ext_runner_docker::DockerRunnerProvider;
use roder_testkit::ScriptedEngine;
use tokio::sync::broadcast;

/// A runtime over `engines`, the builtin tools (host workspace
/// `workspace`), a JSONL store in `store` and `provider`.
pub fn runtime(
    engines: &[Arc<ScriptedEngine>],
    store: &Path,
    workspace: &Path,
    provider: Arc<DockerRunnerProvider>,
) -> Arc<Runtime> {
    let mut builder = ExtensionRegistryBuilder::new();
    for engine in engines {
        builder.inference_engine(engine.clone());
    }
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
        base_path: store.to_path_buf(),
    }));
    builder.tool_contributor(roder_tools::builtin_coding_tools_contributor(workspace).unwrap());
    builder.remote_runner_provider(provider);
    let config = RuntimeConfig {
        workspace: Some(workspace.display().to_string()),
        ..RuntimeConfig::default()
    };
    Arc::new(Runtime::new(builder.build().unwrap(), config).unwrap())
}

/// Events of `thread_id` until its turn ends.
pub async fn until_turn_ends(
    events: &mut broadcast::Receiver<EventEnvelope>,
    thread_id: &str,
) -> Vec<EventEnvelope> {
    let mut seen = Vec::new();
    loop {
        let envelope = tokio::time::timeout(Duration::from_secs(120), events.recv())
            .await
            .expect("the next event should come within 120 s")
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

/// (tool name, output, is_error) of each completed tool call, in order.
pub fn tool_outputs(events: &[EventEnvelope]) -> Vec<(String, String, bool)> {
    events
        .iter()
        .filter_map(|envelope| match &envelope.event {
            RoderEvent::ToolCallCompleted(call) => Some((
                call.tool_name.clone().unwrap_or_default(),
                call.output.clone().unwrap_or_default(),
                call.is_error,
            )),
            _ => None,
        })
        .collect()
}

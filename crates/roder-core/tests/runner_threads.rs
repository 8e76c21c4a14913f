//! Runner-bound threads beyond the conformance suite: deleting a thread
//! closes its live sandbox, and an unbound thread with no runner gets a
//! clear error from lifecycle operations.

use std::sync::Arc;
use std::time::Duration;

use roder_api::events::RoderEvent;
use roder_api::extension::ExtensionRegistryBuilder;
use roder_core::{
    CreateThreadRequest, Runtime, RuntimeConfig, StartTurnRequest, ThreadRunnerSelection,
};
use roder_testkit::mock_runner::mock_workspace;
use roder_testkit::{MOCK_RUNNER_ID, MockRunnerProvider, ScriptedEngine, final_round, tool_round};

fn runtime(provider: &MockRunnerProvider, engine: Arc<ScriptedEngine>) -> Arc<Runtime> {
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(engine);
    builder.remote_runner_provider(Arc::new(provider.clone()));
    builder.tool_contributor(
        roder_tools::builtin_coding_tools_contributor(std::env::temp_dir()).unwrap(),
    );
    Arc::new(Runtime::new(builder.build().unwrap(), RuntimeConfig::default()).unwrap())
}

fn bound_request() -> CreateThreadRequest {
    let mut request = CreateThreadRequest::in_workspace("/nonexistent/local");
    request.runner = Some(ThreadRunnerSelection {
        provider_id: MOCK_RUNNER_ID.to_string(),
        config: serde_json::json!({}),
        workspace: mock_workspace().display().to_string(),
        read_roots: Vec::new(),
    });
    request
}

#[tokio::test]
async fn deleting_a_thread_closes_its_live_sandbox() {
    let provider = MockRunnerProvider::default();
    let runtime = runtime(
        &provider,
        ScriptedEngine::new(vec![
            tool_round(&[("w", "write_file", r#"{"path":"a.txt","content":"x"}"#)]),
            final_round("ok"),
        ]),
    );
    let thread_id = runtime
        .create_thread_with(bound_request())
        .await
        .unwrap()
        .thread_id;
    let mut events = runtime.subscribe_events();
    runtime
        .start_turn(StartTurnRequest::new(&thread_id, "write"))
        .await
        .unwrap();
    loop {
        let envelope = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .unwrap()
            .unwrap();
        if envelope.event.is_terminal() {
            assert!(matches!(envelope.event, RoderEvent::TurnCompleted(_)));
            break;
        }
    }
    assert_eq!(MockRunnerProvider::count(&provider.counters.created), 1);
    assert!(
        provider
            .counters
            .files
            .lock()
            .unwrap()
            .contains_key("a.txt")
    );

    runtime.delete_thread(&thread_id).await.unwrap();
    assert_eq!(MockRunnerProvider::count(&provider.counters.closed), 1);
    assert!(runtime.load_thread(&thread_id).await.unwrap().is_none());
}

#[tokio::test]
async fn lifecycle_operations_on_a_thread_without_a_runner_say_so() {
    let provider = MockRunnerProvider::default();
    let runtime = runtime(&provider, ScriptedEngine::new(Vec::new()));
    let thread_id = runtime
        .create_thread_with(CreateThreadRequest::in_workspace("/tmp"))
        .await
        .unwrap()
        .thread_id;
    let error = runtime.pause_thread_runner(&thread_id).await.unwrap_err();
    assert!(error.to_string().contains("has no runner"), "{error}");
    assert_eq!(MockRunnerProvider::count(&provider.counters.created), 0);
}

//! Tools a client declares for one thread (`Runtime::start_thread_tools`):
//! offered to that thread's turns only, routed like installed tools, held in
//! memory, what the host may run decided from the thread.

mod support;

use std::sync::{Arc, Mutex};

use roder_api::events::RoderEvent;
use roder_api::extension::ExtensionRegistryBuilder;
use roder_api::sandbox_policy::{SandboxMode, SandboxPolicy};
use roder_api::thread_tools::{
    HostAccess, StartedThreadTools, ThreadToolFactory, ThreadToolRequest, ToolSourceState,
    ToolSourceStatus,
};
use roder_api::tools::{ToolCall, ToolExecutionContext, ToolExecutor, ToolResult, ToolSpec};
use roder_core::{CreateThreadRequest, Runtime, RuntimeConfig, StartTurnRequest};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use roder_testkit::{ScriptedEngine, ScriptedRound, final_round, tool_round};
use serde_json::json;
use support::{completed_tools, until_turn_ends};

/// A tool that answers with its name and the thread it was declared for.
struct Echo {
    name: String,
    thread: String,
}

#[async_trait::async_trait]
impl ToolExecutor for Echo {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: "Says who it is.".into(),
            parameters: json!({"type": "object"}),
        }
    }

    async fn execute(
        &self,
        ctx: ToolExecutionContext,
        call: ToolCall,
    ) -> anyhow::Result<ToolResult> {
        Ok(ToolResult::ok(
            &call,
            format!(
                "{} of {} called in {}",
                self.name, self.thread, ctx.thread_id
            ),
            serde_json::Value::Null,
        ))
    }
}

/// Declarations are `{"tools": [names], "fail": "source that fails"}`.
#[derive(Default)]
struct EchoFactory {
    requests: Mutex<Vec<ThreadToolRequest>>,
}

#[async_trait::async_trait]
impl ThreadToolFactory for EchoFactory {
    fn id(&self) -> String {
        "echo".into()
    }

    fn check(&self, declaration: &serde_json::Value) -> anyhow::Result<()> {
        anyhow::ensure!(
            declaration
                .get("tools")
                .is_some_and(serde_json::Value::is_array),
            "echo: give tools, an array of names"
        );
        Ok(())
    }

    async fn start(&self, request: ThreadToolRequest) -> anyhow::Result<StartedThreadTools> {
        self.check(&request.declaration)?;
        let names: Vec<String> = request.declaration["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|name| name.as_str().map(String::from))
            .collect();
        let mut sources = vec![ToolSourceStatus {
            name: "echo".into(),
            state: ToolSourceState::Ready,
            tools: names.clone(),
            error: None,
        }];
        if let Some(failed) = request.declaration["fail"].as_str() {
            sources.push(ToolSourceStatus {
                name: failed.into(),
                state: ToolSourceState::Failed,
                tools: Vec::new(),
                error: Some("no such program".into()),
            });
        }
        let tools = names
            .into_iter()
            .map(|name| {
                Arc::new(Echo {
                    name,
                    thread: request.thread_id.clone(),
                }) as Arc<dyn ToolExecutor>
            })
            .collect();
        self.requests.lock().unwrap().push(request);
        Ok(StartedThreadTools { tools, sources })
    }
}

struct Setup {
    runtime: Arc<Runtime>,
    engine: Arc<ScriptedEngine>,
    factory: Arc<EchoFactory>,
    workspace: tempfile::TempDir,
    _store: tempfile::TempDir,
}

fn setup(rounds: Vec<ScriptedRound>, adjust: impl FnOnce(&mut RuntimeConfig)) -> Setup {
    let workspace = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let engine = ScriptedEngine::new(rounds);
    let factory = Arc::new(EchoFactory::default());
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(engine.clone());
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
        base_path: store.path().to_path_buf(),
    }));
    builder
        .tool_contributor(roder_tools::builtin_coding_tools_contributor(workspace.path()).unwrap());
    builder.thread_tool_factory(factory.clone());
    let mut config = RuntimeConfig {
        workspace: Some(workspace.path().display().to_string()),
        ..RuntimeConfig::default()
    };
    adjust(&mut config);
    let runtime = Arc::new(Runtime::new(builder.build().unwrap(), config).unwrap());
    Setup {
        runtime,
        engine,
        factory,
        workspace,
        _store: store,
    }
}

fn offered(request: &roder_api::inference::AgentInferenceRequest) -> Vec<String> {
    request.tools.iter().map(|tool| tool.name.clone()).collect()
}

#[tokio::test]
async fn declared_tools_are_offered_to_their_thread_only_and_routed_there() {
    let setup = setup(
        vec![
            tool_round(&[("c1", "echo_a", "{}")]),
            final_round("done"),
            tool_round(&[("c2", "echo_a", "{}")]),
            final_round("done"),
        ],
        |_| {},
    );
    let runtime = &setup.runtime;
    let mine = runtime.create_thread(None).await.unwrap().thread_id;
    let other = runtime.create_thread(None).await.unwrap().thread_id;
    let started = runtime
        .start_thread_tools(
            &mine,
            "echo",
            json!({"tools": ["echo_a"], "fail": "broken"}),
        )
        .await
        .unwrap();
    assert_eq!(started.sources.len(), 2);
    assert_eq!(started.sources[1].state, ToolSourceState::Failed);

    let mut events = runtime.subscribe_events();
    runtime
        .start_turn(StartTurnRequest::new(&mine, "call it"))
        .await
        .unwrap();
    let log = until_turn_ends(&mut events, &mine).await;
    let calls = completed_tools(&log);
    assert_eq!(calls.len(), 1);
    assert!(!calls[0].is_error, "{calls:?}");
    assert!(
        calls[0]
            .output
            .as_deref()
            .unwrap_or("")
            .contains(&format!("echo_a of {mine} called in {mine}")),
        "{calls:?}"
    );

    runtime
        .start_turn(StartTurnRequest::new(&other, "call it too"))
        .await
        .unwrap();
    let log = until_turn_ends(&mut events, &other).await;
    let calls = completed_tools(&log);
    assert!(calls[0].is_error, "{calls:?}");
    assert!(
        calls[0]
            .output
            .as_deref()
            .unwrap_or("")
            .contains("unknown tool \"echo_a\""),
        "{calls:?}"
    );

    let requests = setup.engine.requests();
    assert!(offered(&requests[0]).contains(&"echo_a".to_string()));
    assert!(offered(&requests[0]).contains(&"read_file".to_string()));
    assert!(!offered(&requests[2]).contains(&"echo_a".to_string()));

    // The start is in the thread's log, for a client that replays it.
    let page = runtime.read_thread_events(&mine, 0).await.unwrap();
    let recorded = page
        .events
        .iter()
        .find_map(|envelope| match &envelope.event {
            RoderEvent::ThreadToolsStarted(started) => Some(started.clone()),
            _ => None,
        })
        .expect("a thread_tools_started event");
    assert_eq!(recorded, started);
    assert_eq!(recorded.factory, "echo");
}

#[tokio::test]
async fn a_new_declaration_replaces_the_old_one_and_stop_and_delete_drop_them() {
    let setup = setup(vec![final_round("one"), final_round("two")], |_| {});
    let runtime = &setup.runtime;
    let thread = runtime.create_thread(None).await.unwrap().thread_id;
    runtime
        .start_thread_tools(&thread, "echo", json!({"tools": ["echo_a"]}))
        .await
        .unwrap();
    runtime
        .start_thread_tools(&thread, "echo", json!({"tools": ["echo_b"]}))
        .await
        .unwrap();
    let mut events = runtime.subscribe_events();
    runtime
        .start_turn(StartTurnRequest::new(&thread, "hi"))
        .await
        .unwrap();
    until_turn_ends(&mut events, &thread).await;
    assert!(runtime.stop_thread_tools(&thread));
    assert!(!runtime.stop_thread_tools(&thread));
    runtime
        .start_turn(StartTurnRequest::new(&thread, "again"))
        .await
        .unwrap();
    until_turn_ends(&mut events, &thread).await;
    let requests = setup.engine.requests();
    let first = offered(&requests[0]);
    assert!(first.contains(&"echo_b".to_string()) && !first.contains(&"echo_a".to_string()));
    assert!(
        !offered(&requests[1])
            .iter()
            .any(|name| name.starts_with("echo_"))
    );

    runtime
        .start_thread_tools(&thread, "echo", json!({"tools": ["echo_c"]}))
        .await
        .unwrap();
    runtime.delete_thread(&thread).await.unwrap();
    assert!(
        !runtime.stop_thread_tools(&thread),
        "deleting the thread dropped them"
    );
}

#[tokio::test]
async fn names_taken_by_installed_tools_are_not_offered_and_bad_declarations_are_errors() {
    let setup = setup(vec![final_round("x")], |_| {});
    let runtime = &setup.runtime;
    let thread = runtime.create_thread(None).await.unwrap().thread_id;
    let started = runtime
        .start_thread_tools(&thread, "echo", json!({"tools": ["read_file", "echo_ok"]}))
        .await
        .unwrap();
    let source = &started.sources[0];
    assert_eq!(source.tools, vec!["echo_ok".to_string()]);
    assert!(
        source
            .error
            .as_deref()
            .unwrap()
            .contains("tool \"read_file\" is not offered"),
        "{source:?}"
    );
    let bad = runtime
        .check_thread_tools("echo", &json!({"tools": 3}))
        .unwrap_err();
    assert!(bad.to_string().contains("an array of names"), "{bad}");
    let missing = runtime
        .start_thread_tools(&thread, "nothing", json!({}))
        .await
        .unwrap_err();
    assert!(
        missing
            .to_string()
            .contains("\"nothing\" are not supported by this runtime (installed: echo)"),
        "{missing}"
    );
    let unknown = runtime
        .start_thread_tools("no-such-thread", "echo", json!({"tools": []}))
        .await
        .unwrap_err();
    assert!(unknown.to_string().contains("no-such-thread"), "{unknown}");
}

#[tokio::test]
async fn the_host_may_run_a_declaration_only_where_the_threads_commands_are_unconfined() {
    let confined = setup(Vec::new(), |_| {});
    let thread = confined
        .runtime
        .create_thread(None)
        .await
        .unwrap()
        .thread_id;
    confined
        .runtime
        .start_thread_tools(&thread, "echo", json!({"tools": []}))
        .await
        .unwrap();
    let unconfined = confined
        .runtime
        .create_thread_with_sandbox(
            CreateThreadRequest::in_workspace(confined.workspace.path().display().to_string()),
            Some(SandboxPolicy {
                mode: SandboxMode::None,
                ..SandboxPolicy::default()
            }),
        )
        .await
        .unwrap()
        .thread_id;
    confined
        .runtime
        .start_thread_tools(&unconfined, "echo", json!({"tools": []}))
        .await
        .unwrap();
    confined.runtime.set_allow_local_workspaces(false);
    confined
        .runtime
        .start_thread_tools(&unconfined, "echo", json!({"tools": []}))
        .await
        .unwrap();
    let seen: Vec<(String, HostAccess)> = confined
        .factory
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|request| (request.thread_id.clone(), request.host))
        .collect();
    assert_eq!(
        seen,
        vec![
            (thread.clone(), HostAccess::Confined),
            (unconfined.clone(), HostAccess::Unconfined),
            (unconfined.clone(), HostAccess::Forbidden),
        ]
    );
    let workspace = &confined.factory.requests.lock().unwrap()[0].workspace;
    assert_eq!(workspace, confined.workspace.path());
}

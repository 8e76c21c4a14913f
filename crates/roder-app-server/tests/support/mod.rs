//! Shared set-up of the app server's integration tests: a runtime over a
//! scripted engine, the builtin tools and a JSONL store in temp directories,
//! served over a real WebSocket listener or in-memory stdio pipes, and a
//! small JSON-RPC client that speaks to either.

#![allow(dead_code)]

pub mod client;
pub mod mock_materializer;
pub mod mock_runner;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use roder_api::events::{EventEnvelope, RoderEvent};
use roder_api::extension::ExtensionRegistryBuilder;
use roder_app_server::{ConnectionLimits, WsServerConfig, bind_ws};
use roder_core::{Runtime, RuntimeConfig};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use roder_testkit::{ScriptedEngine, ScriptedRound};
use tokio::sync::broadcast;

pub use client::Client;

/// How long any single wait in these tests may take before it fails.
pub const WAIT: Duration = Duration::from_secs(20);

pub struct Harness {
    pub runtime: Arc<Runtime>,
    pub engine: Arc<ScriptedEngine>,
    pub runner: Arc<mock_runner::MockRunnerProvider>,
    pub materializer: Arc<mock_materializer::MockMaterializer>,
    pub workspace: tempfile::TempDir,
    pub store_dir: tempfile::TempDir,
}

/// A backend that says it enforces the policy's network setting and nothing
/// else, so tests can see reports reach `runners/list`.
pub struct NetworkOnlyReport;

impl roder_api::sandbox_policy::ProtectionReport for NetworkOnlyReport {
    fn backend(&self) -> String {
        "test-backend".into()
    }

    fn protections(
        &self,
        policy: &roder_api::sandbox_policy::SandboxPolicy,
    ) -> Vec<roder_api::sandbox_policy::Protection> {
        vec![roder_api::sandbox_policy::Protection {
            name: "network".into(),
            active: !policy.network.allows(),
            detail: format!("network {:?}", policy.network),
        }]
    }
}

impl Harness {
    pub fn new(rounds: Vec<ScriptedRound>) -> Self {
        let workspace = tempfile::tempdir().unwrap();
        let store_dir = tempfile::tempdir().unwrap();
        let engine = ScriptedEngine::new(rounds);
        let runner = mock_runner::MockRunnerProvider::new();
        let materializer = mock_materializer::MockMaterializer::new(workspace.path());
        let mut builder = ExtensionRegistryBuilder::new();
        builder.inference_engine(engine.clone());
        builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
            base_path: store_dir.path().to_path_buf(),
        }));
        builder.tool_contributor(
            roder_tools::builtin_coding_tools_contributor(workspace.path()).unwrap(),
        );
        builder.remote_runner_provider(runner.clone());
        builder.workdir_materializer(materializer.clone());
        builder.protection_report(Arc::new(NetworkOnlyReport));
        builder.profile_resolver(Arc::new(roder_profiles::Resolver::new(Some(
            store_dir.path().join("roder-home"),
        ))));
        let config = RuntimeConfig {
            workspace: Some(workspace.path().display().to_string()),
            ..RuntimeConfig::default()
        };
        let runtime = Arc::new(Runtime::new(builder.build().unwrap(), config).unwrap());
        Self {
            runtime,
            engine,
            runner,
            materializer,
            workspace,
            store_dir,
        }
    }

    pub fn workspace_path(&self) -> String {
        self.workspace.path().display().to_string()
    }

    /// Starts a WebSocket server on 127.0.0.1 (port picked) and returns its
    /// address. The server task ends with the test's runtime.
    pub async fn serve_ws(&self, config: WsServerConfig) -> SocketAddr {
        let server = bind_ws(self.runtime.clone(), config).await.unwrap();
        let addr = server.local_addr();
        tokio::spawn(server.serve());
        addr
    }

    pub async fn ws_client(&self) -> Client {
        let addr = self.serve_ws(WsServerConfig::default()).await;
        Client::ws(addr, None).await.unwrap()
    }

    pub fn stdio_client(&self) -> Client {
        Client::stdio(self.runtime.clone(), ConnectionLimits::default())
    }

    /// A client over the named transport ("ws" or "stdio").
    pub async fn client(&self, transport: &str) -> Client {
        match transport {
            "ws" => self.ws_client().await,
            "stdio" => self.stdio_client(),
            other => panic!("unknown transport {other}"),
        }
    }
}

/// Waits on the runtime's own bus for the first event of `thread_id` that
/// `predicate` accepts: evidence of what the runtime did, independent of any
/// client.
pub async fn wait_on_bus(
    events: &mut broadcast::Receiver<EventEnvelope>,
    thread_id: &str,
    predicate: impl Fn(&RoderEvent) -> bool,
) -> EventEnvelope {
    loop {
        let envelope = tokio::time::timeout(WAIT, events.recv())
            .await
            .expect("the event should arrive in time")
            .expect("the bus should not lag in tests");
        if envelope.thread_id == thread_id && predicate(&envelope.event) {
            return envelope;
        }
    }
}

/// The `type` of a `thread/event` notification's event.
pub fn event_type(notification: &serde_json::Value) -> &str {
    notification["params"]["event"]["type"]
        .as_str()
        .unwrap_or("")
}

/// Whether an event (its `type`) is a transient delta: broadcast live, never
/// in the log, repeating the seq of the persisted event before it.
pub fn is_transient_type(event_type: &str) -> bool {
    matches!(event_type, "message_delta" | "reasoning_delta")
}

pub fn seq(notification: &serde_json::Value) -> u64 {
    notification["params"]["seq"].as_u64().unwrap()
}

/// Whether `seqs` are exactly 1..=n.
pub fn assert_contiguous(seqs: &[u64]) {
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(
        seqs,
        expected.as_slice(),
        "seqs must be 1..=n without gaps or repeats"
    );
}

//! A runner provider whose sandboxes are in memory: files in a map, commands
//! answered without running anything. It counts every lifecycle call so tests
//! can check what the runtime asked of a provider.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerProviderId, RemoteRunnerSession, RunnerCapabilities,
    RunnerCommandId, RunnerCommandRequest, RunnerCommandResult, RunnerDestination,
    RunnerFileReadRequest, RunnerFileReadResult, RunnerFileWriteRequest, RunnerPortRequest,
    RunnerPortResult, RunnerSessionState, RunnerSnapshotRef,
};

pub const MOCK_RUNNER_ID: &str = "mock-runner";

/// What the provider was asked, shared by its sessions.
#[derive(Default)]
pub struct MockRunnerCounters {
    pub created: AtomicUsize,
    pub resumed: AtomicUsize,
    pub closed: AtomicUsize,
    pub commands: Mutex<Vec<RunnerCommandRequest>>,
    /// Files by the path string the session received.
    pub files: Mutex<HashMap<String, Vec<u8>>>,
}

#[derive(Clone, Default)]
pub struct MockRunnerProvider {
    pub counters: Arc<MockRunnerCounters>,
}

impl MockRunnerProvider {
    pub fn count(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl RemoteRunnerProvider for MockRunnerProvider {
    fn id(&self) -> RemoteRunnerProviderId {
        MOCK_RUNNER_ID.to_string()
    }

    fn capabilities(&self) -> RunnerCapabilities {
        RunnerCapabilities {
            command_exec: true,
            file_read: true,
            file_write: true,
            port_preview: false,
            snapshots: false,
            cancellation: false,
            artifact_export: false,
            mounts: Default::default(),
            pausable: true,
            detachable: true,
        }
    }

    async fn create_session(
        &self,
        destination: RunnerDestination,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        let index = self.counters.created.fetch_add(1, Ordering::SeqCst);
        Ok(Arc::new(MockRunnerSession {
            counters: self.counters.clone(),
            state: RunnerSessionState {
                provider_id: MOCK_RUNNER_ID.to_string(),
                session_id: format!("mock-session-{index}"),
                destination_id: destination.id,
                snapshot: None,
                metadata: serde_json::Value::Null,
            },
            paused: AtomicBool::new(false),
        }))
    }

    async fn resume_session(
        &self,
        state: RunnerSessionState,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        self.counters.resumed.fetch_add(1, Ordering::SeqCst);
        Ok(Arc::new(MockRunnerSession {
            counters: self.counters.clone(),
            state,
            paused: AtomicBool::new(false),
        }))
    }
}

pub struct MockRunnerSession {
    counters: Arc<MockRunnerCounters>,
    state: RunnerSessionState,
    paused: AtomicBool,
}

fn key(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[async_trait::async_trait]
impl RemoteRunnerSession for MockRunnerSession {
    fn state(&self) -> RunnerSessionState {
        let mut state = self.state.clone();
        state.metadata = serde_json::json!({ "paused": self.paused.load(Ordering::SeqCst) });
        state
    }

    async fn pause(&self) -> anyhow::Result<RunnerSessionState> {
        self.paused.store(true, Ordering::SeqCst);
        Ok(self.state())
    }

    async fn resume(&self) -> anyhow::Result<RunnerSessionState> {
        self.paused.store(false, Ordering::SeqCst);
        Ok(self.state())
    }

    async fn detach(&self) -> anyhow::Result<RunnerSessionState> {
        Ok(self.state())
    }

    async fn run_command(
        &self,
        request: RunnerCommandRequest,
    ) -> anyhow::Result<RunnerCommandResult> {
        lock(&self.counters.commands).push(request.clone());
        Ok(RunnerCommandResult {
            command_id: request.command_id,
            exit_code: Some(0),
            stdout: String::new(),
            stderr: String::new(),
        })
    }

    async fn cancel_command(&self, _command_id: &RunnerCommandId) -> anyhow::Result<bool> {
        Ok(false)
    }

    async fn read_file(
        &self,
        request: RunnerFileReadRequest,
    ) -> anyhow::Result<RunnerFileReadResult> {
        let contents = lock(&self.counters.files)
            .get(&key(&request.path))
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("no such file: {}", request.path.display()))?;
        Ok(RunnerFileReadResult {
            path: request.path,
            contents,
        })
    }

    async fn write_file(&self, request: RunnerFileWriteRequest) -> anyhow::Result<()> {
        lock(&self.counters.files).insert(key(&request.path), request.contents);
        Ok(())
    }

    async fn expose_port(&self, request: RunnerPortRequest) -> anyhow::Result<RunnerPortResult> {
        Ok(RunnerPortResult {
            port: request.port,
            url: None,
        })
    }

    async fn snapshot(&self) -> anyhow::Result<Option<RunnerSnapshotRef>> {
        Ok(None)
    }

    async fn close(&self) -> anyhow::Result<()> {
        self.counters.closed.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// The workspace path threads bound to the mock runner use.
pub fn mock_workspace() -> PathBuf {
    PathBuf::from("/mock/workspace")
}

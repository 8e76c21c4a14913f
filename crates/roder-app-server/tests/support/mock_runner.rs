//! A runner provider that is pausable and detachable, counting what the
//! runtime asks of it, so lifecycle calls through the protocol can be
//! checked against what reached the provider.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use roder_api::remote_runner::*;
use serde_json::json;

pub const PROVIDER_ID: &str = "mock";

pub struct MockRunnerProvider {
    pub creates: AtomicUsize,
    pub resumes: AtomicUsize,
    pub rejoins: AtomicUsize,
    pub commands: Arc<AtomicUsize>,
}

impl MockRunnerProvider {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            creates: AtomicUsize::new(0),
            resumes: AtomicUsize::new(0),
            rejoins: AtomicUsize::new(0),
            commands: Arc::new(AtomicUsize::new(0)),
        })
    }

    fn session(&self, state: RunnerSessionState) -> Arc<dyn RemoteRunnerSession> {
        Arc::new(MockSession {
            state,
            commands: self.commands.clone(),
        })
    }
}

#[async_trait::async_trait]
impl RemoteRunnerProvider for MockRunnerProvider {
    fn id(&self) -> RemoteRunnerProviderId {
        PROVIDER_ID.to_string()
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
            mounts: RunnerMountCapabilities::default(),
            pausable: true,
            detachable: true,
        }
    }

    fn setup_hint(&self) -> Option<String> {
        Some("set MOCK_RUNNER_TOKEN".to_string())
    }

    async fn create_session(
        &self,
        destination: RunnerDestination,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        let number = self.creates.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(self.session(RunnerSessionState {
            provider_id: PROVIDER_ID.to_string(),
            session_id: format!("sandbox-{number}"),
            destination_id: destination.id,
            snapshot: None,
            metadata: json!({}),
        }))
    }

    async fn resume_session(
        &self,
        state: RunnerSessionState,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        self.resumes.fetch_add(1, Ordering::SeqCst);
        Ok(self.session(state))
    }

    async fn rejoin_session(
        &self,
        state: RunnerSessionState,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        self.rejoins.fetch_add(1, Ordering::SeqCst);
        Ok(self.session(RunnerSessionState {
            metadata: json!({"status": "rejoined"}),
            ..state
        }))
    }
}

struct MockSession {
    state: RunnerSessionState,
    commands: Arc<AtomicUsize>,
}

impl MockSession {
    fn with_status(&self, status: &str) -> RunnerSessionState {
        RunnerSessionState {
            metadata: json!({ "status": status }),
            ..self.state.clone()
        }
    }
}

#[async_trait::async_trait]
impl RemoteRunnerSession for MockSession {
    fn state(&self) -> RunnerSessionState {
        self.state.clone()
    }

    async fn pause(&self) -> anyhow::Result<RunnerSessionState> {
        Ok(self.with_status("paused"))
    }

    async fn resume(&self) -> anyhow::Result<RunnerSessionState> {
        Ok(self.with_status("running"))
    }

    async fn detach(&self) -> anyhow::Result<RunnerSessionState> {
        Ok(self.with_status("detached"))
    }

    async fn run_command(
        &self,
        request: RunnerCommandRequest,
    ) -> anyhow::Result<RunnerCommandResult> {
        self.commands.fetch_add(1, Ordering::SeqCst);
        Ok(RunnerCommandResult {
            command_id: request.command_id,
            exit_code: Some(0),
            stdout: format!("ran in {}", self.state.session_id),
            stderr: String::new(),
        })
    }

    async fn read_file(
        &self,
        request: RunnerFileReadRequest,
    ) -> anyhow::Result<RunnerFileReadResult> {
        Ok(RunnerFileReadResult {
            path: request.path,
            contents: Vec::new(),
        })
    }

    async fn write_file(&self, _request: RunnerFileWriteRequest) -> anyhow::Result<()> {
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
        Ok(())
    }
}

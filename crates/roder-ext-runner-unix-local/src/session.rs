//! A unix-local session: one host directory, commands as host processes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use roder_api::remote_runner::{
    RemoteRunnerSession, RunnerCommandId, RunnerCommandRequest, RunnerCommandResult,
    RunnerFileReadRequest, RunnerFileReadResult, RunnerFileWriteRequest, RunnerPortRequest,
    RunnerPortResult, RunnerSessionState, RunnerSnapshotRef,
};

use crate::command::{self, PreparedCommand};
use crate::config::UnixLocalConfig;
use crate::paths::SessionRoot;
use crate::running::RunningCommands;

/// A session over the destination's root directory itself.
///
/// There is no per-session subdirectory: the root *is* the workspace a thread
/// is bound to, and closing never deletes it (it is the user's directory).
#[derive(Debug)]
pub struct UnixLocalSession {
    state: RunnerSessionState,
    root: SessionRoot,
    env: Vec<(String, String)>,
    running: RunningCommands,
}

impl UnixLocalSession {
    /// Opens a session over an existing root. Blocks on the filesystem.
    pub(crate) fn open_blocking(
        config: UnixLocalConfig,
        session_id: String,
        destination_id: String,
    ) -> anyhow::Result<Self> {
        let root = SessionRoot::open(&config.root)?;
        let state = RunnerSessionState {
            provider_id: crate::PROVIDER_ID.to_string(),
            session_id,
            destination_id,
            snapshot: None,
            metadata: config.to_json(),
        };
        Ok(Self {
            state,
            root,
            env: config.env,
            running: RunningCommands::default(),
        })
    }

    /// The session's root as configured.
    pub fn root(&self) -> &Path {
        &self.root.given
    }

    /// Resolves a path inside the root off the async threads.
    async fn resolve(&self, path: &Path) -> anyhow::Result<PathBuf> {
        let root = self.root.clone();
        let path = path.to_path_buf();
        tokio::task::spawn_blocking(move || root.resolve(&path))
            .await
            .context("path resolution task failed")?
    }

    /// The working directory of a command: the root when none is given.
    async fn resolve_cwd(&self, cwd: Option<&Path>) -> anyhow::Result<PathBuf> {
        let Some(cwd) = cwd else {
            return Ok(self.root.canonical.clone());
        };
        let resolved = self.resolve(cwd).await?;
        match tokio::fs::metadata(&resolved).await {
            Ok(metadata) if metadata.is_dir() => Ok(resolved),
            Ok(_) => bail!("working directory `{}` is not a directory", cwd.display()),
            Err(error) => Err(error)
                .with_context(|| format!("working directory `{}` does not exist", cwd.display())),
        }
    }
}

#[async_trait::async_trait]
impl RemoteRunnerSession for UnixLocalSession {
    fn state(&self) -> RunnerSessionState {
        self.state.clone()
    }

    async fn run_command(
        &self,
        request: RunnerCommandRequest,
    ) -> anyhow::Result<RunnerCommandResult> {
        if request.program.is_empty() {
            bail!("command `{}` has an empty program", request.command_id);
        }
        let cwd = self.resolve_cwd(request.cwd.as_deref()).await?;
        let mut env = self.env.clone();
        env.extend(request.env);
        let prepared = PreparedCommand {
            command_id: request.command_id,
            program: request.program,
            args: request.args,
            cwd,
            env,
            timeout: request.timeout_ms.map(Duration::from_millis),
        };
        command::run(prepared, &self.running).await
    }

    async fn cancel_command(&self, command_id: &RunnerCommandId) -> anyhow::Result<bool> {
        Ok(self.running.cancel(command_id))
    }

    async fn read_file(
        &self,
        request: RunnerFileReadRequest,
    ) -> anyhow::Result<RunnerFileReadResult> {
        let resolved = self.resolve(&request.path).await?;
        let contents = tokio::fs::read(&resolved)
            .await
            .with_context(|| format!("cannot read `{}`", request.path.display()))?;
        Ok(RunnerFileReadResult {
            path: request.path,
            contents,
        })
    }

    async fn write_file(&self, request: RunnerFileWriteRequest) -> anyhow::Result<()> {
        let resolved = self.resolve(&request.path).await?;
        if let Some(parent) = resolved.parent() {
            tokio::fs::create_dir_all(parent).await.with_context(|| {
                format!(
                    "cannot create the parent directories of `{}`",
                    request.path.display()
                )
            })?;
        }
        tokio::fs::write(&resolved, &request.contents)
            .await
            .with_context(|| format!("cannot write `{}`", request.path.display()))
    }

    async fn expose_port(&self, request: RunnerPortRequest) -> anyhow::Result<RunnerPortResult> {
        if request.port == 0 {
            bail!("cannot expose port 0: name the port the service listens on");
        }
        // Processes run on this host, so the port is already reachable here.
        Ok(RunnerPortResult {
            port: request.port,
            url: Some(format!("http://127.0.0.1:{}", request.port)),
        })
    }

    async fn snapshot(&self) -> anyhow::Result<Option<RunnerSnapshotRef>> {
        Ok(None)
    }

    async fn close(&self) -> anyhow::Result<()> {
        // The root is the user's directory: nothing to tear down.
        Ok(())
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;

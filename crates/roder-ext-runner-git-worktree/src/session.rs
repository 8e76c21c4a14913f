//! A session in one worktree: host processes and file operations confined to
//! its checkout, relative paths taken against the thread's working directory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use roder_api::remote_runner::{
    RemoteRunnerSession, RunnerCommandId, RunnerCommandRequest, RunnerCommandResult,
    RunnerFileReadRequest, RunnerFileReadResult, RunnerFileWriteRequest, RunnerPortRequest,
    RunnerPortResult, RunnerSessionState, RunnerSnapshotRef,
};

use crate::command::{self, PreparedCommand};
use crate::paths::Confinement;
use crate::running::RunningCommands;

/// A session over a materialized worktree. Closing it never removes the
/// worktree: cleanup is explicit and belongs to the materializer.
#[derive(Debug)]
pub struct GitWorktreeSession {
    state: RunnerSessionState,
    worktree_id: String,
    confinement: Confinement,
    /// Canonical working directory inside the checkout.
    cwd: PathBuf,
    running: RunningCommands,
}

impl GitWorktreeSession {
    /// Opens a session over an existing checkout. Blocks on the filesystem.
    pub(crate) fn open_blocking(
        state: RunnerSessionState,
        worktree_id: String,
        checkout: &Path,
        cwd: PathBuf,
    ) -> anyhow::Result<Self> {
        let confinement = Confinement::open(checkout)?;
        let cwd = confinement.resolve_dir(&confinement.canonical, &cwd)?;
        Ok(Self {
            state,
            worktree_id,
            confinement,
            cwd,
            running: RunningCommands::default(),
        })
    }

    /// The worktree this session works in.
    pub fn worktree_id(&self) -> &str {
        &self.worktree_id
    }

    /// The checkout's path (canonical).
    pub fn checkout(&self) -> &Path {
        &self.confinement.canonical
    }

    /// The working directory relative paths and commands start from.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// Resolves a path inside the checkout off the async threads.
    async fn resolve(&self, path: &Path) -> anyhow::Result<PathBuf> {
        let confinement = self.confinement.clone();
        let cwd = self.cwd.clone();
        let path = path.to_path_buf();
        tokio::task::spawn_blocking(move || confinement.resolve(&cwd, &path))
            .await
            .context("path resolution task failed")?
    }

    /// The working directory of a command: the session's when none is given.
    async fn resolve_cwd(&self, cwd: Option<&Path>) -> anyhow::Result<PathBuf> {
        let Some(cwd) = cwd else {
            return Ok(self.cwd.clone());
        };
        let confinement = self.confinement.clone();
        let base = self.cwd.clone();
        let cwd = cwd.to_path_buf();
        tokio::task::spawn_blocking(move || {
            confinement
                .resolve_dir(&base, &cwd)
                .with_context(|| format!("working directory `{}` is not usable", cwd.display()))
        })
        .await
        .context("path resolution task failed")?
    }
}

#[async_trait::async_trait]
impl RemoteRunnerSession for GitWorktreeSession {
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
        let prepared = PreparedCommand {
            command_id: request.command_id,
            program: request.program,
            args: request.args,
            cwd,
            env: request.env,
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
        bail!(
            "the git-worktree runner does not preview ports (asked for port {})",
            request.port
        )
    }

    async fn snapshot(&self) -> anyhow::Result<Option<RunnerSnapshotRef>> {
        Ok(None)
    }

    async fn close(&self) -> anyhow::Result<()> {
        // The worktree outlives its sessions; only cleanup removes it.
        Ok(())
    }
}

//! A session in one worktree: a unix-local session rooted at the checkout,
//! with the thread's working directory and git's repository-locating
//! variables removed from every command's environment.
//!
//! Running host processes, confining paths and stopping process groups are
//! the unix-local runner's job; this type only adds what makes the session a
//! worktree's (its id, no port preview, an environment where `git` finds the
//! checkout).

use std::path::{Path, PathBuf};

use anyhow::bail;
use roder_api::remote_runner::{
    RemoteRunnerSession, RunnerCommandId, RunnerCommandRequest, RunnerCommandResult,
    RunnerFileReadRequest, RunnerFileReadResult, RunnerFileWriteRequest, RunnerPortRequest,
    RunnerPortResult, RunnerSessionState, RunnerSnapshotRef,
};
use roder_api::sandbox_policy::SandboxPolicy;
use roder_ext_runner_unix_local::{SessionOptions, UnixLocalSession};

use crate::git::REPOSITORY_ENV;
use crate::paths::ROOT_LABEL;

/// A session over a materialized worktree. Closing it never removes the
/// worktree: cleanup is explicit and belongs to the materializer.
#[derive(Debug)]
pub struct GitWorktreeSession {
    worktree_id: String,
    host: UnixLocalSession,
}

impl GitWorktreeSession {
    /// Opens a session over an existing checkout, working in `cwd` (inside
    /// it).
    pub(crate) async fn open(
        state: RunnerSessionState,
        worktree_id: String,
        checkout: &Path,
        cwd: PathBuf,
        sandbox: SandboxPolicy,
        common_dir: PathBuf,
    ) -> anyhow::Result<Self> {
        let options = SessionOptions {
            cwd: Some(cwd),
            // An inherited GIT_DIR (the runtime started from a git hook, say)
            // would make the agent's `git status` report on another
            // repository.
            env_remove: REPOSITORY_ENV.iter().map(ToString::to_string).collect(),
            root_label: ROOT_LABEL,
            ..SessionOptions::default()
        };
        Ok(Self {
            worktree_id,
            // The worktree's git dir (`<common>/worktrees/<id>`), the
            // objects and refs live in the repository's common git dir:
            // `git commit` must write there.
            host: UnixLocalSession::open(state, checkout, options)
                .await?
                .with_sandbox(sandbox, vec![common_dir]),
        })
    }

    /// The worktree this session works in.
    pub fn worktree_id(&self) -> &str {
        &self.worktree_id
    }

    /// The checkout's path (canonical).
    pub fn checkout(&self) -> &Path {
        self.host.canonical_root()
    }

    /// The working directory relative paths and commands start from.
    pub fn cwd(&self) -> &Path {
        self.host.cwd()
    }
}

#[async_trait::async_trait]
impl RemoteRunnerSession for GitWorktreeSession {
    fn state(&self) -> RunnerSessionState {
        self.host.state()
    }

    async fn run_command(
        &self,
        request: RunnerCommandRequest,
    ) -> anyhow::Result<RunnerCommandResult> {
        self.host.run_command(request).await
    }

    async fn cancel_command(&self, command_id: &RunnerCommandId) -> anyhow::Result<bool> {
        self.host.cancel_command(command_id).await
    }

    async fn read_file(
        &self,
        request: RunnerFileReadRequest,
    ) -> anyhow::Result<RunnerFileReadResult> {
        self.host.read_file(request).await
    }

    async fn write_file(&self, request: RunnerFileWriteRequest) -> anyhow::Result<()> {
        self.host.write_file(request).await
    }

    /// Refused: the provider does not advertise port preview.
    async fn expose_port(&self, request: RunnerPortRequest) -> anyhow::Result<RunnerPortResult> {
        bail!(
            "the git-worktree runner does not preview ports (asked for port {})",
            request.port
        )
    }

    async fn snapshot(&self) -> anyhow::Result<Option<RunnerSnapshotRef>> {
        self.host.snapshot().await
    }

    /// The worktree outlives its sessions; only cleanup removes it.
    async fn close(&self) -> anyhow::Result<()> {
        self.host.close().await
    }
}

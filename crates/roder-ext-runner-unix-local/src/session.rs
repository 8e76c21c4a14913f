//! A unix-local session: one host directory, commands as host processes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use roder_api::remote_runner::{
    RemoteRunnerSession, RunnerCommandId, RunnerCommandRequest, RunnerCommandResult,
    RunnerFileReadRequest, RunnerFileReadResult, RunnerFileWriteRequest, RunnerPortRequest,
    RunnerPortResult, RunnerSessionState, RunnerSnapshotRef,
};

use roder_api::sandbox_policy::SandboxPolicy;
use roder_sandbox::Confinement;

use crate::command::{self, PreparedCommand};
use crate::options::SessionOptions;
use crate::paths::ConfinedRoot;
use crate::running::RunningCommands;

/// A session over a host directory: commands are host processes, file
/// operations and working directories are confined to the directory.
///
/// The provider opens one over the destination's root itself, with no
/// per-session subdirectory: the root *is* the workspace a thread is bound
/// to, and closing never deletes it (it is the user's directory). Other
/// runners over host directories open one with [`Self::open`] and
/// wrap it.
#[derive(Debug)]
pub struct UnixLocalSession {
    state: RunnerSessionState,
    root: ConfinedRoot,
    /// What relative paths are joined to: the root as given when the options
    /// name no working directory (paths read the way the root was written),
    /// else the working directory as resolved.
    base: PathBuf,
    /// Canonical working directory of commands that name none.
    cwd: PathBuf,
    env: Vec<(String, String)>,
    env_remove: Vec<String>,
    running: RunningCommands,
    /// How commands are confined: the thread's policy (the default,
    /// enforced with the network off, until [`Self::with_sandbox`]) over
    /// the canonical root.
    confinement: Confinement,
}

impl UnixLocalSession {
    /// Opens a session over the existing directory `root`, reporting `state`
    /// as its persisted state (a wrapping runner passes its own, since
    /// `resume_session` of *that* runner receives it). Fails when the root or
    /// the options' working directory is not an existing directory inside
    /// it.
    pub async fn open(
        state: RunnerSessionState,
        root: &Path,
        options: SessionOptions,
    ) -> anyhow::Result<Self> {
        let root = root.to_path_buf();
        // Resolving the root and the working directory is many syscalls.
        tokio::task::spawn_blocking(move || Self::open_blocking(state, &root, options))
            .await
            .context("session open task failed")?
    }

    fn open_blocking(
        state: RunnerSessionState,
        root: &Path,
        options: SessionOptions,
    ) -> anyhow::Result<Self> {
        let root = ConfinedRoot::open(root, options.root_label)?;
        let (base, cwd) = match options.cwd {
            None => (root.given().to_path_buf(), root.canonical().to_path_buf()),
            Some(cwd) => {
                let cwd = root.resolve_dir(root.given(), &cwd, "working directory")?;
                (cwd.clone(), cwd)
            }
        };
        Ok(Self {
            state,
            base,
            cwd,
            env: options.env,
            env_remove: options.env_remove,
            running: RunningCommands::default(),
            confinement: Confinement::new(SandboxPolicy::default(), root.canonical().to_path_buf()),
            root,
        })
    }

    /// Confines its commands by `policy`: writable are the root, the
    /// policy's `writable_roots` and `extra_writable` (what a wrapping
    /// runner needs, like a worktree's common git directory).
    pub fn with_sandbox(mut self, policy: SandboxPolicy, extra_writable: Vec<PathBuf>) -> Self {
        self.confinement.policy = policy;
        self.confinement.extra_writable = extra_writable;
        self
    }

    /// How its commands are confined.
    pub fn confinement(&self) -> &Confinement {
        &self.confinement
    }

    /// The session's root as configured.
    pub fn root(&self) -> &Path {
        self.root.given()
    }

    /// The session's root as the filesystem resolved it on open.
    pub fn canonical_root(&self) -> &Path {
        self.root.canonical()
    }

    /// The canonical working directory of commands that name none.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// Runs a path check off the async threads: it is many syscalls.
    async fn confine<T: Send + 'static>(
        &self,
        check: impl FnOnce(&ConfinedRoot, &Path) -> anyhow::Result<T> + Send + 'static,
    ) -> anyhow::Result<T> {
        let root = self.root.clone();
        let base = self.base.clone();
        tokio::task::spawn_blocking(move || check(&root, &base))
            .await
            .context("path resolution task failed")?
    }

    /// Resolves a path inside the root.
    async fn resolve(&self, path: &Path) -> anyhow::Result<PathBuf> {
        let path = path.to_path_buf();
        self.confine(move |root, base| Ok(root.resolve(base, &path)?))
            .await
    }

    /// The working directory of a command: the session's when none is given.
    async fn resolve_cwd(&self, cwd: Option<&Path>) -> anyhow::Result<PathBuf> {
        let Some(cwd) = cwd else {
            return Ok(self.cwd.clone());
        };
        let cwd = cwd.to_path_buf();
        self.confine(move |root, base| Ok(root.resolve_dir(base, &cwd, "working directory")?))
            .await
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
            env_remove: self.env_remove.clone(),
            env,
            timeout: request.timeout_ms.map(Duration::from_millis),
            confinement: self.confinement.clone(),
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

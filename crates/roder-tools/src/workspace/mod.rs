//! The one abstraction every tool is written against: where files are read and
//! written, and where commands run.
//!
//! A [`Workspace`] is either a directory on this host ([`LocalFs`]) or a
//! runner session ([`RemoteFs`]). Both confine paths with the same lexical
//! rules ([`crate::paths`]); the local one also refuses symlinks that leave
//! the root. An enum rather than a trait object: there are exactly two, and
//! the command path stays free of boxed futures.

mod local;
mod remote;

use std::path::PathBuf;
use std::time::Duration;

use roder_api::tools::{ToolExecutionContext, ToolWorkspace};
use tokio_util::sync::CancellationToken;

pub(crate) use local::LocalFs;
pub(crate) use remote::RemoteFs;

use crate::glob_match::PathPattern;
use crate::output::CapturedOutput;
use crate::paths::{Access, ResolvedPath};
use crate::tool::ToolError;

/// Largest file the file tools read into memory.
pub(crate) const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// A command to run in the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommandRequest {
    pub program: String,
    pub args: Vec<String>,
    /// Absolute working directory (a host path or a runner path).
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub timeout_ms: Option<u64>,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommandEnd {
    /// It ended by itself: an exit code, or the signal that killed it.
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
    /// Its timeout passed; it was killed.
    TimedOut,
    /// The turn was interrupted; it was killed.
    Interrupted,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommandOutcome {
    pub end: CommandEnd,
    /// stdout and stderr together, capped.
    pub output: CapturedOutput,
    pub wall: Duration,
}

/// One entry found by a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WalkEntry {
    pub absolute: PathBuf,
    /// Relative to the workspace root when under it, else absolute.
    pub display: String,
    pub is_dir: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct WalkOptions {
    /// Depth below the walked directory (1: its children only).
    pub max_depth: Option<usize>,
    pub include_dirs: bool,
    /// Keep only entries whose path relative to the walked directory matches.
    pub pattern: Option<PathPattern>,
    /// Stop after this many kept entries.
    pub limit: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Walk {
    /// Sorted by path.
    pub entries: Vec<WalkEntry>,
    /// More entries existed than were kept.
    pub truncated: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct GrepQuery {
    pub pattern: String,
    pub target: ResolvedPath,
    pub glob: Option<PathPattern>,
    pub case_insensitive: bool,
    pub max_results: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GrepHit {
    pub display: String,
    pub line_number: u64,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct GrepOutcome {
    pub hits: Vec<GrepHit>,
    pub truncated: bool,
}

/// Where a tool call's files and commands live.
#[derive(Clone)]
pub(crate) enum Workspace {
    Local(LocalFs),
    Remote(RemoteFs),
}

impl Workspace {
    /// The workspace of a call; `None` when the thread has none.
    pub fn from_context(ctx: &ToolExecutionContext) -> Option<Self> {
        let allow_vcs_metadata = ctx.policy_mode.allows_vcs_metadata_writes();
        match &ctx.workspace {
            ToolWorkspace::Local(local) => Some(Workspace::Local(
                LocalFs::new(
                    local.root.clone(),
                    local.read_roots.clone(),
                    allow_vcs_metadata,
                )
                .with_sandbox(ctx.sandbox.clone(), ctx.credential_vars.clone()),
            )),
            ToolWorkspace::Remote(remote) => Some(Workspace::Remote(RemoteFs::new(
                remote.clone(),
                allow_vcs_metadata,
                ctx.command_shell.clone(),
                ctx.cancellation.clone(),
                ctx.command_timeout_ms(Some(remote::HELPER_COMMAND_TIMEOUT_MS)),
            ))),
            ToolWorkspace::None => None,
        }
    }

    /// Resolves a path the model named, refusing anything outside what
    /// `access` allows.
    pub async fn resolve(
        &self,
        requested: &str,
        access: Access,
    ) -> Result<ResolvedPath, ToolError> {
        match self {
            Workspace::Local(local) => local.resolve(requested, access).await,
            Workspace::Remote(remote) => remote.resolve(requested, access),
        }
    }

    /// The working directory for a command: the root, or `workdir` inside it.
    pub async fn command_cwd(&self, workdir: Option<&str>) -> Result<PathBuf, ToolError> {
        match self {
            Workspace::Local(local) => local.command_cwd(workdir).await,
            Workspace::Remote(remote) => remote.command_cwd(workdir),
        }
    }

    /// Reads a whole file; a missing file is an error.
    pub async fn read(&self, path: &ResolvedPath) -> Result<Vec<u8>, ToolError> {
        match self {
            Workspace::Local(local) => local.read(path).await,
            Workspace::Remote(remote) => remote.read(path).await,
        }
    }

    /// Reads a file that may not exist yet (the "before" of a write).
    pub async fn read_if_exists(&self, path: &ResolvedPath) -> Result<Option<Vec<u8>>, ToolError> {
        match self {
            Workspace::Local(local) => local.read_if_exists(path).await,
            Workspace::Remote(remote) => remote.read_if_exists(path).await,
        }
    }

    /// Writes a whole file, creating its parent directories.
    pub async fn write(&self, path: &ResolvedPath, contents: Vec<u8>) -> Result<(), ToolError> {
        match self {
            Workspace::Local(local) => local.write(path, contents).await,
            Workspace::Remote(remote) => remote.write(path, contents).await,
        }
    }

    pub async fn remove(&self, path: &ResolvedPath) -> Result<(), ToolError> {
        match self {
            Workspace::Local(local) => local.remove(path).await,
            Workspace::Remote(remote) => remote.remove(path).await,
        }
    }

    /// Runs one command; `Err` only when it could not be started at all.
    pub async fn run(
        &self,
        request: CommandRequest,
        cancellation: &CancellationToken,
        output_cap: usize,
    ) -> Result<CommandOutcome, ToolError> {
        match self {
            Workspace::Local(local) => {
                crate::process::run_local(&request, cancellation, output_cap, local.confinement())
                    .await
            }
            Workspace::Remote(remote) => remote.run(request, cancellation, output_cap).await,
        }
    }

    /// Lists a directory recursively, skipping `.git` (and, locally, what
    /// `.gitignore` ignores).
    pub async fn walk(&self, dir: &ResolvedPath, options: WalkOptions) -> Result<Walk, ToolError> {
        match self {
            Workspace::Local(local) => local.walk(dir, options).await,
            Workspace::Remote(remote) => remote.walk(dir, options).await,
        }
    }

    pub async fn grep(&self, query: GrepQuery) -> Result<GrepOutcome, ToolError> {
        match self {
            Workspace::Local(local) => local.grep(query).await,
            Workspace::Remote(remote) => remote.grep(query).await,
        }
    }
}

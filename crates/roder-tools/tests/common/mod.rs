//! Test harness shared by the integration tests: one set of tool cases runs
//! against a local directory and against runner sessions.
#![allow(dead_code)]

pub mod cases;
pub mod dir_session;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use roder_api::policy_mode::PolicyMode;
use roder_api::remote_runner::{RemoteRunnerSession, RemoteWorkspace};
use roder_api::tools::{
    LocalWorkspace, ToolCall, ToolExecutionContext, ToolRegistry, ToolResult, ToolWorkspace,
};
use serde_json::Value;
use tempfile::TempDir;

pub use dir_session::DirSession;

/// A workspace under test: a host directory the test can inspect directly,
/// reached by the tools either locally or through a runner session.
pub struct Harness {
    /// The workspace root on this host.
    pub dir: TempDir,
    /// A directory outside the root, for read roots and escape attempts.
    pub outside: TempDir,
    pub registry: ToolRegistry,
    pub kind: Kind,
}

#[derive(Clone)]
pub enum Kind {
    Local,
    /// A runner session whose runner paths are this host's paths.
    Remote(Arc<dyn RemoteRunnerSession>),
}

fn registry(root: &Path) -> ToolRegistry {
    let contributor = roder_tools::builtin_coding_tools_contributor(root).unwrap();
    let mut registry = ToolRegistry::new();
    contributor.contribute(&mut registry).unwrap();
    registry
}

fn canonical_tempdir() -> TempDir {
    tempfile::tempdir().unwrap()
}

impl Harness {
    pub fn local() -> Self {
        let dir = canonical_tempdir();
        Self {
            registry: registry(dir.path()),
            outside: canonical_tempdir(),
            dir,
            kind: Kind::Local,
        }
    }

    /// A runner session backed by the workspace directory on this host.
    pub fn dir_remote() -> Self {
        let dir = canonical_tempdir();
        let session = Arc::new(DirSession::new(dir.path().to_path_buf()));
        Self {
            registry: registry(dir.path()),
            outside: canonical_tempdir(),
            dir,
            kind: Kind::Remote(session),
        }
    }

    /// A harness whose tools reach the directory through `session`.
    pub fn with_session(dir: TempDir, session: Arc<dyn RemoteRunnerSession>) -> Self {
        Self {
            registry: registry(dir.path()),
            outside: canonical_tempdir(),
            dir,
            kind: Kind::Remote(session),
        }
    }

    pub fn is_local(&self) -> bool {
        matches!(self.kind, Kind::Local)
    }

    pub fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }

    pub fn workspace_with_read_roots(&self, read_roots: Vec<PathBuf>) -> ToolWorkspace {
        match &self.kind {
            Kind::Local => ToolWorkspace::Local(LocalWorkspace {
                root: self.root(),
                read_roots,
            }),
            Kind::Remote(session) => ToolWorkspace::Remote(RemoteWorkspace {
                session: session.clone(),
                root: self.root(),
                read_roots,
            }),
        }
    }

    pub fn ctx(&self) -> ToolExecutionContext {
        let mut ctx =
            ToolExecutionContext::for_workspace(self.workspace_with_read_roots(Vec::new()));
        ctx.policy_mode = PolicyMode::Default;
        ctx
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.root().join(relative)
    }

    pub fn write(&self, relative: &str, contents: &str) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }

    pub fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path(relative)).unwrap()
    }

    pub fn exists(&self, relative: &str) -> bool {
        self.path(relative).exists()
    }

    pub async fn call(&self, tool: &str, arguments: Value) -> ToolResult {
        self.call_with(self.ctx(), tool, arguments).await
    }

    pub async fn call_with(
        &self,
        ctx: ToolExecutionContext,
        tool: &str,
        arguments: Value,
    ) -> ToolResult {
        let executor = self
            .registry
            .get(tool)
            .unwrap_or_else(|| panic!("{tool} is not registered"));
        let call = ToolCall {
            id: format!("call-{tool}"),
            name: tool.to_string(),
            arguments,
        };
        let result = executor.execute(ctx, call).await.unwrap();
        assert_eq!(result.name, tool);
        assert_eq!(result.id, format!("call-{tool}"));
        result
    }
}

/// Asserts a successful result and returns its text.
#[track_caller]
pub fn ok(result: &ToolResult) -> &str {
    assert!(!result.is_error, "unexpected error result: {}", result.text);
    &result.text
}

/// Asserts an error result containing `needle`.
#[track_caller]
pub fn err_contains(result: &ToolResult, needle: &str) {
    assert!(result.is_error, "expected an error, got: {}", result.text);
    assert!(
        result.text.contains(needle),
        "error {:?} does not contain {needle:?}",
        result.text
    );
}

/// Waits for a condition nothing notifies about (a file appearing, a
/// process disappearing), with a deadline.
pub async fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    condition()
}

/// Whether the process no longer runs (gone, or a zombie awaiting reaping).
pub fn process_is_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Reads a pid a command wrote to `path`, waiting until it is complete.
pub async fn read_pid(path: &Path) -> i32 {
    assert!(
        eventually(|| std::fs::read_to_string(path).is_ok_and(|s| s.ends_with('\n'))).await,
        "{} never appeared",
        path.display()
    );
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

//! What the tools send to a runner session, checked against an in-memory
//! session shaped like the runtime conformance suite's mock: files in a map
//! keyed by the request path, empty contents for missing files, every command
//! recorded.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use roder_api::policy_mode::PolicyMode;
use roder_api::remote_runner::{
    RemoteRunnerSession, RemoteWorkspace, RunnerCommandId, RunnerCommandRequest,
    RunnerCommandResult, RunnerFileReadRequest, RunnerFileReadResult, RunnerFileWriteRequest,
    RunnerPortRequest, RunnerPortResult, RunnerSessionState, RunnerSnapshotRef,
};
use roder_api::tools::{ToolCall, ToolExecutionContext, ToolRegistry, ToolResult, ToolWorkspace};
use serde_json::{Value, json};
use tokio::sync::Notify;

const ROOT: &str = "/sandbox/workspace";

#[derive(Clone, Copy, PartialEq, Eq)]
enum CommandBehaviour {
    /// Exit 0 with "command ok\n".
    Succeed,
    /// Never finish (until cancelled).
    Hang,
    /// Report that the command was killed (no exit code).
    Killed,
}

struct MemorySession {
    files: Mutex<HashMap<String, Vec<u8>>>,
    reads: Mutex<Vec<PathBuf>>,
    writes: Mutex<Vec<PathBuf>>,
    commands: Mutex<Vec<RunnerCommandRequest>>,
    cancels: Mutex<Vec<String>>,
    command_started: Notify,
    behaviour: Mutex<CommandBehaviour>,
}

impl MemorySession {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            files: Mutex::default(),
            reads: Mutex::default(),
            writes: Mutex::default(),
            commands: Mutex::default(),
            cancels: Mutex::default(),
            command_started: Notify::new(),
            behaviour: Mutex::new(CommandBehaviour::Succeed),
        })
    }

    fn file(&self, key: &str) -> Option<String> {
        self.files
            .lock()
            .unwrap()
            .get(key)
            .map(|bytes| String::from_utf8(bytes.clone()).unwrap())
    }
}

#[async_trait::async_trait]
impl RemoteRunnerSession for MemorySession {
    fn state(&self) -> RunnerSessionState {
        RunnerSessionState {
            provider_id: "memory".to_string(),
            session_id: "memory-1".to_string(),
            destination_id: "memory".to_string(),
            snapshot: None,
            metadata: Value::Null,
        }
    }

    async fn run_command(
        &self,
        request: RunnerCommandRequest,
    ) -> anyhow::Result<RunnerCommandResult> {
        self.commands.lock().unwrap().push(request.clone());
        self.command_started.notify_one();
        let behaviour = *self.behaviour.lock().unwrap();
        match behaviour {
            CommandBehaviour::Succeed => Ok(RunnerCommandResult {
                command_id: request.command_id,
                exit_code: Some(0),
                stdout: "command ok\n".to_string(),
                stderr: String::new(),
            }),
            CommandBehaviour::Killed => Ok(RunnerCommandResult {
                command_id: request.command_id,
                exit_code: None,
                stdout: "partial\n".to_string(),
                stderr: String::new(),
            }),
            CommandBehaviour::Hang => std::future::pending().await,
        }
    }

    async fn cancel_command(&self, command_id: &RunnerCommandId) -> anyhow::Result<bool> {
        self.cancels.lock().unwrap().push(command_id.clone());
        Ok(true)
    }

    async fn read_file(
        &self,
        request: RunnerFileReadRequest,
    ) -> anyhow::Result<RunnerFileReadResult> {
        self.reads.lock().unwrap().push(request.path.clone());
        let key = request.path.to_string_lossy().to_string();
        let contents = self
            .files
            .lock()
            .unwrap()
            .get(&key)
            .cloned()
            .unwrap_or_default();
        Ok(RunnerFileReadResult {
            path: request.path,
            contents,
        })
    }

    async fn write_file(&self, request: RunnerFileWriteRequest) -> anyhow::Result<()> {
        self.writes.lock().unwrap().push(request.path.clone());
        self.files
            .lock()
            .unwrap()
            .insert(request.path.to_string_lossy().to_string(), request.contents);
        Ok(())
    }

    async fn expose_port(&self, _request: RunnerPortRequest) -> anyhow::Result<RunnerPortResult> {
        anyhow::bail!("no ports")
    }

    async fn snapshot(&self) -> anyhow::Result<Option<RunnerSnapshotRef>> {
        Ok(None)
    }

    async fn close(&self) -> anyhow::Result<()> {
        Ok(())
    }
}

fn registry() -> ToolRegistry {
    let scratch = tempfile::tempdir().unwrap();
    let contributor = roder_tools::builtin_coding_tools_contributor(scratch.path()).unwrap();
    let mut registry = ToolRegistry::new();
    contributor.contribute(&mut registry).unwrap();
    registry
}

fn ctx(session: &Arc<MemorySession>, read_roots: Vec<PathBuf>) -> ToolExecutionContext {
    let mut ctx = ToolExecutionContext::for_workspace(ToolWorkspace::Remote(RemoteWorkspace {
        session: session.clone(),
        root: PathBuf::from(ROOT),
        read_roots,
    }));
    ctx.policy_mode = PolicyMode::Bypass;
    ctx
}

async fn call(ctx: ToolExecutionContext, tool: &str, arguments: Value) -> ToolResult {
    registry()
        .get(tool)
        .unwrap()
        .execute(
            ctx,
            ToolCall {
                id: "call".to_string(),
                name: tool.to_string(),
                arguments,
            },
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn paths_inside_the_root_are_sent_relative() {
    let session = MemorySession::new();
    for path in ["out.txt", "/sandbox/workspace/out.txt", "./sub/../out.txt"] {
        let result = call(
            ctx(&session, vec![]),
            "write_file",
            json!({"path": path, "content": "hello from runner"}),
        )
        .await;
        assert!(!result.is_error, "{path}: {}", result.text);
        assert_eq!(result.text, "wrote out.txt");
    }
    assert_eq!(
        session.file("out.txt").as_deref(),
        Some("hello from runner")
    );
    assert!(
        session
            .writes
            .lock()
            .unwrap()
            .iter()
            .all(|path| path == Path::new("out.txt"))
    );

    let read = call(
        ctx(&session, vec![]),
        "read_file",
        json!({"path": "out.txt"}),
    )
    .await;
    assert!(!read.is_error);
    assert!(read.text.contains("hello from runner"));
    assert!(
        session
            .reads
            .lock()
            .unwrap()
            .iter()
            .all(|path| path == Path::new("out.txt"))
    );
    assert!(session.commands.lock().unwrap().is_empty());
}

#[tokio::test]
async fn read_roots_are_sent_absolute_and_stay_read_only() {
    let session = MemorySession::new();
    session
        .files
        .lock()
        .unwrap()
        .insert("/mnt/docs/guide.md".to_string(), b"guide\n".to_vec());
    let read_roots = vec![PathBuf::from("/mnt/docs")];
    let read = call(
        ctx(&session, read_roots.clone()),
        "read_file",
        json!({"path": "/mnt/docs/guide.md"}),
    )
    .await;
    assert_eq!(read.text, "     1\tguide");
    assert_eq!(
        session.reads.lock().unwrap().clone(),
        vec![PathBuf::from("/mnt/docs/guide.md")]
    );
    let write = call(
        ctx(&session, read_roots),
        "write_file",
        json!({"path": "/mnt/docs/guide.md", "content": "x"}),
    )
    .await;
    assert!(write.is_error);
    assert!(
        write
            .text
            .contains("outside the workspace /sandbox/workspace")
    );
    assert!(session.writes.lock().unwrap().is_empty());
}

#[tokio::test]
async fn escapes_are_refused_before_any_request() {
    let session = MemorySession::new();
    for (tool, args) in [
        (
            "write_file",
            json!({"path": "../etc/passwd", "content": "x"}),
        ),
        ("read_file", json!({"path": "/etc/passwd"})),
        (
            "edit",
            json!({"path": "/sandbox/other/x", "old_string": "a", "new_string": "b"}),
        ),
        ("shell", json!({"command": "ls", "workdir": "/sandbox"})),
        ("list_files", json!({"path": "/"})),
    ] {
        let result = call(ctx(&session, vec![]), tool, args).await;
        assert!(result.is_error, "{tool}");
        assert!(
            result
                .text
                .contains("is outside the workspace /sandbox/workspace"),
            "{tool}: {}",
            result.text
        );
    }
    assert!(session.reads.lock().unwrap().is_empty());
    assert!(session.writes.lock().unwrap().is_empty());
    assert!(session.commands.lock().unwrap().is_empty());
}

#[tokio::test]
async fn shell_runs_the_configured_shell_in_the_runner_root() {
    let session = MemorySession::new();
    let result = call(
        ctx(&session, vec![]),
        "shell",
        json!({"command": "echo hi"}),
    )
    .await;
    assert!(!result.is_error, "{}", result.text);
    assert!(result.text.contains("command ok"));
    let command = session.commands.lock().unwrap()[0].clone();
    assert_eq!(command.program, "sh");
    assert_eq!(command.args, vec!["-c".to_string(), "echo hi".to_string()]);
    assert_eq!(command.cwd.as_deref(), Some(Path::new(ROOT)));
    assert_eq!(command.timeout_ms, Some(120_000));
    assert!(!command.command_id.is_empty());
}

#[tokio::test]
async fn exec_command_reports_completed_and_uses_workdir_and_deadline() {
    let session = MemorySession::new();
    let mut context = ctx(&session, vec![]);
    context.remaining_deadline_seconds = Some(31);
    let result = call(
        context,
        "exec_command",
        json!({"cmd": "echo nope", "workdir": "sub"}),
    )
    .await;
    assert!(!result.is_error, "{}", result.text);
    assert!(
        result
            .text
            .starts_with("Exit code: 0\nStatus: completed\nWall time: ")
    );
    assert!(result.text.ends_with("Output:\ncommand ok\n"));
    let command = session.commands.lock().unwrap()[0].clone();
    assert_eq!(
        command.cwd.as_deref(),
        Some(Path::new("/sandbox/workspace/sub"))
    );
    assert_eq!(command.timeout_ms, Some(1_000));
}

#[tokio::test]
async fn a_command_without_exit_code_under_a_timeout_timed_out() {
    let session = MemorySession::new();
    *session.behaviour.lock().unwrap() = CommandBehaviour::Killed;
    let result = call(
        ctx(&session, vec![]),
        "exec_command",
        json!({"cmd": "sleep 100", "timeout_ms": 50}),
    )
    .await;
    assert!(result.is_error);
    assert!(
        result
            .text
            .starts_with("Exit code: none\nStatus: timed_out\n"),
        "{}",
        result.text
    );
    assert!(result.text.ends_with("Output:\npartial\n"));
}

#[tokio::test]
async fn cancellation_cancels_the_runner_command() {
    let session = MemorySession::new();
    *session.behaviour.lock().unwrap() = CommandBehaviour::Hang;
    let context = ctx(&session, vec![]);
    let token = context.cancellation.clone();
    let started = session.command_started.notified();
    let (result, ()) = tokio::join!(
        call(context, "exec_command", json!({"cmd": "sleep 100"})),
        async {
            started.await;
            token.cancel();
        }
    );
    assert!(result.is_error);
    assert_eq!(result.text, "interrupted");
    let command_id = session.commands.lock().unwrap()[0].command_id.clone();
    assert_eq!(session.cancels.lock().unwrap().clone(), vec![command_id]);
}

#[tokio::test]
async fn dropping_a_running_call_cancels_the_runner_command() {
    let session = MemorySession::new();
    *session.behaviour.lock().unwrap() = CommandBehaviour::Hang;
    let started = session.command_started.notified();
    let running = tokio::spawn(call(
        ctx(&session, vec![]),
        "shell",
        json!({"command": "sleep 100"}),
    ));
    started.await;
    running.abort();
    let _ = running.await;
    // The cancel is sent from a task spawned by the drop guard.
    let cancelled = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        loop {
            if !session.cancels.lock().unwrap().is_empty() {
                break;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(
        cancelled.is_ok(),
        "no cancel_command after the call was dropped"
    );
}

#[tokio::test]
async fn edit_reads_once_and_writes_once() {
    let session = MemorySession::new();
    session
        .files
        .lock()
        .unwrap()
        .insert("shared.txt".to_string(), b"alpha beta\n".to_vec());
    let result = call(
        ctx(&session, vec![]),
        "edit",
        json!({"path": "shared.txt", "old_string": "alpha", "new_string": "ALPHA"}),
    )
    .await;
    assert!(!result.is_error, "{}", result.text);
    assert_eq!(session.file("shared.txt").as_deref(), Some("ALPHA beta\n"));
    assert_eq!(session.reads.lock().unwrap().len(), 1);
    assert_eq!(session.writes.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_missing_remote_file_reads_as_empty_through_this_session() {
    // This session cannot tell a missing file from an empty one.
    let session = MemorySession::new();
    let read = call(
        ctx(&session, vec![]),
        "read_file",
        json!({"path": "none.txt"}),
    )
    .await;
    assert!(!read.is_error);
    assert_eq!(read.text, "(none.txt is empty)");
    let edit = call(
        ctx(&session, vec![]),
        "edit",
        json!({"path": "none.txt", "old_string": "a", "new_string": "b"}),
    )
    .await;
    assert!(edit.is_error);
    assert_eq!(edit.text, "old_string not found in none.txt");
}

#[tokio::test]
async fn the_workspace_root_is_not_a_file() {
    let session = MemorySession::new();
    let read = call(ctx(&session, vec![]), "read_file", json!({"path": "."})).await;
    assert!(read.is_error);
    assert!(
        read.text.contains("is the workspace root, not a file"),
        "{}",
        read.text
    );
}

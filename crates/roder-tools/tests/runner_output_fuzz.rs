//! Whatever a runner prints for the helper commands (`find` for
//! `list_files`/`glob`, `find | xargs grep` for `grep`), the tools parse it
//! without panicking: the output is any bytes, decoded lossily as a provider
//! would, mixed with well-formed lines. Well-formed lines under the searched
//! directory still come through.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use roder_api::policy_mode::PolicyMode;
use roder_api::remote_runner::{
    RemoteRunnerSession, RemoteWorkspace, RunnerCommandRequest, RunnerCommandResult,
    RunnerFileReadRequest, RunnerFileReadResult, RunnerFileWriteRequest, RunnerPortRequest,
    RunnerPortResult, RunnerSessionState, RunnerSnapshotRef,
};
use roder_api::tools::{ToolCall, ToolExecutionContext, ToolRegistry, ToolResult, ToolWorkspace};
use serde_json::{Value, json};

const ROOT: &str = "/sandbox/workspace";

/// A session whose every command exits 0 and prints `stdout`.
struct ScriptedSession {
    stdout: Mutex<String>,
}

#[async_trait::async_trait]
impl RemoteRunnerSession for ScriptedSession {
    fn state(&self) -> RunnerSessionState {
        RunnerSessionState {
            provider_id: "scripted".to_string(),
            session_id: "scripted-1".to_string(),
            destination_id: "scripted".to_string(),
            snapshot: None,
            metadata: Value::Null,
        }
    }

    async fn run_command(
        &self,
        request: RunnerCommandRequest,
    ) -> anyhow::Result<RunnerCommandResult> {
        Ok(RunnerCommandResult {
            command_id: request.command_id,
            exit_code: Some(0),
            stdout: self.stdout.lock().unwrap().clone(),
            stderr: String::new(),
        })
    }

    async fn read_file(
        &self,
        _request: RunnerFileReadRequest,
    ) -> anyhow::Result<RunnerFileReadResult> {
        anyhow::bail!("no files in the scripted session")
    }

    async fn write_file(&self, _request: RunnerFileWriteRequest) -> anyhow::Result<()> {
        anyhow::bail!("no files in the scripted session")
    }

    async fn expose_port(&self, _request: RunnerPortRequest) -> anyhow::Result<RunnerPortResult> {
        anyhow::bail!("no ports in the scripted session")
    }

    async fn snapshot(&self) -> anyhow::Result<Option<RunnerSnapshotRef>> {
        Ok(None)
    }

    async fn close(&self) -> anyhow::Result<()> {
        Ok(())
    }
}

struct Fixture {
    session: Arc<ScriptedSession>,
    registry: ToolRegistry,
    runtime: tokio::runtime::Runtime,
}

impl Fixture {
    fn new() -> Self {
        // The contributor checks its default directory once; the calls run
        // in the session's workspace named by the context.
        let local = tempfile::tempdir().unwrap();
        let contributor = roder_tools::builtin_coding_tools_contributor(local.path()).unwrap();
        let mut registry = ToolRegistry::new();
        contributor.contribute(&mut registry).unwrap();
        Self {
            session: Arc::new(ScriptedSession {
                stdout: Mutex::new(String::new()),
            }),
            registry,
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
        }
    }

    fn call(&self, stdout: &str, tool: &str, arguments: Value) -> ToolResult {
        *self.session.stdout.lock().unwrap() = stdout.to_string();
        let mut ctx = ToolExecutionContext::for_workspace(ToolWorkspace::Remote(RemoteWorkspace {
            session: self.session.clone(),
            root: PathBuf::from(ROOT),
            read_roots: Vec::new(),
        }));
        ctx.policy_mode = PolicyMode::Default;
        let executor = self.registry.get(tool).unwrap();
        let call = ToolCall {
            id: "fuzz".to_string(),
            name: tool.to_string(),
            arguments,
        };
        self.runtime.block_on(executor.execute(ctx, call)).unwrap()
    }
}

/// One line of runner output: well formed, nearly so, or noise.
fn output_line() -> impl Strategy<Value = String> {
    prop_oneof![
        "[df] /sandbox/workspace/[a-zé😀:. ]{0,8}",
        "/sandbox/workspace/[a-zé:]{0,6}:[0-9]{0,4}:[^\n]{0,10}",
        "[df]? ?[/a-z:é]{0,6}",
        Just(String::new()),
        Just(":".to_string()),
        Just("é:1:x".to_string()),
        proptest::collection::vec(any::<u8>(), 0..24)
            .prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn listing_and_search_take_any_runner_output(
        lines in proptest::collection::vec(output_line(), 0..16),
        separator in prop_oneof![Just("\n"), Just("\r\n"), Just("\0")],
    ) {
        let fixture = Fixture::new();
        let stdout = lines.join(separator);
        for (tool, arguments) in [
            ("list_files", json!({})),
            ("glob", json!({"pattern": "*"})),
            ("grep", json!({"pattern": "x"})),
            ("grep", json!({"pattern": "x", "glob": "*.rs"})),
        ] {
            let result = fixture.call(&stdout, tool, arguments);
            prop_assert!(!result.is_error, "{tool}: {}", result.text);
        }
    }
}

/// Well-formed lines survive the noise around them, and lines naming paths
/// outside the searched directory (the tail of a file name holding a
/// newline) are dropped.
#[test]
fn well_formed_lines_come_through_the_noise() {
    let fixture = Fixture::new();
    let grep = fixture.call(
        "\n\u{e9}\n/sandbox/workspace/src/a.rs:3:fn main\n:\n\u{fffd}\u{fffd}:1:x\n/elsewhere/b:1:y\n",
        "grep",
        json!({"pattern": "main"}),
    );
    assert!(!grep.is_error, "{}", grep.text);
    assert!(grep.text.contains("src/a.rs:3:fn main"), "{}", grep.text);
    assert!(!grep.text.contains("elsewhere"), "{}", grep.text);
    assert!(!grep.text.contains('\u{fffd}'), "{}", grep.text);

    let listed = fixture.call(
        "d /sandbox/workspace/src\nf /sandbox/workspace/src/a.rs\n\nf \nx y\nf b\n\u{e9}\n",
        "list_files",
        json!({}),
    );
    assert!(!listed.is_error, "{}", listed.text);
    assert!(listed.text.contains("src/"), "{}", listed.text);
    assert!(listed.text.contains("a.rs"), "{}", listed.text);
    assert!(
        !listed.text.lines().any(|line| line.trim() == "b"),
        "{}",
        listed.text
    );
}

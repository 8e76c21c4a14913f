//! `roder mcp-server`: Roder as an MCP server on stdio, so another agent can
//! hand it a task. Two tools: `run_task` runs a turn in a new thread (in a
//! workspace directory, or in a configured runner) and returns the final
//! answer and the thread id; `continue_thread` runs the next turn of a
//! thread. Everything a turn does is saved like `roder exec`'s threads.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, ServiceExt as _, tool, tool_handler, tool_router};
use roder_api::events::RoderEvent;
use roder_api::inference::RuntimeProfile;
use roder_core::{Runtime, StartTurnRequest};
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;

use crate::cli::{ExecArgs, McpServerArgs};
use crate::config::Settings;
use crate::wiring;

pub async fn run(settings: &Settings, args: McpServerArgs) -> anyhow::Result<ExitCode> {
    let workspace = match &args.workspace {
        Some(path) => path.clone(),
        None => std::env::current_dir()?,
    };
    let workspace = tokio::fs::canonicalize(&workspace)
        .await
        .map_err(|error| anyhow::anyhow!("workspace {}: {error}", workspace.display()))?;
    let wired = wiring::runtime(settings, &workspace, |config| {
        config.runtime_profile = RuntimeProfile::NonInteractive;
    })?;
    let server = RoderMcpServer {
        runtime: wired.runtime.clone(),
        settings: Arc::new(settings.clone()),
        default_workspace: workspace,
        tool_router: RoderMcpServer::tool_router(),
    };
    let outcome = match server
        .serve((tokio::io::stdin(), crate::stdout::tokio()))
        .await
    {
        Ok(service) => service
            .waiting()
            .await
            .map(|_| ())
            .map_err(|error| anyhow::anyhow!("the MCP server stopped: {error}")),
        Err(error) => Err(anyhow::anyhow!("MCP client did not initialize: {error}")),
    };
    wired.shutdown().await;
    outcome.map(|()| ExitCode::SUCCESS)
}

#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct RunTask {
    /// What Roder should do, as you would tell a colleague.
    prompt: String,
    /// Absolute path of the directory to work in (default: the directory
    /// `roder mcp-server` was started in).
    #[serde(default)]
    workspace: Option<String>,
    /// A runner configured in Roder's config.toml ([runners.NAME]): the
    /// task's commands and files then live in that sandbox.
    #[serde(default)]
    runner: Option<String>,
    /// Interrupt the turn after this many seconds (the thread is kept).
    #[serde(default)]
    timeout_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct ContinueThread {
    /// The thread id a previous run_task or continue_thread returned.
    thread_id: String,
    /// The next message in that thread.
    prompt: String,
    /// Interrupt the turn after this many seconds (the thread is kept).
    #[serde(default)]
    timeout_seconds: Option<u64>,
}

#[derive(Clone)]
struct RoderMcpServer {
    runtime: Arc<Runtime>,
    settings: Arc<Settings>,
    default_workspace: PathBuf,
    #[allow(dead_code, reason = "read by the tool_handler macro")]
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl RoderMcpServer {
    #[tool(
        description = "Hand a coding task to Roder, an agent that reads, edits and runs code in a workspace. Runs one turn in a new thread and returns Roder's final answer and the thread id (continue it with continue_thread)."
    )]
    async fn run_task(
        &self,
        Parameters(task): Parameters<RunTask>,
    ) -> Result<CallToolResult, ErrorData> {
        let workspace = match &task.workspace {
            Some(path) => PathBuf::from(path),
            None => self.default_workspace.clone(),
        };
        if !workspace.is_absolute() {
            return Ok(refusal(format!(
                "workspace \"{}\" is not an absolute path",
                workspace.display()
            )));
        }
        let workspace = match tokio::fs::canonicalize(&workspace).await {
            Ok(path) => path,
            Err(error) => {
                return Ok(refusal(format!(
                    "workspace {}: {error}",
                    workspace.display()
                )));
            }
        };
        // Like `roder exec`: no thread for a turn that cannot authenticate.
        if let Err(error) =
            crate::preflight::model_key(&self.settings, &self.settings.model.provider)
        {
            return Ok(refusal(format!("{error:#}")));
        }
        let exec_args = ExecArgs {
            prompt: task.prompt.clone(),
            workspace: Some(workspace.clone()),
            thread: None,
            runner: task.runner.clone(),
            json: false,
            deadline: None,
            mode: None,
            profile: Default::default(),
        };
        let thread_id = match crate::exec::create_thread(
            &self.runtime,
            &self.settings,
            &exec_args,
            &workspace,
            None,
        )
        .await
        {
            Ok(thread_id) => thread_id,
            Err(error) => return Ok(refusal(format!("{error:#}"))),
        };
        Ok(self
            .turn(
                &thread_id,
                &task.prompt,
                Some(&workspace),
                task.timeout_seconds,
            )
            .await)
    }

    #[tool(
        description = "Continue a Roder thread: runs its next turn with this message and returns Roder's final answer."
    )]
    async fn continue_thread(
        &self,
        Parameters(next): Parameters<ContinueThread>,
    ) -> Result<CallToolResult, ErrorData> {
        match self.runtime.load_thread(&next.thread_id).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                return Ok(refusal(format!(
                    "thread \"{}\" does not exist",
                    next.thread_id
                )));
            }
            Err(error) => return Ok(refusal(format!("{error:#}"))),
        }
        let workspace = match self.runtime.thread_metadata(&next.thread_id).await {
            Ok(metadata) if !metadata.workspace.is_empty() => {
                Some(PathBuf::from(metadata.workspace))
            }
            _ => None,
        };
        Ok(self
            .turn(
                &next.thread_id,
                &next.prompt,
                workspace.as_deref(),
                next.timeout_seconds,
            )
            .await)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for RoderMcpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("roder", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Roder runs coding tasks: run_task starts one in a workspace and returns the answer and a thread id; continue_thread goes on with that thread.",
            )
    }
}

/// How a turn ended, as the MCP client reads it.
enum Ending {
    Completed {
        answer: String,
        incomplete: Option<String>,
    },
    Failed(String),
    Interrupted,
    DeadlineExceeded,
}

impl RoderMcpServer {
    /// Runs one turn of `thread_id` and waits for its end. If the client
    /// gives up on the call (the future is dropped), the turn is interrupted
    /// rather than left running unseen.
    async fn turn(
        &self,
        thread_id: &str,
        prompt: &str,
        workspace: Option<&std::path::Path>,
        timeout_seconds: Option<u64>,
    ) -> CallToolResult {
        // Subscribed before the turn starts, so its end cannot be missed.
        let mut events = self.runtime.subscribe_events();
        let mut request = StartTurnRequest::new(thread_id, prompt);
        if let Some(workspace) = workspace {
            request.workspace = workspace.display().to_string();
        }
        let turn_id = match self.runtime.start_turn(request).await {
            Ok(turn_id) => turn_id,
            Err(error) => {
                return outcome(thread_id, None, Ending::Failed(format!("{error:#}")));
            }
        };
        let mut guard = InterruptOnDrop {
            runtime: self.runtime.clone(),
            thread_id: thread_id.to_string(),
            turn_id: turn_id.clone(),
            armed: true,
        };
        let wait = wait_for_end(&self.runtime, &mut events, thread_id, &turn_id);
        let ending = match timeout_seconds {
            Some(seconds) => match tokio::time::timeout(Duration::from_secs(seconds), wait).await {
                Ok(ending) => ending,
                Err(_) => {
                    // Interrupt, then report how the turn really ended.
                    if let Err(error) = self.runtime.interrupt_turn(thread_id, &turn_id).await {
                        tracing::debug!("interrupting turn {turn_id}: {error:#}");
                    }
                    wait_for_end(&self.runtime, &mut events, thread_id, &turn_id).await
                }
            },
            None => wait.await,
        };
        guard.armed = false;
        outcome(thread_id, Some(&turn_id), ending)
    }
}

/// Follows the bus (or, after falling behind, the persisted log) until
/// `turn_id` ends.
async fn wait_for_end(
    runtime: &Runtime,
    events: &mut tokio::sync::broadcast::Receiver<roder_api::events::EventEnvelope>,
    thread_id: &str,
    turn_id: &str,
) -> Ending {
    loop {
        let batch = match events.recv().await {
            Ok(envelope) if envelope.thread_id == thread_id => vec![envelope],
            Ok(_) => continue,
            Err(RecvError::Lagged(_)) => match runtime.read_thread_events(thread_id, 0).await {
                Ok(page) => page.events,
                Err(error) => return Ending::Failed(format!("cannot read the thread: {error:#}")),
            },
            Err(RecvError::Closed) => {
                return Ending::Failed("the runtime stopped before the turn ended".into());
            }
        };
        for envelope in batch {
            if envelope.turn_id.as_deref() != Some(turn_id) {
                continue;
            }
            match envelope.event {
                RoderEvent::TurnCompleted(done) => {
                    return Ending::Completed {
                        answer: done.final_message.unwrap_or_default(),
                        incomplete: done.incomplete.map(|reason| reason.describe()),
                    };
                }
                RoderEvent::TurnFailed(failed) => return Ending::Failed(failed.error),
                RoderEvent::TurnInterrupted(_) => return Ending::Interrupted,
                RoderEvent::TurnDeadlineExceeded(_) => return Ending::DeadlineExceeded,
                _ => {}
            }
        }
    }
}

fn outcome(thread_id: &str, turn_id: Option<&str>, ending: Ending) -> CallToolResult {
    let (status, answer, problem) = match ending {
        Ending::Completed { answer, incomplete } => ("completed", answer, incomplete),
        Ending::Failed(error) => ("failed", String::new(), Some(error)),
        Ending::Interrupted => (
            "interrupted",
            String::new(),
            Some("the turn was interrupted".into()),
        ),
        Ending::DeadlineExceeded => (
            "deadline_exceeded",
            String::new(),
            Some("the turn's deadline passed".into()),
        ),
    };
    let text = match (&problem, status) {
        (None, _) => answer.clone(),
        (Some(incomplete), "completed") => {
            format!("{answer}\n\n[incomplete answer: {incomplete}] (thread {thread_id})")
        }
        (Some(problem), _) => format!("{problem} (thread {thread_id})"),
    };
    let mut result = if status == "completed" {
        CallToolResult::success(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::error(vec![ContentBlock::text(text)])
    };
    result.structured_content = Some(serde_json::json!({
        "threadId": thread_id,
        "turnId": turn_id,
        "status": status,
        "answer": answer,
        "problem": problem,
    }));
    result
}

/// A refused call (bad workspace, unknown runner or thread): an error
/// result the calling agent can read and correct.
fn refusal(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// Interrupts a turn whose caller went away before it ended.
struct InterruptOnDrop {
    runtime: Arc<Runtime>,
    thread_id: String,
    turn_id: String,
    armed: bool,
}

impl Drop for InterruptOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // No async runtime left (the process is exiting): nothing to do, the
        // next turn on the thread closes this one.
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let runtime = self.runtime.clone();
        let (thread_id, turn_id) = (self.thread_id.clone(), self.turn_id.clone());
        handle.spawn(async move {
            if let Err(error) = runtime.interrupt_turn(&thread_id, &turn_id).await {
                tracing::debug!("interrupting abandoned turn {turn_id}: {error:#}");
            }
        });
    }
}

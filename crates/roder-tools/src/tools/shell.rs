//! `shell`: run a command string through the workspace's shell.

use serde::Deserialize;
use serde_json::{Value, json};

use roder_api::approval::{CallPreview, CallScope, ToolEffects};
use roder_api::tools::ToolExecutionContext;

use crate::tool::{CodingTool, ToolError, ToolOutput, object_schema};
use crate::tools::command::{self, exit_code, exit_code_text, signal, wall_time};
use crate::workspace::{CommandEnd, Workspace};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    command: String,
    workdir: Option<String>,
    timeout_ms: Option<u64>,
}

pub(crate) struct Shell;

impl CodingTool for Shell {
    type Args = Args;
    const NAME: &'static str = "shell";
    const EFFECTS: ToolEffects = ToolEffects::EXECUTE;

    fn description() -> &'static str {
        "Run a shell command in the workspace root (or `workdir` inside it) and return its exit code \
         and combined stdout/stderr. A non-zero exit code is reported, not treated as a tool \
         failure. Default timeout 120000 ms; the process group is killed on timeout or interrupt. \
         Long output keeps its beginning and end."
    }

    fn parameters() -> Value {
        object_schema(
            json!({
                "command": {"type": "string", "description": "Command line, run by the workspace's shell (`sh -c` by default)."},
                "workdir": {"type": "string", "description": "Working directory inside the workspace. Default: the root."},
                "timeout_ms": {"type": "integer", "minimum": 1, "description": "Kill the command after this many milliseconds. Default 120000."}
            }),
            &["command"],
        )
    }

    fn scope(args: &Args) -> CallScope {
        CallScope::command(args.command.as_str())
    }

    async fn preview(
        workspace: Workspace,
        ctx: &ToolExecutionContext,
        args: Args,
    ) -> Result<Option<CallPreview>, ToolError> {
        command::preview(&workspace, ctx, &args.command, args.workdir.as_deref())
            .await
            .map(Some)
    }

    async fn run(
        workspace: Workspace,
        ctx: &ToolExecutionContext,
        args: Args,
    ) -> Result<ToolOutput, ToolError> {
        let ran = command::run(
            &workspace,
            ctx,
            &args.command,
            args.workdir.as_deref(),
            args.timeout_ms,
        )
        .await?;
        let outcome = &ran.outcome;
        let data = json!({
            "exit_code": exit_code(outcome.end),
            "signal": signal(outcome.end),
            "wall_time_seconds": outcome.wall.as_secs_f64(),
            "timeout_ms": ran.timeout_ms,
            "omitted_bytes": outcome.output.omitted_bytes,
        });
        let body = format!(
            "Wall time: {}\nOutput:\n{}",
            wall_time(outcome),
            outcome.output.text
        );
        Ok(match outcome.end {
            CommandEnd::Interrupted => ToolOutput::failed("interrupted", data),
            CommandEnd::TimedOut => ToolOutput::failed(
                format!(
                    "command timed out after {} ms and was killed\n{body}",
                    ran.timeout_ms.unwrap_or_default()
                ),
                data,
            ),
            CommandEnd::Exited {
                signal: Some(signal),
                ..
            } => ToolOutput::ok(
                format!("Exit code: none (killed by signal {signal})\n{body}"),
                data,
            ),
            end => ToolOutput::ok(format!("Exit code: {}\n{body}", exit_code_text(end)), data),
        })
    }
}

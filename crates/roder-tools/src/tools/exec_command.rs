//! `exec_command`: a one-shot command with a fixed, Codex-shaped report.

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
    cmd: String,
    workdir: Option<String>,
    timeout_ms: Option<u64>,
}

pub(crate) struct ExecCommand;

/// The status line of the report.
fn status(end: CommandEnd) -> &'static str {
    match end {
        CommandEnd::Exited { code: Some(0), .. } => "completed",
        CommandEnd::TimedOut => "timed_out",
        _ => "failed",
    }
}

impl CodingTool for ExecCommand {
    type Args = Args;
    const NAME: &'static str = "exec_command";
    const EFFECTS: ToolEffects = ToolEffects::EXECUTE;

    fn description() -> &'static str {
        "Run one command to completion in the workspace root (or `workdir` inside it). Reports \
         `Exit code`, `Status` (completed, failed or timed_out), `Wall time` and the combined \
         output. Default timeout 120000 ms; the process group is killed on timeout or interrupt."
    }

    fn parameters() -> Value {
        object_schema(
            json!({
                "cmd": {"type": "string", "description": "Command line, run by the workspace's shell (`sh -c` by default)."},
                "workdir": {"type": "string", "description": "Working directory inside the workspace. Default: the root."},
                "timeout_ms": {"type": "integer", "minimum": 1, "description": "Kill the command after this many milliseconds. Default 120000."}
            }),
            &["cmd"],
        )
    }

    fn scope(args: &Args) -> CallScope {
        CallScope::command(args.cmd.as_str())
    }

    async fn preview(
        workspace: Workspace,
        ctx: &ToolExecutionContext,
        args: Args,
    ) -> Result<Option<CallPreview>, ToolError> {
        command::preview(&workspace, ctx, &args.cmd, args.workdir.as_deref())
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
            &args.cmd,
            args.workdir.as_deref(),
            args.timeout_ms,
        )
        .await?;
        let outcome = &ran.outcome;
        if outcome.end == CommandEnd::Interrupted {
            return Ok(ToolOutput::failed(
                "interrupted",
                json!({"status": "interrupted", "wall_time_seconds": outcome.wall.as_secs_f64()}),
            ));
        }
        let status = status(outcome.end);
        let text = format!(
            "Exit code: {}\nStatus: {status}\nWall time: {}\nOutput:\n{}",
            exit_code_text(outcome.end),
            wall_time(outcome),
            outcome.output.text
        );
        let data = json!({
            "exit_code": exit_code(outcome.end),
            "signal": signal(outcome.end),
            "status": status,
            "wall_time_seconds": outcome.wall.as_secs_f64(),
            "timeout_ms": ran.timeout_ms,
            "omitted_bytes": outcome.output.omitted_bytes,
        });
        Ok(if status == "completed" {
            ToolOutput::ok(text, data)
        } else {
            ToolOutput::failed(text, data)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        let exited = |code| CommandEnd::Exited { code, signal: None };
        assert_eq!(status(exited(Some(0))), "completed");
        assert_eq!(status(exited(Some(1))), "failed");
        assert_eq!(status(exited(None)), "failed");
        assert_eq!(status(CommandEnd::TimedOut), "timed_out");
    }
}

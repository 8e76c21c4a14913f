//! What `shell` and `exec_command` share: building the request from the
//! context's shell and deadline, and describing the outcome.

use roder_api::approval::{CallPreview, CommandPreview, RunsOn};
use roder_api::tools::ToolExecutionContext;

use crate::output::DEFAULT_OUTPUT_CAP;
use crate::tool::{ToolError, tool_bail};
use crate::workspace::{CommandEnd, CommandOutcome, CommandRequest, Workspace};

/// Timeout of a command when the model names none: long enough for a build
/// or a test run, short enough that a command waiting on input cannot hold a
/// turn forever. A turn deadline shortens it further.
pub(crate) const DEFAULT_TIMEOUT_MS: u64 = 120_000;

/// A command that ran, with the timeout it ran under.
pub(crate) struct Ran {
    pub outcome: CommandOutcome,
    pub timeout_ms: Option<u64>,
}

/// Runs `command` through the context's shell in the workspace root (or
/// `workdir` inside it).
pub(crate) async fn run(
    workspace: &Workspace,
    ctx: &ToolExecutionContext,
    command: &str,
    workdir: Option<&str>,
    requested_timeout_ms: Option<u64>,
) -> Result<Ran, ToolError> {
    if command.trim().is_empty() {
        tool_bail!("command must not be empty");
    }
    if requested_timeout_ms == Some(0) {
        tool_bail!("timeout_ms must be at least 1");
    }
    if ctx.cancellation.is_cancelled() {
        // The turn is already over: start nothing.
        tool_bail!("interrupted");
    }
    let cwd = workspace.command_cwd(workdir).await?;
    let timeout_ms =
        ctx.command_timeout_ms(Some(requested_timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)));
    let request = CommandRequest {
        program: ctx.command_shell.program.clone(),
        args: ctx.command_shell.argv(command),
        cwd,
        // What the command runs joins the turn's trace.
        env: ctx
            .traceparent
            .iter()
            .map(|traceparent| ("TRACEPARENT".to_string(), traceparent.clone()))
            .collect(),
        timeout_ms,
    };
    let outcome = workspace
        .run(request, &ctx.cancellation, DEFAULT_OUTPUT_CAP)
        .await?;
    Ok(Ran {
        outcome,
        timeout_ms,
    })
}

/// The command as it would run: its line, working directory and where.
pub(crate) async fn preview(
    workspace: &Workspace,
    ctx: &ToolExecutionContext,
    command: &str,
    workdir: Option<&str>,
) -> Result<CallPreview, ToolError> {
    let cwd = workspace.command_cwd(workdir).await?;
    Ok(CallPreview::for_command(CommandPreview {
        command: command.to_string(),
        cwd: cwd.display().to_string(),
        runs_on: RunsOn::of(&ctx.workspace),
    }))
}

pub(crate) fn wall_time(outcome: &CommandOutcome) -> String {
    format!("{:.3} seconds", outcome.wall.as_secs_f64())
}

/// The exit code as the model reads it: the number, or `none` when the
/// command did not exit by itself.
pub(crate) fn exit_code_text(end: CommandEnd) -> String {
    match end {
        CommandEnd::Exited {
            code: Some(code), ..
        } => code.to_string(),
        _ => "none".to_string(),
    }
}

pub(crate) fn exit_code(end: CommandEnd) -> Option<i32> {
    match end {
        CommandEnd::Exited { code, .. } => code,
        _ => None,
    }
}

pub(crate) fn signal(end: CommandEnd) -> Option<i32> {
    match end {
        CommandEnd::Exited { signal, .. } => signal,
        _ => None,
    }
}

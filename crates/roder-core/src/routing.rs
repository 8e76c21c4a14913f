//! How one tool call reaches its executor. The one file that answers "how
//! does a tool reach a runner".
//!
//! 1. Arguments arrive parsed (`turn/tool_call.rs`; malformed JSON is an
//!    error result before routing).
//! 2. Policy and allowlists are checked.
//! 3. External (client-declared) tools go to the client and never provision
//!    a runner.
//! 4. Workspace tools (decided by name) run:
//!    * bound thread: in the thread's runner session, provisioned lazily and
//!      once; never on the host, even when provisioning fails;
//!    * unbound thread: in the local workspace, unless local execution is
//!      disabled, in which case nothing on the host is touched.
//!
//!    Either way serialized per workspace (in-process lock, then the
//!    provider's lease), with the deadline's remaining seconds measured after
//!    both waits.
//! 5. Any other tool runs directly.
//!
//! Tools the client declared for the thread (`thread_tools.rs`) take the
//! same path as installed ones: a declared tool that `runs_in_workspace`
//! (an MCP server inside the sandbox) goes to the runner like `shell`.

use std::path::Path;

use roder_api::events::{ExternalToolCallRequested, ExternalToolCallResolved, RoderEvent};
use roder_api::inference::ToolCallCompleted as ModelToolCall;
use roder_api::remote_runner::{RemoteWorkspace, ThreadRunnerBinding};
use roder_api::tools::{
    FileChange, LocalWorkspace, ToolCall, ToolExecutionContext, ToolExecutor, ToolResult,
    ToolWorkspace, is_workspace_tool,
};

use crate::policy;
use crate::runner::execution_lock::{local_key, session_key};
use crate::runner::lease::LeaseGuard;
use crate::turn::context::TurnContext;
use crate::turn::plan::TurnWorkspace;

/// A tool's result and whether it ran on this host.
pub(crate) struct RoutedResult {
    pub result: ToolResult,
    pub local: bool,
}

pub(crate) async fn execute(
    ctx: TurnContext<'_>,
    call: &ModelToolCall,
    arguments: serde_json::Value,
) -> RoutedResult {
    match route(ctx, call, arguments).await {
        Ok((mut result, local)) => {
            // The model pairs results with calls by id: keep them the call's.
            result.id = call.id.clone();
            result.name = call.name.clone();
            RoutedResult { result, local }
        }
        Err(error) => RoutedResult {
            result: ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                text: format!("{error:#}"),
                data: serde_json::Value::Null,
                is_error: true,
            },
            local: false,
        },
    }
}

/// File changes a tool reported in `data.file_changes`.
pub(crate) fn file_changes(result: &ToolResult) -> Vec<FileChange> {
    result
        .data
        .get("file_changes")
        .and_then(|changes| serde_json::from_value(changes.clone()).ok())
        .unwrap_or_default()
}

async fn route(
    ctx: TurnContext<'_>,
    call: &ModelToolCall,
    arguments: serde_json::Value,
) -> anyhow::Result<(ToolResult, bool)> {
    let TurnContext { runtime, plan } = ctx;
    policy::check(runtime, plan, &call.name).map_err(anyhow::Error::msg)?;
    if plan.is_external_tool(&call.name) {
        return Ok((external(ctx, call).await?, false));
    }
    let tool = plan
        .thread_tools
        .get(&call.name)
        .or_else(|| runtime.tools.get(&call.name))
        .ok_or_else(|| {
            let available: Vec<String> = policy::offered_tools(runtime, plan)
                .into_iter()
                .map(|spec| spec.name)
                .collect();
            anyhow::anyhow!(
                "unknown tool \"{}\" (available: {})",
                call.name,
                available.join(", ")
            )
        })?;
    let tool_call = ToolCall {
        id: call.id.clone(),
        name: call.name.clone(),
        arguments,
    };
    if !is_workspace_tool(&call.name) && !tool.runs_in_workspace() {
        let workspace = match &plan.workspace {
            TurnWorkspace::Local(root) => local_workspace(root),
            _ => ToolWorkspace::None,
        };
        let context = context(ctx, call, workspace);
        return Ok((tool.execute(context, tool_call).await?, false));
    }
    match &plan.workspace {
        TurnWorkspace::Disabled => anyhow::bail!(
            "local workspace execution is disabled for this runtime; tool \"{}\" needs a workspace, so bind the thread to a runner",
            call.name
        ),
        TurnWorkspace::Local(root) => {
            let _serial = runtime.execution_locks.lock(local_key(root)).await;
            let context = context(ctx, call, local_workspace(root));
            Ok((tool.execute(context, tool_call).await?, true))
        }
        TurnWorkspace::Runner(binding) => {
            let result = on_runner(ctx, call, tool.as_ref(), tool_call, binding).await?;
            Ok((result, false))
        }
    }
}

async fn on_runner(
    ctx: TurnContext<'_>,
    call: &ModelToolCall,
    tool: &dyn ToolExecutor,
    tool_call: ToolCall,
    binding: &ThreadRunnerBinding,
) -> anyhow::Result<ToolResult> {
    let TurnContext { runtime, plan } = ctx;
    // Provisioning runs on its own task; an interrupted turn stops waiting
    // for it without stranding it.
    let session = ctx
        .cancellable(runtime.runner_session(&plan.thread, &binding.destination))
        .await?;
    let state = session.state();
    let _serial = runtime
        .execution_locks
        .lock(session_key(&state.provider_id, &state.session_id))
        .await;
    let lease = LeaseGuard::acquire(session.as_ref(), &plan.deadline).await?;
    let workspace = ToolWorkspace::Remote(RemoteWorkspace {
        session: session.clone(),
        root: binding.workspace.clone(),
        read_roots: binding.read_roots.clone(),
    });
    let context = context(ctx, call, workspace);
    let result = lease.run(tool.execute(context, tool_call)).await;
    lease.release().await;
    result
}

/// The execution context, with the deadline measured now (after any
/// provisioning and lease waits).
fn context(
    ctx: TurnContext<'_>,
    call: &ModelToolCall,
    workspace: ToolWorkspace,
) -> ToolExecutionContext {
    let TurnContext { runtime, plan } = ctx;
    ToolExecutionContext {
        thread_id: plan.thread_id().to_string(),
        turn_id: plan.turn_id.clone(),
        call_id: call.id.clone(),
        workspace,
        remaining_deadline_seconds: plan.deadline.remaining_whole_seconds(),
        command_shell: runtime.config.command_shell.clone(),
        policy_mode: runtime.config.policy_mode,
        cancellation: plan.active.cancellation.clone(),
        sandbox: plan.sandbox.clone(),
        credential_vars: runtime.config.all_credential_vars(),
    }
}

fn local_workspace(root: &Path) -> ToolWorkspace {
    ToolWorkspace::Local(LocalWorkspace {
        root: root.to_path_buf(),
        read_roots: Vec::new(),
    })
}

/// Hands the call to the client and waits for its answer.
async fn external(ctx: TurnContext<'_>, call: &ModelToolCall) -> anyhow::Result<ToolResult> {
    let pending = ctx.runtime.external.register();
    let request_id = pending.request_id.clone();
    ctx.emit(RoderEvent::ExternalToolCallRequested(
        ExternalToolCallRequested {
            request_id: request_id.clone(),
            thread_id: ctx.thread_id(),
            turn_id: ctx.turn_id(),
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            arguments: call.arguments.clone(),
        },
    ))
    .await?;
    let resolution = ctx.cancellable(pending.wait()).await?;
    ctx.emit(RoderEvent::ExternalToolCallResolved(
        ExternalToolCallResolved {
            request_id,
            thread_id: ctx.thread_id(),
            turn_id: ctx.turn_id(),
            is_error: resolution.is_error,
        },
    ))
    .await?;
    Ok(ToolResult {
        id: call.id.clone(),
        name: call.name.clone(),
        text: resolution.output,
        data: serde_json::Value::Null,
        is_error: resolution.is_error,
    })
}

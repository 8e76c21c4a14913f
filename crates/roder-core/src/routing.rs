//! How one tool call reaches its executor. The one file that answers "how
//! does a tool reach a runner".
//!
//! 1. Arguments arrive parsed (`turn/tool_call.rs`; malformed JSON is an
//!    error result before routing).
//! 2. Allowlists are checked, then the call is decided (`policy.rs`): it
//!    runs, is refused, or asks a person with a preview computed where it
//!    would run (`approvals/ask.rs`). Its `ToolCallStarted`, recording who
//!    let it run, is persisted before it runs.
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

use roder_api::approval::{CallPreview, DecidedBy};
use roder_api::events::{
    ExternalToolCallRequested, ExternalToolCallResolved, RoderEvent, ToolCallStarted,
};
use roder_api::inference::ToolCallCompleted as ModelToolCall;
use roder_api::remote_runner::{RemoteWorkspace, ThreadRunnerBinding};
use roder_api::tools::{
    FileChange, LocalWorkspace, ToolCall, ToolExecutionContext, ToolExecutor, ToolResult,
    ToolWorkspace, is_workspace_tool,
};

use crate::approvals::ask::{self, Asked};
use crate::policy::{self, Verdict};
use crate::runner::execution_lock::{local_key, session_key};
use crate::runner::lease::LeaseGuard;
use crate::turn::context::TurnContext;
use crate::turn::plan::TurnWorkspace;

/// A tool's result, whether it ran on this host, whether the person who
/// refused it stopped the turn, and when it started (`None`: it never ran).
pub(crate) struct RoutedResult {
    pub result: ToolResult,
    pub local: bool,
    pub stop_turn: bool,
    pub started: Option<std::time::Instant>,
}

impl RoutedResult {
    /// A call that did not run: `text` is what the model reads.
    pub fn refused(call: &ModelToolCall, text: String, stop_turn: bool) -> Self {
        Self {
            result: error_result(call, text),
            local: false,
            stop_turn,
            started: None,
        }
    }
}

pub(crate) async fn execute(
    ctx: TurnContext<'_>,
    call: &ModelToolCall,
    arguments: serde_json::Value,
) -> RoutedResult {
    match route(ctx, call, arguments).await {
        Ok(mut routed) => {
            // The model pairs results with calls by id: keep them the call's.
            routed.result.id = call.id.clone();
            routed.result.name = call.name.clone();
            routed
        }
        Err(error) => RoutedResult::refused(call, format!("{error:#}"), false),
    }
}

fn error_result(call: &ModelToolCall, text: String) -> ToolResult {
    ToolResult {
        id: call.id.clone(),
        name: call.name.clone(),
        text,
        data: serde_json::Value::Null,
        is_error: true,
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

/// Where a tool's execution happens.
enum Placement<'a> {
    /// Not a workspace tool: runs as it is, with the local workspace if the
    /// thread has one.
    Direct(ToolWorkspace),
    Local(&'a Path),
    Runner(&'a ThreadRunnerBinding),
}

async fn route(
    ctx: TurnContext<'_>,
    call: &ModelToolCall,
    arguments: serde_json::Value,
) -> anyhow::Result<RoutedResult> {
    let TurnContext { runtime, plan } = ctx;
    policy::check(runtime, plan, &call.name).map_err(anyhow::Error::msg)?;
    policy::count_call(plan).map_err(anyhow::Error::msg)?;
    if plan.is_external_tool(&call.name) {
        if let Verdict::Refuse { reason, .. } = policy::decide_external(ctx, &call.name) {
            return Ok(RoutedResult::refused(call, reason, false));
        }
        let began = started(ctx, call, DecidedBy::ExternalTool).await?;
        return Ok(RoutedResult {
            result: external(ctx, call).await?,
            local: false,
            stop_turn: false,
            started: Some(began),
        });
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
    let placement = if !is_workspace_tool(&call.name) && !tool.runs_in_workspace() {
        Placement::Direct(match &plan.workspace {
            TurnWorkspace::Local(root) => local_workspace(root),
            _ => ToolWorkspace::None,
        })
    } else {
        match &plan.workspace {
            TurnWorkspace::Disabled => anyhow::bail!(
                "local workspace execution is disabled for this runtime; tool \"{}\" needs a workspace, so bind the thread to a runner",
                call.name
            ),
            TurnWorkspace::Local(root) => Placement::Local(root),
            TurnWorkspace::Runner(binding) => Placement::Runner(binding),
        }
    };
    let approved_by = match admit(ctx, call, tool.as_ref(), &tool_call, &placement).await? {
        Asked::Allowed(by) => by,
        Asked::Refused { text, stop_turn } => {
            return Ok(RoutedResult::refused(call, text, stop_turn));
        }
    };
    let began = started(ctx, call, approved_by).await?;
    let (result, local) = match placement {
        Placement::Direct(workspace) => {
            let context = context(ctx, call, workspace);
            (tool.execute(context, tool_call).await?, false)
        }
        Placement::Local(root) => {
            let _serial = runtime.execution_locks.lock(local_key(root)).await;
            let context = context(ctx, call, local_workspace(root));
            (tool.execute(context, tool_call).await?, true)
        }
        Placement::Runner(binding) => (
            on_runner(ctx, call, tool.as_ref(), tool_call, binding).await?,
            false,
        ),
    };
    Ok(RoutedResult {
        result,
        local,
        stop_turn: false,
        started: Some(began),
    })
}

/// Records that the call runs and who let it, before it runs; returns
/// when it started.
async fn started(
    ctx: TurnContext<'_>,
    call: &ModelToolCall,
    approved_by: DecidedBy,
) -> anyhow::Result<std::time::Instant> {
    tracing::Span::current().record("roder.tool.approved_by", approved_by.to_string());
    ctx.emit(RoderEvent::ToolCallStarted(ToolCallStarted {
        thread_id: ctx.thread_id(),
        turn_id: ctx.turn_id(),
        call_id: call.id.clone(),
        tool_name: call.name.clone(),
        approved_by: Some(approved_by),
    }))
    .await?;
    Ok(std::time::Instant::now())
}

/// Decides the call (`policy::decide`) and, when it asks, asks with the
/// preview computed in the call's workspace.
async fn admit(
    ctx: TurnContext<'_>,
    call: &ModelToolCall,
    tool: &dyn ToolExecutor,
    tool_call: &ToolCall,
    placement: &Placement<'_>,
) -> anyhow::Result<Asked> {
    let effects = tool.effects();
    let scope = match tool.call_scope(&tool_call.arguments) {
        Ok(scope) => scope,
        Err(error) => {
            return Ok(Asked::Refused {
                text: error,
                stop_turn: false,
            });
        }
    };
    let root = match placement {
        Placement::Local(root) => Some(*root),
        Placement::Runner(binding) => Some(Path::new(&binding.workspace)),
        Placement::Direct(ToolWorkspace::Local(local)) => Some(local.root.as_path()),
        Placement::Direct(_) => None,
    };
    let facts = policy::Call {
        tool_name: &call.name,
        effects,
        scope: &scope,
    };
    match policy::decide_in(ctx, facts, root) {
        Verdict::Run(by) => Ok(Asked::Allowed(by)),
        Verdict::Refuse { reason, .. } => Ok(Asked::Refused {
            text: reason,
            stop_turn: false,
        }),
        Verdict::Ask => {
            let preview = preview(ctx, call, tool, tool_call, placement).await;
            let subject = ask::Subject {
                call,
                effects,
                scope: &scope,
                workspace_root: root,
            };
            ask::ask(ctx, subject, preview).await
        }
    }
}

/// The call's preview, computed where it would run (provisioning the
/// runner if need be). A preview that fails still asks, saying why.
async fn preview(
    ctx: TurnContext<'_>,
    call: &ModelToolCall,
    tool: &dyn ToolExecutor,
    tool_call: &ToolCall,
    placement: &Placement<'_>,
) -> CallPreview {
    let runtime = ctx.runtime;
    let computed = match placement {
        Placement::Direct(workspace) => {
            tool.preview(context(ctx, call, workspace.clone()), tool_call)
                .await
        }
        Placement::Local(root) => {
            let _serial = runtime.execution_locks.lock(local_key(root)).await;
            tool.preview(context(ctx, call, local_workspace(root)), tool_call)
                .await
        }
        Placement::Runner(binding) => {
            match ctx
                .cancellable(runtime.runner_session(&ctx.plan.thread, &binding.destination))
                .await
            {
                Ok(session) => {
                    let state = session.state();
                    let _serial = runtime
                        .execution_locks
                        .lock(session_key(&state.provider_id, &state.session_id))
                        .await;
                    let workspace = remote_workspace(session.clone(), binding);
                    tool.preview(context(ctx, call, workspace), tool_call).await
                }
                Err(error) => Err(error),
            }
        }
    };
    computed.unwrap_or_else(|error| {
        let mut preview = CallPreview::for_arguments(&call.name, tool_call.arguments.clone());
        preview.summary = format!("{} (no preview: {error:#})", preview.summary);
        preview
    })
}

fn remote_workspace(
    session: std::sync::Arc<dyn roder_api::remote_runner::RemoteRunnerSession>,
    binding: &ThreadRunnerBinding,
) -> ToolWorkspace {
    ToolWorkspace::Remote(RemoteWorkspace {
        session,
        root: binding.workspace.clone(),
        read_roots: binding.read_roots.clone(),
    })
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
    let workspace = remote_workspace(session.clone(), binding);
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
    let span = tracing::Span::current();
    match &workspace {
        ToolWorkspace::Remote(remote) => {
            let state = remote.session.state();
            span.record("roder.runs_on", "runner");
            span.record("roder.runner.provider", state.provider_id.as_str());
            span.record("roder.runner.session_id", state.session_id.as_str());
        }
        ToolWorkspace::Local(_) | ToolWorkspace::None => {
            span.record("roder.runs_on", "host");
        }
    }
    ToolExecutionContext {
        thread_id: plan.thread_id().to_string(),
        turn_id: plan.turn_id.clone(),
        call_id: call.id.clone(),
        workspace,
        remaining_deadline_seconds: plan.deadline.remaining_whole_seconds(),
        command_shell: runtime.config.command_shell.clone(),
        policy_mode: ctx.mode(),
        cancellation: plan.active.cancellation.clone(),
        sandbox: plan.sandbox.clone(),
        credential_vars: runtime.config.all_credential_vars(),
        traceparent: crate::trace::traceparent(runtime),
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

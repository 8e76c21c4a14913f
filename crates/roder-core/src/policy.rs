//! Which tools a turn is offered and may run.
//!
//! Three filters, all by tool name: the allowlists (runtime and thread; each
//! applies when non-empty), the policy mode (`ReadOnly` drops tools that
//! change things), and the workspace (a thread with nowhere to run file and
//! shell tools is not offered them).

use roder_api::tools::{ToolSpec, is_read_only_tool, is_workspace_tool};

use crate::runtime::Runtime;
use crate::turn::plan::{TurnPlan, TurnWorkspace};

/// Why a call may not run, as the model will read it.
pub(crate) fn check(runtime: &Runtime, plan: &TurnPlan, name: &str) -> Result<(), String> {
    let lists = [
        ("runtime", &runtime.config.tool_allowlist),
        ("thread", &plan.thread_allowlist),
    ];
    for (scope, list) in lists {
        if !list.is_empty() && !list.iter().any(|allowed| allowed == name) {
            return Err(format!(
                "tool \"{name}\" is not in the {scope} tool allowlist ({})",
                list.join(", ")
            ));
        }
    }
    if !runtime.config.policy_mode.allows_mutation()
        && is_workspace_tool(name)
        && !is_read_only_tool(name)
    {
        return Err(format!(
            "tool \"{name}\" changes the workspace, which the read-only policy forbids"
        ));
    }
    Ok(())
}

pub(crate) fn offered_tools(runtime: &Runtime, plan: &TurnPlan) -> Vec<ToolSpec> {
    let has_workspace = !matches!(plan.workspace, TurnWorkspace::Disabled);
    runtime
        .tools
        .specs()
        .into_iter()
        .filter(|spec| has_workspace || !is_workspace_tool(&spec.name))
        .chain(plan.external_tools.iter().cloned())
        .chain(plan.thread_tools.specs())
        .filter(|spec| check(runtime, plan, &spec.name).is_ok())
        .collect()
}

//! Tools the model can call: their specs, executors, registry and the context
//! an execution gets.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::approval::{CallPreview, CallScope, ToolEffects};
use crate::command_shell::CommandShell;
use crate::extension::ToolProviderId;
use crate::policy_mode::PolicyMode;
use crate::remote_runner::RemoteWorkspace;
use crate::sandbox_policy::SandboxPolicy;

/// Tools that read or change a workspace, decided by name whoever registered
/// them. A runner-bound thread provisions its runner for these and only these;
/// with local workspaces disabled an unbound thread may not run them.
pub const WORKSPACE_TOOL_NAMES: &[&str] = &[
    "read_file",
    "write_file",
    "edit",
    "multi_edit",
    "apply_patch",
    "list_files",
    "glob",
    "grep",
    "shell",
    "exec_command",
];

pub fn is_workspace_tool(name: &str) -> bool {
    WORKSPACE_TOOL_NAMES.contains(&name)
}

pub use crate::deadline::{COMMAND_FINALIZATION_RESERVE_MS, MIN_COMMAND_TIMEOUT_MS};

/// What the model is told about a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// One call as the executor receives it: arguments already parsed as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: serde_json::Value,
}

/// What the model gets back. `is_error` results are normal results: the model
/// reads them and can correct itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub id: String,
    pub name: String,
    pub text: String,
    #[serde(default)]
    pub data: serde_json::Value,
    pub is_error: bool,
}

impl ToolResult {
    pub fn ok(call: &ToolCall, text: impl Into<String>, data: serde_json::Value) -> Self {
        Self {
            id: call.id.clone(),
            name: call.name.clone(),
            text: text.into(),
            data,
            is_error: false,
        }
    }

    pub fn error(call: &ToolCall, text: impl Into<String>) -> Self {
        Self {
            id: call.id.clone(),
            name: call.name.clone(),
            text: text.into(),
            data: serde_json::Value::Null,
            is_error: true,
        }
    }
}

/// A file change a tool made, reported in `ToolResult::data["file_changes"]`
/// so the runtime can publish a preview of local edits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: String,
    /// Unified diff of the change.
    pub diff: String,
}

/// A local directory tools work in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalWorkspace {
    pub root: PathBuf,
    /// Extra absolute paths reads may resolve under.
    pub read_roots: Vec<PathBuf>,
}

/// Where a tool execution's workspace is.
#[derive(Clone)]
pub enum ToolWorkspace {
    /// A directory on this host.
    Local(LocalWorkspace),
    /// A runner session; paths are runner paths under `root`.
    Remote(RemoteWorkspace),
    /// No workspace at all: file and process tools must refuse.
    None,
}

impl std::fmt::Debug for ToolWorkspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolWorkspace::Local(local) => f.debug_tuple("Local").field(local).finish(),
            ToolWorkspace::Remote(remote) => f
                .debug_struct("Remote")
                .field("provider_id", &remote.session.state().provider_id)
                .field("root", &remote.root)
                .finish(),
            ToolWorkspace::None => f.write_str("None"),
        }
    }
}

/// Everything an execution may need besides its arguments.
#[derive(Debug, Clone)]
pub struct ToolExecutionContext {
    pub thread_id: String,
    pub turn_id: String,
    pub call_id: String,
    pub workspace: ToolWorkspace,
    /// Whole seconds left before the turn's deadline, measured just before the
    /// tool starts (after provisioning and lease waits). `None`: no deadline.
    pub remaining_deadline_seconds: Option<u64>,
    pub command_shell: CommandShell,
    /// The mode the call runs under (the turn's, else the thread's, else the
    /// runtime's). The runtime decided approval before the call; tools only
    /// read it for what the mode lets files tools touch (`.git` under
    /// `bypass`) and to refuse changes under `plan`.
    pub policy_mode: PolicyMode,
    /// Cancelled when the turn is interrupted; long-running tools stop.
    pub cancellation: CancellationToken,
    /// How commands of a local workspace are confined (a runner session
    /// received its thread's policy when it was created).
    pub sandbox: SandboxPolicy,
    /// Variables holding a configured provider's credential: never in a
    /// command's environment, whatever the policy passes.
    pub credential_vars: Vec<String>,
    /// The W3C `traceparent` of this call's span when the turn is traced:
    /// commands get it as `TRACEPARENT`, so what they run joins the trace.
    pub traceparent: Option<String>,
}

impl ToolExecutionContext {
    /// A context for `workspace` with no deadline, the default shell and policy.
    pub fn for_workspace(workspace: ToolWorkspace) -> Self {
        Self {
            thread_id: String::new(),
            turn_id: String::new(),
            call_id: String::new(),
            workspace,
            remaining_deadline_seconds: None,
            command_shell: CommandShell::default(),
            policy_mode: PolicyMode::default(),
            cancellation: CancellationToken::new(),
            sandbox: SandboxPolicy::default(),
            credential_vars: crate::sandbox_policy::KNOWN_CREDENTIAL_VARS
                .iter()
                .map(|name| name.to_string())
                .collect(),
            traceparent: None,
        }
    }

    /// The timeout a command gets: what the model asked for, capped so the turn
    /// keeps [`COMMAND_FINALIZATION_RESERVE_MS`] after it, never under
    /// [`MIN_COMMAND_TIMEOUT_MS`].
    pub fn command_timeout_ms(&self, requested_ms: Option<u64>) -> Option<u64> {
        crate::deadline::command_timeout_ms(self.remaining_deadline_seconds, requested_ms)
    }

    pub fn remaining_deadline(&self) -> Option<Duration> {
        self.remaining_deadline_seconds.map(Duration::from_secs)
    }
}

/// One tool.
#[async_trait::async_trait]
pub trait ToolExecutor: Send + Sync + 'static {
    fn spec(&self) -> ToolSpec;

    /// Whether this tool runs in the thread's workspace although its name is
    /// not in [`WORKSPACE_TOOL_NAMES`]: a runner-bound thread then provisions
    /// its runner and passes the session (`ToolWorkspace::Remote`), as for
    /// the builtin workspace tools. An MCP server placed in the runner says
    /// yes. Default: no.
    fn runs_in_workspace(&self) -> bool {
        false
    }

    /// What this tool does to the world. Approvals are decided from this
    /// declaration, never from the tool's name. Default: it writes files and
    /// runs commands ([`ToolEffects::UNDECLARED`]), so a tool that says
    /// nothing always asks where asking is on.
    fn effects(&self) -> ToolEffects {
        ToolEffects::UNDECLARED
    }

    /// What one call would touch, read from its arguments alone (no I/O):
    /// the command line it runs, the paths it changes. Allow and deny rules
    /// match on it. `Err`: the arguments are invalid, so the call fails
    /// without doing anything (the text is the model's error result) and
    /// nobody is asked about it. Default: nothing known, so only rules
    /// about the whole tool apply.
    fn call_scope(&self, arguments: &serde_json::Value) -> Result<CallScope, String> {
        let _ = arguments;
        Ok(CallScope::default())
    }

    /// What a person deciding the call sees: the command, its working
    /// directory and where it runs, or the diff an edit would make. Computed
    /// in the call's workspace (`ctx`) without changing anything. Default:
    /// the arguments.
    async fn preview(
        &self,
        ctx: ToolExecutionContext,
        call: &ToolCall,
    ) -> anyhow::Result<CallPreview> {
        let _ = ctx;
        Ok(CallPreview::for_arguments(
            &call.name,
            call.arguments.clone(),
        ))
    }

    /// Runs one call. `Err` is reported to the model as an error result; it
    /// never fails the turn.
    async fn execute(
        &self,
        ctx: ToolExecutionContext,
        call: ToolCall,
    ) -> anyhow::Result<ToolResult>;
}

/// Registers a set of tools (a builtin bundle, an MCP server, ...).
pub trait ToolContributor: Send + Sync + 'static {
    fn id(&self) -> ToolProviderId;

    fn contribute(&self, registry: &mut ToolRegistry) -> anyhow::Result<()>;
}

/// Tools by name. Names are unique: a second registration is an error, never a
/// silent replacement.
#[derive(Default, Clone)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn ToolExecutor>>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&mut self, tool: Arc<dyn ToolExecutor>) -> anyhow::Result<()> {
        let name = tool.spec().name;
        if self.tools.contains_key(&name) {
            anyhow::bail!("tool \"{name}\" is already registered");
        }
        self.tools.insert(name, tool);
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn ToolExecutor>> {
        self.tools.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// Every tool, by name.
    pub fn executors(&self) -> impl Iterator<Item = &Arc<dyn ToolExecutor>> + '_ {
        self.tools.values()
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|tool| tool.spec()).collect()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str);

    #[async_trait::async_trait]
    impl ToolExecutor for Named {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: self.0.to_string(),
                description: String::new(),
                parameters: serde_json::json!({"type": "object"}),
            }
        }

        async fn execute(
            &self,
            _ctx: ToolExecutionContext,
            call: ToolCall,
        ) -> anyhow::Result<ToolResult> {
            Ok(ToolResult::ok(&call, "", serde_json::Value::Null))
        }
    }

    #[test]
    fn duplicate_tool_names_are_rejected() {
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(Named("shell"))).unwrap();
        let error = registry.register(Arc::new(Named("shell"))).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("\"shell\" is already registered")
        );
        assert_eq!(registry.len(), 1);
    }

    #[test]
    fn command_timeout_keeps_the_finalization_reserve() {
        let mut ctx = ToolExecutionContext::for_workspace(ToolWorkspace::None);
        assert_eq!(ctx.command_timeout_ms(None), None);
        assert_eq!(ctx.command_timeout_ms(Some(5_000)), Some(5_000));
        ctx.remaining_deadline_seconds = Some(31);
        assert_eq!(ctx.command_timeout_ms(None), Some(1_000));
        ctx.remaining_deadline_seconds = Some(10);
        assert_eq!(ctx.command_timeout_ms(Some(60_000)), Some(1_000));
        ctx.remaining_deadline_seconds = Some(100);
        assert_eq!(ctx.command_timeout_ms(Some(60_000)), Some(60_000));
        assert_eq!(ctx.command_timeout_ms(Some(90_000)), Some(70_000));
    }
}

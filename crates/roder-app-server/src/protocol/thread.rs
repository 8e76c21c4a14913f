//! `thread/*`: create, subscribe, read, list, page through events, archive.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::event::ThreadEvent;
use super::runner::RunnerState;
use super::workdir::{WorkdirClaimParams, WorkdirsCreateParams};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadStartParams {
    /// Local workspace directory (default: the server's configured
    /// workspace, else its current directory). Unused by runner-bound threads.
    #[serde(default)]
    pub workspace: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    /// Inference engine id (default: the server's).
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    /// When non-empty, the only tools this thread may use.
    #[serde(default)]
    pub tool_allowlist: Vec<String>,
    #[serde(default)]
    pub developer_instructions: Option<String>,
    /// Tools this client runs itself: calls arrive as
    /// `external_tool_call_requested` events, answers go to `tools/resolve`.
    #[serde(default)]
    pub external_tools: Vec<ExternalToolSpec>,
    /// Run the thread's workspace tools in this runner.
    #[serde(default)]
    pub runner: Option<RunnerSelection>,
    /// Give the thread its own working directory (a git worktree). Excludes
    /// `runner`: the working directory's provider is the runner.
    #[serde(default)]
    pub workdir: Option<WorkdirSelection>,
    /// MCP servers for this thread only, by name: each `{command, args?,
    /// env?, cwd?, placement?}` or `{url}`, plus `enabledTools`,
    /// `disabledTools`, `startupTimeoutSec`, `toolTimeoutSec`, `enabled`
    /// (the keys of a `[mcp_servers.NAME]` table). Never persisted: after
    /// this server restarts, declare them again with `thread/resume`.
    /// Started before the answer, which lists each one's state in
    /// `toolSources`; one that fails to start fails nothing else.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, Value>>")]
    pub mcp_servers: Option<Value>,
    /// The thread's own approval mode (default: the server's).
    #[serde(default)]
    pub policy_mode: Option<super::PolicyModeName>,
    /// `required`: asks wait for an approver to follow the thread.
    #[serde(default)]
    pub approvals: Option<super::ApprovalRequirementName>,
    /// The thread's own allow and deny rules.
    #[serde(default)]
    pub approval_rules: Option<super::ApprovalRulesInfo>,
    /// The agent profile the thread runs as, resolved now and kept with the
    /// thread (later turns and resumes never resolve it again). The other
    /// fields here win over the profile's, and each override is recorded.
    #[serde(default)]
    pub profile: Option<ProfileSelection>,
}

/// `thread/start {profile}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileSelection {
    /// `builtin:NAME`, a name (looked up in `archive`, the workspace's
    /// `.roder/profiles`, then the server's), a path; empty: the server's
    /// `default_profile`, else `builtin:default`.
    #[serde(default)]
    pub selector: String,
    #[serde(default)]
    pub archive: Option<ProfileArchive>,
}

/// A profile archive, verified against `digest` and `size` before use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileArchive {
    /// Fetched over HTTP (revalidated with its ETag, cached by digest).
    #[serde(default)]
    pub url: Option<String>,
    /// Or the archive itself, base64.
    #[serde(default)]
    pub data: Option<String>,
    /// Its `roder-bundle.toml` id (empty: whatever it says).
    #[serde(default)]
    pub id: String,
    /// `sha256:<hex>` of the archive's bytes.
    pub digest: String,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExternalToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    #[serde(default = "empty_object_schema")]
    pub parameters: Value,
}

fn empty_object_schema() -> Value {
    serde_json::json!({ "type": "object", "properties": {} })
}

/// A runner for the thread. Persisted with the thread: `config` must not
/// hold secrets (providers read credentials from their environment).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunnerSelection {
    /// An installed provider (see `runners/list`).
    pub provider_id: String,
    #[serde(default)]
    pub config: Value,
    /// Absolute path on the runner that is the thread's workspace root.
    pub workspace: String,
    /// Extra absolute runner paths reads may resolve under.
    #[serde(default)]
    pub read_roots: Vec<String>,
}

/// Materialize a new working directory for the thread, or claim one that
/// exists (see `workdirs/*`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum WorkdirSelection {
    /// Materialized now; rolled back if the thread cannot be created.
    Request(WorkdirsCreateParams),
    /// An existing one; kept whatever happens.
    Claim(WorkdirClaimParams),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResult {
    pub thread: ThreadInfo,
    /// How each of the `mcpServers` given came up (absent when none were).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_sources: Vec<ToolSource>,
}

/// One tool source declared for a thread (an entry of `mcpServers`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolSource {
    pub name: String,
    pub state: ToolSourceState,
    /// Its tools' names as the model sees them (`mcp__NAME__TOOL`).
    pub tools: Vec<String>,
    /// Why it is not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolSourceState {
    Ready,
    /// Did not start (`error` says why); its known tools answer error
    /// results, or start it, when called.
    Failed,
    /// Starts inside the thread's sandbox on the first call of its tools.
    InRunner,
}

/// Subscribe to a thread's events (again): every event after `afterSeq` is
/// sent as a `thread/event` notification before this answers, then live ones
/// follow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadResumeParams {
    pub thread_id: String,
    /// The last seq you have (0: replay the whole log).
    #[serde(default)]
    pub after_seq: u64,
    /// As in `thread/start`: MCP servers for this thread, in place of the
    /// ones declared before (which this server holds only while it runs).
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, Value>>")]
    pub mcp_servers: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResumeResult {
    pub thread: ThreadInfo,
    /// The last seq sent before this answer; live events follow it.
    pub last_seq: u64,
    /// How each of the `mcpServers` given came up (absent when none were).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_sources: Vec<ToolSource>,
}

/// Methods that only name a thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadIdParams {
    pub thread_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadUnsubscribeResult {
    /// Whether this connection was subscribed.
    pub was_subscribed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadReadResult {
    pub thread: ThreadInfo,
    /// The seq of the thread's last event.
    pub last_seq: u64,
    /// The turn running now, if any.
    pub running_turn_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadListParams {
    /// `nextCursor` of the previous page; absent for the first.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Threads per page: default 50, at most 500.
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub include_archived: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadListResult {
    /// Most recently updated first.
    pub threads: Vec<ThreadInfo>,
    /// Pass back to get the next page; absent on the last one.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadEventsParams {
    pub thread_id: String,
    /// Events with `seq > cursor` (0: from the start). A cursor past the end
    /// of the log is an error (-32004).
    #[serde(default)]
    pub cursor: u64,
    /// Events per page: default 500, at most 5000.
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadEventsResult {
    pub events: Vec<ThreadEvent>,
    /// The last seq returned (the cursor given when nothing was new).
    pub next_cursor: u64,
    /// Whether more events follow `nextCursor` already.
    pub has_more: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadHistoryParams {
    pub thread_id: String,
    /// `nextCursor` of the previous page; absent for the first.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Events per page: default 500, at most 5000.
    #[serde(default)]
    pub limit: Option<u32>,
    /// Bytes of the events' JSON per page: default 1 MiB, at most 16 MiB. A
    /// page holds at least one event, however large.
    #[serde(default)]
    pub max_bytes: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadHistoryResult {
    /// Oldest first.
    pub events: Vec<ThreadEvent>,
    /// Pass back for the next page; absent once the log is read to its end.
    pub next_cursor: Option<String>,
}

/// What `thread/compact` wrote: the `context_compacted` event's figures
/// (the event itself reaches subscribers as a `thread/event`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadCompactResult {
    /// The model's summary, or what pruning removed.
    pub summary: String,
    /// Items summarized or pruned.
    pub replaced_items: u64,
    /// Estimated tokens (bytes / 4) of the next request, before and after.
    pub tokens_before: u64,
    pub tokens_after: u64,
}

/// A thread as the protocol shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadInfo {
    pub thread_id: String,
    pub title: Option<String>,
    /// The local workspace (for threads without a runner).
    pub workspace: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub tool_allowlist: Vec<String>,
    pub developer_instructions: Option<String>,
    pub external_tools: Vec<ExternalToolSpec>,
    /// Where the thread's workspace tools run, when not on the host.
    pub runner: Option<RunnerBindingInfo>,
    /// The runner session last persisted for the thread.
    pub runner_state: Option<RunnerState>,
    /// Tokens the thread's model requests used so far.
    pub usage: ThreadUsage,
    pub approvals: super::ThreadApprovalsInfo,
    pub archived: bool,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// Token counts, as the model APIs report them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadUsage {
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunnerBindingInfo {
    pub provider_id: String,
    pub destination_id: String,
    pub config: Value,
    pub workspace: String,
    pub read_roots: Vec<String>,
}

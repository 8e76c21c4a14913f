//! `thread/*`.

use roder_api::approval::{ApprovalRequirement, ThreadApprovals};
use roder_api::thread::ThreadMetadata;
use roder_api::thread_tools::MCP_SERVERS;
use roder_core::{CreateThreadRequest, ThreadRunnerSelection};
use serde_json::Value;

use crate::connection::Context;
use crate::convert;
use crate::error::RpcError;
use crate::protocol::{
    ApprovalRequirementName, ThreadCompactResult, ThreadEventsParams, ThreadEventsResult,
    ThreadHistoryParams, ThreadHistoryResult, ThreadIdParams, ThreadListParams, ThreadListResult,
    ThreadReadResult, ThreadResult, ThreadResumeParams, ThreadResumeResult, ThreadSetModeParams,
    ThreadStartParams, ThreadUnsubscribeResult, ToolSource, WorkdirSelection,
};

const DEFAULT_LIST_LIMIT: u32 = 50;
const MAX_LIST_LIMIT: u32 = 500;
const DEFAULT_EVENTS_LIMIT: u32 = 500;
const MAX_EVENTS_LIMIT: u32 = 5000;
/// `thread/events` pages are bounded in bytes too, so one request never
/// loads a log of huge events whole.
const EVENTS_PAGE_BYTES: usize = 8 * 1024 * 1024;
const DEFAULT_HISTORY_BYTES: u32 = 1024 * 1024;
const MAX_HISTORY_BYTES: u32 = 16 * 1024 * 1024;

pub(crate) async fn start(
    context: &Context,
    mut params: ThreadStartParams,
) -> Result<ThreadResult, RpcError> {
    let runtime = &context.runtime;
    let workspace = match params.workspace {
        Some(workspace) => workspace,
        None => match runtime.config().workspace.clone() {
            Some(workspace) => workspace,
            None => std::env::current_dir()
                .map_err(|error| RpcError::internal(format!("no current directory: {error}")))?
                .display()
                .to_string(),
        },
    };
    let profile = match params.profile.take() {
        Some(selection) => Some(resolve_profile(context, selection, &workspace).await?),
        None => None,
    };
    if let Some(profile) = &profile {
        params.mcp_servers = with_profile_servers(params.mcp_servers.take(), profile)?;
    }
    // A declaration the runtime cannot take is refused before the thread
    // exists.
    check_mcp_servers(context, "thread/start", params.mcp_servers.as_ref())?;
    let mut approvals = ThreadApprovals {
        mode: params.policy_mode.map(convert::mode),
        rules: match params.approval_rules {
            Some(rules) => convert::approval_rules("thread/start", rules)?,
            None => Default::default(),
        },
        requirement: match params.approvals.unwrap_or_default() {
            ApprovalRequirementName::Optional => ApprovalRequirement::Optional,
            ApprovalRequirementName::Required => ApprovalRequirement::Required,
        },
    };
    let mut request = CreateThreadRequest::in_workspace(workspace);
    request.title = params.title;
    request.provider = params.provider;
    request.model = params.model;
    request.tool_allowlist = params.tool_allowlist;
    request.developer_instructions = params.developer_instructions;
    request.external_tools = params
        .external_tools
        .into_iter()
        .map(convert::tool_spec)
        .collect();
    request.runner = params.runner.map(|runner| ThreadRunnerSelection {
        provider_id: runner.provider_id,
        // Providers read their config as an object; absent means "defaults".
        config: match runner.config {
            Value::Null => Value::Object(Default::default()),
            config => config,
        },
        workspace: runner.workspace,
        read_roots: runner.read_roots,
    });
    let created = match params.workdir {
        Some(_) if request.runner.is_some() => {
            return Err(RpcError::invalid_params(
                "thread/start",
                "workdir",
                "give either runner or workdir, not both (a working directory brings its own runner)",
            ));
        }
        Some(workdir) => {
            let selection = match workdir {
                WorkdirSelection::Request(workdir) => {
                    roder_core::WorkdirSelection::Materialize(convert::workdir_request(workdir))
                }
                WorkdirSelection::Claim(claim) => {
                    roder_core::WorkdirSelection::Claim(convert::workdir_claim(claim))
                }
            };
            let profile = profile.map(|profile| (std::mem::take(&mut approvals), profile));
            runtime
                .create_thread_in_workdir_with(request, selection, profile)
                .await
        }
        None => match profile {
            // The profile's snapshot and the approvals go in one write.
            Some(profile) => {
                let approvals = std::mem::take(&mut approvals);
                runtime
                    .create_thread_with_profile(request, None, approvals, profile)
                    .await
            }
            None => runtime.create_thread_with(request).await,
        },
    };
    let mut metadata = created.map_err(RpcError::from_runtime)?;
    if !approvals.is_default() {
        metadata = runtime
            .set_thread_approvals(&metadata.thread_id, approvals)
            .await
            .map_err(RpcError::from_runtime)?;
    }
    let tool_sources = start_mcp_servers(context, &metadata.thread_id, params.mcp_servers).await?;
    context
        .subscriptions
        .subscribe(&metadata.thread_id, 0)
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(ThreadResult {
        thread: context.thread_info(metadata),
        tool_sources,
    })
}

/// Resolves `thread/start {profile}`; what the runtime cannot apply here is
/// refused, never dropped.
async fn resolve_profile(
    context: &Context,
    selection: crate::protocol::ProfileSelection,
    workspace: &str,
) -> Result<roder_api::profile::ProfileSnapshot, RpcError> {
    let invalid = |detail: String| RpcError::invalid_params("thread/start", "profile", detail);
    let spec = roder_api::profile::ProfileRequestSpec {
        selector: selection.selector,
        archive: selection
            .archive
            .map(|archive| roder_api::profile::ProfileArchiveSpec {
                url: archive.url,
                data: archive.data,
                id: archive.id,
                digest: archive.digest,
                size: archive.size,
            }),
    };
    let snapshot = context
        .runtime
        .resolve_profile(&spec, Some(workspace))
        .await
        .map_err(|error| invalid(format!("{error:#}")))?;
    Ok(snapshot)
}

/// The profile's MCP servers added to the client's declaration (the same
/// checks apply to both; a name declared twice is refused).
fn with_profile_servers(
    declared: Option<Value>,
    profile: &roder_api::profile::ProfileSnapshot,
) -> Result<Option<Value>, RpcError> {
    profile
        .mcp_declaration(declared)
        .map_err(|detail| RpcError::invalid_params("thread/start", "profile", detail))
}

/// An invalid-params error for `mcpServers` the runtime would not take.
fn check_mcp_servers(
    context: &Context,
    method: &str,
    servers: Option<&Value>,
) -> Result<(), RpcError> {
    let Some(servers) = servers else {
        return Ok(());
    };
    context
        .runtime
        .check_thread_tools(MCP_SERVERS, servers)
        .map_err(|error| RpcError::invalid_params(method, "mcpServers", format!("{error:#}")))
}

/// Starts the thread's declared MCP servers (`Runtime::start_thread_tools`).
async fn start_mcp_servers(
    context: &Context,
    thread_id: &str,
    servers: Option<Value>,
) -> Result<Vec<ToolSource>, RpcError> {
    let Some(servers) = servers else {
        return Ok(Vec::new());
    };
    let started = context
        .runtime
        .start_thread_tools(thread_id, MCP_SERVERS, servers)
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(started
        .sources
        .into_iter()
        .map(convert::tool_source)
        .collect())
}

pub(crate) async fn resume(
    context: &Context,
    params: ThreadResumeParams,
) -> Result<ThreadResumeResult, RpcError> {
    check_mcp_servers(context, "thread/resume", params.mcp_servers.as_ref())?;
    // Started before the subscription, so their event is in the replay.
    let (metadata, _) = load(context, &params.thread_id).await?;
    let tool_sources = start_mcp_servers(context, &params.thread_id, params.mcp_servers).await?;
    let last_seq = context
        .subscriptions
        .subscribe(&params.thread_id, params.after_seq)
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(ThreadResumeResult {
        thread: context.thread_info(metadata),
        last_seq,
        tool_sources,
    })
}

pub(crate) async fn set_mode(
    context: &Context,
    params: ThreadSetModeParams,
) -> Result<ThreadResult, RpcError> {
    let metadata = context
        .runtime
        .set_thread_policy_mode(&params.thread_id, params.mode.map(convert::mode))
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(ThreadResult {
        thread: context.thread_info(metadata),
        tool_sources: Vec::new(),
    })
}

pub(crate) async fn unsubscribe(
    context: &Context,
    params: ThreadIdParams,
) -> Result<ThreadUnsubscribeResult, RpcError> {
    let was_subscribed = context
        .subscriptions
        .unsubscribe(&params.thread_id)
        .await
        .map_err(RpcError::internal)?;
    Ok(ThreadUnsubscribeResult { was_subscribed })
}

pub(crate) async fn read(
    context: &Context,
    params: ThreadIdParams,
) -> Result<ThreadReadResult, RpcError> {
    let (metadata, last_seq) = load(context, &params.thread_id).await?;
    let running_turn_id = context
        .runtime
        .running_turn(&params.thread_id)
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(ThreadReadResult {
        thread: context.thread_info(metadata),
        last_seq,
        running_turn_id,
    })
}

pub(crate) async fn list(
    context: &Context,
    params: ThreadListParams,
) -> Result<ThreadListResult, RpcError> {
    let limit = page_limit(
        "thread/list",
        params.limit,
        DEFAULT_LIST_LIMIT,
        MAX_LIST_LIMIT,
    )?;
    let after = params
        .cursor
        .as_deref()
        .map(ListCursor::parse)
        .transpose()?;
    let mut threads: Vec<ThreadMetadata> = context
        .runtime
        .list_threads()
        .await
        .map_err(RpcError::from_runtime)?
        .into_iter()
        .filter(|thread| params.include_archived || !thread.archived)
        .collect();
    // A total order (newest first, ties by id) so a cursor is a position.
    threads.sort_by(|a, b| ListCursor::of(a).cmp(&ListCursor::of(b)));
    let start = match &after {
        Some(after) => threads.partition_point(|thread| ListCursor::of(thread) <= *after),
        None => 0,
    };
    let page: Vec<ThreadMetadata> = threads.drain(start..).take(limit + 1).collect();
    let has_more = page.len() > limit;
    let page: Vec<ThreadMetadata> = page.into_iter().take(limit).collect();
    let next_cursor = has_more
        .then(|| page.last().map(|thread| ListCursor::of(thread).encode()))
        .flatten();
    Ok(ThreadListResult {
        threads: page
            .into_iter()
            .map(|metadata| context.thread_info(metadata))
            .collect(),
        next_cursor,
    })
}

pub(crate) async fn events(
    context: &Context,
    params: ThreadEventsParams,
) -> Result<ThreadEventsResult, RpcError> {
    let limit = page_limit(
        "thread/events",
        params.limit,
        DEFAULT_EVENTS_LIMIT,
        MAX_EVENTS_LIMIT,
    )?;
    let page = context
        .runtime
        .read_thread_events_page(&params.thread_id, params.cursor, limit, EVENTS_PAGE_BYTES)
        .await
        .map_err(RpcError::from_runtime)?;
    let events: Vec<_> = page.events.iter().map(convert::thread_event).collect();
    let next_cursor = events.last().map_or(params.cursor, |event| event.seq);
    Ok(ThreadEventsResult {
        events,
        next_cursor,
        has_more: page.more,
    })
}

/// A page of the thread's history (`Runtime::read_thread_history`).
pub(crate) async fn history(
    context: &Context,
    params: ThreadHistoryParams,
) -> Result<ThreadHistoryResult, RpcError> {
    let limit = page_limit(
        "thread/history",
        params.limit,
        DEFAULT_EVENTS_LIMIT,
        MAX_EVENTS_LIMIT,
    )?;
    let max_bytes = page_bound(
        "thread/history",
        "maxBytes",
        params.max_bytes,
        DEFAULT_HISTORY_BYTES,
        MAX_HISTORY_BYTES,
    )?;
    let page = context
        .runtime
        .read_thread_history(
            &params.thread_id,
            params.cursor.as_deref(),
            limit,
            max_bytes,
        )
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(ThreadHistoryResult {
        events: page.events.iter().map(convert::thread_event).collect(),
        next_cursor: page.next_cursor,
    })
}

pub(crate) async fn archive(
    context: &Context,
    params: ThreadIdParams,
) -> Result<ThreadResult, RpcError> {
    let metadata = context
        .runtime
        .archive_thread(&params.thread_id)
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(ThreadResult {
        thread: context.thread_info(metadata),
        tool_sources: Vec::new(),
    })
}

/// Compacts the thread now (`Runtime::compact_thread`): refused while a turn
/// runs, a transaction otherwise.
pub(crate) async fn compact(
    context: &Context,
    params: ThreadIdParams,
) -> Result<ThreadCompactResult, RpcError> {
    let compacted = context
        .runtime
        .compact_thread(&params.thread_id)
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(ThreadCompactResult {
        summary: compacted.summary,
        replaced_items: compacted.replaced_items,
        tokens_before: compacted.tokens_before,
        tokens_after: compacted.tokens_after,
    })
}

/// A thread's metadata and last seq, without reading its whole log.
async fn load(context: &Context, thread_id: &str) -> Result<(ThreadMetadata, u64), RpcError> {
    let metadata = context
        .runtime
        .thread_metadata(thread_id)
        .await
        .map_err(RpcError::from_runtime)?;
    let last_seq = context
        .runtime
        .last_seq(thread_id)
        .await
        .map_err(RpcError::from_runtime)?;
    Ok((metadata, last_seq))
}

fn page_limit(method: &str, limit: Option<u32>, default: u32, max: u32) -> Result<usize, RpcError> {
    page_bound(method, "limit", limit, default, max)
}

/// `value` (else `default`) as a page bound: at least 1, at most `max`;
/// otherwise invalid params naming `field`.
fn page_bound(
    method: &str,
    field: &str,
    value: Option<u32>,
    default: u32,
    max: u32,
) -> Result<usize, RpcError> {
    match value.unwrap_or(default) {
        0 => Err(RpcError::invalid_params(
            method,
            field,
            "must be at least 1",
        )),
        value if value > max => Err(RpcError::invalid_params(
            method,
            field,
            format!("{value} is more than the maximum of {max}"),
        )),
        value => Ok(value as usize),
    }
}

/// Position in the thread list: newest first, ties by id. Encoded as
/// `<updated_at unix nanos>:<thread id>`; opaque to clients.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ListCursor {
    newest_first: std::cmp::Reverse<i128>,
    thread_id: String,
}

impl ListCursor {
    fn of(thread: &ThreadMetadata) -> Self {
        Self {
            newest_first: std::cmp::Reverse(thread.updated_at.unix_timestamp_nanos()),
            thread_id: thread.thread_id.clone(),
        }
    }

    fn encode(&self) -> String {
        format!("{}:{}", self.newest_first.0, self.thread_id)
    }

    fn parse(cursor: &str) -> Result<Self, RpcError> {
        let invalid = || {
            RpcError::invalid_params(
                "thread/list",
                "cursor",
                format!("\"{cursor}\" is not a cursor this server returned"),
            )
        };
        let (nanos, thread_id) = cursor.split_once(':').ok_or_else(invalid)?;
        let nanos: i128 = nanos.parse().map_err(|_| invalid())?;
        Ok(Self {
            newest_first: std::cmp::Reverse(nanos),
            thread_id: thread_id.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_cursors_round_trip_and_order_newest_first() {
        let older = ListCursor {
            newest_first: std::cmp::Reverse(10),
            thread_id: "b".into(),
        };
        let newer = ListCursor {
            newest_first: std::cmp::Reverse(20),
            thread_id: "a".into(),
        };
        assert!(newer < older);
        assert_eq!(ListCursor::parse(&older.encode()).unwrap(), older);
        assert!(ListCursor::parse("garbage").is_err());
    }

    #[test]
    fn page_limits_are_bounded() {
        assert_eq!(page_limit("m", None, 50, 500).unwrap(), 50);
        assert_eq!(
            page_limit("m", Some(0), 50, 500).unwrap_err().data,
            Some(serde_json::json!({"field": "limit"}))
        );
        assert!(page_limit("m", Some(501), 50, 500).is_err());
    }
}

//! From the runtime's types to the protocol's. The protocol has its own
//! types (camelCase, schema-derived) so that the runtime can change its
//! structs without changing the wire.

use roder_api::approval::{
    ApprovalAnswer, ApprovalDecision, ApprovalRequirement, ApprovalRules, RunsOn,
};
use roder_api::events::{ApprovalRequested, ApprovalResolved, EventEnvelope};
use roder_api::policy_mode::PolicyMode;
use roder_api::remote_runner::{RunnerCapabilities, RunnerSessionState};
use roder_api::thread::ThreadMetadata;
use roder_api::tools::ToolSpec;
use roder_api::workdir;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::protocol::{
    self, ApprovalPreview, ApprovalRequestParams, ApprovalRequirementName, ApprovalResolvedParams,
    ApprovalResult, ApprovalRulesInfo, CommandPreviewInfo, DecisionName, ExternalToolSpec,
    FilePreviewInfo, PolicyModeName, RunnerBindingInfo, RunsOnInfo, RuntimeEvent,
    ThreadApprovalsInfo, ThreadEvent, ThreadInfo,
};

pub(crate) fn rfc3339(timestamp: OffsetDateTime) -> String {
    // Formatting a UTC timestamp as RFC 3339 only fails for years past 9999.
    timestamp
        .format(&Rfc3339)
        .unwrap_or_else(|_| timestamp.unix_timestamp().to_string())
}

pub(crate) fn thread_event(envelope: &EventEnvelope) -> ThreadEvent {
    ThreadEvent {
        thread_id: envelope.thread_id.clone(),
        seq: envelope.seq,
        turn_id: envelope.turn_id.clone(),
        timestamp: rfc3339(envelope.timestamp),
        event: RuntimeEvent(serde_json::to_value(&envelope.event).unwrap_or_default()),
    }
}

/// A thread as clients see it; `default_mode` is the server's mode (what a
/// thread without its own runs under).
pub(crate) fn thread_info(metadata: ThreadMetadata, default_mode: PolicyMode) -> ThreadInfo {
    let approvals = ThreadApprovalsInfo {
        mode: metadata.approvals.mode.map(mode_name),
        effective_mode: mode_name(metadata.approvals.mode.unwrap_or(default_mode)),
        requirement: match metadata.approvals.requirement {
            ApprovalRequirement::Optional => ApprovalRequirementName::Optional,
            ApprovalRequirement::Required => ApprovalRequirementName::Required,
        },
        rules: rules_info(&metadata.approvals.rules),
    };
    ThreadInfo {
        approvals,
        thread_id: metadata.thread_id,
        title: metadata.title,
        workspace: metadata.workspace,
        provider: metadata.provider,
        model: metadata.model,
        tool_allowlist: metadata.tool_allowlist,
        developer_instructions: metadata.developer_instructions,
        external_tools: metadata
            .external_tools
            .into_iter()
            .map(|tool| ExternalToolSpec {
                name: tool.name,
                description: tool.description,
                parameters: tool.parameters,
            })
            .collect(),
        runner: metadata.runner_binding.map(|binding| RunnerBindingInfo {
            provider_id: binding.destination.provider_id,
            destination_id: binding.destination.id,
            config: binding.destination.config,
            workspace: binding.workspace.display().to_string(),
            read_roots: binding
                .read_roots
                .iter()
                .map(|root| root.display().to_string())
                .collect(),
        }),
        runner_state: metadata.runner_state.map(runner_state),
        usage: crate::protocol::ThreadUsage {
            input_tokens: metadata.usage.input_tokens,
            cached_input_tokens: metadata.usage.cached_input_tokens,
            output_tokens: metadata.usage.output_tokens,
            reasoning_tokens: metadata.usage.reasoning_tokens,
        },
        archived: metadata.archived,
        created_at: rfc3339(metadata.created_at),
        updated_at: rfc3339(metadata.updated_at),
    }
}

pub(crate) fn mode_name(mode: PolicyMode) -> PolicyModeName {
    match mode {
        PolicyMode::Plan => PolicyModeName::Plan,
        PolicyMode::Default => PolicyModeName::Default,
        PolicyMode::AcceptEdits => PolicyModeName::AcceptEdits,
        PolicyMode::Bypass => PolicyModeName::Bypass,
    }
}

pub(crate) fn mode(name: PolicyModeName) -> PolicyMode {
    match name {
        PolicyModeName::Plan => PolicyMode::Plan,
        PolicyModeName::Default => PolicyMode::Default,
        PolicyModeName::AcceptEdits => PolicyMode::AcceptEdits,
        PolicyModeName::Bypass => PolicyMode::Bypass,
    }
}

fn decision_name(decision: ApprovalDecision) -> DecisionName {
    match decision {
        ApprovalDecision::AllowOnce => DecisionName::AllowOnce,
        ApprovalDecision::AllowThread => DecisionName::AllowThread,
        ApprovalDecision::AllowAlways => DecisionName::AllowAlways,
        ApprovalDecision::Reject => DecisionName::Reject,
        ApprovalDecision::RejectAlways => DecisionName::RejectAlways,
        ApprovalDecision::RejectAndStop => DecisionName::RejectAndStop,
    }
}

pub(crate) fn answer(result: ApprovalResult) -> ApprovalAnswer {
    let decision = match result.decision {
        DecisionName::AllowOnce => ApprovalDecision::AllowOnce,
        DecisionName::AllowThread => ApprovalDecision::AllowThread,
        DecisionName::AllowAlways => ApprovalDecision::AllowAlways,
        DecisionName::Reject => ApprovalDecision::Reject,
        DecisionName::RejectAlways => ApprovalDecision::RejectAlways,
        DecisionName::RejectAndStop => ApprovalDecision::RejectAndStop,
    };
    ApprovalAnswer {
        decision,
        message: result.message,
    }
}

fn rules_info(rules: &ApprovalRules) -> ApprovalRulesInfo {
    ApprovalRulesInfo {
        allow: rules.allow.iter().map(ToString::to_string).collect(),
        deny: rules.deny.iter().map(ToString::to_string).collect(),
    }
}

/// The rules a client gave, parsed; the error names the one that is bad.
pub(crate) fn approval_rules(
    method: &str,
    info: ApprovalRulesInfo,
) -> Result<ApprovalRules, crate::error::RpcError> {
    let parse = |field: &str, texts: Vec<String>| {
        texts
            .iter()
            .enumerate()
            .map(|(index, text)| {
                text.parse()
                    .map_err(|error: roder_api::approval::RuleParseError| {
                        crate::error::RpcError::invalid_params(
                            method,
                            &format!("approvalRules.{field}[{index}]"),
                            error.to_string(),
                        )
                    })
            })
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(ApprovalRules {
        allow: parse("allow", info.allow)?,
        deny: parse("deny", info.deny)?,
    })
}

pub(crate) fn approval_request(ask: &ApprovalRequested) -> ApprovalRequestParams {
    let preview = &ask.preview;
    ApprovalRequestParams {
        thread_id: ask.thread_id.clone(),
        turn_id: ask.turn_id.clone(),
        approval_id: ask.approval_id.clone(),
        call_id: ask.call_id.clone(),
        tool_name: ask.tool_name.clone(),
        effects: ask.effects.names().map(str::to_string).collect(),
        kind: serde_json::to_value(ask.effects.kind())
            .ok()
            .and_then(|kind| kind.as_str().map(str::to_string))
            .unwrap_or_else(|| "other".to_string()),
        preview: ApprovalPreview {
            summary: preview.summary.clone(),
            command: preview.command.as_ref().map(|command| CommandPreviewInfo {
                command: command.command.clone(),
                cwd: command.cwd.clone(),
                runs_on: match &command.runs_on {
                    RunsOn::Host => RunsOnInfo {
                        kind: "host".into(),
                        provider_id: None,
                        session_id: None,
                    },
                    RunsOn::Runner {
                        provider_id,
                        session_id,
                    } => RunsOnInfo {
                        kind: "runner".into(),
                        provider_id: Some(provider_id.clone()),
                        session_id: Some(session_id.clone()),
                    },
                },
            }),
            files: preview
                .files
                .iter()
                .map(|file| FilePreviewInfo {
                    path: file.path.clone(),
                    diff: file.diff.clone(),
                    old_text: file.old_text.clone(),
                    new_text: file.new_text.clone(),
                })
                .collect(),
            arguments: preview.arguments.clone(),
        },
        rules: ask.rules.iter().map(ToString::to_string).collect(),
        expires_at: rfc3339(ask.expires_at),
    }
}

pub(crate) fn approval_resolved(resolved: &ApprovalResolved) -> ApprovalResolvedParams {
    ApprovalResolvedParams {
        thread_id: resolved.thread_id.clone(),
        approval_id: resolved.approval_id.clone(),
        call_id: resolved.call_id.clone(),
        decision: decision_name(resolved.decision),
        by: camel_case_keys(serde_json::to_value(&resolved.by).unwrap_or_default()),
    }
}

/// `client_id` → `clientId`: the protocol's names are camelCase.
fn camel_case_keys(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(object) => serde_json::Value::Object(
            object
                .into_iter()
                .map(|(key, value)| {
                    let mut camel = String::with_capacity(key.len());
                    let mut upper = false;
                    for c in key.chars() {
                        if c == '_' {
                            upper = true;
                        } else if upper {
                            camel.extend(c.to_uppercase());
                            upper = false;
                        } else {
                            camel.push(c);
                        }
                    }
                    (camel, value)
                })
                .collect(),
        ),
        other => other,
    }
}

pub(crate) fn tool_spec(tool: ExternalToolSpec) -> ToolSpec {
    ToolSpec {
        name: tool.name,
        description: tool.description,
        parameters: tool.parameters,
    }
}

pub(crate) fn tool_source(
    source: roder_api::thread_tools::ToolSourceStatus,
) -> protocol::ToolSource {
    use roder_api::thread_tools::ToolSourceState as State;
    protocol::ToolSource {
        name: source.name,
        state: match source.state {
            State::Ready => protocol::ToolSourceState::Ready,
            State::Failed => protocol::ToolSourceState::Failed,
            State::InRunner => protocol::ToolSourceState::InRunner,
        },
        tools: source.tools,
        error: source.error,
    }
}

pub(crate) fn runner_state(state: RunnerSessionState) -> protocol::RunnerState {
    protocol::RunnerState {
        provider_id: state.provider_id,
        session_id: state.session_id,
        destination_id: state.destination_id,
        snapshot: state.snapshot.map(|snapshot| protocol::RunnerSnapshot {
            provider_id: snapshot.provider_id,
            snapshot_id: snapshot.snapshot_id,
            metadata: snapshot.metadata,
        }),
        metadata: state.metadata,
    }
}

pub(crate) fn capabilities(capabilities: RunnerCapabilities) -> protocol::RunnerCapabilities {
    protocol::RunnerCapabilities {
        command_exec: capabilities.command_exec,
        file_read: capabilities.file_read,
        file_write: capabilities.file_write,
        port_preview: capabilities.port_preview,
        snapshots: capabilities.snapshots,
        cancellation: capabilities.cancellation,
        artifact_export: capabilities.artifact_export,
        pausable: capabilities.pausable,
        detachable: capabilities.detachable,
        mounts: protocol::RunnerMountCapabilities {
            s3: capabilities.mounts.s3,
            gcs: capabilities.mounts.gcs,
            r2: capabilities.mounts.r2,
            azure_blob: capabilities.mounts.azure_blob,
            box_storage: capabilities.mounts.box_storage,
            provider_native: capabilities.mounts.provider_native,
        },
    }
}

pub(crate) fn workdir_info(info: workdir::WorkdirInfo) -> protocol::WorkdirInfo {
    protocol::WorkdirInfo {
        id: info.id,
        status: match info.status {
            workdir::WorkdirStatus::Active => protocol::WorkdirStatus::Active,
            workdir::WorkdirStatus::CleanupPending => protocol::WorkdirStatus::CleanupPending,
            workdir::WorkdirStatus::Corrupted => protocol::WorkdirStatus::Corrupted,
            workdir::WorkdirStatus::NotFound => protocol::WorkdirStatus::NotFound,
        },
        checkout: info.checkout.display().to_string(),
        repository: info.repository.display().to_string(),
        selector: info.selector,
        base_commit: info.base_commit,
        base_tree: info.base_tree,
        cleanliness: info.cleanliness.map(|cleanliness| match cleanliness {
            workdir::Cleanliness::Clean => protocol::Cleanliness::Clean,
            workdir::Cleanliness::Dirty => protocol::Cleanliness::Dirty,
        }),
        head_commit: info.head_commit,
        branch: info.branch,
        primary_thread_id: info.primary_thread_id,
        created_at: rfc3339(info.created_at),
    }
}

pub(crate) fn workdir_request(params: protocol::WorkdirsCreateParams) -> workdir::WorkdirRequest {
    workdir::WorkdirRequest {
        repository: params.repository.into(),
        selector: params.selector,
        id: params.id,
    }
}

pub(crate) fn workdir_claim(params: protocol::WorkdirClaimParams) -> workdir::WorkdirClaim {
    workdir::WorkdirClaim {
        id: params.id,
        relative_cwd: params.relative_cwd.map(Into::into),
    }
}

//! An ask of the runtime (`approval_requested`) as ACP's
//! `session/request_permission`, and the editor's answer as a decision.
//!
//! The options: `allow_once`; `allow_always`, whose name states the rule it
//! keeps (written to `config.toml`, as Roder's `allow_always`); `reject_once`;
//! `reject_always` (a deny rule). The two `always` options are offered only
//! when the call can be described by a rule (an opaque command line cannot).
//! A `cancelled` outcome (the user stopped the turn) is `reject_and_stop`.

use agent_client_protocol_schema::v1 as acp;
use roder_api::approval::{ApprovalAnswer, ApprovalDecision};
use roder_api::events::ApprovalRequested;

use crate::updates::tool_kind;

const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT_ONCE: &str = "reject_once";
const REJECT_ALWAYS: &str = "reject_always";

/// The request for `ask`; `diffs` are the call's diffs so far (the tool
/// call was announced before, with the same id).
pub(crate) fn request(
    session_id: &str,
    ask: &ApprovalRequested,
    diffs: Vec<acp::ToolCallContent>,
) -> acp::RequestPermissionRequest {
    let mut fields = acp::ToolCallUpdateFields::new()
        .kind(tool_kind(ask.effects.kind()))
        .status(acp::ToolCallStatus::Pending)
        .title(ask.preview.summary.clone());
    if !diffs.is_empty() {
        fields = fields.content(diffs);
    }
    let tool_call = acp::ToolCallUpdate::new(ask.call_id.clone(), fields);
    let mut options = vec![acp::PermissionOption::new(
        ALLOW_ONCE,
        "Allow",
        acp::PermissionOptionKind::AllowOnce,
    )];
    let rules: Vec<String> = ask.rules.iter().map(describe_rule).collect();
    if !rules.is_empty() {
        options.push(acp::PermissionOption::new(
            ALLOW_ALWAYS,
            format!("Always allow {}", rules.join(", ")),
            acp::PermissionOptionKind::AllowAlways,
        ));
    }
    options.push(acp::PermissionOption::new(
        REJECT_ONCE,
        "Reject",
        acp::PermissionOptionKind::RejectOnce,
    ));
    if !rules.is_empty() {
        options.push(acp::PermissionOption::new(
            REJECT_ALWAYS,
            format!("Always reject {}", rules.join(", ")),
            acp::PermissionOptionKind::RejectAlways,
        ));
    }
    acp::RequestPermissionRequest::new(session_id.to_string(), tool_call, options)
}

/// A rule as a person reads it: `exec:cargo test` as "`cargo test`",
/// `write:docs/**` as "edits to `docs/**`".
fn describe_rule(rule: &roder_api::approval::ApprovalRule) -> String {
    let text = rule.to_string();
    match text.split_once(':') {
        Some(("exec", command)) => format!("`{command}`"),
        Some(("write", paths)) => format!("edits to `{paths}`"),
        Some(("tool", name)) => format!("tool `{name}`"),
        _ => format!("`{text}`"),
    }
}

/// The decision an answer makes (an answer that cannot be read, or an
/// option we did not offer, rejects the call once).
pub(crate) fn decision(answer: Result<serde_json::Value, acp::Error>) -> ApprovalAnswer {
    let outcome = answer
        .map_err(|error| format!("the client answered with an error: {}", error.message))
        .and_then(|value| {
            serde_json::from_value::<acp::RequestPermissionResponse>(value)
                .map_err(|error| format!("the client's answer did not parse: {error}"))
        });
    let (decision, message) = match outcome {
        Ok(response) => match response.outcome {
            acp::RequestPermissionOutcome::Cancelled => (ApprovalDecision::RejectAndStop, None),
            acp::RequestPermissionOutcome::Selected(selected) => {
                match selected.option_id.0.as_ref() {
                    ALLOW_ONCE => (ApprovalDecision::AllowOnce, None),
                    ALLOW_ALWAYS => (ApprovalDecision::AllowAlways, None),
                    REJECT_ONCE => (ApprovalDecision::Reject, None),
                    REJECT_ALWAYS => (ApprovalDecision::RejectAlways, None),
                    other => (
                        ApprovalDecision::Reject,
                        Some(format!("the client chose an unknown option \"{other}\"")),
                    ),
                }
            }
            _ => (ApprovalDecision::Reject, None),
        },
        Err(problem) => {
            tracing::warn!("permission request: {problem}; the call is rejected");
            (ApprovalDecision::Reject, None)
        }
    };
    ApprovalAnswer { decision, message }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::approval::{CallPreview, ToolEffects};
    use serde_json::json;

    fn ask(rules: &[&str]) -> ApprovalRequested {
        ApprovalRequested {
            thread_id: "t".into(),
            turn_id: "u".into(),
            approval_id: "a".into(),
            call_id: "c".into(),
            tool_name: "exec_command".into(),
            effects: ToolEffects::EXECUTE,
            preview: CallPreview {
                summary: "run `cargo test` in /w (on this host)".into(),
                ..CallPreview::default()
            },
            rules: rules.iter().map(|rule| rule.parse().unwrap()).collect(),
            expires_at: time::OffsetDateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn options_name_their_scope_and_answers_map_to_decisions() {
        let wire = serde_json::to_value(request("s", &ask(&["exec:cargo test"]), vec![])).unwrap();
        assert_eq!(wire["toolCall"]["toolCallId"], "c");
        assert_eq!(wire["toolCall"]["kind"], "execute");
        let options: Vec<(String, String)> = wire["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["optionId"].as_str().unwrap().into(),
                    o["name"].as_str().unwrap().into(),
                )
            })
            .collect();
        assert_eq!(
            options[1],
            ("allow_always".into(), "Always allow `cargo test`".into())
        );
        assert_eq!(options.len(), 4);
        let opaque = serde_json::to_value(request("s", &ask(&[]), vec![])).unwrap();
        assert_eq!(opaque["options"].as_array().unwrap().len(), 2);

        let selected = |id: &str| Ok(json!({"outcome": {"outcome": "selected", "optionId": id}}));
        assert_eq!(
            decision(selected("allow_once")).decision,
            ApprovalDecision::AllowOnce
        );
        assert_eq!(
            decision(selected("allow_always")).decision,
            ApprovalDecision::AllowAlways
        );
        assert_eq!(
            decision(selected("reject_once")).decision,
            ApprovalDecision::Reject
        );
        assert_eq!(
            decision(selected("reject_always")).decision,
            ApprovalDecision::RejectAlways
        );
        assert_eq!(
            decision(selected("other")).decision,
            ApprovalDecision::Reject
        );
        assert_eq!(
            decision(Ok(json!({"outcome": {"outcome": "cancelled"}}))).decision,
            ApprovalDecision::RejectAndStop
        );
        assert_eq!(
            decision(Ok(json!("junk"))).decision,
            ApprovalDecision::Reject
        );
        assert_eq!(
            decision(Err(acp::Error::method_not_found())).decision,
            ApprovalDecision::Reject
        );
    }
}

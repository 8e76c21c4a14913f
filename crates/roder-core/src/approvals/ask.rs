//! Asking a person about one call, inside its turn.
//!
//! The ask is registered, then persisted (`approval_requested`, with the
//! call's preview and the rules a lasting answer would keep) before anyone
//! can see it, and it waits for the first of: an answer, the timeout, or
//! the turn being interrupted (its deadline included). Whatever ends it is
//! persisted as `approval_resolved` before the call runs or is refused, so
//! the log never shows a call run without a decision that allowed it. A
//! process that dies while it waits leaves the ask open in the log; the
//! next writer closes it (`turn/recovery.rs`) and the call never runs.

use std::path::Path;

use roder_api::approval::{
    ApprovalDecision, ApprovalRule, ApprovalRules, CallPreview, CallScope, CommandLine, DecidedBy,
    ToolEffects, workspace_relative,
};
use roder_api::events::{ApprovalRequested, ApprovalResolved, RoderEvent};
use roder_api::inference::ToolCallCompleted as ModelToolCall;
use time::OffsetDateTime;

use crate::turn::context::TurnContext;

/// How an ask ended for the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Asked {
    /// Run it; `by` goes into its `ToolCallStarted`.
    Allowed(DecidedBy),
    /// Do not run it: `text` is the result the model reads.
    Refused { text: String, stop_turn: bool },
}

/// The call being asked about.
pub(crate) struct Subject<'a> {
    pub call: &'a ModelToolCall,
    pub effects: ToolEffects,
    pub scope: &'a CallScope,
    pub workspace_root: Option<&'a Path>,
}

/// Asks about `subject` with `preview` and waits for the outcome. `Err`
/// only when the log cannot be written, or the turn was cancelled (after
/// the ask's resolution is recorded).
pub(crate) async fn ask(
    ctx: TurnContext<'_>,
    subject: Subject<'_>,
    preview: CallPreview,
) -> anyhow::Result<Asked> {
    let approvals = &ctx.runtime.approvals;
    let timeout = approvals.timeout;
    let rules = lasting_rules(&subject);
    let expires_at = OffsetDateTime::now_utc() + timeout;
    let request = ApprovalRequested {
        thread_id: ctx.thread_id(),
        turn_id: ctx.turn_id(),
        approval_id: uuid::Uuid::new_v4().to_string(),
        call_id: subject.call.id.clone(),
        tool_name: subject.call.name.clone(),
        effects: subject.effects,
        preview,
        rules: rules.clone(),
        expires_at,
    };
    let approval_id = request.approval_id.clone();
    // Registered before it is announced: an answer sent the moment the
    // event arrives finds it.
    let mut pending = approvals.hub.register(request.clone());
    ctx.emit(RoderEvent::ApprovalRequested(request)).await?;
    let span = crate::trace::step("approval.wait");
    let waited = tracing::Instrument::instrument(
        async {
            tokio::select! {
                biased;
                _ = ctx.cancellation().cancelled() => Waited::Cancelled,
                answered = pending.answer() => match answered {
                    Some(answered) => Waited::Answered(answered),
                    None => Waited::Cancelled,
                },
                _ = tokio::time::sleep(timeout) => Waited::TimedOut,
            }
        },
        span.clone(),
    )
    .await;
    drop(pending);
    span.record(
        "roder.detail",
        match &waited {
            Waited::Answered(answered) => answered.answer.decision.as_str(),
            Waited::TimedOut => "timed out",
            Waited::Cancelled => "cancelled",
        },
    );
    let resolved = |decision, by, message| ApprovalResolved {
        thread_id: ctx.thread_id(),
        turn_id: ctx.turn_id(),
        approval_id: approval_id.clone(),
        call_id: subject.call.id.clone(),
        decision,
        by,
        message,
    };
    match waited {
        Waited::Cancelled => {
            let by = if ctx
                .plan
                .deadline
                .remaining()
                .is_some_and(|left| left.is_zero())
            {
                DecidedBy::Deadline
            } else {
                DecidedBy::Interrupt
            };
            ctx.emit(RoderEvent::ApprovalResolved(resolved(
                ApprovalDecision::Reject,
                by,
                None,
            )))
            .await?;
            anyhow::bail!(
                "the turn was cancelled while this call waited for approval; it was not run"
            )
        }
        Waited::TimedOut => {
            ctx.emit(RoderEvent::ApprovalResolved(resolved(
                ApprovalDecision::Reject,
                DecidedBy::Timeout,
                None,
            )))
            .await?;
            Ok(Asked::Refused {
                text: format!(
                    "nobody answered the approval request for this call within {} s, so it was not run; continue without it or ask the user",
                    timeout.as_secs()
                ),
                stop_turn: false,
            })
        }
        Waited::Answered(answered) => {
            let decision = answered.answer.decision;
            let message = answered.answer.message.clone();
            let by = DecidedBy::Client {
                client_id: answered.client_id,
            };
            let event =
                RoderEvent::ApprovalResolved(resolved(decision, by.clone(), message.clone()));
            if decision.allows() {
                // Goes out with the call's start, in one append.
                ctx.defer(event);
            } else {
                ctx.emit(event).await?;
            }
            keep_rules(ctx, decision, rules).await;
            Ok(match decision {
                ApprovalDecision::AllowOnce
                | ApprovalDecision::AllowThread
                | ApprovalDecision::AllowAlways => Asked::Allowed(by),
                ApprovalDecision::Reject | ApprovalDecision::RejectAlways => Asked::Refused {
                    text: refusal(
                        &message,
                        "Do not retry it as it was: change your approach, or ask the user what they want instead.",
                    ),
                    stop_turn: false,
                },
                ApprovalDecision::RejectAndStop => Asked::Refused {
                    text: refusal(&message, "They stopped the turn."),
                    stop_turn: true,
                },
            })
        }
    }
}

enum Waited {
    Answered(super::Answered),
    TimedOut,
    Cancelled,
}

fn refusal(message: &Option<String>, then: &str) -> String {
    match message
        .as_deref()
        .map(str::trim)
        .filter(|text| !text.is_empty())
    {
        Some(message) => format!(
            "the user rejected this call, so it was not run. Their message: {message}\n{then}"
        ),
        None => format!("the user rejected this call, so it was not run. {then}"),
    }
}

/// Keeps what a lasting decision keeps: with the thread, or for good.
async fn keep_rules(ctx: TurnContext<'_>, decision: ApprovalDecision, rules: Vec<ApprovalRule>) {
    if rules.is_empty() {
        return;
    }
    let kept = match decision {
        ApprovalDecision::AllowThread => {
            let allow = ApprovalRules {
                allow: rules,
                deny: Vec::new(),
            };
            ctx.runtime
                .update_thread_approvals(&ctx.plan.thread, |approvals| {
                    approvals.rules.merge(&allow)
                })
                .await
                .map(|_| ())
        }
        ApprovalDecision::AllowAlways | ApprovalDecision::RejectAlways => {
            let (allow, deny) = if decision == ApprovalDecision::AllowAlways {
                (rules, Vec::new())
            } else {
                (Vec::new(), rules)
            };
            ctx.runtime
                .approvals
                .keep(&ApprovalRules { allow, deny })
                .await
                .map(|_| ())
        }
        _ => Ok(()),
    };
    if let Err(error) = kept {
        tracing::warn!(
            thread_id = ctx.plan.thread_id(),
            "could not keep the approval rules of a {} decision: {error:#}",
            decision.as_str()
        );
    }
}

/// The rules a lasting decision about this call keeps: the exact command
/// of each simple command it runs (`cd` aside), the exact paths it writes,
/// or the whole tool for a tool that does neither. Empty when no rule can
/// describe it (an opaque command line, a path outside the workspace): a
/// lasting decision then acts once.
pub(crate) fn lasting_rules(subject: &Subject<'_>) -> Vec<ApprovalRule> {
    if let Some(line) = &subject.scope.command {
        let parsed = CommandLine::parse(line);
        if parsed.opaque {
            return Vec::new();
        }
        return parsed
            .commands
            .into_iter()
            .filter(|words| words.first().is_some_and(|program| program != "cd"))
            .filter_map(ApprovalRule::exec)
            .collect();
    }
    if !subject.scope.paths.is_empty() {
        let mut rules = Vec::new();
        for path in &subject.scope.paths {
            let Some(relative) = workspace_relative(path, subject.workspace_root) else {
                return Vec::new();
            };
            match format!("write:{}", escape_glob(&relative)).parse() {
                Ok(rule) if !rules.contains(&rule) => rules.push(rule),
                Ok(_) => {}
                Err(_) => return Vec::new(),
            }
        }
        return rules;
    }
    format!("tool:{}", subject.call.name)
        .parse()
        .map(|rule| vec![rule])
        .unwrap_or_default()
}

/// `path` as a glob that matches only itself.
fn escape_glob(path: &str) -> String {
    let mut escaped = String::with_capacity(path.len());
    for c in path.chars() {
        if "*?[]{}\\!".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules_of(name: &str, effects: ToolEffects, scope: CallScope) -> Vec<String> {
        let call = ModelToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: String::new(),
        };
        lasting_rules(&Subject {
            call: &call,
            effects,
            scope: &scope,
            workspace_root: Some(Path::new("/w")),
        })
        .iter()
        .map(ToString::to_string)
        .collect()
    }

    #[test]
    fn lasting_rules_describe_exactly_the_call() {
        assert_eq!(
            rules_of(
                "shell",
                ToolEffects::EXECUTE,
                CallScope::command("cd x && cargo test -p a")
            ),
            vec!["exec:cargo test -p a"]
        );
        assert!(
            rules_of(
                "shell",
                ToolEffects::EXECUTE,
                CallScope::command("echo $(id)")
            )
            .is_empty()
        );
        assert_eq!(
            rules_of(
                "edit",
                ToolEffects::WRITE,
                CallScope::paths(["/w/src/a*.rs", "docs/b.md"])
            ),
            vec!["write:src/a\\*.rs", "write:docs/b.md"]
        );
        assert!(
            rules_of(
                "edit",
                ToolEffects::WRITE,
                CallScope::paths(["/etc/passwd"])
            )
            .is_empty()
        );
        assert_eq!(
            rules_of(
                "mcp__time__now",
                ToolEffects::UNDECLARED,
                CallScope::default()
            ),
            vec!["tool:mcp__time__now"]
        );
    }

    #[test]
    fn an_escaped_path_rule_matches_only_that_path() {
        let rule: ApprovalRule = format!("write:{}", escape_glob("src/a*.rs"))
            .parse()
            .unwrap();
        let subject = |path: &str| CallScope::paths([path]);
        let root = Some(Path::new("/w"));
        let matches = |path: &str| {
            rule.allows(&roder_api::approval::RuleSubject {
                tool_name: "edit",
                scope: &subject(path),
                workspace_root: root,
            })
        };
        assert!(matches("src/a*.rs"));
        assert!(!matches("src/ab.rs"));
    }
}

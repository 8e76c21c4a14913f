//! Which tools a turn is offered, and whether one call runs, asks or is
//! refused. The whole rule is here; `approvals/ask.rs` only carries out an
//! ask once this module says to.
//!
//! For one call, in order:
//! 1. The allowlists (runtime, thread): a tool outside them is refused
//!    ([`check`]).
//! 2. Deny rules (the runtime's and the thread's) refuse any call they
//!    catch, under every mode, `bypass` included.
//! 3. `bypass`: the call runs.
//! 4. A call whose tool only reads runs, in every mode.
//! 5. `plan`: anything else is refused (it is not offered either).
//! 6. An allow rule that vouches for the whole call lets it run.
//! 7. `accept_edits`: a call that only edits files inside the workspace
//!    runs.
//! 8. Everything else asks a person: when an approver is attached, or the
//!    thread requires one (the ask then waits for one to attach). With no
//!    approver and none required, `[approvals] no_approver` decides.
//!
//! Effects come from the tools' declarations (`ToolExecutor::effects`), never
//! from their names; a tool that declares nothing writes and runs commands.
//! The sandbox policy is enforced below all of this, whatever is decided.

use std::path::Path;

use roder_api::approval::{
    ApprovalRequirement, ApprovalRule, ApprovalRules, CallScope, DecidedBy, NoApprover,
    RuleSubject, ToolEffects, exec_rules_allow, workspace_relative,
};
use roder_api::policy_mode::PolicyMode;
use roder_api::tools::{ToolSpec, is_workspace_tool};

use crate::runtime::Runtime;
use crate::turn::context::TurnContext;
use crate::turn::plan::{TurnPlan, TurnWorkspace};

/// Why a call may not run at all, as the model will read it: the tool is
/// outside an allowlist.
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
    Ok(())
}

/// Counts one call against the thread's profile limit
/// (`limits.max_tool_calls`); past it the call is refused, as the model
/// will read it.
pub(crate) fn count_call(plan: &TurnPlan) -> Result<(), String> {
    let made = plan
        .tool_calls
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    match plan.max_tool_calls {
        Some(max) if made >= max => Err(format!(
            "this turn reached its limit of {max} tool calls (the profile's limits.max_tool_calls); \
             answer with what you have"
        )),
        _ => Ok(()),
    }
}

/// The tools the model is offered this turn: allowed by the lists, not
/// denied as a whole tool by a rule, needing no workspace the thread lacks,
/// and, in `plan`, only those that read.
pub(crate) fn offered_tools(runtime: &Runtime, plan: &TurnPlan) -> Vec<ToolSpec> {
    let has_workspace = !matches!(plan.workspace, TurnWorkspace::Disabled);
    let mode = plan.mode_over(runtime.config.policy_mode);
    let rules = runtime.approvals.rules();
    let thread = plan.thread_rules();
    let denied = |name: &str| {
        rules
            .deny
            .iter()
            .chain(&thread.rules.deny)
            .any(|rule| rule.tool_pattern_matches(name))
    };
    let installed = runtime
        .tools
        .executors()
        .chain(plan.thread_tools.executors())
        .filter(|tool| mode != PolicyMode::Plan || tool.effects().only_reads())
        .map(|tool| tool.spec())
        .filter(|spec| has_workspace || !is_workspace_tool(&spec.name));
    installed
        .chain(plan.external_tools.iter().cloned())
        .filter(|spec| check(runtime, plan, &spec.name).is_ok() && !denied(&spec.name))
        .collect()
}

/// One call, as the rule sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    pub tool_name: &'a str,
    pub effects: ToolEffects,
    pub scope: &'a CallScope,
}

/// Whether anyone can be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Approver {
    /// At least one approver is attached to the thread.
    Attached,
    /// None is, but the thread requires one: the ask waits for it.
    Required,
    /// None is and none is required: this decides what would ask.
    Absent(NoApprover),
}

/// Everything besides the call that the rule reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings<'a> {
    pub mode: PolicyMode,
    /// The runtime's rules (configuration and `allow_always`), then the
    /// thread's.
    pub rules: [&'a ApprovalRules; 2],
    pub workspace_root: Option<&'a Path>,
    pub approver: Approver,
}

/// What happens to a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Run(DecidedBy),
    Refuse {
        by: DecidedBy,
        reason: String,
    },
    /// Ask a person (waiting for an approver first when none is attached).
    Ask,
}

/// Decides a call made now in the turn of `ctx`, with the workspace root
/// `root` (paths in rules are relative to it).
pub(crate) fn decide_in(ctx: TurnContext<'_>, call: Call<'_>, root: Option<&Path>) -> Verdict {
    let runtime = ctx.runtime;
    let rules = runtime.approvals.rules();
    let thread = ctx.plan.thread_rules();
    let approver = if runtime.approvals.hub.has_approver(ctx.plan.thread_id()) {
        Approver::Attached
    } else if thread.requirement == ApprovalRequirement::Required {
        Approver::Required
    } else {
        Approver::Absent(runtime.approvals.no_approver)
    };
    decide(
        call,
        Settings {
            mode: ctx.mode(),
            rules: [&rules, &thread.rules],
            workspace_root: root,
            approver,
        },
    )
}

/// A tool the client declared and resolves itself: only deny rules about
/// the whole tool apply; the client decides by answering it.
pub(crate) fn decide_external(ctx: TurnContext<'_>, tool_name: &str) -> Verdict {
    let rules = ctx.runtime.approvals.rules();
    let thread = ctx.plan.thread_rules();
    match rules
        .deny
        .iter()
        .chain(&thread.rules.deny)
        .find(|rule| rule.tool_pattern_matches(tool_name))
    {
        Some(rule) => Verdict::Refuse {
            by: DecidedBy::Rule {
                rule: rule.to_string(),
            },
            reason: format!("the deny rule `{rule}` forbids tool \"{tool_name}\""),
        },
        None => Verdict::Run(DecidedBy::ExternalTool),
    }
}

/// Decides one call. Pure: no I/O, no clock.
pub(crate) fn decide(call: Call<'_>, settings: Settings<'_>) -> Verdict {
    let subject = RuleSubject {
        tool_name: call.tool_name,
        scope: call.scope,
        workspace_root: settings.workspace_root,
    };
    let rules = settings.rules;
    if let Some(rule) = rules
        .iter()
        .flat_map(|set| &set.deny)
        .find(|rule| rule.denies(&subject))
    {
        return Verdict::Refuse {
            by: DecidedBy::Rule {
                rule: rule.to_string(),
            },
            reason: format!(
                "the deny rule `{rule}` forbids this call; do not retry it, find another way or ask the user"
            ),
        };
    }
    let mode = settings.mode;
    let by_mode = DecidedBy::Mode { mode };
    if mode == PolicyMode::Bypass || call.effects.only_reads() {
        return Verdict::Run(by_mode);
    }
    if mode == PolicyMode::Plan {
        return Verdict::Refuse {
            by: by_mode,
            reason: format!(
                "tool \"{}\" changes things ({}), which the plan mode forbids: only reading tools may run",
                call.tool_name, call.effects
            ),
        };
    }
    if let Some(rule) = allowing_rule(&rules, &subject) {
        return Verdict::Run(DecidedBy::Rule { rule });
    }
    if mode == PolicyMode::AcceptEdits
        && call.effects.only_edits()
        && call.scope.command.is_none()
        && !call.scope.paths.is_empty()
        && call
            .scope
            .paths
            .iter()
            .all(|path| workspace_relative(path, settings.workspace_root).is_some())
    {
        return Verdict::Run(by_mode);
    }
    match settings.approver {
        Approver::Attached | Approver::Required => Verdict::Ask,
        Approver::Absent(NoApprover::Allow) => Verdict::Run(DecidedBy::NoApprover),
        Approver::Absent(NoApprover::Reject) => Verdict::Refuse {
            by: DecidedBy::NoApprover,
            reason: format!(
                "this call of \"{}\" ({}) needs a person's approval under the {mode} mode, and no approver is attached to the thread ([approvals] no_approver = \"reject\"); it was not run",
                call.tool_name, call.effects
            ),
        },
    }
}

/// The allow rule that vouches for the whole call, as written: a tool rule,
/// exec rules covering every command of its line, or a write rule covering
/// every path it writes.
fn allowing_rule(rules: &[&ApprovalRules; 2], subject: &RuleSubject<'_>) -> Option<String> {
    let allow: Vec<&ApprovalRule> = rules.iter().flat_map(|set| &set.allow).collect();
    if let Some(rule) = allow.iter().find(|rule| rule.allows(subject)) {
        return Some(rule.to_string());
    }
    let line = subject.scope.command.as_deref()?;
    exec_rules_allow(&allow, line).then(|| {
        let exec: Vec<String> = allow
            .iter()
            .filter(|rule| matches!(rule, ApprovalRule::Exec { .. }))
            .map(|rule| rule.to_string())
            .collect();
        exec.join(", ")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const READ: ToolEffects = ToolEffects::READ;
    const EDIT: ToolEffects = ToolEffects::WRITE;
    const EXEC: ToolEffects = ToolEffects::EXECUTE;
    const NET: ToolEffects = ToolEffects::NETWORK;

    fn rules(allow: &[&str], deny: &[&str]) -> ApprovalRules {
        ApprovalRules {
            allow: allow.iter().map(|rule| rule.parse().unwrap()).collect(),
            deny: deny.iter().map(|rule| rule.parse().unwrap()).collect(),
        }
    }

    fn verdict(
        mode: PolicyMode,
        effects: ToolEffects,
        scope: &CallScope,
        runtime: &ApprovalRules,
        approver: Approver,
    ) -> Verdict {
        let thread = ApprovalRules::default();
        decide(
            Call {
                tool_name: "tool",
                effects,
                scope,
            },
            Settings {
                mode,
                rules: [runtime, &thread],
                workspace_root: Some(Path::new("/w")),
                approver,
            },
        )
    }

    fn mode_ran(mode: PolicyMode) -> Verdict {
        Verdict::Run(DecidedBy::Mode { mode })
    }

    /// Every mode against every class of effects, with an approver attached.
    #[test]
    fn the_mode_table() {
        let none = ApprovalRules::default();
        let edit = CallScope::paths(["src/a.rs"]);
        let command = CallScope::command("cargo test");
        let nothing = CallScope::default();
        let at = Approver::Attached;
        use PolicyMode::*;
        for mode in PolicyMode::ALL {
            assert_eq!(
                verdict(mode, READ, &nothing, &none, at),
                mode_ran(mode),
                "{mode}"
            );
        }
        for (effects, scope) in [(EDIT, &edit), (EXEC, &command), (NET, &nothing)] {
            assert!(matches!(
                verdict(Plan, effects, scope, &none, at),
                Verdict::Refuse { .. }
            ));
            assert_eq!(verdict(Default, effects, scope, &none, at), Verdict::Ask);
            assert_eq!(verdict(Bypass, effects, scope, &none, at), mode_ran(Bypass));
        }
        assert_eq!(
            verdict(AcceptEdits, EDIT, &edit, &none, at),
            mode_ran(AcceptEdits)
        );
        assert_eq!(
            verdict(AcceptEdits, EXEC, &command, &none, at),
            Verdict::Ask
        );
        assert_eq!(verdict(AcceptEdits, NET, &nothing, &none, at), Verdict::Ask);
        // An edit that leaves the workspace, or names no path, still asks.
        let outside = CallScope::paths(["../elsewhere"]);
        assert_eq!(
            verdict(AcceptEdits, EDIT, &outside, &none, at),
            Verdict::Ask
        );
        assert_eq!(
            verdict(AcceptEdits, EDIT, &nothing, &none, at),
            Verdict::Ask
        );
        // A tool that declares nothing writes and runs commands.
        let undeclared = ToolEffects::UNDECLARED;
        assert_eq!(
            verdict(AcceptEdits, undeclared, &nothing, &none, at),
            Verdict::Ask
        );
    }

    #[test]
    fn deny_beats_every_mode_and_every_allow() {
        let set = rules(&["exec:rm", "tool:tool"], &["exec:rm"]);
        let rm = CallScope::command("rm -rf build");
        for mode in PolicyMode::ALL {
            let refused = verdict(mode, EXEC, &rm, &set, Approver::Attached);
            assert!(
                matches!(&refused, Verdict::Refuse { by: DecidedBy::Rule { rule }, .. } if rule == "exec:rm"),
                "{mode}: {refused:?}"
            );
        }
        let reads = rules(&[], &["tool:tool"]);
        assert!(matches!(
            verdict(
                PolicyMode::Bypass,
                READ,
                &CallScope::default(),
                &reads,
                Approver::Attached
            ),
            Verdict::Refuse { .. }
        ));
    }

    #[test]
    fn allow_rules_let_a_call_run_without_asking() {
        let set = rules(
            &["exec:cargo test", "exec:git status", "write:docs/**"],
            &[],
        );
        let ran_by = |scope: &CallScope, effects| {
            verdict(
                PolicyMode::Default,
                effects,
                scope,
                &set,
                Approver::Attached,
            )
        };
        assert_eq!(
            ran_by(&CallScope::command("cargo test -p x"), EXEC),
            Verdict::Run(DecidedBy::Rule {
                rule: "exec:cargo test, exec:git status".into()
            })
        );
        assert_eq!(
            ran_by(&CallScope::command("cargo test; rm x"), EXEC),
            Verdict::Ask
        );
        assert_eq!(
            ran_by(&CallScope::paths(["docs/a.md"]), EDIT),
            Verdict::Run(DecidedBy::Rule {
                rule: "write:docs/**".into()
            })
        );
        assert_eq!(ran_by(&CallScope::paths(["src/a.rs"]), EDIT), Verdict::Ask);
        // Rules do not open the plan mode.
        assert!(matches!(
            verdict(
                PolicyMode::Plan,
                EXEC,
                &CallScope::command("cargo test"),
                &set,
                Approver::Attached
            ),
            Verdict::Refuse { .. }
        ));
    }

    #[test]
    fn without_an_approver_no_approver_decides() {
        let none = ApprovalRules::default();
        let command = CallScope::command("make");
        assert_eq!(
            verdict(
                PolicyMode::Default,
                EXEC,
                &command,
                &none,
                Approver::Absent(NoApprover::Allow)
            ),
            Verdict::Run(DecidedBy::NoApprover)
        );
        assert!(matches!(
            verdict(
                PolicyMode::Default,
                EXEC,
                &command,
                &none,
                Approver::Absent(NoApprover::Reject)
            ),
            Verdict::Refuse {
                by: DecidedBy::NoApprover,
                ..
            }
        ));
        assert_eq!(
            verdict(
                PolicyMode::Default,
                EXEC,
                &command,
                &none,
                Approver::Required
            ),
            Verdict::Ask
        );
        // Reads never need anyone.
        assert_eq!(
            verdict(
                PolicyMode::Default,
                READ,
                &command,
                &none,
                Approver::Absent(NoApprover::Reject)
            ),
            mode_ran(PolicyMode::Default)
        );
    }
}

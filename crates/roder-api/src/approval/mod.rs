//! Approvals: deciding, before a tool call runs, whether it runs.
//!
//! Tools declare their [effects](ToolEffects) and what one call would touch
//! ([`CallScope`]); modes ([`PolicyMode`](crate::policy_mode::PolicyMode))
//! and [rules](ApprovalRule) decide from those. What neither settles is
//! asked of a person, with a [`CallPreview`], and answered with an
//! [`ApprovalDecision`]. The rule itself lives in one place,
//! `roder-core`'s `policy` module; this module holds the vocabulary.

mod command_line;
mod decision;
mod effects;
mod preview;
mod rule;
mod scope;

pub use command_line::CommandLine;
pub use decision::{ApprovalAnswer, ApprovalDecision, DecidedBy};
pub use effects::{ToolEffects, ToolKind};
pub use preview::{CallPreview, CommandPreview, FilePreview, RunsOn};
pub use rule::{
    ApprovalRule, PatternMatcher, RuleParseError, RuleSubject, exec_rules_allow, workspace_relative,
};
pub use scope::CallScope;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::policy_mode::PolicyMode;

/// Allow and deny rules. Deny beats allow, and beats every mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRules {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<ApprovalRule>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<ApprovalRule>,
}

impl ApprovalRules {
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }

    /// Adds the rules of `other` not already here.
    pub fn merge(&mut self, other: &ApprovalRules) {
        for (mine, theirs) in [
            (&mut self.allow, &other.allow),
            (&mut self.deny, &other.deny),
        ] {
            for rule in theirs {
                if !mine.contains(rule) {
                    mine.push(rule.clone());
                }
            }
        }
    }
}

/// What a call that would ask does when no approver is attached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoApprover {
    /// Run it (library use, scripts, the non-interactive `roder exec`).
    #[default]
    Allow,
    /// Refuse it (hosted use: nothing runs that nobody approved).
    Reject,
}

/// Whether a thread's asks wait for an approver to attach.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalRequirement {
    /// With no approver attached, `no_approver` decides at once.
    #[default]
    Optional,
    /// An ask waits for an approver to attach, up to the ask's timeout.
    Required,
}

/// A thread's own approval settings, persisted with it.
///
/// ```
/// use roder_api::approval::ThreadApprovals;
/// use roder_api::policy_mode::PolicyMode;
///
/// let settings = ThreadApprovals { mode: Some(PolicyMode::AcceptEdits), ..Default::default() };
/// assert!(!settings.is_default());
/// assert!(ThreadApprovals::default().is_default());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadApprovals {
    /// The thread's mode (unset: the runtime's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<PolicyMode>,
    /// Rules of this thread (given at creation, or kept by `allow_thread`).
    #[serde(default, skip_serializing_if = "ApprovalRules::is_empty")]
    pub rules: ApprovalRules,
    #[serde(default, skip_serializing_if = "is_optional")]
    pub requirement: ApprovalRequirement,
}

fn is_optional(requirement: &ApprovalRequirement) -> bool {
    *requirement == ApprovalRequirement::Optional
}

impl ThreadApprovals {
    pub fn is_default(&self) -> bool {
        *self == ThreadApprovals::default()
    }
}

/// Where rules a person chose to keep for good (`allow_always`,
/// `reject_always`) are written, so a new process honours them: the CLI
/// writes them to `config.toml`.
pub trait ApprovalRuleStore: Send + Sync + 'static {
    /// Persists `rules` (added to what is kept already).
    fn keep(&self, rules: &ApprovalRules) -> anyhow::Result<()>;
}

/// A shared rule store.
pub type SharedApprovalRuleStore = Arc<dyn ApprovalRuleStore>;

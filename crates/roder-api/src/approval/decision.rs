//! A person's answer to an ask, and who settled a call.

use serde::{Deserialize, Serialize};

use crate::policy_mode::PolicyMode;

/// What a person decided about one call.
///
/// ```
/// use roder_api::approval::ApprovalDecision;
///
/// assert!(ApprovalDecision::AllowThread.allows());
/// assert!(!ApprovalDecision::RejectAndStop.allows());
/// assert_eq!(serde_json::to_string(&ApprovalDecision::AllowOnce).unwrap(), r#""allow_once""#);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Run this call.
    AllowOnce,
    /// Run it, and keep an allow rule for such calls with the thread.
    AllowThread,
    /// Run it, and keep an allow rule for such calls in the configuration.
    AllowAlways,
    /// Do not run it; the model reads that the person refused.
    Reject,
    /// Do not run it, and keep a deny rule for such calls in the
    /// configuration.
    RejectAlways,
    /// Do not run it, and end the turn as interrupted.
    RejectAndStop,
}

impl ApprovalDecision {
    pub const ALL: [ApprovalDecision; 6] = [
        ApprovalDecision::AllowOnce,
        ApprovalDecision::AllowThread,
        ApprovalDecision::AllowAlways,
        ApprovalDecision::Reject,
        ApprovalDecision::RejectAlways,
        ApprovalDecision::RejectAndStop,
    ];

    pub fn allows(self) -> bool {
        matches!(
            self,
            ApprovalDecision::AllowOnce
                | ApprovalDecision::AllowThread
                | ApprovalDecision::AllowAlways
        )
    }

    /// The wire name (`allow_once`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalDecision::AllowOnce => "allow_once",
            ApprovalDecision::AllowThread => "allow_thread",
            ApprovalDecision::AllowAlways => "allow_always",
            ApprovalDecision::Reject => "reject",
            ApprovalDecision::RejectAlways => "reject_always",
            ApprovalDecision::RejectAndStop => "reject_and_stop",
        }
    }
}

/// An answer to an ask, as a client sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalAnswer {
    pub decision: ApprovalDecision,
    /// Shown to the model with a rejection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Who or what settled whether a call runs. Recorded in the log with every
/// call that runs (`ToolCallStarted`) and every ask (`ApprovalResolved`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DecidedBy {
    /// The mode: it lets such calls run (or, in `plan`, refuses them).
    Mode { mode: PolicyMode },
    /// An allow or deny rule, as written.
    Rule { rule: String },
    /// A person, through the client with this id.
    Client { client_id: String },
    /// Nobody could be asked: `[approvals] no_approver` decided.
    NoApprover,
    /// Nobody answered within `[approvals] timeout_s`.
    Timeout,
    /// The turn was interrupted while the ask waited.
    Interrupt,
    /// The turn's deadline passed while the ask waited.
    Deadline,
    /// The process waiting for the answer stopped (killed, crashed); the
    /// next writer of the thread closed the ask.
    ProcessStopped,
    /// A tool the client declared and resolves itself: the client decides
    /// by answering it.
    ExternalTool,
}

impl std::fmt::Display for DecidedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecidedBy::Mode { mode } => write!(f, "the {} mode", mode.as_str()),
            DecidedBy::Rule { rule } => write!(f, "the rule `{rule}`"),
            DecidedBy::Client { client_id } => write!(f, "client {client_id}"),
            DecidedBy::NoApprover => f.write_str("no_approver (nobody was attached to ask)"),
            DecidedBy::Timeout => f.write_str("the approval timeout"),
            DecidedBy::Interrupt => f.write_str("an interrupt"),
            DecidedBy::Deadline => f.write_str("the turn's deadline"),
            DecidedBy::ProcessStopped => f.write_str("the process stopping"),
            DecidedBy::ExternalTool => f.write_str("the client that resolves this tool"),
        }
    }
}

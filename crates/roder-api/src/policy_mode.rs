//! Who decides what the model's tools may do without asking.

use serde::{Deserialize, Serialize};

/// The approval mode of a runtime, a thread or a turn: which calls run
/// without asking. The sandbox policy and deny rules hold under every mode.
///
/// The names are the ones clients already use (ACP agents, upstream roder).
/// Two older names stay as aliases: `read_only` is `plan`, `accept_all` is
/// `accept_edits` (they are constants in code, so code written against them
/// keeps compiling).
///
/// ```
/// use roder_api::policy_mode::PolicyMode;
///
/// assert_eq!("accept_edits".parse::<PolicyMode>().unwrap(), PolicyMode::AcceptEdits);
/// assert_eq!("read_only".parse::<PolicyMode>().unwrap(), PolicyMode::Plan);
/// assert_eq!(PolicyMode::AcceptAll, PolicyMode::AcceptEdits);
/// assert_eq!(serde_json::to_string(&PolicyMode::Bypass).unwrap(), r#""bypass""#);
/// assert!("yolo".parse::<PolicyMode>().unwrap_err().contains("plan, default, accept_edits, bypass"));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyMode {
    /// Only tools that read are offered; nothing changes.
    #[serde(alias = "read_only")]
    Plan,
    /// Reads run; every write and every command asks.
    #[default]
    Default,
    /// Reads and file edits inside the workspace run; commands ask.
    #[serde(alias = "accept_all")]
    AcceptEdits,
    /// Nothing asks. File tools may also write inside `.git`.
    Bypass,
}

#[allow(non_upper_case_globals)]
impl PolicyMode {
    /// The second wave's name of [`PolicyMode::Plan`].
    pub const ReadOnly: PolicyMode = PolicyMode::Plan;
    /// The second wave's name of [`PolicyMode::AcceptEdits`].
    pub const AcceptAll: PolicyMode = PolicyMode::AcceptEdits;

    pub const ALL: [PolicyMode; 4] = [
        PolicyMode::Plan,
        PolicyMode::Default,
        PolicyMode::AcceptEdits,
        PolicyMode::Bypass,
    ];

    /// Whether tools that change files or run commands are offered at all.
    pub fn allows_mutation(self) -> bool {
        !matches!(self, PolicyMode::Plan)
    }

    /// Whether file tools may write under `.git/`.
    pub fn allows_vcs_metadata_writes(self) -> bool {
        matches!(self, PolicyMode::Bypass)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PolicyMode::Plan => "plan",
            PolicyMode::Default => "default",
            PolicyMode::AcceptEdits => "accept_edits",
            PolicyMode::Bypass => "bypass",
        }
    }

    /// One line for a person choosing a mode.
    pub fn description(self) -> &'static str {
        match self {
            PolicyMode::Plan => "Only reading tools are offered; nothing changes.",
            PolicyMode::Default => "Reads run; every file edit and every command asks.",
            PolicyMode::AcceptEdits => "Reads and file edits run; commands ask.",
            PolicyMode::Bypass => "Nothing asks (the sandbox and deny rules still hold).",
        }
    }
}

impl std::fmt::Display for PolicyMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for PolicyMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "plan" | "read_only" => Ok(PolicyMode::Plan),
            "default" => Ok(PolicyMode::Default),
            "accept_edits" | "accept_all" => Ok(PolicyMode::AcceptEdits),
            "bypass" => Ok(PolicyMode::Bypass),
            other => Err(format!(
                "unknown policy mode \"{other}\" (known: plan, default, accept_edits, bypass)"
            )),
        }
    }
}

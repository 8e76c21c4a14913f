//! Tool and model names in profile files: Roder's own, and Claude Code's
//! spellings mapped to Roder's.
//!
//! An allowed name Roder does not know is an error (a typo would otherwise
//! silently take a tool away, or, for a deny list, silently leave it).
//! Claude Code tools Roder has no counterpart for (`WebFetch`, `Task`, ...)
//! are dropped: there is nothing to allow or deny.

use roder_api::approval::ApprovalRule;
use roder_api::tools::WORKSPACE_TOOL_NAMES;

use crate::error::ProfileError;

/// Claude Code's tool names and Roder's tools that do the same.
const CLAUDE_TOOLS: &[(&str, &[&str])] = &[
    ("Read", &["read_file"]),
    ("Write", &["write_file"]),
    ("Edit", &["edit"]),
    ("MultiEdit", &["multi_edit"]),
    ("Bash", &["shell", "exec_command"]),
    ("Grep", &["grep"]),
    ("Glob", &["glob"]),
    ("LS", &["list_files"]),
    ("WebFetch", &[]),
    ("WebSearch", &[]),
    ("Task", &[]),
    ("Agent", &[]),
    ("TodoWrite", &[]),
    ("NotebookEdit", &[]),
    ("NotebookRead", &[]),
    ("BashOutput", &[]),
    ("KillShell", &[]),
    ("KillBash", &[]),
    ("ExitPlanMode", &[]),
    ("SlashCommand", &[]),
    ("Skill", &[]),
];

fn known_roder_tool(name: &str) -> bool {
    WORKSPACE_TOOL_NAMES.contains(&name)
        || name
            .strip_prefix("mcp__")
            .is_some_and(|rest| rest.contains("__") && !rest.contains(char::is_whitespace))
}

/// One name: Roder's names pass, Claude Code's map.
fn map_name(name: &str, origin: &str) -> Result<Vec<String>, ProfileError> {
    if known_roder_tool(name) {
        return Ok(vec![name.to_string()]);
    }
    if let Some((_, roder)) = CLAUDE_TOOLS.iter().find(|(claude, _)| *claude == name) {
        return Ok(roder.iter().map(|tool| tool.to_string()).collect());
    }
    Err(ProfileError::invalid(
        origin,
        format!(
            "unknown tool {name:?} (Roder's tools: {}, mcp__SERVER__TOOL; Claude Code's names are accepted too)",
            WORKSPACE_TOOL_NAMES.join(", ")
        ),
    ))
}

/// `tools`: exact tool names.
pub fn allowed(entries: Vec<String>, origin: &str) -> Result<Vec<String>, ProfileError> {
    let mut tools = Vec::new();
    for entry in entries {
        if entry.contains('(') || entry.contains(':') {
            return Err(ProfileError::invalid(
                origin,
                format!(
                    "tools entry {entry:?}: tools lists whole tools; put command or path rules in disallowed_tools"
                ),
            ));
        }
        for tool in map_name(&entry, origin)? {
            if !tools.contains(&tool) {
                tools.push(tool);
            }
        }
    }
    Ok(tools)
}

/// `disallowed_tools`: tool names (Roder's or Claude Code's), Claude Code's
/// `Bash(git push:*)`, or Roder's approval rules (`tool:`, `exec:`,
/// `write:`). Every entry becomes a deny rule of the thread.
pub fn denied(entries: Vec<String>, origin: &str) -> Result<Vec<String>, ProfileError> {
    let mut rules = Vec::new();
    for entry in entries {
        let mapped = if let Some(inner) = entry
            .strip_prefix("Bash(")
            .and_then(|rest| rest.strip_suffix(')'))
        {
            let prefix = inner.strip_suffix(":*").unwrap_or(inner).trim();
            vec![format!("exec:{prefix}")]
        } else if ["tool:", "exec:", "write:"]
            .iter()
            .any(|kind| entry.starts_with(kind))
        {
            vec![entry.clone()]
        } else {
            map_name(&entry, origin)?
        };
        for rule in mapped {
            rule.parse::<ApprovalRule>().map_err(|why| {
                ProfileError::invalid(origin, format!("disallowed_tools entry {entry:?}: {why}"))
            })?;
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
    }
    Ok(rules)
}

/// `model`: `provider/model`; Claude Code's `inherit` (the runtime's model,
/// `None`) and its aliases.
pub fn model(text: &str, origin: &str) -> Result<Option<String>, ProfileError> {
    let alias = match text {
        "inherit" => return Ok(None),
        "sonnet" => Some("anthropic/claude-sonnet-4-5"),
        "opus" => Some("anthropic/claude-opus-4-1"),
        "haiku" => Some("anthropic/claude-haiku-4-5"),
        _ => None,
    };
    if let Some(alias) = alias {
        return Ok(Some(alias.to_string()));
    }
    match text.split_once('/') {
        Some((provider, model))
            if !provider.is_empty()
                && !model.is_empty()
                && !text.chars().any(|c| c.is_whitespace() || c.is_control()) =>
        {
            Ok(Some(text.to_string()))
        }
        _ => Err(ProfileError::invalid(
            origin,
            format!(
                "model {text:?} is not provider/model (for example openai/gpt-5), inherit, sonnet, opus or haiku"
            ),
        )),
    }
}

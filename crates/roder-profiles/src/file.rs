//! One profile file: Markdown with TOML (`+++`) or YAML (`---`) front
//! matter whose body is the instructions, or a plain TOML file with
//! `instructions`. Claude Code subagent files (YAML front matter with
//! `name`, `description`, `tools`, `model`, `disallowedTools`,
//! `permissionMode`, `color`) load as they are.
//!
//! Every top-level key must be known: unknown keys are one error that names
//! them all, so a misspelt restriction (`allowed-tools`) never silently
//! grants every tool.

use std::collections::BTreeMap;

use roder_api::inference::ReasoningEffort;
use roder_api::policy_mode::PolicyMode;
use roder_api::profile::{ProfileLimits, ProfileMcpServer, ProfileSandbox};
use serde::Deserialize;

use crate::error::ProfileError;
use crate::{secrets, tool_names};

/// The keys a profile may have (Claude Code's spellings included).
const KNOWN_KEYS: &[&str] = &[
    "name",
    "description",
    "instructions",
    "model",
    "reasoning_effort",
    "tools",
    "disallowed_tools",
    "disallowedTools",
    "policy_mode",
    "permissionMode",
    "sandbox",
    "runner",
    "mcp_servers",
    "limits",
    "extends",
    "color",
];

/// What one file says, before `extends` is applied. `None` is "not set
/// here" (the parent's value, or the default, applies).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfileDoc {
    pub name: Option<String>,
    pub description: Option<String>,
    pub instructions: Option<String>,
    pub model: Option<String>,
    pub reasoning_effort: Option<ReasoningEffort>,
    pub tools: Option<Vec<String>>,
    pub disallowed_tools: Vec<String>,
    pub policy_mode: Option<PolicyMode>,
    pub sandbox: ProfileSandbox,
    pub runner: Option<String>,
    pub mcp_servers: BTreeMap<String, ProfileMcpServer>,
    pub limits: ProfileLimits,
    pub extends: Option<String>,
}

/// The file format, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Markdown,
    Toml,
}

impl FileKind {
    pub fn of(path: &str) -> Option<FileKind> {
        if path.ends_with(".md") {
            Some(FileKind::Markdown)
        } else if path.ends_with(".toml") {
            Some(FileKind::Toml)
        } else {
            None
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ToolList {
    List(Vec<String>),
    /// Claude Code writes `tools: Read, Grep, Glob`.
    Commas(String),
}

impl ToolList {
    fn entries(self) -> Vec<String> {
        match self {
            ToolList::List(list) => list,
            ToolList::Commas(text) => text
                .split(',')
                .map(str::trim)
                .filter(|entry| !entry.is_empty())
                .map(str::to_string)
                .collect(),
        }
    }
}

#[derive(Debug, Deserialize)]
struct Raw {
    name: Option<String>,
    description: Option<String>,
    instructions: Option<String>,
    model: Option<String>,
    reasoning_effort: Option<ReasoningEffort>,
    tools: Option<ToolList>,
    #[serde(alias = "disallowedTools")]
    disallowed_tools: Option<ToolList>,
    #[serde(alias = "permissionMode")]
    policy_mode: Option<String>,
    sandbox: Option<ProfileSandbox>,
    runner: Option<String>,
    mcp_servers: Option<BTreeMap<String, ProfileMcpServer>>,
    limits: Option<ProfileLimits>,
    extends: Option<String>,
    /// Claude Code's display colour: accepted, not used.
    #[allow(dead_code)]
    color: Option<String>,
}

/// Parses a profile file's text. `origin` names it in errors.
///
/// ```
/// use roder_profiles::file::{parse, FileKind};
///
/// let doc = parse("+++\nname = \"r\"\ntools = [\"read_file\"]\n+++\nReview.\n", FileKind::Markdown, "r.md").unwrap();
/// assert_eq!(doc.instructions.as_deref(), Some("Review."));
/// let error = parse("+++\nallowed-tools = [\"x\"]\n+++\n", FileKind::Markdown, "r.md").unwrap_err();
/// assert!(error.to_string().contains("allowed-tools"));
/// ```
pub fn parse(text: &str, kind: FileKind, origin: &str) -> Result<ProfileDoc, ProfileError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (value, body) = match kind {
        FileKind::Toml => (toml_value(text, origin)?, None),
        FileKind::Markdown => {
            let front = split_front_matter(text).ok_or_else(|| {
                ProfileError::invalid(
                    origin,
                    "a Markdown profile starts with front matter: a +++ line (TOML) or a --- line (YAML), then a closing line of the same",
                )
            })?;
            let value = match front.syntax {
                Syntax::Toml => toml_value(front.header, origin)?,
                Syntax::Yaml => yaml_value(front.header, origin)?,
            };
            (value, Some(front.body.trim().to_string()))
        }
    };
    check_keys(&value, origin)?;
    secrets::refuse_literal_secrets(&value, origin)?;
    if let Some(body) = &body {
        secrets::refuse_in_text(body, "the instructions", origin)?;
    }
    let raw: Raw =
        serde_json::from_value(value).map_err(|error| ProfileError::invalid(origin, error))?;
    into_doc(raw, body, origin)
}

fn into_doc(raw: Raw, body: Option<String>, origin: &str) -> Result<ProfileDoc, ProfileError> {
    let instructions = match (raw.instructions, body) {
        (Some(_), Some(body)) if !body.is_empty() => {
            return Err(ProfileError::invalid(
                origin,
                "has both an instructions key and a body; keep one",
            ));
        }
        (Some(instructions), _) => Some(instructions),
        (None, Some(body)) if !body.is_empty() => Some(body),
        (None, _) => None,
    };
    let tools = match raw.tools {
        Some(list) => Some(tool_names::allowed(list.entries(), origin)?),
        None => None,
    };
    let disallowed_tools = match raw.disallowed_tools {
        Some(list) => tool_names::denied(list.entries(), origin)?,
        None => Vec::new(),
    };
    let policy_mode = raw
        .policy_mode
        .map(|mode| policy_mode(&mode, origin))
        .transpose()?;
    let model = raw
        .model
        .map(|model| tool_names::model(&model, origin))
        .transpose()?
        .flatten();
    if let Some(name) = &raw.name {
        crate::selector::check_name(name).map_err(|why| ProfileError::invalid(origin, why))?;
    }
    for (server, entry) in raw.mcp_servers.iter().flatten() {
        secrets::check_mcp_server(server, entry, origin)?;
    }
    if raw.limits.as_ref().and_then(|limits| limits.max_tool_calls) == Some(0) {
        return Err(ProfileError::invalid(
            origin,
            "limits.max_tool_calls must be at least 1",
        ));
    }
    Ok(ProfileDoc {
        name: raw.name,
        description: raw.description,
        instructions,
        model,
        reasoning_effort: raw.reasoning_effort,
        tools,
        disallowed_tools,
        policy_mode,
        sandbox: raw.sandbox.unwrap_or_default(),
        runner: raw.runner,
        mcp_servers: raw.mcp_servers.unwrap_or_default(),
        limits: raw.limits.unwrap_or_default(),
        extends: raw.extends,
    })
}

/// Roder's mode names, and Claude Code's `permissionMode` values.
fn policy_mode(text: &str, origin: &str) -> Result<PolicyMode, ProfileError> {
    match text {
        "acceptEdits" => Ok(PolicyMode::AcceptEdits),
        "bypassPermissions" => Ok(PolicyMode::Bypass),
        other => other
            .parse::<PolicyMode>()
            .map_err(|why| ProfileError::invalid(origin, format!("policy_mode: {why}"))),
    }
}

fn check_keys(value: &serde_json::Value, origin: &str) -> Result<(), ProfileError> {
    let Some(table) = value.as_object() else {
        return Err(ProfileError::invalid(
            origin,
            "front matter must be a table of keys",
        ));
    };
    let unknown: Vec<&str> = table
        .keys()
        .map(String::as_str)
        .filter(|key| !KNOWN_KEYS.contains(key))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(ProfileError::invalid(
        origin,
        format!(
            "unknown key{} {} (known: {})",
            if unknown.len() == 1 { "" } else { "s" },
            unknown
                .iter()
                .map(|key| format!("{key:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            KNOWN_KEYS.join(", ")
        ),
    ))
}

fn toml_value(text: &str, origin: &str) -> Result<serde_json::Value, ProfileError> {
    let table: toml::Table = toml::from_str(text)
        .map_err(|error| ProfileError::invalid(origin, format!("TOML: {error}")))?;
    serde_json::to_value(table).map_err(|error| ProfileError::invalid(origin, error))
}

fn yaml_value(text: &str, origin: &str) -> Result<serde_json::Value, ProfileError> {
    if text.trim().is_empty() {
        return Ok(serde_json::Value::Object(Default::default()));
    }
    serde_yaml_ng::from_str::<serde_json::Value>(text)
        .map_err(|error| ProfileError::invalid(origin, format!("YAML: {error}")))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Syntax {
    Toml,
    Yaml,
}

struct FrontMatter<'a> {
    syntax: Syntax,
    header: &'a str,
    body: &'a str,
}

/// Splits `+++`/`---` front matter from the body. Works on line boundaries
/// found by `split_inclusive`, so no byte offset can fall inside a
/// character.
fn split_front_matter(text: &str) -> Option<FrontMatter<'_>> {
    let mut lines = text.split_inclusive('\n');
    let first = lines.next()?;
    let fence = first.trim_end_matches(['\n', '\r']);
    let syntax = match fence {
        "+++" => Syntax::Toml,
        "---" => Syntax::Yaml,
        _ => return None,
    };
    let header_start = first.len();
    let mut offset = header_start;
    for line in lines {
        if line.trim_end_matches(['\n', '\r']) == fence {
            let header = text.get(header_start..offset)?;
            let body = text.get(offset + line.len()..)?;
            return Some(FrontMatter {
                syntax,
                header,
                body,
            });
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn toml_front_matter_with_a_body() {
        let doc = parse(
            "+++\nname = \"reviewer\"\ndescription = \"Reviews\"\nmodel = \"mock/mock\"\n\
             tools = [\"read_file\", \"grep\"]\ndisallowed_tools = [\"write_file\", \"exec:git push\"]\n\
             policy_mode = \"plan\"\nlimits = { turn_deadline_s = 60, max_tool_calls = 5 }\n\
             sandbox = { network = false }\n+++\n\nReview the diff.\n",
            FileKind::Markdown,
            "reviewer.md",
        )
        .unwrap();
        assert_eq!(doc.name.as_deref(), Some("reviewer"));
        assert_eq!(doc.instructions.as_deref(), Some("Review the diff."));
        assert_eq!(doc.tools, Some(vec!["read_file".into(), "grep".into()]));
        assert_eq!(
            doc.disallowed_tools,
            vec!["write_file".to_string(), "exec:git push".to_string()]
        );
        assert_eq!(doc.policy_mode, Some(PolicyMode::Plan));
        assert_eq!(doc.limits.max_tool_calls, Some(5));
        assert_eq!(doc.sandbox.network, Some(false));
    }

    #[test]
    fn a_claude_code_subagent_file_loads_as_it_is() {
        let text = "---\nname: code-reviewer\ndescription: Expert code review specialist. \
                    Use proactively after writing code.\ntools: Read, Grep, Glob, Bash\n\
                    model: inherit\ncolor: blue\n---\n\nYou are a senior code reviewer.\n";
        let doc = parse(text, FileKind::Markdown, "code-reviewer.md").unwrap();
        assert_eq!(doc.name.as_deref(), Some("code-reviewer"));
        assert_eq!(
            doc.tools,
            Some(vec![
                "read_file".into(),
                "grep".into(),
                "glob".into(),
                "shell".into(),
                "exec_command".into()
            ])
        );
        assert_eq!(doc.model, None, "inherit keeps the runtime's model");
        assert_eq!(
            doc.instructions.as_deref(),
            Some("You are a senior code reviewer.")
        );
        let denied = parse(
            "---\nname: x\ndisallowedTools: Write, Bash(git push:*)\npermissionMode: acceptEdits\nmodel: sonnet\n---\n",
            FileKind::Markdown,
            "x.md",
        )
        .unwrap();
        assert_eq!(
            denied.disallowed_tools,
            vec!["write_file".to_string(), "exec:git push".to_string()]
        );
        assert_eq!(denied.policy_mode, Some(PolicyMode::AcceptEdits));
        assert_eq!(denied.model.as_deref(), Some("anthropic/claude-sonnet-4-5"));
    }

    #[test]
    fn unknown_keys_are_named_all_at_once() {
        let error = parse(
            "---\nname: x\nallowed-tools: Read\nmaxTurns: 3\n---\n",
            FileKind::Markdown,
            "x.md",
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("\"allowed-tools\""), "{error}");
        assert!(error.contains("\"maxTurns\""), "{error}");
        let nested = parse("[limits]\nmax_turns = 3\n", FileKind::Toml, "x.toml")
            .unwrap_err()
            .to_string();
        assert!(nested.contains("max_turns"), "{nested}");
    }

    #[test]
    fn unknown_tool_names_are_errors() {
        let error = parse("tools = [\"fs.read\"]\n", FileKind::Toml, "x.toml")
            .unwrap_err()
            .to_string();
        assert!(error.contains("fs.read"), "{error}");
    }

    #[test]
    fn plain_toml_with_instructions() {
        let doc = parse(
            "name = \"t\"\ninstructions = \"\"\"\nDo it.\n\"\"\"\n",
            FileKind::Toml,
            "t.toml",
        )
        .unwrap();
        assert_eq!(doc.instructions.as_deref(), Some("Do it.\n"));
    }

    #[test]
    fn markdown_needs_front_matter() {
        assert!(parse("just text", FileKind::Markdown, "x.md").is_err());
        assert!(parse("+++\nname = \"x\"\n", FileKind::Markdown, "x.md").is_err());
    }

    proptest! {
        #[test]
        fn parsing_arbitrary_text_never_panics(text in "(\\+\\+\\+|---)?\\PC{0,200}(\\n(\\+\\+\\+|---))?\\PC{0,40}") {
            let _ = parse(&text, FileKind::Markdown, "x.md");
            let _ = parse(&text, FileKind::Toml, "x.toml");
        }

        #[test]
        fn front_matter_splitting_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = split_front_matter(&text);
        }
    }
}

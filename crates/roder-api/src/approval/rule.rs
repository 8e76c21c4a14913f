//! Allow and deny rules: by tool, by command prefix, by the paths a call
//! writes.
//!
//! Written as strings in `config.toml`, in thread settings and on the wire:
//! `exec:git status` (a command whose words start with `git status`),
//! `write:docs/**` (a call whose written paths all match the glob, relative
//! to the workspace root), `tool:mcp__time__*` or a bare tool name (every
//! call of matching tools).

use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::command_line::CommandLine;
use super::scope::CallScope;

/// One rule. Parse with [`str::parse`]; it displays as it is written.
///
/// ```
/// use roder_api::approval::ApprovalRule;
///
/// let rule: ApprovalRule = "exec:cargo test".parse().unwrap();
/// assert_eq!(rule.to_string(), "exec:cargo test");
/// assert!("write:".parse::<ApprovalRule>().is_err());
/// assert_eq!("read_file".parse::<ApprovalRule>().unwrap().to_string(), "tool:read_file");
/// ```
#[derive(Clone)]
pub enum ApprovalRule {
    /// Every call of the tools whose names match.
    Tool {
        pattern: String,
        matcher: PatternMatcher,
    },
    /// Commands whose words start with these words.
    Exec { prefix: Vec<String> },
    /// Calls whose written paths match (relative to the workspace root).
    Write {
        pattern: String,
        matcher: PatternMatcher,
    },
}

/// A rule's pattern, ready to match. Most patterns are plain names
/// (`write_file`, `exec_command`) and compare as strings; only a pattern
/// with glob syntax compiles a glob, whose matcher is a regular expression
/// that costs tens of microseconds to build. A thread started with a
/// profile parses every deny rule of it, so the difference is visible in a
/// thread's start.
///
/// ```
/// use roder_api::approval::ApprovalRule;
///
/// for (rule, name, hit) in [("tool:edit", "edit", true), ("tool:edit", "edits", false),
///                           ("tool:mcp__*", "mcp__time__now", true)] {
///     assert_eq!(rule.parse::<ApprovalRule>().unwrap().tool_pattern_matches(name), hit);
/// }
/// ```
#[derive(Clone, Debug)]
pub enum PatternMatcher {
    /// No glob syntax: the text itself.
    Literal(String),
    Glob(GlobMatcher),
}

impl PatternMatcher {
    pub fn is_match(&self, text: &str) -> bool {
        match self {
            PatternMatcher::Literal(literal) => literal == text,
            PatternMatcher::Glob(glob) => glob.is_match(text),
        }
    }
}

/// What a rule is matched against: one call.
#[derive(Debug, Clone, Copy)]
pub struct RuleSubject<'a> {
    pub tool_name: &'a str,
    pub scope: &'a CallScope,
    /// The thread's workspace root, to make written paths relative.
    pub workspace_root: Option<&'a Path>,
}

impl ApprovalRule {
    /// A rule allowing exactly this command's words as a prefix.
    pub fn exec(prefix: Vec<String>) -> Option<ApprovalRule> {
        (!prefix.is_empty()).then_some(ApprovalRule::Exec { prefix })
    }

    /// Whether this allow rule vouches for the whole call: every command it
    /// runs (the line must not be opaque) or every path it writes.
    pub fn allows(&self, subject: &RuleSubject<'_>) -> bool {
        match self {
            ApprovalRule::Tool { matcher, .. } => matcher.is_match(subject.tool_name),
            ApprovalRule::Exec { .. } => false,
            ApprovalRule::Write { matcher, .. } => {
                subject.scope.command.is_none()
                    && !subject.scope.paths.is_empty()
                    && subject.scope.paths.iter().all(|path| {
                        workspace_relative(path, subject.workspace_root)
                            .is_some_and(|relative| matcher.is_match(&relative))
                    })
            }
        }
    }

    /// Whether this deny rule catches any part of the call: the tool, any
    /// simple command of its line (its program matched by file name too, so
    /// `exec:rm` catches `/bin/rm`), or any path it writes.
    pub fn denies(&self, subject: &RuleSubject<'_>) -> bool {
        match self {
            ApprovalRule::Tool { matcher, .. } => matcher.is_match(subject.tool_name),
            ApprovalRule::Exec { prefix } => subject.scope.command.as_deref().is_some_and(|line| {
                CommandLine::parse(line)
                    .commands
                    .iter()
                    .any(|words| starts_with(words, prefix, true))
            }),
            ApprovalRule::Write { matcher, .. } => subject.scope.paths.iter().any(|path| {
                workspace_relative(path, subject.workspace_root)
                    .is_some_and(|relative| matcher.is_match(&relative))
                    || matcher.is_match(path)
            }),
        }
    }

    /// Whether this is a rule about whole tools (`tool:`): a denied tool is
    /// not offered to the model at all.
    pub fn tool_pattern_matches(&self, tool_name: &str) -> bool {
        matches!(self, ApprovalRule::Tool { matcher, .. } if matcher.is_match(tool_name))
    }
}

/// Whether the allow rules together vouch for a command line: it is not
/// opaque, and each of its simple commands is `cd` or starts with some
/// rule's prefix (the program compared exactly: `exec:git` does not allow a
/// `./git` the model wrote).
pub fn exec_rules_allow(rules: &[&ApprovalRule], line: &str) -> bool {
    let parsed = CommandLine::parse(line);
    if parsed.opaque || parsed.commands.is_empty() {
        return false;
    }
    parsed.commands.iter().all(|words| {
        words.first().is_some_and(|program| program == "cd")
            || rules.iter().any(|rule| match rule {
                ApprovalRule::Exec { prefix } => starts_with(words, prefix, false),
                _ => false,
            })
    })
}

/// `words` starts with `prefix`; with `by_file_name`, the program may be a
/// path whose file name is the prefix's program.
fn starts_with(words: &[String], prefix: &[String], by_file_name: bool) -> bool {
    if words.len() < prefix.len() {
        return false;
    }
    words
        .iter()
        .zip(prefix)
        .enumerate()
        .all(|(index, (word, want))| {
            word == want
                || (index == 0
                    && by_file_name
                    && Path::new(word)
                        .file_name()
                        .is_some_and(|name| name == want.as_str()))
        })
}

/// `path` relative to `root`, lexically (no file system), with `/`
/// separators: `None` when it leaves the root, is absolute outside it, or is
/// the root itself.
///
/// ```
/// use std::path::Path;
/// use roder_api::approval::workspace_relative;
///
/// let root = Some(Path::new("/w"));
/// assert_eq!(workspace_relative("/w/src/./a.rs", root).as_deref(), Some("src/a.rs"));
/// assert_eq!(workspace_relative("docs/../x", root).as_deref(), Some("x"));
/// assert_eq!(workspace_relative("../x", root), None);
/// assert_eq!(workspace_relative("/etc/passwd", root), None);
/// ```
pub fn workspace_relative(path: &str, root: Option<&Path>) -> Option<String> {
    let path = Path::new(path);
    let rest: PathBuf = if path.is_absolute() {
        path.strip_prefix(root?).ok()?.to_path_buf()
    } else {
        path.to_path_buf()
    };
    let mut parts: Vec<String> = Vec::new();
    for component in rest.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Why a rule's text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid approval rule {text:?}: {reason} (rules look like \"exec:cargo test\", \"write:docs/**\" or \"tool:NAME\")"
)]
pub struct RuleParseError {
    pub text: String,
    pub reason: String,
}

impl std::str::FromStr for ApprovalRule {
    type Err = RuleParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = |reason: &str| RuleParseError {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let trimmed = text.trim();
        let (kind, body) = match trimmed.split_once(':') {
            Some((kind @ ("exec" | "write" | "tool"), body)) => (kind, body.trim()),
            Some((kind, _)) if !kind.contains(char::is_whitespace) && !kind.contains('*') => {
                return Err(error(&format!(
                    "unknown kind \"{kind}\" (known: exec, write, tool)"
                )));
            }
            _ => ("tool", trimmed),
        };
        if body.is_empty() {
            return Err(error("nothing after the kind"));
        }
        match kind {
            "exec" => {
                let parsed = CommandLine::parse(body);
                match parsed.commands.as_slice() {
                    [words] if !parsed.opaque => Ok(ApprovalRule::Exec {
                        prefix: words.clone(),
                    }),
                    _ => Err(error(
                        "an exec rule is one plain command prefix, without operators, substitutions or redirections",
                    )),
                }
            }
            "write" => Ok(ApprovalRule::Write {
                pattern: body.to_string(),
                matcher: glob(body, true).map_err(|reason| error(&reason))?,
            }),
            _ => {
                if !body
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.*?".contains(c))
                {
                    return Err(error(
                        "a tool name may hold letters, digits, '_', '-', '.' and the wildcards '*' and '?'",
                    ));
                }
                Ok(ApprovalRule::Tool {
                    pattern: body.to_string(),
                    matcher: glob(body, false).map_err(|reason| error(&reason))?,
                })
            }
        }
    }
}

/// A literal when `pattern` holds none of the glob syntax `globset` reads
/// (`* ? [ ] { } \`); the same matches either way.
fn glob(pattern: &str, paths: bool) -> Result<PatternMatcher, String> {
    let anchored = pattern.strip_prefix("./").unwrap_or(pattern);
    if !anchored.contains(['*', '?', '[', ']', '{', '}', '\\']) {
        return Ok(PatternMatcher::Literal(anchored.to_string()));
    }
    GlobBuilder::new(anchored)
        .literal_separator(paths)
        .backslash_escape(true)
        .build()
        .map(|glob| PatternMatcher::Glob(glob.compile_matcher()))
        .map_err(|error| format!("bad glob: {error}"))
}

impl std::fmt::Display for ApprovalRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApprovalRule::Tool { pattern, .. } => write!(f, "tool:{pattern}"),
            ApprovalRule::Write { pattern, .. } => write!(f, "write:{pattern}"),
            ApprovalRule::Exec { prefix } => {
                let words: Vec<String> = prefix.iter().map(|word| quote(word)).collect();
                write!(f, "exec:{}", words.join(" "))
            }
        }
    }
}

/// A word as a rule writes it: single-quoted unless plainly safe (and not
/// a word the splitter would read as a keyword or an assignment).
fn quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c))
        && !super::command_line::KEYWORDS.contains(&word)
        && !super::command_line::is_assignment(word);
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

impl std::fmt::Debug for ApprovalRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApprovalRule({self})")
    }
}

impl PartialEq for ApprovalRule {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for ApprovalRule {}

impl Serialize for ApprovalRule {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ApprovalRule {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rule(text: &str) -> ApprovalRule {
        text.parse().unwrap()
    }

    fn command(line: &str) -> CallScope {
        CallScope {
            command: Some(line.to_string()),
            paths: Vec::new(),
        }
    }

    fn writes(paths: &[&str]) -> CallScope {
        CallScope {
            command: None,
            paths: paths.iter().map(|path| path.to_string()).collect(),
        }
    }

    fn subject<'a>(tool_name: &'a str, scope: &'a CallScope) -> RuleSubject<'a> {
        RuleSubject {
            tool_name,
            scope,
            workspace_root: Some(Path::new("/w")),
        }
    }

    #[test]
    fn exec_prefixes_allow_every_command_of_a_plain_line() {
        let status = rule("exec:git status");
        let test = rule("exec:cargo test");
        let both = [&status, &test];
        assert!(exec_rules_allow(&both, "git status --short"));
        assert!(exec_rules_allow(
            &both,
            "cd sub && cargo test -p x 2>&1 | git status"
        ));
        assert!(!exec_rules_allow(&both, "git statusx"));
        assert!(!exec_rules_allow(&both, "git push"));
        assert!(!exec_rules_allow(&both, "cargo test && rm -rf /"));
        assert!(!exec_rules_allow(&both, "cargo test $(rm -rf /)"));
        assert!(!exec_rules_allow(&both, "cargo test > out"));
        assert!(!exec_rules_allow(&both, "./git status"));
        assert!(!exec_rules_allow(&both, ""));
    }

    #[test]
    fn exec_denies_catch_any_command_and_any_path_to_the_program() {
        let rm = rule("exec:rm");
        for line in ["rm -rf x", "cd a && /bin/rm x", "ls | rm x", "X=1 rm y"] {
            assert!(rm.denies(&subject("shell", &command(line))), "{line}");
        }
        assert!(!rm.denies(&subject("shell", &command("rmdir x"))));
        assert!(!rm.denies(&subject("write_file", &writes(&["rm"]))));
    }

    #[test]
    fn write_globs_match_paths_relative_to_the_root() {
        let docs = rule("write:docs/**");
        assert!(docs.allows(&subject("write_file", &writes(&["docs/a/b.md"]))));
        assert!(docs.allows(&subject("edit", &writes(&["/w/docs/x.md", "./docs/y"]))));
        assert!(!docs.allows(&subject("edit", &writes(&["docs/x.md", "src/main.rs"]))));
        assert!(!docs.allows(&subject("edit", &writes(&["docs/../src/main.rs"]))));
        assert!(!docs.allows(&subject("edit", &writes(&["/elsewhere/docs/a"]))));
        assert!(!docs.allows(&subject("edit", &writes(&[]))));
        let top = rule("write:*.md");
        assert!(top.allows(&subject("edit", &writes(&["README.md"]))));
        assert!(!top.allows(&subject("edit", &writes(&["docs/README.md"]))));
        let env = rule("write:**/.env");
        assert!(env.denies(&subject("edit", &writes(&["a/.env", "ok.txt"]))));
    }

    #[test]
    fn tool_rules_match_names_with_wildcards() {
        let time = rule("tool:mcp__time__*");
        let scope = CallScope::default();
        assert!(time.allows(&subject("mcp__time__convert_time", &scope)));
        assert!(!time.allows(&subject("mcp__git__log", &scope)));
        assert!(rule("shell").denies(&subject("shell", &scope)));
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        for (text, reason) in [
            ("exec:", "nothing after"),
            ("exec:a && b", "one plain command"),
            ("exec:echo $(x)", "one plain command"),
            ("run:ls", "unknown kind \"run\""),
            ("tool:a b", "a tool name may hold"),
            ("write:[", "bad glob"),
        ] {
            let error = text.parse::<ApprovalRule>().unwrap_err().to_string();
            assert!(error.contains(reason), "{text}: {error}");
        }
    }

    #[test]
    fn rules_round_trip_through_their_text() {
        for text in [
            "exec:git status",
            "exec:echo 'a b'",
            "write:docs/**",
            "tool:mcp__*",
        ] {
            let parsed = rule(text);
            assert_eq!(parsed.to_string(), text);
            let json = serde_json::to_string(&parsed).unwrap();
            assert_eq!(serde_json::from_str::<ApprovalRule>(&json).unwrap(), parsed);
        }
    }

    proptest! {
        #[test]
        fn parsing_never_panics_and_what_parses_round_trips(text in "\\PC{0,40}") {
            if let Ok(parsed) = text.parse::<ApprovalRule>() {
                let again: ApprovalRule = parsed.to_string().parse().unwrap();
                prop_assert_eq!(again, parsed);
            }
        }

        #[test]
        fn matching_never_panics(rule_text in "(exec|write|tool):[a-z*/. ]{1,12}", line in "\\PC{0,40}") {
            if let Ok(parsed) = rule_text.parse::<ApprovalRule>() {
                let scope = CallScope { command: Some(line.clone()), paths: vec![line.clone()] };
                let subject = subject("t", &scope);
                let _ = parsed.allows(&subject);
                let _ = parsed.denies(&subject);
                let _ = exec_rules_allow(&[&parsed], &line);
            }
        }

        /// A pattern without glob syntax, matched as a string, matches
        /// exactly what its compiled glob would.
        #[test]
        fn a_literal_pattern_matches_as_its_glob_would(
            pattern in "[a-z_./-]{1,12}",
            text in "[a-z_./-]{0,12}",
            paths: bool,
        ) {
            let matcher = glob(&pattern, paths).unwrap();
            prop_assert!(matches!(matcher, PatternMatcher::Literal(_)));
            let anchored = pattern.strip_prefix("./").unwrap_or(&pattern);
            let compiled = GlobBuilder::new(anchored)
                .literal_separator(paths)
                .backslash_escape(true)
                .build()
                .unwrap()
                .compile_matcher();
            prop_assert_eq!(matcher.is_match(&text), compiled.is_match(&text));
            prop_assert!(matcher.is_match(anchored));
        }
    }
}

//! Patches: the Codex `*** Begin Patch` format and plain unified diffs,
//! parsed into one model ([`FileOp`]) and applied to text in memory.
//!
//! Parsing and applying are pure (no I/O): the `apply_patch` tool validates
//! every hunk of every file against the current contents before it writes
//! anything.

mod apply;
mod codex;
mod unified;

pub(crate) use apply::apply_hunks;

use crate::tool::ToolError;

/// One file's change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileOp {
    /// Create (or replace) a file with these contents.
    Add {
        path: String,
        contents: String,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

/// One contiguous change inside a file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Hunk {
    /// A line to find first (Codex `@@ <line>`); the hunk matches after it.
    pub anchor: Option<String>,
    /// Where the hunk starts in the old file, 1-based (unified diffs). A
    /// hint: the hunk still matches elsewhere if the file moved.
    pub old_start: Option<usize>,
    pub lines: Vec<HunkLine>,
    /// The hunk must match at the end of the file (`*** End of File`).
    pub end_of_file: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HunkLine {
    Context(String),
    Remove(String),
    Add(String),
}

impl FileOp {
    /// What the section does, as its errors name it: `add a`, `delete a`,
    /// `update a`, `move a to b`, `update a and move it to b`.
    /// The paths this operation changes: its file, and a move's target.
    pub fn paths(&self) -> Vec<&str> {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path } => vec![path.as_str()],
            FileOp::Update { path, move_to, .. } => std::iter::once(path.as_str())
                .chain(move_to.as_deref())
                .collect(),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            FileOp::Add { path, .. } => format!("add {path}"),
            FileOp::Delete { path } => format!("delete {path}"),
            FileOp::Update {
                path,
                move_to: None,
                ..
            } => format!("update {path}"),
            FileOp::Update {
                path,
                move_to: Some(target),
                hunks,
            } if hunks.is_empty() => format!("move {path} to {target}"),
            FileOp::Update {
                path,
                move_to: Some(target),
                ..
            } => format!("update {path} and move it to {target}"),
        }
    }
}

impl Hunk {
    /// The lines the hunk expects to find.
    pub fn old_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|line| match line {
                HunkLine::Context(text) | HunkLine::Remove(text) => Some(text.as_str()),
                HunkLine::Add(_) => None,
            })
            .collect()
    }

    /// The lines the hunk leaves in their place.
    pub fn new_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|line| match line {
                HunkLine::Context(text) | HunkLine::Add(text) => Some(text.as_str()),
                HunkLine::Remove(_) => None,
            })
            .collect()
    }
}

/// Parses either format, chosen by the first line.
pub(crate) fn parse(text: &str) -> Result<Vec<FileOp>, ToolError> {
    // Only whole blank lines are trimmed: a trailing space can be content
    // (`+ ` adds a line holding one space).
    let all: Vec<&str> = text
        .lines()
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .collect();
    let first = all.iter().position(|line| !line.trim().is_empty());
    let last = all.iter().rposition(|line| !line.trim().is_empty());
    let (lines, skipped) = match (first, last) {
        (Some(first), Some(last)) => (all.get(first..=last).unwrap_or_default(), first),
        _ => (&[][..], 0),
    };
    let (lines, skipped) = match strip_heredoc(lines) {
        Some(inner) => (inner, skipped + 1),
        None => (lines, skipped),
    };
    // The 1-based number, in the model's text, of `lines[0]`.
    let first_line = skipped + 1;
    match lines.first() {
        None => Err(ToolError::new(
            "apply_patch: the patch is empty: send `*** Begin Patch`, the sections, then `*** End Patch`",
        )),
        Some(first) if first.trim() == codex::BEGIN => codex::parse(lines, first_line),
        Some(_) if unified::looks_unified(lines) => unified::parse(lines, first_line),
        Some(first) => Err(line_error(
            first_line,
            None,
            format!(
                "unrecognized patch format (first line {first:?}): expected `*** Begin Patch` \
                 or a unified diff with `--- a/file` and `+++ b/file` headers"
            ),
        )),
    }
}

/// A parse error at `line_number` (1-based, in the model's text), inside the
/// section `op` (`add a`, `update a`, ...) when there is one.
fn line_error(line_number: usize, op: Option<&str>, message: impl std::fmt::Display) -> ToolError {
    match op {
        Some(op) => ToolError::new(format!("apply_patch: line {line_number} ({op}): {message}")),
        None => ToolError::new(format!("apply_patch: line {line_number}: {message}")),
    }
}

/// Models sometimes send the shell form `<<'EOF' ... EOF` verbatim: the
/// lines inside such a wrapper, if `lines` is one.
fn strip_heredoc<'a>(lines: &'a [&'a str]) -> Option<&'a [&'a str]> {
    let (first, rest) = lines.split_first()?;
    let (last, inner) = rest.split_last()?;
    let opener = first.trim_start().strip_prefix("<<")?;
    let word = opener
        .trim_start_matches('<')
        .trim()
        .trim_matches(['\'', '"'])
        .trim();
    (word == last.trim()).then_some(inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chooses_the_format_by_its_first_line() {
        let codex = parse("*** Begin Patch\n*** Delete File: a\n*** End Patch\n").unwrap();
        assert_eq!(codex, vec![FileOp::Delete { path: "a".into() }]);
        let unified = parse("--- a/x\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n").unwrap();
        assert_eq!(unified, vec![FileOp::Delete { path: "x".into() }]);
        let error = parse("hello").unwrap_err();
        assert!(error.0.contains("unrecognized patch format"), "{error}");
        assert!(parse("  \n").unwrap_err().0.contains("empty"));
    }

    #[test]
    fn accepts_a_heredoc_wrapper_and_crlf() {
        let ops =
            parse("<<'EOF'\r\n*** Begin Patch\r\n*** Delete File: a\r\n*** End Patch\r\nEOF\r\n")
                .unwrap();
        assert_eq!(ops, vec![FileOp::Delete { path: "a".into() }]);
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;
        use similar::{ChangeTag, TextDiff};

        fn file() -> impl Strategy<Value = String> {
            proptest::collection::vec(prop_oneof![Just("".to_string()), "[a-c ]{1,4}"], 0..12)
                .prop_map(|lines| lines.iter().map(|line| format!("{line}\n")).collect())
        }

        fn distinct_edit() -> impl Strategy<Value = (String, String)> {
            (
                proptest::collection::btree_set("[a-z]{1,3}", 0..12),
                proptest::collection::vec((0_u8..4, "[A-Z ]{0,3}"), 12),
            )
                .prop_map(|(distinct, ops)| {
                    let old: Vec<String> = distinct.into_iter().collect();
                    let mut new = Vec::new();
                    for (line, (op, other)) in old.iter().zip(&ops) {
                        match op {
                            0 => new.push(line.clone()),
                            1 => {}
                            2 => new.push(other.clone()),
                            _ => {
                                new.push(other.clone());
                                new.push(line.clone());
                            }
                        }
                    }
                    let text = |lines: &[String]| -> String {
                        lines.iter().map(|line| format!("{line}\n")).collect()
                    };
                    (text(&old), text(&new))
                })
        }

        /// A Codex patch equivalent to `old` → `new`, built from a diff.
        fn codex_patch(old: &str, new: &str) -> String {
            let diff = TextDiff::from_lines(old, new);
            let mut patch = String::from("*** Begin Patch\n*** Update File: f\n");
            for group in diff.grouped_ops(3) {
                patch.push_str("@@\n");
                for op in group {
                    for change in diff.iter_changes(&op) {
                        let sign = match change.tag() {
                            ChangeTag::Equal => ' ',
                            ChangeTag::Delete => '-',
                            ChangeTag::Insert => '+',
                        };
                        patch.push(sign);
                        patch.push_str(change.value().trim_end_matches('\n'));
                        patch.push('\n');
                    }
                }
            }
            patch.push_str("*** End Patch\n");
            patch
        }

        fn apply_all(old: &str, patch: &str) -> Result<String, ToolError> {
            match parse(patch)?.remove(0) {
                FileOp::Update { hunks, .. } => apply_hunks(old, &hunks),
                other => panic!("{other:?}"),
            }
        }

        proptest! {
            #[test]
            fn parsing_never_panics(text in "(\\*\\*\\* |@@|[-+ ]|--- |\\+\\+\\+ |[a-z\\n])*") {
                let _ = parse(&text);
            }

            /// Any text at all, multi-byte characters and control bytes
            /// included, inside and outside a Codex envelope.
            #[test]
            fn parsing_arbitrary_text_never_panics(
                text in any::<String>(),
                wrapped in proptest::collection::vec(
                    prop_oneof![
                        any::<String>(),
                        "[ \t]*\\*\\*\\* (Add|Delete|Update) File:[ é]*[a-zé]*",
                        "[ \t]*\\*\\*\\* (Move to:|End of File)[ a-z]*",
                        "[-+ @\t]?[ -~é€😀]{0,6}",
                    ],
                    0..12,
                ),
            ) {
                let _ = parse(&text);
                let body = wrapped.join("\n");
                let _ = parse(&format!("*** Begin Patch\n{body}\n*** End Patch\n"));
            }

            /// Whatever hunks parse, applying them to any text never panics.
            #[test]
            fn applying_never_panics(
                original in "([a-c é]{0,3}(\n|\r\n))*[a-c]?",
                body in proptest::collection::vec("(@@ ?[a-c]?|[-+ ][a-c é]{0,3}|\\*\\*\\* End of File|)", 0..10),
            ) {
                let patch = format!("*** Begin Patch\n*** Update File: f\n{}\n*** End Patch", body.join("\n"));
                if let Ok(ops) = parse(&patch) {
                    for op in ops {
                        if let FileOp::Update { hunks, .. } = op {
                            let _ = apply_hunks(&original, &hunks);
                        }
                    }
                }
            }

            #[test]
            fn unified_diffs_roundtrip(old in file(), new in file()) {
                prop_assume!(old != new);
                let diff = TextDiff::from_lines(&old, &new)
                    .unified_diff()
                    .header("a/f", "b/f")
                    .to_string();
                prop_assert_eq!(apply_all(&old, &diff).unwrap(), new);
            }

            /// Codex hunks carry no line numbers, so the property needs
            /// distinct old lines (a model includes distinctive context).
            #[test]
            fn codex_patches_roundtrip((old, new) in distinct_edit()) {
                prop_assume!(old != new);
                prop_assert_eq!(apply_all(&old, &codex_patch(&old, &new)).unwrap(), new);
            }
        }
    }
}

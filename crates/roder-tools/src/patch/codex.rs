//! The Codex patch format:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path        (then `+` lines)
//! *** Delete File: path
//! *** Update File: path
//! *** Move to: new/path     (optional)
//! @@ optional anchor line
//!  context
//! -removed
//! +added
//! *** End of File           (optional: the hunk ends the file)
//! *** End Patch
//! ```
//!
//! As Codex does, the markers are recognized with surrounding whitespace
//! ignored (`  *** Update File: a` is a header) wherever a section header is
//! expected. Inside an update's hunks a space-indented ` *** x` is a context
//! line (the file holds `*** x`), as in Codex; a `*** ` line indented by
//! anything else (a tab) can only be a header and ends the hunks.

use super::{FileOp, Hunk, HunkLine, line_error};
use crate::tool::ToolError;

pub(super) const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const DELETE: &str = "*** Delete File:";
const UPDATE: &str = "*** Update File:";
const MOVE: &str = "*** Move to:";
const END_OF_FILE: &str = "*** End of File";

/// The markers that start a section, for "did you mean" checks.
const SECTION_MARKERS: [&str; 3] = [ADD, DELETE, UPDATE];

/// One parse: the patch lines and the 1-based number of the first of them in
/// the text the model sent, so errors cite the model's own line numbers.
struct Parser<'a> {
    lines: &'a [&'a str],
    first_line: usize,
}

impl Parser<'_> {
    fn error(&self, index: usize, op: Option<&str>, message: impl std::fmt::Display) -> ToolError {
        line_error(self.first_line + index, op, message)
    }

    /// The path after `marker` if `lines[index]`, ignoring surrounding
    /// whitespace, starts with it.
    fn path_after(&self, index: usize, marker: &str) -> Result<Option<&str>, ToolError> {
        let Some(line) = self.lines.get(index) else {
            return Ok(None);
        };
        match line.trim().strip_prefix(marker) {
            None => Ok(None),
            Some(path) if path.trim().is_empty() => Err(self.error(
                index,
                None,
                format!("`{marker}` needs a path, as in `{marker} src/main.rs`"),
            )),
            Some(path) => Ok(Some(path.trim())),
        }
    }
}

/// Parses `lines`, which start with `*** Begin Patch`; `first_line` is the
/// 1-based line number of that line in the model's text.
pub(super) fn parse(lines: &[&str], first_line: usize) -> Result<Vec<FileOp>, ToolError> {
    let parser = Parser { lines, first_line };
    let end = lines.iter().rposition(|line| line.trim() == END).ok_or_else(|| {
        ToolError::new(
            "apply_patch: the patch must end with a `*** End Patch` line (after the last section)",
        )
    })?;
    if let Some(extra) = (end + 1..lines.len()).find(|&index| !lines[index].trim().is_empty()) {
        return Err(parser.error(
            extra,
            None,
            format!(
                "unexpected text after `*** End Patch`: {:?}; the patch ends there",
                lines[extra]
            ),
        ));
    }
    let mut ops = Vec::new();
    let mut index = 1;
    while index < end {
        let line = lines[index];
        if let Some(path) = parser.path_after(index, ADD)? {
            let op = format!("add {path}");
            index += 1;
            let mut contents = String::new();
            while index < end && !lines[index].trim_start().starts_with("*** ") {
                match lines[index].strip_prefix('+') {
                    Some(text) => {
                        contents.push_str(text);
                        contents.push('\n');
                    }
                    // Blank lines before the next section are layout.
                    None if only_blank_until_header(lines, index, end) => {}
                    None => {
                        return Err(parser.error(
                            index,
                            Some(&op),
                            format!(
                                "every line of an added file starts with `+` (`+` alone for an empty line); got {:?}",
                                lines[index]
                            ),
                        ));
                    }
                }
                index += 1;
            }
            ops.push(FileOp::Add {
                path: path.to_string(),
                contents,
            });
        } else if let Some(path) = parser.path_after(index, DELETE)? {
            ops.push(FileOp::Delete {
                path: path.to_string(),
            });
            index += 1;
        } else if let Some(path) = parser.path_after(index, UPDATE)? {
            let header = index;
            index += 1;
            let mut move_to = None;
            if index < end
                && let Some(target) = parser.path_after(index, MOVE)?
            {
                move_to = Some(target.to_string());
                index += 1;
            }
            let (hunks, next) = parse_hunks(&parser, index, end, &format!("update {path}"))?;
            if hunks.is_empty() && move_to.is_none() {
                return Err(parser.error(
                    header,
                    Some(&format!("update {path}")),
                    "the section has no hunks: follow it with `@@` and ' ', '-' and '+' lines \
                     (or with `*** Move to: <path>` to rename the file)",
                ));
            }
            ops.push(FileOp::Update {
                path: path.to_string(),
                move_to,
                hunks,
            });
            index = next;
        } else if line.trim().is_empty() {
            index += 1;
        } else {
            return Err(parser.error(index, None, misplaced(line)));
        }
    }
    if ops.is_empty() {
        return Err(ToolError::new(
            "apply_patch: the patch changes no files: put `*** Add File: <path>`, \
             `*** Delete File: <path>` or `*** Update File: <path>` sections between \
             `*** Begin Patch` and `*** End Patch`",
        ));
    }
    Ok(ops)
}

/// Why `line` cannot stand where a section header is expected. Never says
/// "expected X" of a line that holds X.
fn misplaced(line: &str) -> String {
    let trimmed = line.trim();
    if trimmed.starts_with(MOVE) {
        return format!(
            "{line:?} must directly follow the `*** Update File: <path>` line of the file it renames"
        );
    }
    if trimmed.starts_with(END_OF_FILE) {
        return format!(
            "{line:?} must directly follow the last hunk line of an `*** Update File:` section"
        );
    }
    if let Some(marker) = SECTION_MARKERS
        .iter()
        .find(|marker| trimmed.contains(**marker))
    {
        return format!(
            "{line:?} holds `{marker}` but not at its start: a header is a line of its own"
        );
    }
    if trimmed.starts_with(['+', '-', '@']) || line.starts_with(' ') {
        return format!(
            "{line:?} is a patch body line outside any section: start the section with \
             `*** Update File: <path>` (or `*** Add File: <path>` for `+` lines)"
        );
    }
    format!(
        "expected a section header (`*** Add File: <path>`, `*** Delete File: <path>` or \
         `*** Update File: <path>`) or `*** End Patch`; got {line:?}"
    )
}

/// Parses the hunks of one `*** Update File:` section, from `index` to the
/// next unindented `*** ` line. Returns them and the index of that line.
fn parse_hunks(
    parser: &Parser<'_>,
    mut index: usize,
    end: usize,
    op: &str,
) -> Result<(Vec<Hunk>, usize), ToolError> {
    let lines = parser.lines;
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut current: Option<Hunk> = None;
    while index < end {
        let line = lines[index];
        if line.trim_end() == END_OF_FILE {
            let mut hunk = current.take().ok_or_else(|| {
                parser.error(
                    index,
                    Some(op),
                    "`*** End of File` must follow the lines of a hunk",
                )
            })?;
            hunk.end_of_file = true;
            hunks.push(hunk);
            index += 1;
            continue;
        }
        if ends_hunks(line) {
            break;
        }
        if let Some(anchor) = line.strip_prefix("@@") {
            hunks.extend(current.take());
            let anchor = anchor.trim();
            current = Some(Hunk {
                anchor: (!anchor.is_empty()).then(|| anchor.to_string()),
                ..Hunk::default()
            });
            index += 1;
            continue;
        }
        let hunk_line = if let Some(text) = line.strip_prefix(' ') {
            HunkLine::Context(text.to_string())
        } else if let Some(text) = line.strip_prefix('-') {
            HunkLine::Remove(text.to_string())
        } else if let Some(text) = line.strip_prefix('+') {
            HunkLine::Add(text.to_string())
        } else if !line.is_empty() {
            return Err(parser.error(
                index,
                Some(op),
                format!(
                    "unexpected line {line:?}: hunk lines start with ' ' (context), '-' (removed) \
                     or '+' (added), and a hunk starts with `@@`"
                ),
            ));
        } else if only_empty_until_marker(lines, index, end) {
            // Blank lines before the next section are layout, not content.
            index += 1;
            continue;
        } else {
            // An empty line is an empty context line whose space an editor
            // stripped.
            HunkLine::Context(String::new())
        };
        current
            .get_or_insert_with(Hunk::default)
            .lines
            .push(hunk_line);
        index += 1;
    }
    hunks.extend(current);
    hunks.retain(|hunk| !hunk.lines.is_empty());
    Ok((hunks, index))
}

/// Whether only blank lines follow `index` in an added file, up to the next
/// section header (or the end of the patch).
fn only_blank_until_header(lines: &[&str], index: usize, end: usize) -> bool {
    lines
        .get(index..end)
        .unwrap_or_default()
        .iter()
        .find(|line| !line.trim().is_empty())
        .is_none_or(|line| line.trim_start().starts_with("*** "))
}

/// Whether `line` ends an update's hunks: a line that can only be a header.
/// A space-indented ` *** x` is a context line (see the module comment).
fn ends_hunks(line: &str) -> bool {
    line.starts_with("*** ")
        || (!line.starts_with([' ', '-', '+']) && line.trim_start().starts_with("*** "))
}

/// Whether only empty lines follow `index` in an update, up to the line that
/// ends its hunks (or the end of the patch). A line holding spaces is a
/// context line, not layout.
fn only_empty_until_marker(lines: &[&str], index: usize, end: usize) -> bool {
    lines
        .get(index..end)
        .unwrap_or_default()
        .iter()
        .find(|line| !line.is_empty())
        .is_none_or(|line| ends_hunks(line))
}

#[cfg(test)]
mod tests {
    use super::super::parse as parse_patch;
    use super::*;

    fn ctx(text: &str) -> HunkLine {
        HunkLine::Context(text.into())
    }
    fn del(text: &str) -> HunkLine {
        HunkLine::Remove(text.into())
    }
    fn add(text: &str) -> HunkLine {
        HunkLine::Add(text.into())
    }

    #[test]
    fn parses_every_operation() {
        let patch = "*** Begin Patch
*** Add File: hello.txt
+Hello
+world
*** Delete File: old.txt
*** Update File: src/lib.rs
*** Move to: src/main.rs
@@ fn main() {
 let a = 1;
-let b = 2;
+let b = 3;
@@
-x
+y
*** End of File
*** End Patch";
        let ops = parse_patch(patch).unwrap();
        assert_eq!(
            ops,
            vec![
                FileOp::Add {
                    path: "hello.txt".into(),
                    contents: "Hello\nworld\n".into()
                },
                FileOp::Delete {
                    path: "old.txt".into()
                },
                FileOp::Update {
                    path: "src/lib.rs".into(),
                    move_to: Some("src/main.rs".into()),
                    hunks: vec![
                        Hunk {
                            anchor: Some("fn main() {".into()),
                            old_start: None,
                            lines: vec![ctx("let a = 1;"), del("let b = 2;"), add("let b = 3;")],
                            end_of_file: false,
                        },
                        Hunk {
                            anchor: None,
                            old_start: None,
                            lines: vec![del("x"), add("y")],
                            end_of_file: true,
                        },
                    ]
                },
            ]
        );
    }

    #[test]
    fn the_first_hunk_may_omit_its_header() {
        let ops =
            parse_patch("*** Begin Patch\n*** Update File: a\n-x\n+y\n*** End Patch").unwrap();
        let FileOp::Update { hunks, .. } = &ops[0] else {
            panic!("{ops:?}")
        };
        assert_eq!(hunks[0].lines, vec![del("x"), add("y")]);
        assert_eq!(hunks[0].anchor, None);
    }

    #[test]
    fn empty_lines_are_empty_context() {
        let ops =
            parse_patch("*** Begin Patch\n*** Update File: a\n@@\n a\n\n-b\n+c\n*** End Patch")
                .unwrap();
        let FileOp::Update { hunks, .. } = &ops[0] else {
            panic!("{ops:?}")
        };
        assert_eq!(hunks[0].lines, vec![ctx("a"), ctx(""), del("b"), add("c")]);
    }

    #[test]
    fn blank_lines_between_sections_are_layout() {
        let ops = parse_patch(
            "*** Begin Patch\n*** Update File: a\n@@\n-b\n+c\n\n\n*** Delete File: d\n\n*** End Patch",
        )
        .unwrap();
        let FileOp::Update { hunks, .. } = &ops[0] else {
            panic!("{ops:?}")
        };
        assert_eq!(hunks[0].lines, vec![del("b"), add("c")]);
        assert_eq!(ops.len(), 2);
    }

    #[test]
    fn an_empty_added_file() {
        let ops = parse_patch("*** Begin Patch\n*** Add File: empty\n*** End Patch").unwrap();
        assert_eq!(
            ops,
            vec![FileOp::Add {
                path: "empty".into(),
                contents: String::new()
            }]
        );
    }

    #[test]
    fn errors_name_the_line_and_the_section() {
        let missing_end = parse_patch("*** Begin Patch\n*** Delete File: a\n").unwrap_err();
        assert!(
            missing_end
                .0
                .contains("must end with a `*** End Patch` line"),
            "{missing_end}"
        );

        let bad_add =
            parse_patch("*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch").unwrap_err();
        assert!(
            bad_add.0.starts_with("apply_patch: line 3 (add a):"),
            "{bad_add}"
        );
        assert!(bad_add.0.contains("starts with `+`"), "{bad_add}");

        let bad_hunk =
            parse_patch("*** Begin Patch\n*** Update File: a\n@@\n x\n?y\n*** End Patch")
                .unwrap_err();
        assert!(
            bad_hunk.0.starts_with("apply_patch: line 5 (update a):"),
            "{bad_hunk}"
        );

        let unknown =
            parse_patch("*** Begin Patch\n*** Rename File: a\n*** End Patch").unwrap_err();
        assert!(unknown.0.contains("expected a section header"), "{unknown}");
        assert!(unknown.0.contains("\"*** Rename File: a\""), "{unknown}");

        let no_hunks =
            parse_patch("*** Begin Patch\n*** Update File: a\n*** End Patch").unwrap_err();
        assert!(
            no_hunks.0.starts_with("apply_patch: line 2 (update a):"),
            "{no_hunks}"
        );
        assert!(no_hunks.0.contains("has no hunks"), "{no_hunks}");

        let no_path = parse_patch("*** Begin Patch\n*** Delete File: \n*** End Patch").unwrap_err();
        assert!(no_path.0.contains("needs a path"), "{no_path}");

        let trailing =
            parse_patch("*** Begin Patch\n*** Delete File: a\n*** End Patch\nmore").unwrap_err();
        assert!(trailing.0.contains("after `*** End Patch`"), "{trailing}");

        let nothing = parse_patch("*** Begin Patch\n*** End Patch").unwrap_err();
        assert!(nothing.0.contains("changes no files"), "{nothing}");
    }

    #[test]
    fn line_numbers_are_the_models_own() {
        // Two blank lines and a heredoc opener come before `*** Begin Patch`.
        let error = parse_patch(
            "\n\n<<'EOF'\n*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch\nEOF\n",
        )
        .unwrap_err();
        assert!(
            error.0.starts_with("apply_patch: line 6 (add a):"),
            "{error}"
        );
    }

    /// Codex accepts headers and markers padded with whitespace.
    #[test]
    fn indented_headers_and_padded_markers() {
        let ops = parse_patch(
            " *** Begin Patch \n  *** Update File: a.txt\n@@\n-old\n+new\n\t*** Add File:b\n+x\n   *** Delete File:  c  \n *** End Patch ",
        )
        .unwrap();
        assert_eq!(
            ops,
            vec![
                FileOp::Update {
                    path: "a.txt".into(),
                    move_to: None,
                    hunks: vec![Hunk {
                        lines: vec![del("old"), add("new")],
                        ..Hunk::default()
                    }],
                },
                FileOp::Add {
                    path: "b".into(),
                    contents: "x\n".into()
                },
                FileOp::Delete { path: "c".into() },
            ]
        );
        let moved =
            parse_patch("*** Begin Patch\n  *** Update File: a\n  *** Move to: b\n*** End Patch")
                .unwrap();
        assert_eq!(
            moved,
            vec![FileOp::Update {
                path: "a".into(),
                move_to: Some("b".into()),
                hunks: vec![]
            }]
        );
    }

    /// Inside an update's hunks a space-indented `*** ` line is context: the
    /// file holds that text (a document about this very format, say).
    #[test]
    fn an_indented_marker_inside_hunks_is_context() {
        let ops = parse_patch(
            "*** Begin Patch\n*** Update File: doc.md\n@@\n *** Delete File: x\n-a\n+b\n*** End Patch",
        )
        .unwrap();
        let FileOp::Update { hunks, .. } = &ops[0] else {
            panic!("{ops:?}")
        };
        assert_eq!(
            hunks[0].lines,
            vec![ctx("*** Delete File: x"), del("a"), add("b")]
        );
    }

    /// The issue: a refusal said it expected `*** Update File:` while quoting
    /// a line that holds it. No refusal of a line may do that.
    #[test]
    fn a_refused_line_is_never_told_it_lacks_what_it_holds() {
        for line in [
            "x *** Update File: a",
            "*** Move to: b",
            "*** End of File",
            "*** Frobnicate File: foo",
            "+stray",
            " stray context",
        ] {
            let error =
                parse_patch(&format!("*** Begin Patch\n{line}\n*** End Patch")).unwrap_err();
            assert!(error.0.starts_with("apply_patch: line 2:"), "{error}");
            assert!(error.0.contains(&format!("{line:?}")), "{error}");
            for marker in SECTION_MARKERS {
                if line.contains(marker) {
                    assert!(!error.0.contains("expected"), "{line}: {error}");
                }
            }
        }
    }

    #[test]
    fn blank_lines_after_an_added_file_are_layout() {
        let ops = parse_patch(
            "*** Begin Patch\n*** Add File: a\n+x\n\n  \n*** Delete File: b\n*** End Patch",
        )
        .unwrap();
        assert_eq!(
            ops,
            vec![
                FileOp::Add {
                    path: "a".into(),
                    contents: "x\n".into()
                },
                FileOp::Delete { path: "b".into() },
            ]
        );
    }

    #[test]
    fn a_move_without_hunks_is_a_rename() {
        let ops = parse_patch("*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch")
            .unwrap();
        assert_eq!(
            ops,
            vec![FileOp::Update {
                path: "a".into(),
                move_to: Some("b".into()),
                hunks: vec![]
            }]
        );
    }
}

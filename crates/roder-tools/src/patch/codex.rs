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

use super::{FileOp, Hunk, HunkLine};
use crate::tool::ToolError;

pub(super) const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const END_OF_FILE: &str = "*** End of File";

fn error(line_index: usize, message: impl std::fmt::Display) -> ToolError {
    ToolError::new(format!("apply_patch: line {}: {message}", line_index + 1))
}

fn path_after<'a>(line: &'a str, marker: &str, index: usize) -> Result<Option<&'a str>, ToolError> {
    match line.strip_prefix(marker) {
        None => Ok(None),
        Some(path) if path.trim().is_empty() => {
            Err(error(index, format!("{} needs a path", marker.trim())))
        }
        Some(path) => Ok(Some(path.trim())),
    }
}

pub(super) fn parse(lines: &[&str]) -> Result<Vec<FileOp>, ToolError> {
    let end = lines
        .iter()
        .rposition(|line| line.trim() == END)
        .ok_or_else(|| ToolError::new("apply_patch: the patch must end with `*** End Patch`"))?;
    if lines[end + 1..].iter().any(|line| !line.trim().is_empty()) {
        return Err(error(end + 1, "unexpected text after `*** End Patch`"));
    }
    let mut ops = Vec::new();
    let mut index = 1;
    while index < end {
        let line = lines[index];
        if let Some(path) = path_after(line, ADD, index)? {
            index += 1;
            let mut contents = String::new();
            while index < end && !lines[index].starts_with("*** ") {
                match lines[index].strip_prefix('+') {
                    Some(text) => {
                        contents.push_str(text);
                        contents.push('\n');
                    }
                    None => {
                        return Err(error(
                            index,
                            format!(
                                "every line of an added file starts with `+` (adding {path}); got {:?}",
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
        } else if let Some(path) = path_after(line, DELETE, index)? {
            ops.push(FileOp::Delete {
                path: path.to_string(),
            });
            index += 1;
        } else if let Some(path) = path_after(line, UPDATE, index)? {
            index += 1;
            let mut move_to = None;
            if index < end
                && let Some(target) = path_after(lines[index], MOVE, index)?
            {
                move_to = Some(target.to_string());
                index += 1;
            }
            let (hunks, next) = parse_hunks(lines, index, end, path)?;
            if hunks.is_empty() && move_to.is_none() {
                return Err(error(
                    index.saturating_sub(1),
                    format!("the update of {path} has no hunks"),
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
            return Err(error(
                index,
                format!(
                    "expected `*** Add File:`, `*** Delete File:`, `*** Update File:` or `*** End Patch`; got {line:?}"
                ),
            ));
        }
    }
    if ops.is_empty() {
        return Err(ToolError::new("apply_patch: the patch changes no files"));
    }
    Ok(ops)
}

/// Parses the hunks of one `*** Update File:` section, from `index` to the
/// next `*** ` marker. Returns them and the index of that marker.
fn parse_hunks(
    lines: &[&str],
    mut index: usize,
    end: usize,
    path: &str,
) -> Result<(Vec<Hunk>, usize), ToolError> {
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut current: Option<Hunk> = None;
    while index < end {
        let line = lines[index];
        if line.trim_end() == END_OF_FILE {
            let mut hunk = current
                .take()
                .ok_or_else(|| error(index, "`*** End of File` must follow a hunk"))?;
            hunk.end_of_file = true;
            hunks.push(hunk);
            index += 1;
            continue;
        }
        if line.starts_with("*** ") {
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
        let hunk_line = match line.chars().next() {
            Some(' ') => HunkLine::Context(line[1..].to_string()),
            Some('-') => HunkLine::Remove(line[1..].to_string()),
            Some('+') => HunkLine::Add(line[1..].to_string()),
            // Blank lines before the next section are layout, not content.
            None if only_blank_until_marker(lines, index, end) => {
                index += 1;
                continue;
            }
            // Otherwise an empty line is an empty context line whose space an
            // editor stripped.
            None => HunkLine::Context(String::new()),
            Some(_) => {
                return Err(error(
                    index,
                    format!(
                        "unexpected line in the update of {path}: {line:?}; hunk lines start with ' ', '-' or '+', and hunks with `@@`"
                    ),
                ));
            }
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

fn only_blank_until_marker(lines: &[&str], index: usize, end: usize) -> bool {
    lines[index..end]
        .iter()
        .find(|line| !line.is_empty())
        .is_none_or(|line| line.starts_with("*** "))
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
    fn errors_name_the_line() {
        let missing_end = parse_patch("*** Begin Patch\n*** Delete File: a\n").unwrap_err();
        assert!(
            missing_end.0.contains("must end with `*** End Patch`"),
            "{missing_end}"
        );

        let bad_add =
            parse_patch("*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch").unwrap_err();
        assert!(bad_add.0.starts_with("apply_patch: line 3:"), "{bad_add}");
        assert!(bad_add.0.contains("starts with `+`"), "{bad_add}");

        let bad_hunk =
            parse_patch("*** Begin Patch\n*** Update File: a\n@@\n x\n?y\n*** End Patch")
                .unwrap_err();
        assert!(bad_hunk.0.starts_with("apply_patch: line 5:"), "{bad_hunk}");

        let unknown =
            parse_patch("*** Begin Patch\n*** Rename File: a\n*** End Patch").unwrap_err();
        assert!(unknown.0.contains("expected `*** Add File:`"), "{unknown}");

        let no_hunks =
            parse_patch("*** Begin Patch\n*** Update File: a\n*** End Patch").unwrap_err();
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

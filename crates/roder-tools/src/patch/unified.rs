//! Plain unified diffs (`diff -u`, `git diff`): `--- a/x`, `+++ b/x`,
//! `@@ -a,b +c,d @@` hunks.
//!
//! Models often get hunk counts wrong, so the counts decide where a hunk
//! ends only while they are unmet; after that, further ` `/`-`/`+` lines that
//! are not a new file header still belong to the hunk.

use super::{FileOp, Hunk, HunkLine, line_error};
use crate::tool::ToolError;

/// Whether a `--- ` line followed by a `+++ ` line starts at `index`.
fn is_file_header(lines: &[&str], index: usize) -> bool {
    lines[index].starts_with("--- ")
        && lines
            .get(index + 1)
            .is_some_and(|next| next.starts_with("+++ "))
}

pub(super) fn looks_unified(lines: &[&str]) -> bool {
    (0..lines.len()).any(|index| is_file_header(lines, index))
}

/// The path of a `---`/`+++` header: `None` for `/dev/null`; `a/` and `b/`
/// prefixes and a trailing timestamp dropped.
fn header_path(raw: &str) -> Option<String> {
    let raw = raw.split('\t').next().unwrap_or(raw).trim();
    let raw = raw
        .strip_prefix('"')
        .and_then(|quoted| quoted.strip_suffix('"'))
        .unwrap_or(raw);
    if raw == "/dev/null" {
        return None;
    }
    let path = raw
        .strip_prefix("a/")
        .or_else(|| raw.strip_prefix("b/"))
        .unwrap_or(raw);
    Some(path.to_string())
}

/// `@@ -a[,b] +c[,d] @@ ...` → (a, b, d).
fn hunk_header(line: &str) -> Option<(usize, usize, usize)> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, _) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let range = |range: &str| -> Option<(usize, usize)> {
        match range.split_once(',') {
            Some((start, count)) => Some((start.parse().ok()?, count.parse().ok()?)),
            None => Some((range.parse().ok()?, 1)),
        }
    };
    let (old_start, old_count) = range(old)?;
    let (_, new_count) = range(new)?;
    Some((old_start, old_count, new_count))
}

/// What a file header announces, as errors name it.
fn describe(old_path: Option<&str>, new_path: Option<&str>) -> String {
    match (old_path, new_path) {
        (None, Some(path)) => format!("add {path}"),
        (Some(path), None) => format!("delete {path}"),
        (Some(path), Some(new_path)) if path == new_path => format!("update {path}"),
        (Some(path), Some(new_path)) => format!("update {path} and move it to {new_path}"),
        (None, None) => "/dev/null to /dev/null".to_string(),
    }
}

/// Parses `lines`; `first_line` is the 1-based number of `lines[0]` in the
/// model's text.
pub(super) fn parse(lines: &[&str], first_line: usize) -> Result<Vec<FileOp>, ToolError> {
    let error =
        |index: usize, op: &str, message: String| line_error(first_line + index, Some(op), message);
    let mut ops = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        if !is_file_header(lines, index) {
            // `diff --git`, `index ...`, mode lines and prose are skipped.
            index += 1;
            continue;
        }
        let header_of = |line: &str| header_path(line.get(4..).unwrap_or_default());
        let old_path = header_of(lines[index]);
        let new_path = header_of(lines[index + 1]);
        let header_index = index;
        let op = describe(old_path.as_deref(), new_path.as_deref());
        index += 2;
        let mut hunks = Vec::new();
        while index < lines.len() && lines[index].starts_with("@@") {
            let (old_start, old_count, new_count) = hunk_header(lines[index]).ok_or_else(|| {
                error(
                    index,
                    &op,
                    format!(
                        "malformed hunk header {:?}; expected `@@ -a,b +c,d @@`",
                        lines[index]
                    ),
                )
            })?;
            index += 1;
            let mut hunk = Hunk {
                old_start: Some(old_start),
                ..Hunk::default()
            };
            let (mut old_seen, mut new_seen) = (0, 0);
            while index < lines.len() {
                let line = lines[index];
                if line.starts_with('\\') {
                    // "\ No newline at end of file"
                    index += 1;
                    continue;
                }
                if is_file_header(lines, index) || line.starts_with("@@") {
                    break;
                }
                let counts_met = old_seen >= old_count && new_seen >= new_count;
                let hunk_line = if let Some(text) = line.strip_prefix(' ') {
                    HunkLine::Context(text.to_string())
                } else if let Some(text) = line.strip_prefix('-') {
                    HunkLine::Remove(text.to_string())
                } else if let Some(text) = line.strip_prefix('+') {
                    HunkLine::Add(text.to_string())
                } else if line.is_empty() && !counts_met {
                    HunkLine::Context(String::new())
                } else {
                    break;
                };
                match &hunk_line {
                    HunkLine::Context(_) => {
                        old_seen += 1;
                        new_seen += 1;
                    }
                    HunkLine::Remove(_) => old_seen += 1,
                    HunkLine::Add(_) => new_seen += 1,
                }
                hunk.lines.push(hunk_line);
                index += 1;
            }
            if old_count == 0 && hunk.old_lines().is_empty() {
                // A pure insertion after line `old_start`.
                hunk.old_start = Some(old_start + 1);
            }
            hunks.push(hunk);
        }
        let file_op = match (old_path, new_path) {
            (None, None) => {
                return Err(error(
                    header_index,
                    &op,
                    "both sides of the file header are /dev/null: name the file on one side"
                        .to_string(),
                ));
            }
            (None, Some(path)) => FileOp::Add {
                contents: hunks
                    .iter()
                    .flat_map(|hunk| hunk.new_lines())
                    .map(|line| format!("{line}\n"))
                    .collect(),
                path,
            },
            (Some(path), None) => FileOp::Delete { path },
            (Some(path), Some(new_path)) => {
                if hunks.is_empty() && path == new_path {
                    return Err(error(
                        header_index,
                        &op,
                        "the file header has no hunks: follow it with `@@ -a,b +c,d @@` and \
                         ' ', '-' and '+' lines"
                            .to_string(),
                    ));
                }
                FileOp::Update {
                    move_to: (new_path != path).then_some(new_path),
                    path,
                    hunks,
                }
            }
        };
        ops.push(file_op);
    }
    if ops.is_empty() {
        return Err(ToolError::new(
            "apply_patch: the diff changes no files: no file headers (`--- a/path` then `+++ b/path`) found",
        ));
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::super::parse as parse_patch;
    use super::*;

    #[test]
    fn parses_a_git_diff() {
        let diff = "diff --git a/src/lib.rs b/src/lib.rs
index 3b18e51..a9c2d1f 100644
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,3 +1,3 @@ mod x;
 one
-two
+TWO
 three
@@ -10,2 +10,3 @@
 ten
+ten and a half
 eleven
";
        let ops = parse_patch(diff).unwrap();
        let FileOp::Update {
            path,
            move_to,
            hunks,
        } = &ops[0]
        else {
            panic!("{ops:?}")
        };
        assert_eq!(path, "src/lib.rs");
        assert_eq!(move_to, &None);
        assert_eq!(hunks.len(), 2);
        assert_eq!(hunks[0].old_start, Some(1));
        assert_eq!(hunks[0].old_lines(), vec!["one", "two", "three"]);
        assert_eq!(hunks[0].new_lines(), vec!["one", "TWO", "three"]);
        assert_eq!(hunks[1].old_start, Some(10));
    }

    #[test]
    fn new_and_deleted_files() {
        let diff = "--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+hello
+world
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
";
        assert_eq!(
            parse_patch(diff).unwrap(),
            vec![
                FileOp::Add {
                    path: "new.txt".into(),
                    contents: "hello\nworld\n".into()
                },
                FileOp::Delete {
                    path: "gone.txt".into()
                },
            ]
        );
    }

    #[test]
    fn renames_timestamps_and_missing_counts() {
        let diff = "--- old.txt\t2024-01-01 00:00:00\n+++ new.txt\t2024-01-02 00:00:00\n@@ -1 +1 @@\n-a\n+b\n";
        let ops = parse_patch(diff).unwrap();
        assert_eq!(
            ops,
            vec![FileOp::Update {
                path: "old.txt".into(),
                move_to: Some("new.txt".into()),
                hunks: vec![Hunk {
                    anchor: None,
                    old_start: Some(1),
                    lines: vec![HunkLine::Remove("a".into()), HunkLine::Add("b".into())],
                    end_of_file: false,
                }]
            }]
        );
    }

    #[test]
    fn wrong_counts_are_tolerated() {
        // Says 1 line each side, has 3 and 3.
        let diff = "--- a/f\n+++ b/f\n@@ -1,1 +1,1 @@\n a\n-b\n+c\n d\n";
        let ops = parse_patch(diff).unwrap();
        let FileOp::Update { hunks, .. } = &ops[0] else {
            panic!()
        };
        assert_eq!(hunks[0].old_lines(), vec!["a", "b", "d"]);
    }

    #[test]
    fn removed_lines_that_look_like_headers() {
        // "--- x" removed (old line "-- x"), not followed by "+++": a body line.
        let diff = "--- a/f\n+++ b/f\n@@ -1,2 +1,1 @@\n--- x\n keep\n";
        let ops = parse_patch(diff).unwrap();
        let FileOp::Update { hunks, .. } = &ops[0] else {
            panic!()
        };
        assert_eq!(hunks[0].old_lines(), vec!["-- x", "keep"]);
    }

    #[test]
    fn no_newline_markers_and_insertions() {
        let diff = "--- a/f\n+++ b/f\n@@ -2,0 +3,1 @@\n+inserted\n\\ No newline at end of file\n";
        let ops = parse_patch(diff).unwrap();
        let FileOp::Update { hunks, .. } = &ops[0] else {
            panic!()
        };
        assert_eq!(hunks[0].old_start, Some(3));
        assert_eq!(hunks[0].new_lines(), vec!["inserted"]);
    }

    #[test]
    fn errors() {
        let bad_header = parse_patch("--- a/f\n+++ b/f\n@@ nonsense @@\n").unwrap_err();
        assert!(
            bad_header
                .0
                .starts_with("apply_patch: line 3 (update f): malformed hunk header"),
            "{bad_header}"
        );
        // Line numbers count the model's own lines, leading prose included.
        let later = parse_patch("\n\nsee below\n--- a/f\n+++ /dev/null\n@@ x @@\n").unwrap_err();
        assert!(
            later.0.starts_with("apply_patch: line 6 (delete f):"),
            "{later}"
        );
        let no_hunks = parse_patch("--- a/f\n+++ b/f\n").unwrap_err();
        assert!(no_hunks.0.contains("(update f)"), "{no_hunks}");
        assert!(no_hunks.0.contains("has no hunks"), "{no_hunks}");
        let both_null = parse_patch("--- /dev/null\n+++ /dev/null\n").unwrap_err();
        assert!(both_null.0.contains("/dev/null"), "{both_null}");
    }
}

//! Applying hunks to a file's text, in memory.
//!
//! Each hunk's old lines are located at or after the end of the previous
//! hunk: exactly first, then ignoring trailing whitespace, then ignoring
//! surrounding whitespace (models often get indentation of blank-ish lines
//! wrong). A hunk that matches nowhere is an error naming the hunk and the
//! first line that could not be matched; the caller adds the operation and
//! the file.

use super::{Hunk, HunkLine};
use crate::tool::ToolError;

/// How strictly lines are compared, from strictest to loosest.
const LEVELS: [fn(&str, &str) -> bool; 3] = [
    |a, b| a == b,
    |a, b| a.trim_end() == b.trim_end(),
    |a, b| a.trim() == b.trim(),
];

/// Applies `hunks` to `original`, keeping its line endings (LF or CRLF) and
/// whether it ends with a newline.
pub(crate) fn apply_hunks(original: &str, hunks: &[Hunk]) -> Result<String, ToolError> {
    let crlf = original.contains("\r\n");
    let ends_with_newline = original.is_empty() || original.ends_with('\n');
    let mut lines: Vec<&str> = original
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .collect();
    if ends_with_newline {
        lines.pop();
    }

    let mut replacements: Vec<(usize, usize, Vec<&str>)> = Vec::new();
    let mut cursor = 0;
    for (number, hunk) in hunks.iter().enumerate() {
        let old = hunk.old_lines();
        if let Some(anchor) = &hunk.anchor {
            let found = find_line(&lines, anchor, cursor).ok_or_else(|| {
                ToolError::new(format!(
                    "hunk {}: the context line {anchor:?} (from `@@ {anchor}`) was not found{}",
                    number + 1,
                    after(cursor),
                ))
            })?;
            // A hunk that repeats its anchor as its first line matches at the
            // anchor itself.
            cursor = if old.first().is_some_and(|first| LEVELS[2](first, anchor)) {
                found
            } else {
                found + 1
            };
        }
        let start = if old.is_empty() {
            insertion_point(hunk, &lines, cursor)
        } else {
            find_block(&lines, &old, cursor, hunk)
                .ok_or_else(|| mismatch(number, &lines, &old, cursor))?
        };
        // Context lines keep the file's own text (whitespace the fuzzy match
        // tolerated is not rewritten); only '-' and '+' lines change.
        let mut replacement = Vec::with_capacity(hunk.lines.len());
        let mut at = start;
        for line in &hunk.lines {
            match line {
                HunkLine::Context(_) => {
                    replacement.push(lines[at]);
                    at += 1;
                }
                HunkLine::Remove(_) => at += 1,
                HunkLine::Add(text) => replacement.push(text.as_str()),
            }
        }
        replacements.push((start, old.len(), replacement));
        cursor = start + old.len();
    }

    let mut result: Vec<&str> = Vec::with_capacity(lines.len());
    let mut next = 0;
    for (start, removed, added) in replacements {
        result.extend_from_slice(&lines[next..start]);
        result.extend(added);
        next = start + removed;
    }
    result.extend_from_slice(&lines[next..]);

    let separator = if crlf { "\r\n" } else { "\n" };
    let mut text = result.join(separator);
    if ends_with_newline && !result.is_empty() {
        text.push_str(separator);
    }
    Ok(text)
}

fn after(cursor: usize) -> String {
    if cursor == 0 {
        String::new()
    } else {
        format!(" after line {cursor}")
    }
}

/// Where a hunk that removes nothing inserts its lines.
fn insertion_point(hunk: &Hunk, lines: &[&str], cursor: usize) -> usize {
    if hunk.end_of_file {
        return lines.len();
    }
    match (hunk.old_start, &hunk.anchor) {
        (Some(start), _) => start.saturating_sub(1).clamp(cursor, lines.len()),
        (None, Some(_)) => cursor,
        (None, None) => lines.len(),
    }
}

fn find_line(lines: &[&str], wanted: &str, from: usize) -> Option<usize> {
    LEVELS
        .iter()
        .find_map(|same| (from..lines.len()).find(|&index| same(lines[index], wanted)))
}

fn matches_at(lines: &[&str], old: &[&str], start: usize, same: fn(&str, &str) -> bool) -> bool {
    start + old.len() <= lines.len()
        && old
            .iter()
            .zip(&lines[start..])
            .all(|(wanted, actual)| same(actual, wanted))
}

/// Finds `old` at or after `from`. An end-of-file hunk must end the file; a
/// unified hunk tries its stated position first.
fn find_block(lines: &[&str], old: &[&str], from: usize, hunk: &Hunk) -> Option<usize> {
    if old.len() > lines.len() {
        return None;
    }
    let last_start = lines.len() - old.len();
    if hunk.end_of_file {
        return (last_start >= from
            && LEVELS
                .iter()
                .any(|same| matches_at(lines, old, last_start, *same)))
        .then_some(last_start);
    }
    for same in LEVELS {
        if let Some(hint) = hunk.old_start.map(|start| start.saturating_sub(1))
            && hint >= from
            && matches_at(lines, old, hint, same)
        {
            return Some(hint);
        }
        if let Some(start) = (from..=last_start).find(|&start| matches_at(lines, old, start, same))
        {
            return Some(start);
        }
    }
    None
}

/// The error for a hunk that matched nowhere: the longest partial match
/// decides which line is reported as the one that differs.
fn mismatch(number: usize, lines: &[&str], old: &[&str], from: usize) -> ToolError {
    let same = LEVELS[2];
    let mut best: Option<(usize, usize)> = None; // (matched lines, start)
    for start in from..lines.len() {
        let matched = old
            .iter()
            .zip(&lines[start..])
            .take_while(|(wanted, actual)| same(actual, wanted))
            .count();
        if matched > 0 && best.is_none_or(|(most, _)| matched > most) {
            best = Some((matched, start));
        }
    }
    let message = match best {
        Some((matched, start)) if matched < old.len() => format!(
            "the hunk's first {matched} line(s) match at line {}, but then expected {:?} and found {:?}",
            start + 1,
            old[matched],
            lines
                .get(start + matched)
                .copied()
                .unwrap_or("<end of file>")
        ),
        // Matches in full, but not where an end-of-file hunk must.
        Some((_, start)) => format!(
            "the hunk matches at line {} but must end the file",
            start + 1
        ),
        None => format!("the context line {:?} was not found{}", old[0], after(from)),
    };
    ToolError::new(format!(
        "hunk {} does not match the current contents: {message}",
        number + 1
    ))
}

#[cfg(test)]
mod tests {
    use super::super::{FileOp, parse};
    use super::*;

    fn hunks_of(patch: &str) -> Vec<Hunk> {
        match parse(patch).unwrap().remove(0) {
            FileOp::Update { hunks, .. } => hunks,
            other => panic!("{other:?}"),
        }
    }

    fn codex(body: &str) -> Vec<Hunk> {
        hunks_of(&format!(
            "*** Begin Patch\n*** Update File: f\n{body}\n*** End Patch"
        ))
    }

    #[test]
    fn replaces_lines_and_keeps_the_rest() {
        let out = apply_hunks("a\nb\nc\n", &codex("@@\n a\n-b\n+B\n c")).unwrap();
        assert_eq!(out, "a\nB\nc\n");
    }

    #[test]
    fn anchors_select_among_repeats() {
        let file = "fn a() {\n    x\n}\nfn b() {\n    x\n}\n";
        let out = apply_hunks(file, &codex("@@ fn b() {\n-    x\n+    y")).unwrap();
        assert_eq!(out, "fn a() {\n    x\n}\nfn b() {\n    y\n}\n");
        // The anchor repeated as the first context line works too.
        let out = apply_hunks(file, &codex("@@ fn b() {\n fn b() {\n-    x\n+    y")).unwrap();
        assert_eq!(out, "fn a() {\n    x\n}\nfn b() {\n    y\n}\n");
    }

    #[test]
    fn hunks_apply_in_order() {
        let out = apply_hunks("x\n1\nx\n2\n", &codex("@@\n-x\n+A\n@@\n-x\n+B")).unwrap();
        assert_eq!(out, "A\n1\nB\n2\n");
    }

    #[test]
    fn whitespace_fuzz() {
        let out = apply_hunks("  a  \nb\n", &codex("@@\n a\n-b\n+c")).unwrap();
        assert_eq!(out, "  a  \nc\n");
    }

    #[test]
    fn end_of_file_hunks_match_at_the_end() {
        let out = apply_hunks("x\ny\nx\n", &codex("@@\n-x\n+z\n*** End of File")).unwrap();
        assert_eq!(out, "x\ny\nz\n");
        let error = apply_hunks("x\ny\n", &codex("@@\n-x\n+z\n*** End of File")).unwrap_err();
        assert!(error.0.contains("must end the file"), "{error}");
    }

    #[test]
    fn pure_additions_append() {
        let out = apply_hunks("a\n", &codex("@@\n+b")).unwrap();
        assert_eq!(out, "a\nb\n");
        let out = apply_hunks("", &codex("@@\n+b")).unwrap();
        assert_eq!(out, "b\n");
    }

    #[test]
    fn unified_positions_are_hints() {
        let diff = "--- a/f\n+++ b/f\n@@ -3,1 +3,1 @@\n-x\n+y\n";
        // Two `x` lines: the hint picks the third line.
        let out = apply_hunks("x\nq\nx\n", &hunks_of(diff)).unwrap();
        assert_eq!(out, "x\nq\ny\n");
        // The file moved: still found.
        let out = apply_hunks("x\n", &hunks_of(diff)).unwrap();
        assert_eq!(out, "y\n");
        let insertion = "--- a/f\n+++ b/f\n@@ -1,0 +2,1 @@\n+mid\n";
        let out = apply_hunks("a\nb\n", &hunks_of(insertion)).unwrap();
        assert_eq!(out, "a\nmid\nb\n");
    }

    #[test]
    fn keeps_crlf_and_a_missing_final_newline() {
        let out = apply_hunks("a\r\nb\r\n", &codex("@@\n-b\n+c")).unwrap();
        assert_eq!(out, "a\r\nc\r\n");
        let out = apply_hunks("a\nb", &codex("@@\n-b\n+c")).unwrap();
        assert_eq!(out, "a\nc");
    }

    #[test]
    fn mismatches_name_the_hunk_and_line() {
        let error = apply_hunks("one\ntwo\nthree\n", &codex("@@\n one\n-TWO\n+2")).unwrap_err();
        assert!(
            error
                .0
                .starts_with("hunk 1 does not match the current contents"),
            "{error}"
        );
        assert!(
            error.0.contains("expected \"TWO\" and found \"two\""),
            "{error}"
        );

        let error = apply_hunks("one\n", &codex("@@\n-nowhere\n+x")).unwrap_err();
        assert!(
            error
                .0
                .contains("the context line \"nowhere\" was not found"),
            "{error}"
        );

        let error = apply_hunks("one\n", &codex("@@ fn missing()\n-one\n+x")).unwrap_err();
        assert!(error.0.contains("\"fn missing()\""), "{error}");
        assert!(error.0.contains("hunk 1"), "{error}");
    }

    #[test]
    fn a_later_hunk_cannot_match_before_an_earlier_one() {
        let error = apply_hunks("a\nb\n", &codex("@@\n-b\n+B\n@@\n-a\n+A")).unwrap_err();
        assert!(error.0.contains("hunk 2"), "{error}");
    }

    #[test]
    fn hunk_lines_roundtrip() {
        let hunk = Hunk {
            lines: vec![
                HunkLine::Context("c".into()),
                HunkLine::Remove("r".into()),
                HunkLine::Add("a".into()),
            ],
            ..Hunk::default()
        };
        assert_eq!(hunk.old_lines(), vec!["c", "r"]);
        assert_eq!(hunk.new_lines(), vec!["c", "a"]);
    }
}

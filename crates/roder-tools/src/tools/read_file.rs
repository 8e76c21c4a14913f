//! `read_file`: numbered lines of a text file, a page at a time.

use serde::Deserialize;
use serde_json::{Value, json};

use roder_api::approval::ToolEffects;
use roder_api::tools::ToolExecutionContext;

use crate::paths::Access;
use crate::text::{decode_text, truncate_line};
use crate::tool::{CodingTool, ToolError, ToolOutput, object_schema, tool_bail};
use crate::workspace::Workspace;

/// Lines returned when the model does not say.
pub(crate) const DEFAULT_LIMIT: u64 = 2000;

/// Longest line shown; minified files would otherwise flood the context.
const MAX_LINE_CHARS: usize = 2000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    path: String,
    start_line: Option<u64>,
    limit: Option<u64>,
}

pub(crate) struct ReadFile;

impl CodingTool for ReadFile {
    type Args = Args;
    const NAME: &'static str = "read_file";
    const EFFECTS: ToolEffects = ToolEffects::READ;

    fn description() -> &'static str {
        "Read a UTF-8 text file. Returns numbered lines (`cat -n` style), at most `limit` lines \
         (default 2000) from `start_line` (1-based, default 1); lines over 2000 characters are cut. \
         When more lines remain, the result ends with the `start_line` to continue from. Relative \
         paths resolve against the workspace root."
    }

    fn parameters() -> Value {
        object_schema(
            json!({
                "path": {"type": "string", "description": "File to read, relative to the workspace root or absolute."},
                "start_line": {"type": "integer", "minimum": 1, "description": "First line to return (1-based). Default 1."},
                "limit": {"type": "integer", "minimum": 1, "description": "Most lines to return. Default 2000."}
            }),
            &["path"],
        )
    }

    async fn run(
        workspace: Workspace,
        _ctx: &ToolExecutionContext,
        args: Args,
    ) -> Result<ToolOutput, ToolError> {
        let start_line = args.start_line.unwrap_or(1);
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
        if start_line == 0 {
            tool_bail!("start_line is 1-based; got 0");
        }
        if limit == 0 {
            tool_bail!("limit must be at least 1");
        }
        let path = workspace.resolve(&args.path, Access::Read).await?;
        let display = path.display();
        let text = decode_text(workspace.read(&path).await?, &display)?;
        render(&display, &text, start_line, limit)
    }
}

/// Formats one page of `text`.
pub(crate) fn render(
    display: &str,
    text: &str,
    start_line: u64,
    limit: u64,
) -> Result<ToolOutput, ToolError> {
    let total = text.lines().count() as u64;
    if total == 0 {
        if start_line > 1 {
            tool_bail!("start_line {start_line} is past the end of {display}, which is empty");
        }
        return Ok(ToolOutput::ok(
            format!("({display} is empty)"),
            json!({"path": display, "start_line": 1, "end_line": 0, "total_lines": 0}),
        ));
    }
    if start_line > total {
        tool_bail!("start_line {start_line} is past the end of {display} ({total} lines)");
    }
    let mut out = String::new();
    let mut end_line = start_line - 1;
    for (index, line) in text
        .lines()
        .enumerate()
        .skip((start_line - 1) as usize)
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
    {
        if !out.is_empty() {
            out.push('\n');
        }
        end_line = index as u64 + 1;
        out.push_str(&format!(
            "{end_line:>6}\t{}",
            truncate_line(line, MAX_LINE_CHARS)
        ));
    }
    let remaining = total - end_line;
    if remaining > 0 {
        out.push_str(&format!(
            "\n... {remaining} more lines; continue with start_line={}",
            end_line + 1
        ));
    }
    Ok(ToolOutput::ok(
        out,
        json!({
            "path": display,
            "start_line": start_line,
            "end_line": end_line,
            "total_lines": total,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_lines_like_cat_n() {
        let out = render("a.txt", "one\ntwo\n", 1, 10).unwrap();
        assert_eq!(out.text, "     1\tone\n     2\ttwo");
        assert_eq!(out.data["total_lines"], 2);
    }

    #[test]
    fn pages_with_a_hint() {
        let text: String = (1..=10).map(|n| format!("line {n}\n")).collect();
        let first = render("a.txt", &text, 1, 3).unwrap();
        assert!(first.text.starts_with("     1\tline 1\n"));
        assert!(
            first
                .text
                .ends_with("\n... 7 more lines; continue with start_line=4"),
            "{}",
            first.text
        );
        let last = render("a.txt", &text, 9, 3).unwrap();
        assert_eq!(last.text, "     9\tline 9\n    10\tline 10");
    }

    #[test]
    fn out_of_range_pages_are_errors() {
        let error = render("a.txt", "x\ny\n", 3, 1).unwrap_err();
        assert_eq!(error.0, "start_line 3 is past the end of a.txt (2 lines)");
        assert!(render("e.txt", "", 2, 1).is_err());
    }

    #[test]
    fn empty_files_say_so() {
        assert_eq!(render("e.txt", "", 1, 5).unwrap().text, "(e.txt is empty)");
    }

    #[test]
    fn crlf_and_long_lines() {
        let long = "x".repeat(2500);
        let out = render("w.txt", &format!("a\r\n{long}\r\n"), 1, 5).unwrap();
        assert!(out.text.starts_with("     1\ta\n"));
        assert!(
            out.text.ends_with("... [500 more characters]"),
            "{}",
            &out.text[..40]
        );
    }
}

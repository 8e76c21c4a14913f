//! `edit`: replace one exact, unique occurrence of a string in a file.

use serde::Deserialize;
use serde_json::{Value, json};

use roder_api::approval::{CallPreview, CallScope, ToolEffects};
use roder_api::tools::ToolExecutionContext;

use crate::paths::{Access, ResolvedPath};
use crate::text::{decode_text, file_change, file_preview};
use crate::tool::{CodingTool, ToolError, ToolOutput, object_schema, tool_bail};
use crate::workspace::Workspace;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    path: String,
    old_string: String,
    new_string: String,
}

pub(crate) struct Edit;

impl CodingTool for Edit {
    type Args = Args;
    const NAME: &'static str = "edit";
    const EFFECTS: ToolEffects = ToolEffects::WRITE;

    fn description() -> &'static str {
        "Replace exactly one occurrence of `old_string` with `new_string` in a file. `old_string` \
         must match the file exactly (whitespace included) and occur exactly once: include enough \
         surrounding lines to make it unique. Use `multi_edit` for several changes to one file."
    }

    fn parameters() -> Value {
        object_schema(
            json!({
                "path": {"type": "string", "description": "File to change."},
                "old_string": {"type": "string", "description": "Exact text to replace; must occur exactly once."},
                "new_string": {"type": "string", "description": "Replacement text."}
            }),
            &["path", "old_string", "new_string"],
        )
    }

    fn scope(args: &Args) -> CallScope {
        CallScope::paths([args.path.as_str()])
    }

    async fn preview(
        workspace: Workspace,
        _ctx: &ToolExecutionContext,
        args: Args,
    ) -> Result<Option<CallPreview>, ToolError> {
        let (path, old, new) = edited(&workspace, &args).await?;
        let preview = file_preview(&path.absolute, &path.display(), Some(&old), Some(&new));
        Ok(Some(CallPreview::for_files(vec![preview])))
    }

    /// One read, one write: the runtime serializes executions on a workspace
    /// around this, so nothing can slip in between.
    async fn run(
        workspace: Workspace,
        _ctx: &ToolExecutionContext,
        args: Args,
    ) -> Result<ToolOutput, ToolError> {
        let (path, old, new) = edited(&workspace, &args).await?;
        let display = path.display();
        let change = file_change(&display, &old, &new);
        workspace.write(&path, new.into_bytes()).await?;
        Ok(ToolOutput::ok(
            format!("edited {display}"),
            json!({"path": display, "file_changes": [change]}),
        ))
    }
}

/// The file the edit changes, its text, and its text after the edit.
async fn edited(
    workspace: &Workspace,
    args: &Args,
) -> Result<(ResolvedPath, String, String), ToolError> {
    let path = workspace.resolve(&args.path, Access::Write).await?;
    let display = path.display();
    let old = decode_text(workspace.read(&path).await?, &display)?;
    let new = replace_unique(&old, &args.old_string, &args.new_string, &display)?;
    Ok((path, old, new))
}

/// Replaces the single occurrence of `old` in `content`.
///
/// When the file uses CRLF line endings and `old` was written with LF (models
/// usually do), the edit is retried with both strings converted to CRLF.
pub(crate) fn replace_unique(
    content: &str,
    old: &str,
    new: &str,
    display: &str,
) -> Result<String, ToolError> {
    if old.is_empty() {
        tool_bail!(
            "old_string must not be empty; use write_file to create or replace a whole file"
        );
    }
    if old == new {
        tool_bail!("old_string and new_string are identical; nothing would change");
    }
    match content.matches(old).count() {
        1 => Ok(content.replacen(old, new, 1)),
        0 => {
            if content.contains("\r\n") && old.contains('\n') && !old.contains("\r\n") {
                let old_crlf = old.replace('\n', "\r\n");
                if content.matches(&old_crlf).count() == 1 {
                    return Ok(content.replacen(&old_crlf, &new.replace('\n', "\r\n"), 1));
                }
            }
            tool_bail!("old_string not found in {display}")
        }
        count => tool_bail!(
            "old_string occurs {count} times in {display}; include more context to make it unique"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_a_unique_occurrence() {
        assert_eq!(replace_unique("a b c", "b", "B", "f").unwrap(), "a B c");
    }

    #[test]
    fn clear_errors() {
        assert_eq!(
            replace_unique("a b c", "x", "y", "f.txt").unwrap_err().0,
            "old_string not found in f.txt"
        );
        assert_eq!(
            replace_unique("b b b", "b", "y", "f.txt").unwrap_err().0,
            "old_string occurs 3 times in f.txt; include more context to make it unique"
        );
        assert!(
            replace_unique("b", "b", "b", "f")
                .unwrap_err()
                .0
                .contains("identical")
        );
        assert!(
            replace_unique("b", "", "x", "f")
                .unwrap_err()
                .0
                .contains("must not be empty")
        );
    }

    #[test]
    fn tolerates_lf_edits_of_crlf_files() {
        let out = replace_unique("one\r\ntwo\r\nthree\r\n", "one\ntwo", "1\n2", "f").unwrap();
        assert_eq!(out, "1\r\n2\r\nthree\r\n");
    }
}

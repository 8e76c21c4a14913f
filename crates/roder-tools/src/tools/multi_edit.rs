//! `multi_edit`: several exact replacements in one file, all or nothing.

use serde::Deserialize;
use serde_json::{Value, json};

use roder_api::approval::{CallPreview, CallScope, ToolEffects};
use roder_api::tools::ToolExecutionContext;

use crate::paths::{Access, ResolvedPath};
use crate::text::{decode_text, file_change, file_preview};
use crate::tool::{CodingTool, ToolError, ToolOutput, object_schema, tool_bail};
use crate::tools::edit::replace_unique;
use crate::workspace::Workspace;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditArgs {
    old_string: String,
    new_string: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    path: String,
    edits: Vec<EditArgs>,
}

pub(crate) struct MultiEdit;

impl CodingTool for MultiEdit {
    type Args = Args;
    const NAME: &'static str = "multi_edit";
    const EFFECTS: ToolEffects = ToolEffects::WRITE;

    fn description() -> &'static str {
        "Apply several exact replacements to one file, in order. Each edit follows the rules of \
         `edit` (exact match, exactly one occurrence) against the result of the edits before it. \
         All or nothing: if any edit fails, the file is left unchanged."
    }

    fn parameters() -> Value {
        object_schema(
            json!({
                "path": {"type": "string", "description": "File to change."},
                "edits": {
                    "type": "array",
                    "minItems": 1,
                    "description": "Replacements, applied in order.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "old_string": {"type": "string"},
                            "new_string": {"type": "string"}
                        },
                        "required": ["old_string", "new_string"],
                        "additionalProperties": false
                    }
                }
            }),
            &["path", "edits"],
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
            format!("applied {} edits to {display}", args.edits.len()),
            json!({"path": display, "edits": args.edits.len(), "file_changes": [change]}),
        ))
    }
}

/// The file the edits change, its text, and its text after them all.
async fn edited(
    workspace: &Workspace,
    args: &Args,
) -> Result<(ResolvedPath, String, String), ToolError> {
    if args.edits.is_empty() {
        tool_bail!("edits must contain at least one edit");
    }
    let path = workspace.resolve(&args.path, Access::Write).await?;
    let display = path.display();
    let old = decode_text(workspace.read(&path).await?, &display)?;
    let new = apply_all(&old, &args.edits, &display)?;
    Ok((path, old, new))
}

fn apply_all(content: &str, edits: &[EditArgs], display: &str) -> Result<String, ToolError> {
    let mut current = content.to_string();
    for (index, edit) in edits.iter().enumerate() {
        current = replace_unique(&current, &edit.old_string, &edit.new_string, display).map_err(
            |error| {
                ToolError::new(format!(
                    "edits[{index}] (edit {} of {}): {error}; no changes were written",
                    index + 1,
                    edits.len()
                ))
            },
        )?;
    }
    Ok(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(old: &str, new: &str) -> EditArgs {
        EditArgs {
            old_string: old.to_string(),
            new_string: new.to_string(),
        }
    }

    #[test]
    fn edits_apply_in_order_on_the_running_result() {
        let out = apply_all("a b", &[edit("a", "x"), edit("x b", "done")], "f").unwrap();
        assert_eq!(out, "done");
    }

    #[test]
    fn the_failing_edit_is_named() {
        let error = apply_all("a b", &[edit("a", "x"), edit("zzz", "y")], "f.txt").unwrap_err();
        assert_eq!(
            error.0,
            "edits[1] (edit 2 of 2): old_string not found in f.txt; no changes were written"
        );
    }
}

//! `write_file`: create or replace a whole file.

use serde::Deserialize;
use serde_json::{Value, json};

use roder_api::approval::{CallPreview, CallScope, ToolEffects};
use roder_api::tools::ToolExecutionContext;

use crate::paths::Access;
use crate::text::{file_change, file_preview};
use crate::tool::{CodingTool, ToolError, ToolOutput, object_schema};
use crate::workspace::Workspace;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    path: String,
    content: String,
}

pub(crate) struct WriteFile;

impl CodingTool for WriteFile {
    type Args = Args;
    const NAME: &'static str = "write_file";
    const EFFECTS: ToolEffects = ToolEffects::WRITE;

    fn description() -> &'static str {
        "Create a file or replace its whole contents. Parent directories are created. The path must \
         stay inside the workspace root. Prefer `edit` or `apply_patch` to change part of a file."
    }

    fn parameters() -> Value {
        object_schema(
            json!({
                "path": {"type": "string", "description": "File to write, relative to the workspace root or absolute inside it."},
                "content": {"type": "string", "description": "The complete new contents."}
            }),
            &["path", "content"],
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
        let path = workspace.resolve(&args.path, Access::Write).await?;
        let before = workspace.read_if_exists(&path).await?;
        let old = before.as_deref().map(String::from_utf8_lossy);
        Ok(Some(CallPreview::for_files(vec![file_preview(
            &path.absolute,
            &path.display(),
            old.as_deref(),
            Some(&args.content),
        )])))
    }

    async fn run(
        workspace: Workspace,
        _ctx: &ToolExecutionContext,
        args: Args,
    ) -> Result<ToolOutput, ToolError> {
        let path = workspace.resolve(&args.path, Access::Write).await?;
        let display = path.display();
        let before = workspace.read_if_exists(&path).await?;
        let old = before
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        let change = file_change(&display, &old, &args.content);
        let bytes = args.content.len();
        workspace.write(&path, args.content.into_bytes()).await?;
        Ok(ToolOutput::ok(
            format!("wrote {display}"),
            json!({
                "path": display,
                "bytes": bytes,
                "created": before.is_none(),
                "file_changes": [change],
            }),
        ))
    }
}

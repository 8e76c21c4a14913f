//! `list_files`: what is in a directory, a few levels deep.

use serde::Deserialize;
use serde_json::{Value, json};

use roder_api::approval::ToolEffects;
use roder_api::tools::ToolExecutionContext;

use crate::paths::Access;
use crate::tool::{CodingTool, ToolError, ToolOutput, object_schema, tool_bail};
use crate::workspace::{Walk, WalkOptions, Workspace};

const DEFAULT_DEPTH: usize = 2;
pub(crate) const MAX_ENTRIES: usize = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    path: Option<String>,
    depth: Option<usize>,
}

pub(crate) struct ListFiles;

impl CodingTool for ListFiles {
    type Args = Args;
    const NAME: &'static str = "list_files";
    const EFFECTS: ToolEffects = ToolEffects::SEARCH;

    fn description() -> &'static str {
        "List files and directories under a directory (default: the workspace root), `depth` levels \
         deep (default 2). Directories end with `/`. Skips `.git` and, on this host, what \
         `.gitignore` ignores. At most 1000 entries."
    }

    fn parameters() -> Value {
        object_schema(
            json!({
                "path": {"type": "string", "description": "Directory to list. Default: the workspace root."},
                "depth": {"type": "integer", "minimum": 1, "description": "Levels to descend. Default 2."}
            }),
            &[],
        )
    }

    async fn run(
        workspace: Workspace,
        _ctx: &ToolExecutionContext,
        args: Args,
    ) -> Result<ToolOutput, ToolError> {
        let depth = args.depth.unwrap_or(DEFAULT_DEPTH);
        if depth == 0 {
            tool_bail!("depth must be at least 1");
        }
        let dir = workspace
            .resolve(args.path.as_deref().unwrap_or("."), Access::Read)
            .await?;
        let walk = workspace
            .walk(
                &dir,
                WalkOptions {
                    max_depth: Some(depth),
                    include_dirs: true,
                    pattern: None,
                    limit: MAX_ENTRIES,
                },
            )
            .await?;
        Ok(render(&dir.display(), &walk))
    }
}

fn render(display: &str, walk: &Walk) -> ToolOutput {
    let data = json!({
        "path": display,
        "entries": walk.entries.len(),
        "truncated": walk.truncated,
    });
    if walk.entries.is_empty() {
        return ToolOutput::ok(format!("({display} is empty)"), data);
    }
    let mut text = walk
        .entries
        .iter()
        .map(|entry| {
            if entry.is_dir {
                format!("{}/", entry.display)
            } else {
                entry.display.clone()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    if walk.truncated {
        text.push_str(&format!(
            "\n... truncated at {MAX_ENTRIES} entries; list a subdirectory or lower the depth"
        ));
    }
    ToolOutput::ok(text, data)
}

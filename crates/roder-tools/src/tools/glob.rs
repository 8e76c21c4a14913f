//! `glob`: files whose path matches a pattern.

use serde::Deserialize;
use serde_json::{Value, json};

use roder_api::approval::ToolEffects;
use roder_api::tools::ToolExecutionContext;

use crate::glob_match::PathPattern;
use crate::paths::Access;
use crate::tool::{CodingTool, ToolError, ToolOutput, object_schema};
use crate::workspace::{WalkOptions, Workspace};

const MAX_MATCHES: usize = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    pattern: String,
    path: Option<String>,
}

pub(crate) struct Glob;

impl CodingTool for Glob {
    type Args = Args;
    const NAME: &'static str = "glob";
    const EFFECTS: ToolEffects = ToolEffects::SEARCH;

    fn description() -> &'static str {
        "Find files by glob pattern under a directory (default: the workspace root). A pattern \
         without `/` matches file names at any depth (`*.rs`); a pattern with `/` matches the path \
         relative to the directory (`src/**/*.rs`; `*` does not cross `/`, `**` does). Skips `.git` \
         and, on this host, what `.gitignore` ignores. Sorted, at most 1000 paths."
    }

    fn parameters() -> Value {
        object_schema(
            json!({
                "pattern": {"type": "string", "description": "Glob pattern, e.g. `*.rs` or `src/**/test_*.py`."},
                "path": {"type": "string", "description": "Directory to search. Default: the workspace root."}
            }),
            &["pattern"],
        )
    }

    async fn run(
        workspace: Workspace,
        _ctx: &ToolExecutionContext,
        args: Args,
    ) -> Result<ToolOutput, ToolError> {
        let pattern = PathPattern::new(&args.pattern)?;
        let dir = workspace
            .resolve(args.path.as_deref().unwrap_or("."), Access::Read)
            .await?;
        let walk = workspace
            .walk(
                &dir,
                WalkOptions {
                    max_depth: None,
                    include_dirs: false,
                    pattern: Some(pattern),
                    limit: MAX_MATCHES,
                },
            )
            .await?;
        let display = dir.display();
        let data = json!({
            "pattern": args.pattern,
            "path": display,
            "matches": walk.entries.len(),
            "truncated": walk.truncated,
        });
        if walk.entries.is_empty() {
            return Ok(ToolOutput::ok(
                format!("no files match {:?} in {display}", args.pattern),
                data,
            ));
        }
        let mut text = walk
            .entries
            .iter()
            .map(|entry| entry.display.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        if walk.truncated {
            text.push_str(&format!(
                "\n... truncated at {MAX_MATCHES} paths; use a narrower pattern or path"
            ));
        }
        Ok(ToolOutput::ok(text, data))
    }
}

//! `grep`: lines matching a regular expression, as `path:line:text`.

use serde::Deserialize;
use serde_json::{Value, json};

use roder_api::approval::ToolEffects;
use roder_api::tools::ToolExecutionContext;

use crate::glob_match::PathPattern;
use crate::paths::Access;
use crate::tool::{CodingTool, ToolError, ToolOutput, object_schema, tool_bail};
use crate::workspace::{GrepQuery, Workspace};

const DEFAULT_MAX_RESULTS: usize = 200;
const MAX_MAX_RESULTS: usize = 2000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    case_insensitive: Option<bool>,
    max_results: Option<usize>,
}

pub(crate) struct Grep;

impl CodingTool for Grep {
    type Args = Args;
    const NAME: &'static str = "grep";
    const EFFECTS: ToolEffects = ToolEffects::SEARCH;

    fn description() -> &'static str {
        "Search file contents for a regular expression under a file or directory (default: the \
         workspace root). Prints `path:line:text` per matching line. `glob` keeps only files whose \
         name (or, with `/`, relative path) matches. Skips `.git`, binary files and, on this host, \
         what `.gitignore` ignores. At most `max_results` lines (default 200)."
    }

    fn parameters() -> Value {
        object_schema(
            json!({
                "pattern": {"type": "string", "description": "Regular expression (Rust/ripgrep syntax on this host, POSIX extended on a runner)."},
                "path": {"type": "string", "description": "File or directory to search. Default: the workspace root."},
                "glob": {"type": "string", "description": "Only search files matching this glob, e.g. `*.rs`."},
                "case_insensitive": {"type": "boolean", "description": "Ignore case. Default false."},
                "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_MAX_RESULTS, "description": "Most matching lines to return. Default 200."}
            }),
            &["pattern"],
        )
    }

    async fn run(
        workspace: Workspace,
        _ctx: &ToolExecutionContext,
        args: Args,
    ) -> Result<ToolOutput, ToolError> {
        if args.pattern.is_empty() {
            tool_bail!("pattern must not be empty");
        }
        let max_results = args.max_results.unwrap_or(DEFAULT_MAX_RESULTS);
        if max_results == 0 {
            tool_bail!("max_results must be at least 1");
        }
        let max_results = max_results.min(MAX_MAX_RESULTS);
        let glob = args.glob.as_deref().map(PathPattern::new).transpose()?;
        let target = workspace
            .resolve(args.path.as_deref().unwrap_or("."), Access::Read)
            .await?;
        let display = target.display();
        let outcome = workspace
            .grep(GrepQuery {
                pattern: args.pattern.clone(),
                target,
                glob,
                case_insensitive: args.case_insensitive.unwrap_or(false),
                max_results,
            })
            .await?;
        let data = json!({
            "pattern": args.pattern,
            "path": display,
            "matches": outcome.hits.len(),
            "truncated": outcome.truncated,
        });
        if outcome.hits.is_empty() {
            return Ok(ToolOutput::ok(
                format!("no matches for {:?} in {display}", args.pattern),
                data,
            ));
        }
        let mut text = outcome
            .hits
            .iter()
            .map(|hit| format!("{}:{}:{}", hit.display, hit.line_number, hit.text))
            .collect::<Vec<_>>()
            .join("\n");
        if outcome.truncated {
            text.push_str(&format!(
                "\n... stopped after {} matches; narrow the path or glob, or raise max_results",
                outcome.hits.len()
            ));
        }
        Ok(ToolOutput::ok(text, data))
    }
}

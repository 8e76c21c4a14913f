//! `apply_patch`: a multi-file patch (Codex format or unified diff), all or
//! nothing.
//!
//! Every error names the operation and the file it concerns (`cannot update
//! a.txt: ...`) and says whether anything was applied: parsing and staging
//! happen in memory, so their errors always end "nothing was applied"; only
//! a write that fails while committing can leave earlier files changed, and
//! then the error lists them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Value, json};

use roder_api::approval::{CallPreview, CallScope, ToolEffects};
use roder_api::tools::ToolExecutionContext;

use crate::patch::{self, FileOp};
use crate::paths::{Access, ResolvedPath};
use crate::text::{decode_text, file_change, file_preview};
use crate::tool::{CodingTool, ToolError, ToolOutput, object_schema};
use crate::workspace::Workspace;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    patch: String,
}

pub(crate) struct ApplyPatch;

impl CodingTool for ApplyPatch {
    type Args = Args;
    const NAME: &'static str = "apply_patch";
    const EFFECTS: ToolEffects = ToolEffects::WRITE
        .union(ToolEffects::DELETE)
        .union(ToolEffects::MOVE);

    fn description() -> &'static str {
        "Apply a patch to one or more files. Accepts the Codex format (`*** Begin Patch`, \
         `*** Add File: p` with `+` lines, `*** Delete File: p`, `*** Update File: p` with optional \
         `*** Move to: q` and `@@ [context line]` hunks of ' ', '-' and '+' lines, optional \
         `*** End of File`, then `*** End Patch`) or a unified diff (`--- a/p`, `+++ b/p`, \
         `@@ -a,b +c,d @@`). Every hunk is checked against the current files before anything is \
         written: a patch that does not apply changes nothing (errors say so)."
    }

    fn parameters() -> Value {
        object_schema(
            json!({
                "patch": {"type": "string", "description": "The patch text."}
            }),
            &["patch"],
        )
    }

    /// Every path the patch names: added, updated, deleted, and both ends
    /// of a move. A patch that does not parse names none (it fails before
    /// doing anything).
    fn scope(args: &Args) -> CallScope {
        let ops = patch::parse(&args.patch).unwrap_or_default();
        CallScope::paths(ops.iter().flat_map(FileOp::paths))
    }

    async fn preview(
        workspace: Workspace,
        _ctx: &ToolExecutionContext,
        args: Args,
    ) -> Result<Option<CallPreview>, ToolError> {
        let plan = Plan::staged(&workspace, &args.patch).await?;
        let files = plan
            .changed()
            .map(|staged| {
                file_preview(
                    &staged.path.absolute,
                    &staged.path.display(),
                    staged.before.as_deref(),
                    staged.after.as_deref(),
                )
            })
            .collect();
        Ok(Some(CallPreview::for_files(files)))
    }

    async fn run(
        workspace: Workspace,
        _ctx: &ToolExecutionContext,
        args: Args,
    ) -> Result<ToolOutput, ToolError> {
        Plan::staged(&workspace, &args.patch)
            .await?
            .commit(&workspace)
            .await
    }
}

const NOTHING_APPLIED: &str = "nothing was applied";

/// Ends an error raised before anything was written.
fn nothing_applied(error: ToolError) -> ToolError {
    ToolError::new(format!("{error}; {NOTHING_APPLIED}"))
}

/// A file as the patch sees it: its contents before, and after the operations
/// staged so far (`None`: absent).
struct Staged {
    path: ResolvedPath,
    before: Option<String>,
    after: Option<String>,
}

/// Every file the patch touches, keyed by absolute path so that two sections
/// naming one file (or a move onto a file the patch also edits) compose.
#[derive(Default)]
struct Plan {
    files: BTreeMap<PathBuf, Staged>,
    /// Paths in the order the patch first named them, for the report.
    order: Vec<PathBuf>,
}

impl Plan {
    /// The patch parsed and staged in memory, checked whole: nothing is
    /// written.
    async fn staged(workspace: &Workspace, patch_text: &str) -> Result<Plan, ToolError> {
        let ops = patch::parse(patch_text).map_err(nothing_applied)?;
        let mut plan = Plan::default();
        for op in ops {
            let what = op.describe();
            plan.stage(workspace, op).await.map_err(|error| {
                nothing_applied(ToolError::new(format!(
                    "apply_patch: cannot {what}: {error}"
                )))
            })?;
        }
        plan.check_nesting().map_err(nothing_applied)?;
        Ok(plan)
    }

    /// The files the patch changes, in the order it first names them.
    fn changed(&self) -> impl Iterator<Item = &Staged> {
        self.order
            .iter()
            .filter_map(|key| self.files.get(key))
            .filter(|staged| staged.before != staged.after)
    }

    async fn load(
        &mut self,
        workspace: &Workspace,
        requested: &str,
        must_exist: bool,
    ) -> Result<&mut Staged, ToolError> {
        let path = workspace.resolve(requested, Access::Write).await?;
        let key = path.absolute.clone();
        if !self.files.contains_key(&key) {
            let display = path.display();
            let before = if must_exist {
                Some(decode_text(workspace.read(&path).await?, &display)?)
            } else {
                workspace
                    .read_if_exists(&path)
                    .await?
                    .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            };
            self.order.push(key.clone());
            self.files.insert(
                key.clone(),
                Staged {
                    path,
                    after: before.clone(),
                    before,
                },
            );
        }
        self.files
            .get_mut(&key)
            .ok_or_else(|| ToolError::new("internal error: the staged file vanished"))
    }

    async fn stage(&mut self, workspace: &Workspace, op: FileOp) -> Result<(), ToolError> {
        match op {
            FileOp::Add { path, contents } => {
                self.load(workspace, &path, false).await?.after = Some(contents);
            }
            FileOp::Delete { path } => {
                let staged = self.load(workspace, &path, true).await?;
                if staged.after.is_none() {
                    return Err(ToolError::new(
                        "an earlier section of the patch already removes it",
                    ));
                }
                staged.after = None;
            }
            FileOp::Update {
                path,
                move_to,
                hunks,
            } => {
                let staged = self.load(workspace, &path, true).await?;
                let Some(current) = staged.after.as_deref() else {
                    return Err(ToolError::new("an earlier section of the patch removes it"));
                };
                let updated = patch::apply_hunks(current, &hunks)?;
                staged.after = None;
                match move_to {
                    None => staged.after = Some(updated),
                    Some(target) => {
                        self.load(workspace, &target, false).await?.after = Some(updated);
                    }
                }
            }
        }
        Ok(())
    }

    /// Refuses a patch that leaves a file where it also leaves another file
    /// inside it (`*** Add File: d/x` and `*** Add File: d`): one of the two
    /// writes would fail halfway through the commit.
    fn check_nesting(&self) -> Result<(), ToolError> {
        for (key, staged) in &self.files {
            if staged.after.is_none() {
                continue;
            }
            let outer = key
                .ancestors()
                .skip(1)
                .filter_map(|ancestor| self.files.get(ancestor))
                .find(|outer| outer.after.is_some());
            if let Some(outer) = outer {
                return Err(ToolError::new(format!(
                    "apply_patch: cannot {} {}: the patch also writes {} inside it, so it would be both a file and a directory",
                    staged_verb(outer),
                    outer.path.display(),
                    staged.path.display(),
                )));
            }
        }
        Ok(())
    }

    /// Writes the staged result. Everything was validated in memory; a write
    /// that still fails (a full disk, a vanished runner) is reported with
    /// what had already changed.
    async fn commit(self, workspace: &Workspace) -> Result<ToolOutput, ToolError> {
        let mut summary = Vec::new();
        let mut changes = Vec::new();
        let mut done: Vec<String> = Vec::new();
        let changed = self.changed();
        // Writes before deletes: a move never loses the file's only copy.
        let (writes, deletes): (Vec<&Staged>, Vec<&Staged>) =
            changed.partition(|staged| staged.after.is_some());
        for staged in writes.into_iter().chain(deletes) {
            let display = staged.path.display();
            let result = match &staged.after {
                Some(contents) => {
                    workspace
                        .write(&staged.path, contents.clone().into_bytes())
                        .await
                }
                None => workspace.remove(&staged.path).await,
            };
            let verb = staged_verb(staged);
            let marker = match verb {
                "add" => "A",
                "delete" => "D",
                _ => "M",
            };
            if let Err(error) = result {
                let applied = if done.is_empty() {
                    NOTHING_APPLIED.to_string()
                } else {
                    format!(
                        "already applied: {}; the rest was not applied",
                        done.join(", ")
                    )
                };
                return Err(ToolError::new(format!(
                    "apply_patch: cannot {verb} {display}: {error}; {applied}"
                )));
            }
            summary.push(format!("{marker} {display}"));
            changes.push(file_change(
                &display,
                staged.before.as_deref().unwrap_or_default(),
                staged.after.as_deref().unwrap_or_default(),
            ));
            done.push(format!("{verb} {display}"));
        }
        let text = if summary.is_empty() {
            "patch applied; no file changed".to_string()
        } else {
            format!("applied patch:\n{}", summary.join("\n"))
        };
        Ok(ToolOutput::ok(text, json!({"file_changes": changes})))
    }
}

/// What committing `staged` does to its file.
fn staged_verb(staged: &Staged) -> &'static str {
    match (&staged.before, &staged.after) {
        (None, Some(_)) => "add",
        (Some(_), None) => "delete",
        _ => "update",
    }
}

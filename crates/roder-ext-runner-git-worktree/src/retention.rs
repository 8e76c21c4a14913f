//! Removing checkpoint refs nothing needs any more (past the retention, or
//! of a deleted thread): one `git for-each-ref` to see which still exist
//! and still name the checkpoint's commit, then one `git update-ref
//! --stdin` transaction deleting them all, however many. The commits
//! themselves become unreachable and git's own garbage collection frees
//! them; a ref another writer moved since is left alone.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use roder_api::checkpoint::{RemovedCheckpoint, WorkspaceCheckpoint};

use crate::checkpointer::CHECKPOINTER_ID;
use crate::git::Git;

/// The prefix every checkpoint ref lives under.
const PREFIX: &str = "refs/roder/checkpoints/";

/// The checkout a checkpoint was taken in, as it recorded it.
pub(crate) fn checkout_of(checkpoint: &WorkspaceCheckpoint) -> Option<PathBuf> {
    checkpoint
        .metadata
        .get("checkout")
        .and_then(serde_json::Value::as_str)
        .map(PathBuf::from)
}

/// Removes (or with `dry_run` lists) the refs of `checkpoints` in the
/// repository of `checkout`.
pub(crate) async fn remove_refs(
    checkout: &Path,
    checkpoints: &[&WorkspaceCheckpoint],
    dry_run: bool,
) -> anyhow::Result<Vec<RemovedCheckpoint>> {
    let wanted: HashMap<&str, &str> = checkpoints
        .iter()
        .filter_map(|checkpoint| {
            let reference = checkpoint.reference.as_deref()?;
            reference
                .starts_with(PREFIX)
                .then_some((reference, checkpoint.id.as_str()))
        })
        .collect();
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let listed = Git::new(checkout)
        .args(["for-each-ref", "--format=%(objectname) %(refname)", PREFIX])
        .text()
        .await?;
    let present: BTreeMap<&str, &str> = listed
        .lines()
        .filter_map(|line| line.split_once(' '))
        .filter(|(object, reference)| wanted.get(reference) == Some(object))
        .map(|(object, reference)| (reference, object))
        .collect();
    if !dry_run && !present.is_empty() {
        let mut input = String::from("start\n");
        for (reference, object) in &present {
            input.push_str(&format!("delete {reference} {object}\n"));
        }
        input.push_str("prepare\ncommit\n");
        Git::new(checkout)
            .args(["update-ref", "--stdin"])
            .input(input.into_bytes())
            .run()
            .await?;
    }
    Ok(present
        .keys()
        .map(|reference| RemovedCheckpoint {
            checkpointer: CHECKPOINTER_ID.to_string(),
            id: (*reference).to_string(),
            bytes: None,
        })
        .collect())
}

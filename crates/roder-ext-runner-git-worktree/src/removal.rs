//! Removing a worktree from disk and from its source's worktree list.
//!
//! Used by cleanup (explicit, refused while bound), by rollback (a thread
//! creation failed after materializing) and by a materialization that fails
//! half way. The caller holds the source repository's lock.

use std::io::ErrorKind;
use std::path::Path;

use anyhow::{Context, bail};

use crate::git::Git;

/// Removes the checkout (git's own removal first, then whatever git left),
/// drops git's admin entry when git could not, then removes `dir`
/// (`<root>/<id>`, record included).
///
/// Only a directory is ever removed at the checkout path: anything else
/// there (a file, a symlink) was not made by us, so it is reported, not
/// deleted.
pub(crate) async fn remove_worktree(
    repository: &Path,
    checkout: &Path,
    dir: &Path,
) -> anyhow::Result<()> {
    let source_present = tokio::fs::metadata(repository)
        .await
        .is_ok_and(|metadata| metadata.is_dir());
    let mut git_removed = false;
    match tokio::fs::symlink_metadata(checkout).await {
        Ok(metadata) if metadata.is_dir() => {
            let mut git_error = None;
            if source_present {
                // Twice `--force`: discard uncommitted changes and ignore a
                // `git worktree lock` (the checkout is ours).
                let removed = Git::new(repository)
                    .args(["worktree", "remove", "--force", "--force"])
                    .arg(checkout)
                    .run()
                    .await;
                match removed {
                    Ok(_) => git_removed = true,
                    Err(error) => git_error = Some(error),
                }
            }
            if let Err(error) = remove_dir_all(checkout).await {
                let git_said = git_error
                    .map(|error| format!(" (git's removal failed too: {error:#})"))
                    .unwrap_or_default();
                return Err(error).context(format!(
                    "cannot remove checkout `{}`{git_said}",
                    checkout.display()
                ));
            }
        }
        Ok(_) => bail!(
            "checkout `{}` is not a directory (something replaced it); remove it by hand, \
             then run cleanup again",
            checkout.display()
        ),
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(error) => {
            return Err(error)
                .with_context(|| format!("cannot inspect checkout `{}`", checkout.display()));
        }
    }
    if source_present && !git_removed && is_registered(repository, checkout).await {
        // The checkout went without git's help: drop git's stale entry for
        // it. A failure only leaves an entry git prunes on its own later.
        let _ = Git::new(repository).args(["worktree", "prune"]).run().await;
    }
    remove_dir_all(dir)
        .await
        .with_context(|| format!("cannot remove worktree directory `{}`", dir.display()))
}

/// Whether the source still lists `checkout` as one of its worktrees, so a
/// prune is only run when there is something of ours to prune.
async fn is_registered(repository: &Path, checkout: &Path) -> bool {
    let Ok(listing) = Git::new(repository)
        .args(["worktree", "list", "--porcelain"])
        .run()
        .await
    else {
        return false;
    };
    let wanted = format!("worktree {}", checkout.display());
    String::from_utf8_lossy(&listing)
        .lines()
        .any(|line| line == wanted)
}

/// `remove_dir_all` where an already missing directory is success.
async fn remove_dir_all(path: &Path) -> std::io::Result<()> {
    match tokio::fs::remove_dir_all(path).await {
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

//! Observing a worktree: its status, cleanliness, commit and branch.
//!
//! The record says what the worktree was made from; everything else is read
//! from the checkout each time, because the agent (or a user) changes it
//! behind our back with plain git commands.

use std::io::ErrorKind;
use std::path::Path;

use roder_api::workdir::{Cleanliness, WorkdirInfo, WorkdirStatus};
use time::OffsetDateTime;

use crate::git::Git;
use crate::layout::Layout;
use crate::record::{self, Record, RecordState};

/// What a healthy checkout looks like right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Probe {
    pub(crate) cleanliness: Cleanliness,
    pub(crate) head_commit: Option<String>,
    pub(crate) branch: Option<String>,
}

/// Reads the checkout; `None` when it is corrupted: the checkout or its
/// `.git` link is gone or replaced, the source repository is gone, or git
/// cannot read it.
pub(crate) async fn probe(record: &Record) -> Option<Probe> {
    if !is_dir(&record.repository).await || !is_dir(&record.checkout).await {
        return None;
    }
    if !links_to_source(record).await {
        return None;
    }
    // The ceiling stops git from walking up into an enclosing repository if
    // the checkout's own `.git` vanishes between the check and the status.
    // No optional locks: a status that refreshed the index would hold
    // `index.lock` and could make the agent's own `git add` fail.
    let ceiling = record.checkout.parent().unwrap_or(&record.checkout);
    let output = Git::new(&record.checkout)
        .args([
            "--no-optional-locks",
            "status",
            "--porcelain=v2",
            "--branch",
        ])
        .env("GIT_CEILING_DIRECTORIES", ceiling)
        .run()
        .await
        .ok()?;
    Some(parse_status(&String::from_utf8_lossy(&output)))
}

/// The full picture of one recorded worktree.
pub(crate) async fn inspect(record: &Record) -> WorkdirInfo {
    let probe = probe(record).await;
    info(record, probe)
}

/// Combines the record with a probe. A pending cleanup wins over anything
/// observed: it is the state that tells the user what to do next.
pub(crate) fn info(record: &Record, probe: Option<Probe>) -> WorkdirInfo {
    let status = match (record.state, &probe) {
        (RecordState::CleanupPending, _) => WorkdirStatus::CleanupPending,
        (RecordState::Active, Some(_)) => WorkdirStatus::Active,
        (RecordState::Active, None) => WorkdirStatus::Corrupted,
    };
    let (cleanliness, head_commit, branch) = match probe {
        Some(probe) => (Some(probe.cleanliness), probe.head_commit, probe.branch),
        None => (None, None, None),
    };
    WorkdirInfo {
        id: record.id.clone(),
        status,
        checkout: record.checkout.clone(),
        repository: record.repository.clone(),
        selector: record.selector.clone(),
        base_commit: record.base_commit.clone(),
        base_tree: record.base_tree.clone(),
        cleanliness,
        head_commit,
        branch,
        primary_thread_id: record.primary_thread_id.clone(),
        created_at: record.created_at,
    }
}

/// The answer for an id nothing is recorded under.
pub(crate) fn not_found(layout: &Layout, id: &str) -> WorkdirInfo {
    WorkdirInfo {
        id: id.to_string(),
        status: WorkdirStatus::NotFound,
        checkout: layout.checkout(id),
        repository: Default::default(),
        selector: String::new(),
        base_commit: String::new(),
        base_tree: String::new(),
        cleanliness: None,
        head_commit: None,
        branch: None,
        primary_thread_id: None,
        created_at: OffsetDateTime::UNIX_EPOCH,
    }
}

/// `info` for a record that was just removed: what it was, now not found.
pub(crate) fn removed(record: &Record) -> WorkdirInfo {
    WorkdirInfo {
        status: WorkdirStatus::NotFound,
        primary_thread_id: None,
        ..info(record, None)
    }
}

/// Every recorded worktree under the root, oldest first. Directories
/// without a record (a materialization that crashed half way) are skipped.
pub(crate) async fn list(layout: &Layout) -> anyhow::Result<Vec<WorkdirInfo>> {
    let mut entries = match tokio::fs::read_dir(layout.root()).await {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!(
                "cannot list worktrees under `{}`",
                layout.root().display()
            )));
        }
    };
    let mut infos = Vec::new();
    while let Some(entry) = entries.next_entry().await? {
        let Some(id) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if crate::id::validate(&id).is_err() {
            continue;
        }
        if let Some(record) = record::read(&layout.record(&id)).await? {
            infos.push(inspect(&record).await);
        }
    }
    infos.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
    Ok(infos)
}

async fn is_dir(path: &Path) -> bool {
    tokio::fs::symlink_metadata(path)
        .await
        .is_ok_and(|metadata| metadata.is_dir())
}

/// Whether `<checkout>/.git` is the link file git wrote, pointing into the
/// recorded source's `worktrees/` directory (which still exists).
async fn links_to_source(record: &Record) -> bool {
    let Ok(link) = tokio::fs::read_to_string(record.checkout.join(".git")).await else {
        return false;
    };
    let Some(gitdir) = link.strip_prefix("gitdir:").map(str::trim) else {
        return false;
    };
    let gitdir = Path::new(gitdir);
    let gitdir = if gitdir.is_absolute() {
        gitdir.to_path_buf()
    } else {
        record.checkout.join(gitdir)
    };
    match tokio::fs::canonicalize(&gitdir).await {
        Ok(resolved) => resolved.starts_with(record.common_dir.join("worktrees")),
        Err(_) => false,
    }
}

/// Parses `git status --porcelain=v2 --branch`: `#` lines are headers
/// (commit and branch), any other line is a change.
fn parse_status(output: &str) -> Probe {
    let mut head_commit = None;
    let mut branch = None;
    let mut dirty = false;
    for line in output.lines() {
        if let Some(oid) = line.strip_prefix("# branch.oid ") {
            head_commit = (oid != "(initial)").then(|| oid.to_string());
        } else if let Some(head) = line.strip_prefix("# branch.head ") {
            branch = (head != "(detached)").then(|| head.to_string());
        } else if !line.starts_with('#') && !line.is_empty() {
            dirty = true;
        }
    }
    Probe {
        cleanliness: if dirty {
            Cleanliness::Dirty
        } else {
            Cleanliness::Clean
        },
        head_commit,
        branch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_porcelain_v2_headers_and_entries() {
        let detached = parse_status("# branch.oid abc\n# branch.head (detached)\n");
        assert_eq!(
            detached,
            Probe {
                cleanliness: Cleanliness::Clean,
                head_commit: Some("abc".to_string()),
                branch: None,
            }
        );
        let dirty = parse_status(
            "# branch.oid def\n# branch.head feature\n# branch.upstream o/f\n? new.txt\n",
        );
        assert_eq!(dirty.cleanliness, Cleanliness::Dirty);
        assert_eq!(dirty.branch.as_deref(), Some("feature"));
        assert_eq!(parse_status("# branch.oid (initial)\n").head_commit, None);
    }
}

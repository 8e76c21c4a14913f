//! Materializing a worktree: `<root>/<id>/checkout` as a detached worktree
//! of a local repository at a selector, plus its record.
//!
//! Either everything is created or nothing is left: a failure after the
//! `<root>/<id>` directory exists removes the worktree and the directory.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use roder_api::workdir::{MaterializedWorkdir, WorkdirRequest};
use time::OffsetDateTime;

use crate::git::Git;
use crate::inspect::inspect;
use crate::keyed_lock::{RECORDS, REPOSITORIES};
use crate::layout::{CHECKOUT, Layout};
use crate::record::{self, Record, RecordState};
use crate::removal::remove_worktree;
use crate::source::{DEFAULT_SELECTOR, Source, is_head, validate_selector};

pub(crate) async fn materialize(
    layout: &Layout,
    request: WorkdirRequest,
) -> anyhow::Result<MaterializedWorkdir> {
    let selector = request
        .selector
        .unwrap_or_else(|| DEFAULT_SELECTOR.to_string());
    validate_selector(&selector)?;
    let id = match request.id {
        Some(id) => {
            crate::id::validate(&id)?;
            id
        }
        None => crate::id::generate(),
    };
    let source = Source::open(&request.repository).await?;

    tokio::fs::create_dir_all(layout.root())
        .await
        .with_context(|| format!("cannot create worktree root `{}`", layout.root().display()))?;
    let root = tokio::fs::canonicalize(layout.root())
        .await
        .with_context(|| format!("cannot resolve worktree root `{}`", layout.root().display()))?;
    let dir = layout.dir(&id);
    let _record_lock = RECORDS.lock(&dir).await;
    match tokio::fs::create_dir(&dir).await {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::AlreadyExists => bail!(
            "worktree `{id}` already exists under `{}`; claim it, or choose another id",
            layout.root().display()
        ),
        Err(error) => {
            return Err(error)
                .with_context(|| format!("cannot create worktree directory `{}`", dir.display()));
        }
    }

    let checkout = root.join(&id).join(CHECKOUT);
    let _repository_lock = REPOSITORIES.lock(&source.common_dir).await;
    let made = create(layout, &source, &id, &selector, &checkout).await;
    let record = match made {
        Ok(record) => record,
        Err(error) => {
            if let Err(undo) = remove_worktree(&source.repository, &checkout, &dir).await {
                return Err(error.context(format!(
                    "and undoing the partial worktree failed ({undo:#}); remove `{}` by hand",
                    dir.display()
                )));
            }
            return Err(error);
        }
    };
    let info = inspect(&record).await;
    Ok(MaterializedWorkdir {
        cwd: record.checkout.clone(),
        info,
        created: true,
    })
}

/// Resolves the selector, checks the source, adds the worktree and writes
/// the record. The caller holds the source's lock and undoes on error.
async fn create(
    layout: &Layout,
    source: &Source,
    id: &str,
    selector: &str,
    checkout: &Path,
) -> anyhow::Result<Record> {
    let resolved = source.resolve(selector).await?;
    if is_head(selector) && !source.is_clean().await? {
        bail!(
            "repository `{}` has uncommitted changes (`git status --porcelain` is not empty), \
             which a checkout of {selector} would leave behind; commit or stash them, or pass a \
             branch or commit as the selector to start from it without them",
            source.repository.display()
        );
    }
    Git::new(&source.repository)
        .args(["worktree", "add", "--detach", "--quiet"])
        .arg(checkout)
        .arg(&resolved.commit)
        .run()
        .await?;
    let record = Record {
        version: record::VERSION,
        id: id.to_string(),
        repository: source.repository.clone(),
        common_dir: source.common_dir.clone(),
        selector: selector.to_string(),
        base_commit: resolved.commit,
        base_tree: resolved.tree,
        checkout: PathBuf::from(checkout),
        state: RecordState::Active,
        primary_thread_id: None,
        created_at: OffsetDateTime::now_utc(),
    };
    record::write(&layout.record(id), &record).await?;
    Ok(record)
}

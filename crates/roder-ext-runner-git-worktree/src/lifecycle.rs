//! The life of a recorded worktree after materialization: lookups, claims,
//! the bound thread, cleanup and rollback.
//!
//! Every change to a record happens under that record's lock, so a bind
//! racing a cleanup sees either the worktree or its absence, never half.

use std::path::Path;

use anyhow::{Context, bail};
use roder_api::workdir::{MaterializedWorkdir, WorkdirClaim, WorkdirInfo, WorkdirStatus};

use crate::inspect::{inspect, not_found, removed};
use crate::keyed_lock::{RECORDS, REPOSITORIES};
use crate::layout::Layout;
use crate::record::{self, Record, RecordState};
use crate::removal::remove_worktree;

/// The wire name of a status, for messages.
pub(crate) fn status_name(status: WorkdirStatus) -> &'static str {
    match status {
        WorkdirStatus::Active => "active",
        WorkdirStatus::CleanupPending => "cleanup_pending",
        WorkdirStatus::Corrupted => "corrupted",
        WorkdirStatus::NotFound => "not_found",
    }
}

/// The record of `id`, or an error saying nothing is recorded under it.
pub(crate) async fn require(layout: &Layout, id: &str) -> anyhow::Result<Record> {
    crate::id::validate(id)?;
    record::read(&layout.record(id)).await?.with_context(|| {
        format!(
            "no worktree `{id}` under `{}` (status not_found)",
            layout.root().display()
        )
    })
}

/// The record of `id` if its worktree is usable now (`active`), with the
/// observed info.
pub(crate) async fn require_active(
    layout: &Layout,
    id: &str,
) -> anyhow::Result<(Record, WorkdirInfo)> {
    let record = require(layout, id).await?;
    let info = inspect(&record).await;
    if info.status != WorkdirStatus::Active {
        let hint = match info.status {
            WorkdirStatus::CleanupPending => "run cleanup again to finish removing it",
            _ => "its checkout or source repository is missing or broken; clean it up",
        };
        bail!("worktree `{id}` is {} ({hint})", status_name(info.status));
    }
    Ok((record, info))
}

pub(crate) async fn get(layout: &Layout, id: &str) -> anyhow::Result<WorkdirInfo> {
    crate::id::validate(id)?;
    Ok(match record::read(&layout.record(id)).await? {
        Some(record) => inspect(&record).await,
        None => not_found(layout, id),
    })
}

/// An existing, active worktree, with the claimed working directory inside it.
pub(crate) async fn claim(
    layout: &Layout,
    claim: WorkdirClaim,
) -> anyhow::Result<MaterializedWorkdir> {
    let (record, info) = require_active(layout, &claim.id).await?;
    let cwd = claimed_cwd(&record.checkout, claim.relative_cwd.as_deref()).await?;
    Ok(MaterializedWorkdir {
        info,
        cwd,
        created: false,
    })
}

/// Resolves a claimed working directory off the async threads.
pub(crate) async fn claimed_cwd(
    checkout: &Path,
    relative_cwd: Option<&Path>,
) -> anyhow::Result<std::path::PathBuf> {
    let checkout = checkout.to_path_buf();
    let relative_cwd = relative_cwd.map(Path::to_path_buf);
    tokio::task::spawn_blocking(move || {
        crate::paths::claimed_cwd(&checkout, relative_cwd.as_deref())
    })
    .await
    .context("working directory resolution task failed")?
}

/// Records `thread_id` as the primary thread. Binding the same thread again
/// is a no-op; a second thread is refused, because two agents editing one
/// checkout is what worktrees exist to prevent.
pub(crate) async fn bind(layout: &Layout, id: &str, thread_id: &str) -> anyhow::Result<()> {
    if thread_id.is_empty() {
        bail!("cannot bind worktree `{id}` to an empty thread id");
    }
    let _lock = RECORDS.lock(&layout.dir(id)).await;
    let mut record = require(layout, id).await?;
    if record.state == RecordState::CleanupPending {
        bail!("worktree `{id}` is cleanup_pending; it cannot be bound");
    }
    match record.primary_thread_id.as_deref() {
        Some(bound) if bound == thread_id => return Ok(()),
        Some(bound) => bail!(
            "worktree `{id}` is already bound to thread `{bound}`; \
             delete that thread or materialize another worktree"
        ),
        None => {}
    }
    record.primary_thread_id = Some(thread_id.to_string());
    record::write(&layout.record(id), &record).await
}

/// Clears the primary thread if it is `thread_id`. Unknown worktrees and
/// other threads are no-ops, so deleting a thread never fails on them.
pub(crate) async fn unbind(layout: &Layout, id: &str, thread_id: &str) -> anyhow::Result<()> {
    crate::id::validate(id)?;
    let _lock = RECORDS.lock(&layout.dir(id)).await;
    let Some(mut record) = record::read(&layout.record(id)).await? else {
        return Ok(());
    };
    if record.primary_thread_id.as_deref() != Some(thread_id) {
        return Ok(());
    }
    record.primary_thread_id = None;
    record::write(&layout.record(id), &record).await
}

/// Removes a worktree for good. Refused while a thread is bound. When the
/// removal fails the record is kept, marked `cleanup_pending`, and the error
/// says why; running cleanup again retries.
pub(crate) async fn cleanup(layout: &Layout, id: &str) -> anyhow::Result<WorkdirInfo> {
    crate::id::validate(id)?;
    let dir = layout.dir(id);
    let _lock = RECORDS.lock(&dir).await;
    let mut record = require(layout, id).await?;
    if let Some(thread) = &record.primary_thread_id {
        bail!(
            "worktree `{id}` is bound to thread `{thread}`; delete the thread (which unbinds it) \
             before cleaning the worktree up"
        );
    }
    let removal = {
        let _repository = REPOSITORIES.lock(&record.common_dir).await;
        remove_worktree(&record.repository, &record.checkout, &dir).await
    };
    match removal {
        Ok(()) => Ok(removed(&record)),
        Err(error) => {
            record.state = RecordState::CleanupPending;
            let marked = match record::write(&layout.record(id), &record).await {
                Ok(()) => "marked cleanup_pending; run cleanup again once fixed".to_string(),
                Err(write) => format!("and marking it cleanup_pending failed too: {write:#}"),
            };
            Err(error.context(format!("cleanup of worktree `{id}` failed, {marked}")))
        }
    }
}

/// Removes a worktree this process just materialized, bound or not, leaving
/// nothing under `<root>/<id>`.
pub(crate) async fn rollback(layout: &Layout, id: &str) -> anyhow::Result<()> {
    crate::id::validate(id)?;
    let dir = layout.dir(id);
    let _lock = RECORDS.lock(&dir).await;
    match record::read(&layout.record(id)).await? {
        Some(record) => {
            let _repository = REPOSITORIES.lock(&record.common_dir).await;
            remove_worktree(&record.repository, &record.checkout, &dir)
                .await
                .with_context(|| format!("rollback of worktree `{id}` failed"))
        }
        None => match tokio::fs::remove_dir_all(&dir).await {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error)
                .with_context(|| format!("cannot remove worktree directory `{}`", dir.display())),
            _ => Ok(()),
        },
    }
}

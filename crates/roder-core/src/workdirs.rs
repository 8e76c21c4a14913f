//! Threads in per-thread working directories (git worktrees), and the thread
//! operations that must keep them: archive and delete never remove a
//! worktree; cleanup is explicit and belongs to the materializer.

use std::sync::Arc;

use roder_api::thread::ThreadMetadata;
use roder_api::workdir::{MaterializedWorkdir, WorkdirClaim, WorkdirMaterializer, WorkdirRequest};

use crate::error::RuntimeError;
use crate::requests::{CreateThreadRequest, ThreadRunnerSelection};
use crate::runner::state::update_metadata;
use crate::runtime::Runtime;

/// The working directory a new thread gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkdirSelection {
    /// Materialize a new one now; rolled back if the thread is not created.
    Materialize(WorkdirRequest),
    /// Bind to an existing one; never removed by a failure.
    Claim(WorkdirClaim),
}

/// Config key of a worktree-bound thread's runner selection.
pub const WORKTREE_ID_KEY: &str = "worktree_id";

impl Runtime {
    /// The installed working-directory materializer, if any.
    pub fn workdirs(&self) -> anyhow::Result<&Arc<dyn WorkdirMaterializer>> {
        self.workdir_materializer.as_ref().ok_or_else(|| {
            anyhow::anyhow!(
                "working directories are not supported: no workdir materializer is installed"
            )
        })
    }

    /// Creates a thread bound to a working directory: materializes (or
    /// claims) it, binds the thread to it through the materializer's runner
    /// provider, and rolls a new working directory back when anything after
    /// materializing fails.
    pub async fn create_thread_in_workdir(
        &self,
        request: CreateThreadRequest,
        workdir: WorkdirSelection,
    ) -> anyhow::Result<ThreadMetadata> {
        self.create_thread_in_workdir_with(request, workdir, None)
            .await
    }

    /// [`create_thread_in_workdir`](Self::create_thread_in_workdir), the
    /// thread running as `profile` (as
    /// [`create_thread_with_profile`](Self::create_thread_with_profile)
    /// applies it, with `approvals` winning; the working directory is the
    /// thread's runner, so a profile's `runner` is recorded as overridden).
    ///
    /// ```no_run
    /// # async fn demo(runtime: &roder_core::Runtime) -> anyhow::Result<()> {
    /// use roder_api::profile::ProfileSnapshot;
    /// use roder_api::workdir::WorkdirRequest;
    /// use roder_core::{CreateThreadRequest, WorkdirSelection};
    ///
    /// let thread = runtime
    ///     .create_thread_in_workdir_with(
    ///         CreateThreadRequest::in_workspace("/work/repo"),
    ///         WorkdirSelection::Materialize(WorkdirRequest {
    ///             repository: "/work/repo".into(),
    ///             selector: None,
    ///             id: None,
    ///         }),
    ///         Some((Default::default(), ProfileSnapshot::default())),
    ///     )
    ///     .await?;
    /// assert!(thread.runner_binding.is_some());
    /// # Ok(()) }
    /// ```
    pub async fn create_thread_in_workdir_with(
        &self,
        mut request: CreateThreadRequest,
        workdir: WorkdirSelection,
        profile: Option<(
            roder_api::approval::ThreadApprovals,
            roder_api::profile::ProfileSnapshot,
        )>,
    ) -> anyhow::Result<ThreadMetadata> {
        let materializer = self.workdirs()?.clone();
        if request.runner.is_some() {
            anyhow::bail!("a thread in a working directory cannot also name a runner");
        }
        let materialized = match workdir {
            WorkdirSelection::Materialize(workdir) => materializer.materialize(workdir).await?,
            WorkdirSelection::Claim(claim) => materializer.claim(claim).await?,
        };
        request.runner = Some(selection(materializer.as_ref(), &materialized));
        let result = async {
            let metadata = match profile {
                Some((approvals, profile)) => {
                    self.create_thread_with_profile(request, None, approvals, profile)
                        .await?
                }
                None => self.create_thread_with(request).await?,
            };
            if let Err(error) = materializer
                .bind(&materialized.info.id, &metadata.thread_id)
                .await
            {
                let _ = self.store.delete_thread(&metadata.thread_id).await;
                return Err(error);
            }
            Ok(metadata)
        }
        .await;
        match result {
            Ok(metadata) => Ok(metadata),
            Err(error) if materialized.created => {
                if let Err(rollback) = materializer.rollback(&materialized.info.id).await {
                    return Err(error.context(format!(
                        "and rolling back working directory \"{}\" failed: {rollback:#}",
                        materialized.info.id
                    )));
                }
                Err(error)
            }
            Err(error) => Err(error),
        }
    }

    /// Marks a thread archived. Its working directory stays.
    pub async fn archive_thread(&self, thread_id: &str) -> anyhow::Result<ThreadMetadata> {
        let thread = self.thread_state(thread_id).await?;
        update_metadata(self.store.as_ref(), &thread, |metadata| {
            metadata.archived = true
        })
        .await
    }

    /// Deletes a thread's metadata and log. Refused while a turn runs. Its
    /// working directory stays (unbound, so it can be claimed or cleaned up);
    /// its live runner session is closed.
    pub async fn delete_thread(&self, thread_id: &str) -> anyhow::Result<()> {
        let thread = self.thread_state(thread_id).await?;
        if let Some(active) = thread.active_turn() {
            return Err(RuntimeError::ThreadBusy {
                thread_id: thread_id.to_string(),
                turn_id: active.turn_id,
            }
            .into());
        }
        let metadata = self.thread_metadata(thread_id).await?;
        // Its checkpoints go with it (first, while its worktree is still
        // there): nothing can roll back to them now.
        if let Err(error) = self.collect_checkpoints(thread_id, 0, false).await {
            tracing::warn!("could not remove the checkpoints of thread {thread_id}: {error:#}");
        }
        if let (Some(materializer), Some(binding)) =
            (&self.workdir_materializer, &metadata.runner_binding)
            && binding.destination.provider_id == materializer.provider_id()
            && let Some(id) = binding
                .destination
                .config
                .get(WORKTREE_ID_KEY)
                .and_then(serde_json::Value::as_str)
        {
            materializer.unbind(id, thread_id).await?;
        }
        // A live sandbox is closed, which removes it unless its destination
        // says to keep it; one this process never opened is left to the
        // provider's garbage collection (`roder runners gc`).
        if let Some(session) = self.sessions.evict(thread_id)
            && let Err(error) = session.close().await
        {
            tracing::warn!("could not close the runner session of thread {thread_id}: {error:#}");
        }
        self.store.delete_thread(thread_id).await?;
        self.threads.remove(thread_id);
        self.thread_tools.remove(thread_id);
        self.retention.forget(thread_id);
        Ok(())
    }
}

fn selection(
    materializer: &dyn WorkdirMaterializer,
    materialized: &MaterializedWorkdir,
) -> ThreadRunnerSelection {
    let relative_cwd = materialized
        .cwd
        .strip_prefix(&materialized.info.checkout)
        .ok()
        .filter(|relative| !relative.as_os_str().is_empty())
        .map(|relative| relative.display().to_string());
    ThreadRunnerSelection {
        provider_id: materializer.provider_id(),
        config: serde_json::json!({
            WORKTREE_ID_KEY: materialized.info.id,
            "relative_cwd": relative_cwd,
            "repository": materialized.info.repository,
            "selector": materialized.info.selector,
        }),
        workspace: materialized.cwd.display().to_string(),
        read_roots: Vec::new(),
    }
}

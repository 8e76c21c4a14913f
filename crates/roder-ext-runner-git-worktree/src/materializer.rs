//! [`GitWorktreeMaterializer`]: the `WorkdirMaterializer` the runtime calls.

use std::path::{Path, PathBuf};

use roder_api::remote_runner::RemoteRunnerProviderId;
use roder_api::workdir::{
    MaterializedWorkdir, WorkdirClaim, WorkdirInfo, WorkdirMaterializer, WorkdirRequest,
};

use crate::layout::Layout;
use crate::{export, inspect, lifecycle, materialize};

/// Materializes detached git worktrees of local repositories under a root
/// directory (`<root>/<id>/checkout`, recorded in
/// `<root>/<id>/materialization.json`).
///
/// Stateless apart from the root: records live on disk and locks are
/// process-wide, so any number of instances over the same root (the
/// runtime's materializer and the runner provider) agree.
#[derive(Debug, Clone)]
pub struct GitWorktreeMaterializer {
    layout: Layout,
}

impl GitWorktreeMaterializer {
    /// `root` is created on first materialization; a relative root is taken
    /// against the process's working directory.
    pub fn new(root: PathBuf) -> Self {
        Self {
            layout: Layout::new(root),
        }
    }

    /// The directory worktrees are materialized under.
    pub fn root(&self) -> &Path {
        self.layout.root()
    }
}

#[async_trait::async_trait]
impl WorkdirMaterializer for GitWorktreeMaterializer {
    fn provider_id(&self) -> RemoteRunnerProviderId {
        crate::PROVIDER_ID.to_string()
    }

    async fn materialize(&self, request: WorkdirRequest) -> anyhow::Result<MaterializedWorkdir> {
        materialize::materialize(&self.layout, request).await
    }

    async fn claim(&self, claim: WorkdirClaim) -> anyhow::Result<MaterializedWorkdir> {
        lifecycle::claim(&self.layout, claim).await
    }

    async fn bind(&self, id: &str, thread_id: &str) -> anyhow::Result<()> {
        lifecycle::bind(&self.layout, id, thread_id).await
    }

    async fn unbind(&self, id: &str, thread_id: &str) -> anyhow::Result<()> {
        lifecycle::unbind(&self.layout, id, thread_id).await
    }

    async fn rollback(&self, id: &str) -> anyhow::Result<()> {
        lifecycle::rollback(&self.layout, id).await
    }

    async fn get(&self, id: &str) -> anyhow::Result<WorkdirInfo> {
        lifecycle::get(&self.layout, id).await
    }

    async fn list(&self) -> anyhow::Result<Vec<WorkdirInfo>> {
        inspect::list(&self.layout).await
    }

    async fn cleanup(&self, id: &str) -> anyhow::Result<WorkdirInfo> {
        lifecycle::cleanup(&self.layout, id).await
    }

    async fn export_patch(&self, id: &str) -> anyhow::Result<String> {
        export::export_patch(&self.layout, id).await
    }

    async fn export_branch(&self, id: &str) -> anyhow::Result<String> {
        export::export_branch(&self.layout, id).await
    }
}

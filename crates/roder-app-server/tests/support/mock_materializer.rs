//! An in-memory working-directory materializer whose runner is the mock
//! provider, so `workdirs/*` and `thread/start {workdir}` can be driven
//! through the protocol without git.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use roder_api::remote_runner::RemoteRunnerProviderId;
use roder_api::workdir::*;
use time::OffsetDateTime;

pub struct MockMaterializer {
    root: PathBuf,
    workdirs: Mutex<BTreeMap<String, WorkdirInfo>>,
}

impl MockMaterializer {
    pub fn new(root: &Path) -> Arc<Self> {
        Arc::new(Self {
            root: root.join("workdirs"),
            workdirs: Mutex::new(BTreeMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, WorkdirInfo>> {
        self.workdirs.lock().unwrap()
    }
}

#[async_trait::async_trait]
impl WorkdirMaterializer for MockMaterializer {
    fn provider_id(&self) -> RemoteRunnerProviderId {
        super::mock_runner::PROVIDER_ID.to_string()
    }

    async fn materialize(&self, request: WorkdirRequest) -> anyhow::Result<MaterializedWorkdir> {
        let mut workdirs = self.lock();
        let id = request
            .id
            .unwrap_or_else(|| format!("wd-{}", workdirs.len() + 1));
        anyhow::ensure!(
            !workdirs.contains_key(&id),
            "working directory \"{id}\" exists"
        );
        let info = WorkdirInfo {
            id: id.clone(),
            status: WorkdirStatus::Active,
            checkout: self.root.join(&id).join("checkout"),
            repository: request.repository,
            selector: request.selector.unwrap_or_else(|| "HEAD".to_string()),
            base_commit: "c0ffee".to_string(),
            base_tree: "7ree".to_string(),
            cleanliness: Some(Cleanliness::Clean),
            head_commit: Some("c0ffee".to_string()),
            branch: None,
            primary_thread_id: None,
            created_at: OffsetDateTime::UNIX_EPOCH,
        };
        workdirs.insert(id, info.clone());
        Ok(MaterializedWorkdir {
            cwd: info.checkout.clone(),
            info,
            created: true,
        })
    }

    async fn claim(&self, claim: WorkdirClaim) -> anyhow::Result<MaterializedWorkdir> {
        let info = self.get(&claim.id).await?;
        anyhow::ensure!(
            info.status == WorkdirStatus::Active,
            "no working directory \"{}\"",
            claim.id
        );
        let cwd = match claim.relative_cwd {
            Some(relative) => info.checkout.join(relative),
            None => info.checkout.clone(),
        };
        Ok(MaterializedWorkdir {
            info,
            cwd,
            created: false,
        })
    }

    async fn bind(&self, id: &str, thread_id: &str) -> anyhow::Result<()> {
        let mut workdirs = self.lock();
        let info = workdirs
            .get_mut(id)
            .ok_or_else(|| anyhow::anyhow!("no working directory \"{id}\""))?;
        info.primary_thread_id = Some(thread_id.to_string());
        Ok(())
    }

    async fn unbind(&self, id: &str, thread_id: &str) -> anyhow::Result<()> {
        if let Some(info) = self.lock().get_mut(id)
            && info.primary_thread_id.as_deref() == Some(thread_id)
        {
            info.primary_thread_id = None;
        }
        Ok(())
    }

    async fn rollback(&self, id: &str) -> anyhow::Result<()> {
        self.lock().remove(id);
        Ok(())
    }

    async fn get(&self, id: &str) -> anyhow::Result<WorkdirInfo> {
        Ok(self.lock().get(id).cloned().unwrap_or_else(|| WorkdirInfo {
            id: id.to_string(),
            status: WorkdirStatus::NotFound,
            checkout: PathBuf::new(),
            repository: PathBuf::new(),
            selector: String::new(),
            base_commit: String::new(),
            base_tree: String::new(),
            cleanliness: None,
            head_commit: None,
            branch: None,
            primary_thread_id: None,
            created_at: OffsetDateTime::UNIX_EPOCH,
        }))
    }

    async fn list(&self) -> anyhow::Result<Vec<WorkdirInfo>> {
        Ok(self.lock().values().cloned().collect())
    }

    async fn cleanup(&self, id: &str) -> anyhow::Result<WorkdirInfo> {
        let mut workdirs = self.lock();
        let info = workdirs
            .get(id)
            .ok_or_else(|| anyhow::anyhow!("no working directory \"{id}\""))?;
        if let Some(thread_id) = &info.primary_thread_id {
            anyhow::bail!(
                "working directory \"{id}\" is bound to thread \"{thread_id}\"; delete the thread first"
            );
        }
        let mut info = info.clone();
        workdirs.remove(id);
        info.status = WorkdirStatus::NotFound;
        Ok(info)
    }

    async fn export_patch(&self, _id: &str) -> anyhow::Result<String> {
        Ok(String::new())
    }

    async fn export_branch(&self, id: &str) -> anyhow::Result<String> {
        Ok(format!("roder/{id}"))
    }
}

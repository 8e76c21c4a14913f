//! The `unix-local` provider: validates destinations and opens sessions.

use std::sync::Arc;

use anyhow::{Context, bail};
use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerProviderId, RemoteRunnerSession, RunnerCapabilities,
    RunnerDestination, RunnerMountCapabilities, RunnerSessionState,
};

use crate::config::UnixLocalConfig;
use crate::options::SessionOptions;
use crate::provider_checks::{destination_config, session_state, state_metadata};
use crate::session::UnixLocalSession;

/// The provider id destinations name to use this runner.
pub const PROVIDER_ID: &str = "unix-local";

/// Runner provider whose sessions are host directories.
///
/// Stateless: sessions carry everything they need, so one provider serves any
/// number of destinations.
#[derive(Debug, Clone, Default)]
pub struct UnixLocalRunnerProvider {
    _private: (),
}

impl UnixLocalRunnerProvider {
    /// Parses a destination, refusing what this provider cannot honour.
    fn parse_destination(
        &self,
        destination: &RunnerDestination,
    ) -> anyhow::Result<UnixLocalConfig> {
        let config = destination_config(
            destination,
            PROVIDER_ID,
            "point `root` at a directory that already holds the files",
        )?;
        UnixLocalConfig::from_json(config, &format!("destination `{}` config", destination.id))
    }
}

/// Opens a session over the config's root. The config is the state's
/// metadata, so a resumed session is rebuilt from the state alone.
async fn open_session(
    config: UnixLocalConfig,
    session_id: String,
    destination_id: String,
) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
    let state = session_state(PROVIDER_ID, session_id, destination_id, config.to_json());
    let policy = config.sandbox_policy();
    let UnixLocalConfig {
        root,
        env,
        workspace,
        sandbox: _,
    } = config;
    let options = SessionOptions {
        // Relative file paths and commands start in the bound workspace,
        // as the runtime's tools expect.
        cwd: workspace,
        env,
        ..SessionOptions::default()
    };
    Ok(Arc::new(
        UnixLocalSession::open(state, &root, options)
            .await?
            .with_sandbox(policy, Vec::new()),
    ))
}

#[async_trait::async_trait]
impl RemoteRunnerProvider for UnixLocalRunnerProvider {
    fn id(&self) -> RemoteRunnerProviderId {
        PROVIDER_ID.to_string()
    }

    fn capabilities(&self) -> RunnerCapabilities {
        RunnerCapabilities {
            command_exec: true,
            file_read: true,
            file_write: true,
            port_preview: true,
            snapshots: false,
            cancellation: true,
            artifact_export: false,
            mounts: RunnerMountCapabilities::default(),
            pausable: false,
            detachable: false,
        }
    }

    /// Refuses bad configs and a bound workspace outside the root, so such
    /// a thread is never created.
    async fn validate_destination(&self, destination: &RunnerDestination) -> anyhow::Result<()> {
        self.parse_destination(destination).map(|_| ())
    }

    /// Creates the root (and the bound workspace inside it) if missing; the
    /// session runs in the workspace, or in the root itself without one.
    async fn create_session(
        &self,
        destination: RunnerDestination,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        let config = self.parse_destination(&destination)?;
        let start = config.workspace.as_ref().unwrap_or(&config.root);
        tokio::fs::create_dir_all(start).await.with_context(|| {
            format!(
                "cannot create the runner directory `{}` of destination `{}`",
                start.display(),
                destination.id
            )
        })?;
        open_session(config, uuid::Uuid::new_v4().to_string(), destination.id).await
    }

    /// Fails when the recorded root is missing or gone, so the runtime falls
    /// back to a fresh session instead of running in a directory that no
    /// longer exists (or silently recreating an empty one).
    async fn resume_session(
        &self,
        state: RunnerSessionState,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        let config = UnixLocalConfig::from_json(
            state_metadata(&state, PROVIDER_ID)?,
            &format!("session `{}` state metadata", state.session_id),
        )?;
        match tokio::fs::metadata(&config.root).await {
            Ok(metadata) if metadata.is_dir() => {}
            Ok(_) => bail!(
                "cannot resume session `{}`: runner root `{}` is no longer a directory",
                state.session_id,
                config.root.display()
            ),
            Err(error) => {
                return Err(error).with_context(|| {
                    format!(
                        "cannot resume session `{}`: runner root `{}` no longer exists",
                        state.session_id,
                        config.root.display()
                    )
                });
            }
        }
        open_session(config, state.session_id, state.destination_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::remote_runner::{RunnerManifest, RunnerManifestEntry};
    use serde_json::json;

    fn destination(config: serde_json::Value) -> RunnerDestination {
        RunnerDestination {
            id: "local".to_string(),
            provider_id: PROVIDER_ID.to_string(),
            config,
            default_manifest: RunnerManifest::default(),
        }
    }

    fn state(metadata: serde_json::Value) -> RunnerSessionState {
        RunnerSessionState {
            provider_id: PROVIDER_ID.to_string(),
            session_id: "s1".to_string(),
            destination_id: "local".to_string(),
            snapshot: None,
            metadata,
        }
    }

    #[test]
    fn identity_and_capabilities() {
        let provider = UnixLocalRunnerProvider::default();
        assert_eq!(provider.id(), "unix-local");
        let capabilities = provider.capabilities();
        assert!(capabilities.command_exec && capabilities.file_read && capabilities.file_write);
        assert!(capabilities.cancellation && capabilities.port_preview);
        assert!(!capabilities.snapshots && !capabilities.artifact_export);
        assert!(!capabilities.pausable && !capabilities.detachable);
        assert_eq!(capabilities.mounts, RunnerMountCapabilities::default());
        assert_eq!(provider.default_workspace(), None);
    }

    #[tokio::test]
    async fn create_makes_the_root_and_records_it_in_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("new/root");
        let provider = UnixLocalRunnerProvider::default();
        let session = provider
            .create_session(destination(json!({"root": root.display().to_string()})))
            .await
            .unwrap();
        assert!(tokio::fs::metadata(&root).await.unwrap().is_dir());
        let state = session.state();
        assert_eq!(state.provider_id, "unix-local");
        assert_eq!(state.destination_id, "local");
        assert!(uuid::Uuid::parse_str(&state.session_id).is_ok());
        assert_eq!(state.metadata, json!({"root": root.display().to_string()}));
        let other = provider
            .create_session(destination(json!({"root": root.display().to_string()})))
            .await
            .unwrap();
        assert_ne!(other.state().session_id, state.session_id);
    }

    #[tokio::test]
    async fn bad_destinations_are_refused_with_the_field_named() {
        let provider = UnixLocalRunnerProvider::default();
        let error = provider
            .create_session(destination(json!({})))
            .await
            .err()
            .unwrap();
        assert!(error.to_string().contains("field `root` is required"));
        let error = provider
            .validate_destination(&destination(json!({"root": "relative"})))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("must be an absolute path"));

        let mut foreign = destination(json!({"root": "/tmp"}));
        foreign.provider_id = "docker".to_string();
        let error = provider.validate_destination(&foreign).await.unwrap_err();
        assert!(error.to_string().contains("`docker`"));

        let mut with_manifest = destination(json!({"root": "/tmp"}));
        with_manifest
            .default_manifest
            .entries
            .push(RunnerManifestEntry {
                source: "/a".into(),
                target: "/b".into(),
                writable: false,
            });
        let error = provider
            .validate_destination(&with_manifest)
            .await
            .unwrap_err();
        assert!(error.to_string().contains("manifest"));
    }

    #[tokio::test]
    async fn files_and_commands_share_the_bound_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let workspace = root.join("app");
        let provider = UnixLocalRunnerProvider::default();
        let config = json!({
            "root": root.display().to_string(),
            "workspace": workspace.display().to_string(),
        });
        provider
            .validate_destination(&destination(config.clone()))
            .await
            .unwrap();
        let session = provider.create_session(destination(config)).await.unwrap();
        session
            .write_file(roder_api::remote_runner::RunnerFileWriteRequest {
                path: "notes.txt".into(),
                contents: b"here\n".to_vec(),
            })
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(workspace.join("notes.txt")).unwrap(),
            "here\n"
        );
        for cwd in [None, Some(workspace.clone())] {
            let result = session
                .run_command(roder_api::remote_runner::RunnerCommandRequest {
                    command_id: "c".to_string(),
                    program: "sh".to_string(),
                    args: vec!["-c".to_string(), "pwd && cat notes.txt".to_string()],
                    cwd,
                    env: Vec::new(),
                    timeout_ms: Some(10_000),
                })
                .await
                .unwrap();
            assert_eq!(result.stdout, format!("{}\nhere\n", workspace.display()));
        }
        let resumed = provider.resume_session(session.state()).await.unwrap();
        let read = resumed
            .read_file(roder_api::remote_runner::RunnerFileReadRequest {
                path: "notes.txt".into(),
            })
            .await
            .unwrap();
        assert_eq!(
            read.contents, b"here\n",
            "a resumed session keeps the workspace"
        );
    }

    #[tokio::test]
    async fn a_workspace_outside_the_root_is_refused_at_validation() {
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let provider = UnixLocalRunnerProvider::default();
        let error = provider
            .validate_destination(&destination(json!({
                "root": root.path().display().to_string(),
                "workspace": elsewhere.path().display().to_string(),
            })))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(&root.path().display().to_string()),
            "{error}"
        );
        assert!(
            error.contains(&elsewhere.path().display().to_string()),
            "{error}"
        );
        assert!(error.contains("outside the runner root"), "{error}");
    }

    #[tokio::test]
    async fn resume_keeps_the_session_when_the_root_exists() {
        let dir = tempfile::tempdir().unwrap();
        let provider = UnixLocalRunnerProvider::default();
        let resumed = provider
            .resume_session(state(json!({
                "root": dir.path().display().to_string(),
                "env": {"K": "V"}
            })))
            .await
            .unwrap();
        assert_eq!(resumed.state().session_id, "s1");
        assert_eq!(resumed.state().destination_id, "local");
        let result = resumed
            .run_command(roder_api::remote_runner::RunnerCommandRequest {
                command_id: "c".to_string(),
                program: "sh".to_string(),
                args: vec!["-c".to_string(), "echo $K".to_string()],
                cwd: None,
                env: Vec::new(),
                timeout_ms: None,
            })
            .await
            .unwrap();
        assert_eq!(result.stdout, "V\n");
    }

    #[tokio::test]
    async fn resume_fails_when_the_root_is_gone_or_unrecorded() {
        let provider = UnixLocalRunnerProvider::default();
        let error = provider
            .resume_session(state(json!({"root": "/definitely/missing/runner/root"})))
            .await
            .err()
            .unwrap();
        assert!(error.to_string().contains("no longer exists"));
        assert!(
            error
                .to_string()
                .contains("/definitely/missing/runner/root")
        );

        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        tokio::fs::create_dir(&root).await.unwrap();
        let recorded = state(json!({"root": root.display().to_string()}));
        assert!(provider.resume_session(recorded.clone()).await.is_ok());
        tokio::fs::remove_dir(&root).await.unwrap();
        assert!(provider.resume_session(recorded).await.is_err());
        assert!(
            !tokio::fs::try_exists(&root).await.unwrap(),
            "resume must not recreate a vanished root"
        );

        for metadata in [serde_json::Value::Null, json!({})] {
            let error = provider
                .resume_session(state(metadata))
                .await
                .err()
                .unwrap();
            assert!(error.to_string().contains("root"), "{error}");
        }
    }
}

//! A docker session: one container, commands as execs, files through the
//! archive API.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use anyhow::bail;
use bollard::Docker;
use roder_api::remote_runner::{
    RemoteRunnerSession, RunnerArtifactExportRequest, RunnerArtifactExportResult, RunnerCommandId,
    RunnerCommandRequest, RunnerCommandResult, RunnerFileReadRequest, RunnerFileReadResult,
    RunnerFileWriteRequest, RunnerPortRequest, RunnerPortResult, RunnerProcess,
    RunnerProcessRequest, RunnerSessionState, RunnerSnapshotRef,
};
use serde_json::json;

use crate::archive::WriteRules;
use crate::client::{Client, message_of};
use crate::config::{Cleanup, ExecutorMode, is_credential};
use crate::exec::{self, ExecRequest};
use crate::executor::{self, ExecutorSlot};
use crate::{archive, container, labels, paths, snapshot};
use roder_sandbox::RunningCommands;

/// Repository of the images `snapshot` commits.
pub const SNAPSHOT_REPOSITORY: &str = "roder-snapshot";

/// Where a session is in its life. Once detached or closed it refuses
/// further work: the runtime has dropped it, and acting on the container
/// through a stale handle would surprise whoever holds the new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Live,
    Detached,
    Closed,
}

/// What a session knows about its container.
pub(crate) struct Opened {
    pub container_id: String,
    pub image: String,
    pub workdir: String,
    pub cleanup: Cleanup,
    pub paused: bool,
    pub session_destination: String,
    /// Where file writes may land (the sandbox's writable mounts).
    pub rules: WriteRules,
    /// Whether commands and files go through the sandbox executor.
    pub executor: ExecutorMode,
    /// The manifest entries copied in at creation (what a patch export
    /// compares against).
    pub manifest: Vec<crate::manifest::Entry>,
}

/// A session over one container.
pub struct DockerSession {
    client: Arc<Client>,
    container_id: String,
    workdir: String,
    cleanup: Cleanup,
    rules: WriteRules,
    state: Mutex<RunnerSessionState>,
    phase: Mutex<Phase>,
    running: RunningCommands,
    executor: ExecutorSlot,
    manifest: Vec<crate::manifest::Entry>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl DockerSession {
    pub(crate) fn new(client: Arc<Client>, opened: Opened) -> Self {
        let state = RunnerSessionState {
            provider_id: crate::PROVIDER_ID.to_string(),
            // The container id is the session id: two sessions over one
            // container (two threads sharing it) then share the runtime's
            // per-session execution lock.
            session_id: opened.container_id.clone(),
            destination_id: opened.session_destination,
            snapshot: None,
            metadata: json!({
                "container_id": opened.container_id,
                "image": opened.image,
                "workdir": opened.workdir,
                "paused": opened.paused,
                "executor": match opened.executor {
                    ExecutorMode::Auto => "auto",
                    ExecutorMode::Off => "off",
                },
                "manifest": opened.manifest.clone(),
            }),
        };
        Self {
            client,
            container_id: opened.container_id,
            workdir: opened.workdir,
            cleanup: opened.cleanup,
            rules: opened.rules,
            state: Mutex::new(state),
            phase: Mutex::new(Phase::Live),
            running: RunningCommands::default(),
            executor: ExecutorSlot::new(opened.executor),
            manifest: opened.manifest,
        }
    }

    /// The session's sandbox executor, started on first use; `None` when
    /// calls go through plain execs and the archive API.
    ///
    /// A paused session refuses at once: its helper is frozen with the
    /// container and would answer only after a resume.
    async fn executor(
        &self,
        docker: &Docker,
    ) -> anyhow::Result<Option<roder_executor::client::Executor>> {
        let paused = lock(&self.state).metadata["paused"] == json!(true);
        if paused {
            bail!(
                "container {} is paused; resume the thread's runner first",
                self.short_id()
            );
        }
        Ok(self
            .executor
            .get(docker, &self.container_id, &self.workdir, &self.rules)
            .await)
    }

    /// The full id of the session's container.
    pub fn container_id(&self) -> &str {
        &self.container_id
    }

    /// The container path relative file paths resolve against.
    pub fn workdir(&self) -> &str {
        &self.workdir
    }

    /// The client, if the session may still act on its container.
    async fn docker(&self) -> anyhow::Result<&Docker> {
        match *lock(&self.phase) {
            Phase::Live => {}
            Phase::Detached => bail!(
                "the session of container {} was detached; rejoin it to use it again",
                self.short_id()
            ),
            Phase::Closed => bail!("the session of container {} is closed", self.short_id()),
        }
        self.client.get().await
    }

    fn short_id(&self) -> &str {
        &self.container_id[..self.container_id.len().min(12)]
    }

    fn set_paused(&self, paused: bool) -> RunnerSessionState {
        let mut state = lock(&self.state);
        if let Some(metadata) = state.metadata.as_object_mut() {
            metadata.insert("paused".to_string(), json!(paused));
        }
        state.clone()
    }

    fn resolve(&self, path: &std::path::Path) -> anyhow::Result<String> {
        paths::resolve(&self.workdir, path)
    }
}

#[async_trait::async_trait]
impl RemoteRunnerSession for DockerSession {
    fn state(&self) -> RunnerSessionState {
        lock(&self.state).clone()
    }

    /// Freezes every process in the container (cgroup freezer); memory and
    /// files stay as they are.
    async fn pause(&self) -> anyhow::Result<RunnerSessionState> {
        let docker = self.docker().await?;
        match docker.pause_container(&self.container_id).await {
            Ok(()) => {}
            Err(error) if message_of(&error).contains("already paused") => {}
            Err(error) => bail!(
                "cannot pause container {}: {}",
                self.short_id(),
                message_of(&error)
            ),
        }
        Ok(self.set_paused(true))
    }

    /// Stops the container (its processes end, memory is freed, its
    /// filesystem stays); rejoining its state starts it again. Refused for
    /// a container whose workspace lives on tmpfs volumes (a confined one):
    /// stopping would lose the files.
    async fn stop(&self) -> anyhow::Result<RunnerSessionState> {
        let docker = self.docker().await?;
        let inspect = container::inspect(docker, &self.container_id).await?;
        let lost = container::tmpfs_volumes(&inspect);
        if !lost.is_empty() {
            bail!(
                "on_idle = \"stop\" would lose the files of container {}: its {} live on size-bounded tmpfs volumes (the sandbox policy's disk bound); use \"pause\"",
                self.short_id(),
                lost.join(", ")
            );
        }
        self.executor.stop().await;
        docker
            .stop_container(
                &self.container_id,
                Some(
                    bollard::query_parameters::StopContainerOptionsBuilder::default()
                        .t(2)
                        .build(),
                ),
            )
            .await
            .map_err(|error| {
                anyhow::anyhow!(
                    "cannot stop container {}: {}",
                    self.short_id(),
                    message_of(&error)
                )
            })?;
        Ok(self.state())
    }

    async fn resume(&self) -> anyhow::Result<RunnerSessionState> {
        let docker = self.docker().await?;
        match docker.unpause_container(&self.container_id).await {
            Ok(()) => {}
            Err(error) if message_of(&error).contains("not paused") => {}
            Err(error) => bail!(
                "cannot resume container {}: {}",
                self.short_id(),
                message_of(&error)
            ),
        }
        Ok(self.set_paused(false))
    }

    /// Keeps the container (running or paused) for a later
    /// `rejoin_session`, whatever the cleanup setting.
    async fn detach(&self) -> anyhow::Result<RunnerSessionState> {
        {
            let mut phase = lock(&self.phase);
            if *phase == Phase::Closed {
                bail!("the session of container {} is closed", self.short_id());
            }
            *phase = Phase::Detached;
        }
        self.executor.stop().await;
        Ok(self.state())
    }

    async fn run_command(
        &self,
        request: RunnerCommandRequest,
    ) -> anyhow::Result<RunnerCommandResult> {
        if request.program.is_empty() {
            bail!("command `{}` has an empty program", request.command_id);
        }
        let cwd = match &request.cwd {
            Some(cwd) => self.resolve(cwd)?,
            None => self.workdir.clone(),
        };
        let mut env = Vec::with_capacity(request.env.len());
        for (name, value) in &request.env {
            if name.is_empty() || name.contains('=') || name.contains('\0') || value.contains('\0')
            {
                bail!(
                    "command `{}` has an invalid environment variable {name:?}",
                    request.command_id
                );
            }
            // A command never gets a credential, whatever asks for it.
            if !is_credential(name) {
                env.push(format!("{name}={value}"));
            }
        }
        let registration = self.running.reserve(&request.command_id)?;
        let docker = self.docker().await?;
        let mut argv = Vec::with_capacity(request.args.len() + 1);
        argv.push(request.program);
        argv.extend(request.args);
        let exec_request = ExecRequest {
            command_id: request.command_id,
            argv,
            cwd,
            env,
            timeout: request.timeout_ms.map(Duration::from_millis),
        };
        match self.executor(docker).await? {
            Some(helper) => {
                executor::run_command(&helper, exec_request, registration.token()).await
            }
            None => {
                exec::run(
                    docker,
                    &self.container_id,
                    exec_request,
                    registration.token(),
                )
                .await
            }
        }
    }

    async fn cancel_command(&self, command_id: &RunnerCommandId) -> anyhow::Result<bool> {
        Ok(self.running.cancel(command_id))
    }

    async fn read_file(
        &self,
        request: RunnerFileReadRequest,
    ) -> anyhow::Result<RunnerFileReadResult> {
        let path = self.resolve(&request.path)?;
        let docker = self.docker().await?;
        let contents = match self.executor(docker).await? {
            Some(helper) => executor::read_file(&helper, &path).await?,
            None => archive::read(docker, &self.container_id, &path).await?,
        };
        Ok(RunnerFileReadResult {
            path: request.path,
            contents,
        })
    }

    async fn write_file(&self, request: RunnerFileWriteRequest) -> anyhow::Result<()> {
        let path = self.resolve(&request.path)?;
        paths::split(&path)?;
        let docker = self.docker().await?;
        match self.executor(docker).await? {
            Some(helper) => {
                executor::write_file(&helper, &path, &request.contents, &self.rules).await
            }
            None => {
                archive::write(
                    docker,
                    &self.container_id,
                    &path,
                    &request.contents,
                    &self.rules,
                )
                .await
            }
        }
    }

    /// Starts an interactive process through the sandbox executor; a
    /// session on the plain path (no helper) cannot, and says why.
    async fn spawn_process(
        &self,
        request: RunnerProcessRequest,
    ) -> anyhow::Result<Box<dyn RunnerProcess>> {
        if request.program.is_empty() {
            bail!("an interactive process needs a program");
        }
        let cwd = match &request.cwd {
            Some(cwd) => self.resolve(cwd)?,
            None => self.workdir.clone(),
        };
        let env = request
            .env
            .iter()
            .filter(|(name, _)| !is_credential(name))
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        let docker = self.docker().await?;
        let Some(helper) = self.executor(docker).await? else {
            let reason = self
                .executor
                .fallback_reason()
                .await
                .unwrap_or_else(|| "the sandbox executor is not running".to_string());
            bail!(
                "interactive processes in a docker sandbox need the sandbox executor, which is not available here: {reason}"
            );
        };
        let mut argv = vec![request.program];
        argv.extend(request.args);
        Ok(Box::new(executor::spawn_process(&helper, argv, cwd, env)?))
    }

    /// Writes the path's tar (or its patch against the manifest entry it
    /// was copied in from) to a host file; see [`crate::artifact`].
    async fn export_artifact(
        &self,
        request: RunnerArtifactExportRequest,
    ) -> anyhow::Result<RunnerArtifactExportResult> {
        let path = self.resolve(&request.path)?;
        let docker = self.docker().await?;
        crate::artifact::export(docker, &self.container_id, &path, &self.manifest, request).await
    }

    /// The host URL of a container port published through the config's
    /// `ports` (Docker cannot publish a port on a running container). With
    /// `network: host` every port is already on the host.
    async fn expose_port(&self, request: RunnerPortRequest) -> anyhow::Result<RunnerPortResult> {
        if request.port == 0 {
            bail!("cannot expose port 0: name the port the service listens on");
        }
        let docker = self.docker().await?;
        let inspect = container::inspect(docker, &self.container_id).await?;
        let network = inspect
            .host_config
            .as_ref()
            .and_then(|host| host.network_mode.clone())
            .unwrap_or_default();
        if network == "host" {
            return Ok(RunnerPortResult {
                port: request.port,
                url: Some(format!("http://127.0.0.1:{}", request.port)),
            });
        }
        let ports = inspect
            .network_settings
            .and_then(|settings| settings.ports)
            .unwrap_or_default();
        let key = format!("{}/tcp", request.port);
        let binding = ports
            .get(&key)
            .and_then(|bindings| bindings.as_ref())
            .and_then(|bindings| {
                bindings.iter().find(|binding| {
                    binding
                        .host_port
                        .as_deref()
                        .is_some_and(|port| !port.is_empty())
                })
            });
        let Some(binding) = binding else {
            let mut published: Vec<&str> = ports.keys().map(String::as_str).collect();
            published.sort_unstable();
            bail!(
                "container port {} is not published (published: {}); add it to the destination's `ports` and use a network other than \"none\"",
                request.port,
                if published.is_empty() {
                    "none".to_string()
                } else {
                    published.join(", ")
                }
            );
        };
        let host = match binding.host_ip.as_deref() {
            Some("::") => "[::1]".to_string(),
            Some(ip) if ip.contains(':') => format!("[{ip}]"),
            None | Some("") | Some("0.0.0.0") => "127.0.0.1".to_string(),
            Some(ip) => ip.to_string(),
        };
        let host_port = binding.host_port.clone().unwrap_or_default();
        Ok(RunnerPortResult {
            port: request.port,
            url: Some(format!("http://{host}:{host_port}")),
        })
    }

    /// Commits the container to `roder-snapshot:<container>-<suffix>`. The
    /// image blanks Roder's container labels so containers created from it
    /// do not look like this one (or like a pool container) to `gc`.
    ///
    /// A confined container's workspace is a volume, which a commit does
    /// not capture, so its snapshot is built from a helper container of the
    /// same image holding a copy of the workspace under
    /// [`snapshot::SAVED_WORKSPACES`]; containers of the snapshot copy it
    /// back into their workspace when they start.
    async fn snapshot(&self) -> anyhow::Result<Option<RunnerSnapshotRef>> {
        let docker = self.docker().await?;
        let tag = format!("{}-{}", self.short_id(), labels::name_suffix());
        let mut image_labels: HashMap<String, String> = labels::CONTAINER_ONLY
            .iter()
            .map(|key| (key.to_string(), String::new()))
            .collect();
        image_labels.insert(labels::SNAPSHOT_OF.to_string(), self.container_id.clone());
        let inspect = container::inspect(docker, &self.container_id).await?;
        let on_volume = container::tmpfs_volumes(&inspect).contains(&self.workdir);
        let committed = if on_volume {
            snapshot::commit_with_workspace(docker, &inspect, &self.workdir, &tag, image_labels)
                .await
        } else {
            snapshot::commit(
                docker,
                &self.container_id,
                &tag,
                "roder docker runner snapshot",
                true,
                image_labels,
            )
            .await
        }
        .map_err(|error| {
            anyhow::anyhow!("cannot snapshot container {}: {error:#}", self.short_id())
        })?;
        let snapshot = RunnerSnapshotRef {
            provider_id: crate::PROVIDER_ID.to_string(),
            snapshot_id: format!("{SNAPSHOT_REPOSITORY}:{tag}"),
            metadata: json!({
                "image_id": committed,
                "container_id": self.container_id,
            }),
        };
        lock(&self.state).snapshot = Some(snapshot.clone());
        Ok(Some(snapshot))
    }

    /// Removes the container unless the config said `keep` or the session
    /// was detached. Running commands are cancelled. Closing twice is fine.
    async fn close(&self) -> anyhow::Result<()> {
        let was = std::mem::replace(&mut *lock(&self.phase), Phase::Closed);
        self.running.cancel_all();
        self.executor.stop().await;
        if was != Phase::Live || self.cleanup == Cleanup::Keep {
            return Ok(());
        }
        let docker = self.client.get().await?;
        container::remove(docker, &self.container_id).await
    }
}

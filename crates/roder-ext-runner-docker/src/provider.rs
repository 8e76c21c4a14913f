//! The `docker` provider: validates destinations, creates sessions (from
//! the warm pool when it can), finds containers again, collects garbage.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use bollard::Docker;
use bollard::models::{ContainerInspectResponse, ContainerStateStatusEnum};
use bollard::query_parameters::RenameContainerOptions;
use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerProviderId, RemoteRunnerSession, RunnerCapabilities,
    RunnerDestination, RunnerMountCapabilities, RunnerSessionState,
};

use crate::archive::WriteRules;
use crate::client::{self, Client, is_not_found, message_of};
use crate::config::{Cleanup, DEFAULT_WORKDIR, DockerConfig, ExecutorMode, parse_user};
use crate::gc::{GcOptions, GcReport};
use crate::pool::Pool;
use crate::session::{DockerSession, Opened};
use crate::{container, gc, labels, manifest};

/// The provider id destinations name to use this runner.
pub const PROVIDER_ID: &str = "docker";

/// How long `prewarm` waits for a pool to fill.
const PREWARM_TIMEOUT: Duration = Duration::from_secs(120);

/// Runner provider whose sessions are Docker containers.
///
/// One provider serves any number of destinations; it owns the daemon
/// connection and the warm pools. Call [`shutdown_pool`](Self::shutdown_pool)
/// before exiting so pre-created containers do not outlive the process
/// (`gc` removes them otherwise).
pub struct DockerRunnerProvider {
    client: Arc<Client>,
    pool: Pool,
    /// The id of the Roder home this provider works for, labelled on every
    /// container it makes (see [`Self::with_home_id`]).
    home: Option<String>,
}

impl Default for DockerRunnerProvider {
    /// Connects to the local daemon (`DOCKER_HOST` or the default socket)
    /// on first use.
    fn default() -> Self {
        Self::over(Client::lazy())
    }
}

impl std::fmt::Debug for DockerRunnerProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerRunnerProvider")
            .field("instance", &self.pool.owner())
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

impl DockerRunnerProvider {
    fn over(client: Client) -> Self {
        let client = Arc::new(client);
        let instance = uuid::Uuid::new_v4().simple().to_string();
        Self {
            pool: Pool::new(client.clone(), instance, None),
            client,
            home: None,
        }
    }

    /// This provider working for the Roder home `home_id`: every container
    /// it creates (warm pool included) is labelled `dev.roder.home=<id>`,
    /// and its [`gc`](Self::gc) removes only containers with that label.
    /// Without a home id containers get no home label and `gc` collects
    /// only unlabelled ones. Call it right after construction: the warm
    /// pool is rebuilt empty.
    pub fn with_home_id(self, home_id: impl Into<String>) -> anyhow::Result<Self> {
        let home_id = home_id.into();
        labels::check_home_id(&home_id)?;
        Ok(Self {
            pool: Pool::new(
                self.client.clone(),
                self.pool.owner().to_string(),
                Some(home_id.clone()),
            ),
            client: self.client,
            home: Some(home_id),
        })
    }

    /// The home id set with [`with_home_id`](Self::with_home_id).
    pub fn home_id(&self) -> Option<&str> {
        self.home.as_deref()
    }

    /// A provider for the local daemon; fails at once when the Docker host
    /// setting is unusable (the daemon itself is first contacted on use).
    pub fn connect() -> anyhow::Result<Self> {
        let docker = Docker::connect_with_local_defaults().map_err(|error| {
            anyhow::anyhow!(
                "cannot connect to the Docker daemon ({}): {error}",
                client::daemon_address()
            )
        })?;
        Ok(Self::with_docker(docker))
    }

    /// A provider over a client built elsewhere (another socket, a TCP host).
    pub fn with_docker(docker: Docker) -> Self {
        Self::over(Client::with(docker))
    }

    /// The connected Docker client (for tooling and tests).
    pub async fn docker(&self) -> anyhow::Result<Docker> {
        Ok(self.client.get().await?.clone())
    }

    /// This provider instance's id, carried by its pool containers.
    pub fn instance_id(&self) -> &str {
        self.pool.owner()
    }

    /// Fills the warm pool of `destination` (its `pool_size`) and waits
    /// until it is full, e.g. at start-up so the first thread is fast.
    pub async fn prewarm(&self, destination: &RunnerDestination) -> anyhow::Result<()> {
        let config = self.parse_destination(destination)?;
        if config.pool_size == 0 {
            bail!(
                "destination `{}` has no warm pool: set `pool_size` above 0",
                destination.id
            );
        }
        self.pool.ensure(&config);
        self.pool
            .wait_ready(&config, config.pool_size, PREWARM_TIMEOUT)
            .await
    }

    /// Ready containers in the warm pool of `destination`.
    pub fn pool_ready(&self, destination: &RunnerDestination) -> anyhow::Result<usize> {
        Ok(self.pool.ready(&self.parse_destination(destination)?))
    }

    /// Stops refilling and removes every unclaimed pool container. Returns
    /// how many were removed.
    pub async fn shutdown_pool(&self) -> anyhow::Result<usize> {
        self.pool.shutdown().await
    }

    /// Removes this home's containers whose thread is not in
    /// `live_thread_ids` (the threads of this home's store) and unclaimed
    /// pool containers this home's other (gone) provider instances left;
    /// keeps everything else, another home's containers above all. The
    /// report says what was removed and why each other container was kept.
    /// See the README for exactly what is kept.
    pub async fn gc(
        &self,
        live_thread_ids: &HashSet<String>,
        options: GcOptions,
    ) -> anyhow::Result<GcReport> {
        let docker = self.client.get().await?;
        let collector = gc::Collector {
            home: self.home.as_deref(),
            own_pool: self.pool.owner(),
            options,
        };
        gc::collect(docker, &collector, live_thread_ids).await
    }

    /// This home's containers, in any state, with the thread each serves
    /// (`roder runners list`); never another home's.
    pub async fn sandboxes(&self) -> anyhow::Result<Vec<crate::SandboxEntry>> {
        let docker = self.client.get().await?;
        crate::sandboxes::of_home(docker, self.home.as_deref()).await
    }

    /// What containers of `policy` are protected by on this machine, and
    /// what not and why (for `roder sandbox status` and `runners/list`),
    /// for a destination that sets no `user`. Describes containers created
    /// from now on, from the policy and whether a daemon socket is there;
    /// it does not contact the daemon.
    pub fn protections(
        &self,
        policy: &roder_api::sandbox_policy::SandboxPolicy,
    ) -> Vec<roder_api::sandbox_policy::Protection> {
        crate::sandbox::protections(policy, None, client::daemon_socket_present())
    }

    /// [`protections`](Self::protections) of one destination: its own
    /// `sandbox` policy (else the default) and its `user`.
    pub fn destination_protections(
        &self,
        destination: &RunnerDestination,
    ) -> anyhow::Result<Vec<roder_api::sandbox_policy::Protection>> {
        let config = self.parse_destination(destination)?;
        Ok(crate::sandbox::protections(
            &config.sandbox,
            config.user.as_deref(),
            client::daemon_socket_present(),
        ))
    }

    fn check_provider(&self, provider_id: &str, what: &str) -> anyhow::Result<()> {
        if provider_id != PROVIDER_ID {
            bail!("{what} is for runner provider `{provider_id}`, not `{PROVIDER_ID}`");
        }
        Ok(())
    }

    fn parse_destination(&self, destination: &RunnerDestination) -> anyhow::Result<DockerConfig> {
        self.check_provider(
            &destination.provider_id,
            &format!("destination `{}`", destination.id),
        )?;
        let config = DockerConfig::from_json(
            &destination.config,
            &format!("destination `{}` config", destination.id),
        )?;
        if destination
            .config
            .get(roder_api::runner_idle::ON_IDLE_CONFIG_KEY)
            == Some(&serde_json::json!("stop"))
            && crate::sandbox::Confinement::of(&config)
                .workspace_bytes
                .is_some()
        {
            bail!(
                "destination `{}`: on_idle = \"stop\" would lose the workspace, which the sandbox policy puts on size-bounded tmpfs volumes; use \"pause\" (or a policy with mode \"none\")",
                destination.id
            );
        }
        manifest::plan(
            &destination.default_manifest,
            &config,
            &container::write_rules(&config),
        )
        .map_err(|error| anyhow::anyhow!("destination `{}`: {error:#}", destination.id))?;
        Ok(config)
    }

    /// A pool container claimed for `thread`, if the pool has one. Claiming
    /// renames it (its only mutable mark) so `gc` can tell whose it is; a
    /// container removed behind the pool's back is skipped.
    async fn claim_from_pool(
        &self,
        docker: &Docker,
        config: &DockerConfig,
        thread: Option<&str>,
    ) -> anyhow::Result<Option<String>> {
        if config.pool_size == 0 {
            return Ok(None);
        }
        self.pool.ensure(config);
        while let Some(id) = self.pool.take(config) {
            let name = labels::session_name(thread, &labels::name_suffix());
            match docker
                .rename_container(&id, RenameContainerOptions { name })
                .await
            {
                Ok(()) => return Ok(Some(id)),
                Err(error) if is_not_found(&error) => continue,
                Err(error) => {
                    container::remove(docker, &id).await.ok();
                    tracing::warn!(
                        "could not claim pool container {id}: {}",
                        message_of(&error)
                    );
                }
            }
        }
        Ok(None)
    }

    /// Reattaches to the container a persisted state names (the session id,
    /// which is the container id; a bare name works too), starting it if it
    /// stopped. The recorded workdir is used only when the metadata is about
    /// that same container (a rejoin may name another sandbox).
    async fn attach(
        &self,
        state: RunnerSessionState,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        self.check_provider(
            &state.provider_id,
            &format!("session `{}`", state.session_id),
        )?;
        let recorded = |key: &str| {
            state
                .metadata
                .get(key)
                .and_then(serde_json::Value::as_str)
                .filter(|value| !value.is_empty())
                .map(str::to_string)
        };
        let recorded_container = recorded("container_id");
        let reference = Some(state.session_id.clone())
            .filter(|id| !id.is_empty())
            .or_else(|| recorded_container.clone())
            .ok_or_else(|| anyhow::anyhow!("the runner state names no container to rejoin"))?;
        let docker = self.client.get().await?;
        let inspect = container::attach(docker, &reference).await?;
        let same_container = recorded_container.is_some() && recorded_container == inspect.id;
        let recorded_workdir = recorded("workdir").filter(|_| same_container);
        let executor = match recorded("executor").as_deref() {
            Some("off") => ExecutorMode::Off,
            _ => ExecutorMode::Auto,
        };
        let mut opened = opened_from(&inspect, &reference, recorded_workdir, state.destination_id)?;
        opened.executor = executor;
        opened.manifest = state
            .metadata
            .get("manifest")
            .filter(|_| same_container)
            .and_then(|recorded| serde_json::from_value(recorded.clone()).ok())
            .unwrap_or_default();
        Ok(Arc::new(DockerSession::new(self.client.clone(), opened)))
    }
}

/// What a session needs to know, from an inspected container.
fn opened_from(
    inspect: &ContainerInspectResponse,
    reference: &str,
    recorded_workdir: Option<String>,
    destination_id: String,
) -> anyhow::Result<Opened> {
    let container_id = inspect
        .id
        .clone()
        .ok_or_else(|| anyhow::anyhow!("the daemon reported no id for container {reference}"))?;
    let config = inspect.config.as_ref();
    let container_labels = config
        .and_then(|config| config.labels.clone())
        .unwrap_or_default();
    let workdir = recorded_workdir
        .or_else(|| config.and_then(|config| config.working_dir.clone()))
        .filter(|workdir| workdir.starts_with('/'))
        .unwrap_or_else(|| DEFAULT_WORKDIR.to_string());
    Ok(Opened {
        container_id,
        image: config
            .and_then(|config| config.image.clone())
            .unwrap_or_default(),
        workdir,
        cleanup: Cleanup::from_label(labels::get(&container_labels, labels::CLEANUP)),
        paused: inspect.state.as_ref().and_then(|state| state.status)
            == Some(ContainerStateStatusEnum::PAUSED),
        session_destination: destination_id,
        rules: WriteRules {
            writable: container::writable_paths(inspect),
            owner: config
                .and_then(|config| config.user.as_deref())
                .and_then(parse_user),
        },
        executor: ExecutorMode::Auto,
        manifest: Vec::new(),
    })
}

#[async_trait::async_trait]
impl RemoteRunnerProvider for DockerRunnerProvider {
    fn id(&self) -> RemoteRunnerProviderId {
        PROVIDER_ID.to_string()
    }

    fn capabilities(&self) -> RunnerCapabilities {
        RunnerCapabilities {
            command_exec: true,
            file_read: true,
            file_write: true,
            port_preview: true,
            snapshots: true,
            cancellation: true,
            artifact_export: true,
            mounts: RunnerMountCapabilities::default(),
            pausable: true,
            detachable: true,
        }
    }

    fn setup_hint(&self) -> Option<String> {
        (!client::daemon_socket_present()).then(|| {
            format!(
                "no Docker daemon socket at {}; start Docker or set DOCKER_HOST",
                client::DEFAULT_SOCKET
            )
        })
    }

    /// Threads that pick this runner without a workspace work in the
    /// default container workdir.
    fn default_workspace(&self) -> Option<String> {
        Some(DEFAULT_WORKDIR.to_string())
    }

    /// Checks the config and that the image is present, and starts warming
    /// the pool, so a thread bound now has a container ready by its first
    /// tool call.
    async fn validate_destination(&self, destination: &RunnerDestination) -> anyhow::Result<()> {
        let config = self.parse_destination(destination)?;
        let docker = self.client.get().await?;
        container::require_image(docker, &config.image).await?;
        self.pool.ensure(&config);
        Ok(())
    }

    async fn create_session(
        &self,
        destination: RunnerDestination,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        let config = self.parse_destination(&destination)?;
        let docker = self.client.get().await?;
        let thread = labels::thread_of_destination(&destination.id);
        let container_id = match self.claim_from_pool(docker, &config, thread).await? {
            Some(id) => id,
            None => {
                let mut all = container::base_labels(&config, self.home.as_deref());
                all.insert(labels::DESTINATION.to_string(), destination.id.clone());
                if let Some(thread) = thread {
                    all.insert(labels::THREAD.to_string(), thread.to_string());
                }
                let name = labels::session_name(thread, &labels::name_suffix());
                container::create_and_start(docker, &config, all, &name).await?
            }
        };
        let rules = container::write_rules(&config);
        let entries = manifest::plan(&destination.default_manifest, &config, &rules)?;
        if !entries.is_empty()
            && let Err(error) = manifest::copy_in(docker, &container_id, &entries, &rules).await
        {
            if let Err(removal) = container::remove(docker, &container_id).await {
                tracing::warn!(
                    "cannot remove container {container_id} after a failed copy: {removal:#}"
                );
            }
            return Err(error);
        }
        Ok(Arc::new(DockerSession::new(
            self.client.clone(),
            Opened {
                manifest: entries,
                container_id,
                image: config.image,
                workdir: config.workdir,
                cleanup: config.cleanup,
                paused: false,
                session_destination: destination.id,
                rules,
                executor: config.executor,
            },
        )))
    }

    /// Fails when the container is gone (or not Roder's), so the runtime
    /// falls back to a fresh session.
    async fn resume_session(
        &self,
        state: RunnerSessionState,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        self.attach(state).await
    }

    /// Finds the container by id (or name) without creating anything.
    async fn rejoin_session(
        &self,
        state: RunnerSessionState,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        self.attach(state).await
    }
}

//! The public API: [`Runtime`].
//!
//! A runtime owns the installed extensions, the thread store, the event bus,
//! live thread state and the runner session cache. Turn methods live in
//! `turn/start.rs` and runner lifecycle methods in `runner/lifecycle.rs`; both
//! are `impl Runtime` blocks.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use roder_api::events::{EventEnvelope, RoderEvent, ThreadCreated};
use roder_api::extension::ExtensionRegistry;
use roder_api::inference::InferenceEngine;
use roder_api::remote_runner::RemoteRunnerProvider;
use roder_api::thread::{ThreadMetadata, ThreadSnapshot, ThreadStore};
use roder_api::tools::ToolRegistry;
use roder_api::workdir::WorkdirMaterializer;
use time::OffsetDateTime;
use tokio::sync::broadcast;

use crate::bus::EventBus;
use crate::config::RuntimeConfig;
use crate::error::RuntimeError;
use crate::external::ExternalCalls;
use crate::memory_store::MemoryThreadStore;
use crate::requests::{CreateThreadRequest, ExternalToolResolution, ThreadEventsPage};
use crate::runner::binding::{self, Providers};
use crate::runner::execution_lock::ExecutionLocks;
use crate::runner::sessions::SessionCache;
use crate::threads::{ThreadState, ThreadTable};

pub struct Runtime {
    pub(crate) config: RuntimeConfig,
    pub(crate) engines: BTreeMap<String, Arc<dyn InferenceEngine>>,
    pub(crate) providers: Providers,
    pub(crate) tools: ToolRegistry,
    pub(crate) store: Arc<dyn ThreadStore>,
    pub(crate) bus: Arc<EventBus>,
    pub(crate) threads: ThreadTable,
    pub(crate) sessions: SessionCache,
    pub(crate) execution_locks: ExecutionLocks,
    pub(crate) external: ExternalCalls,
    pub(crate) workdir_materializer: Option<Arc<dyn WorkdirMaterializer>>,
    allow_local_workspaces: AtomicBool,
    pub(crate) protection_reports: Vec<Arc<dyn roder_api::sandbox_policy::ProtectionReport>>,
    /// Who this runtime is when it holds a thread's writer lease.
    pub(crate) writer_identity: roder_api::writer_lease::WriterIdentity,
    /// Per-turn checkpoints, rollback and fork (`checkpoint.rs`).
    pub(crate) checkpointers: Vec<Arc<dyn roder_api::checkpoint::WorkspaceCheckpointer>>,
    /// Starts tools clients declare per thread (`thread_tools.rs`).
    pub(crate) thread_tool_factories:
        BTreeMap<String, Arc<dyn roder_api::thread_tools::ThreadToolFactory>>,
    pub(crate) thread_tools: crate::thread_tools::ThreadToolTable,
    /// Approvers, pending asks and the runtime's rules (`approvals/`).
    pub(crate) approvals: crate::approvals::Approvals,
    /// Gives spans their `traceparent` when the runtime is traced (`trace.rs`).
    pub(crate) trace_context: Option<Arc<dyn roder_api::telemetry::TraceContext>>,
    pub(crate) profile_resolver: Option<Arc<dyn roder_api::profile::ProfileResolver>>,
    /// Checkpoints taken since each thread's last automatic collection.
    pub(crate) retention: crate::retention::Retention,
}

impl Runtime {
    /// Builds a runtime from installed extensions. Fails when no inference
    /// engine is installed, the default provider or runner destination is not
    /// installed, tools collide, or the config sets something unsupported.
    pub fn new(registry: ExtensionRegistry, config: RuntimeConfig) -> anyhow::Result<Runtime> {
        config.validate()?;
        if registry.inference_engines.is_empty() {
            anyhow::bail!("no inference engine is installed; install at least one");
        }
        let default_engine = engine_named(&registry.inference_engines, &config.default_provider)?;
        if config.hosted_web_search.enabled && !default_engine.capabilities().hosted_web_search {
            anyhow::bail!(
                "hosted_web_search is not supported by inference provider \"{}\"",
                config.default_provider
            );
        }
        if let Some(destination) = &config.remote_runner_destination {
            binding::provider(&registry.remote_runner_providers, &destination.provider_id)?;
        }
        let mut tools = ToolRegistry::new();
        for contributor in &registry.tool_contributors {
            contributor.contribute(&mut tools).map_err(|error| {
                anyhow::anyhow!(
                    "tool contributor \"{}\" failed to register its tools: {error:#}",
                    contributor.id()
                )
            })?;
        }
        let store: Arc<dyn ThreadStore> = match &registry.thread_store_factory {
            Some(factory) => factory.open().map_err(|error| {
                anyhow::anyhow!(
                    "could not open thread store \"{}\": {error:#}",
                    factory.id()
                )
            })?,
            None => Arc::new(MemoryThreadStore::default()),
        };
        let allow_local_workspaces = AtomicBool::new(config.allow_local_workspaces);
        let approvals =
            crate::approvals::Approvals::new(&config.approvals, registry.approval_rule_store);
        let bus = Arc::new(EventBus::new(store.clone(), config.event_buffer_capacity));
        Ok(Runtime {
            config,
            engines: registry.inference_engines,
            providers: registry.remote_runner_providers,
            tools,
            bus,
            store,
            threads: ThreadTable::default(),
            sessions: SessionCache::default(),
            execution_locks: ExecutionLocks::default(),
            external: ExternalCalls::default(),
            workdir_materializer: registry.workdir_materializer,
            allow_local_workspaces,
            writer_identity: crate::writer::identity(),
            protection_reports: registry.protection_reports,
            checkpointers: registry.workspace_checkpointers,
            thread_tool_factories: registry.thread_tool_factories,
            thread_tools: Default::default(),
            approvals,
            trace_context: registry.trace_context,
            profile_resolver: registry.profile_resolver,
            retention: Default::default(),
        })
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// Installed runner providers, by id.
    pub fn runner_providers(&self) -> impl Iterator<Item = &Arc<dyn RemoteRunnerProvider>> {
        self.providers.values()
    }

    /// Installed inference engines, by id.
    pub fn inference_engines(&self) -> impl Iterator<Item = &Arc<dyn InferenceEngine>> {
        self.engines.values()
    }

    /// When false, workspace tools of threads without a runner fail instead of
    /// touching the host ("local workspace execution is disabled").
    pub fn set_allow_local_workspaces(&self, allow: bool) {
        self.allow_local_workspaces.store(allow, Ordering::SeqCst);
    }

    pub fn allows_local_workspaces(&self) -> bool {
        self.allow_local_workspaces.load(Ordering::SeqCst)
    }

    /// For each installed backend report, which protections of the
    /// runtime's sandbox policy it enforces on this machine, and why not.
    ///
    /// ```
    /// # fn demo(runtime: &roder_core::Runtime) {
    /// for (backend, protections) in runtime.sandbox_status() {
    ///     for protection in protections {
    ///         println!("{backend}: {} {}", protection.name, protection.active);
    ///     }
    /// }
    /// # }
    /// ```
    pub fn sandbox_status(&self) -> Vec<(String, Vec<roder_api::sandbox_policy::Protection>)> {
        self.protection_reports
            .iter()
            .map(|report| (report.backend(), report.protections(&self.config.sandbox)))
            .collect()
    }

    /// The turns running in this runtime, `(thread_id, turn_id)`, from memory.
    pub fn running_turns(&self) -> Vec<(String, String)> {
        self.threads.running_turns()
    }

    /// Every event of every thread, as it happens.
    pub fn subscribe_events(&self) -> broadcast::Receiver<EventEnvelope> {
        self.bus.subscribe()
    }

    /// A thread in `workspace` (default: the configured workspace, else the
    /// current directory), bound to the runtime-level runner destination when
    /// a workspace is known for it.
    pub async fn create_thread(&self, workspace: Option<String>) -> anyhow::Result<ThreadMetadata> {
        let workspace = match workspace.or_else(|| self.config.workspace.clone()) {
            Some(workspace) => workspace,
            None => std::env::current_dir()?.display().to_string(),
        };
        self.create_thread_with(CreateThreadRequest::in_workspace(workspace))
            .await
    }

    pub async fn create_thread_with(
        &self,
        request: CreateThreadRequest,
    ) -> anyhow::Result<ThreadMetadata> {
        self.create_thread_with_sandbox(request, None).await
    }

    /// [`create_thread_with`](Self::create_thread_with) with the thread's own
    /// sandbox policy (`None`: its runner destination's, else the runtime's).
    /// A runner-bound thread's provider receives the policy in its
    /// destination config and enforces it in the sandbox it creates.
    ///
    /// ```no_run
    /// # async fn demo(runtime: &roder_core::Runtime) -> anyhow::Result<()> {
    /// use roder_api::sandbox_policy::{NetworkAccess, SandboxPolicy};
    /// use roder_core::CreateThreadRequest;
    ///
    /// let online = SandboxPolicy { network: NetworkAccess::On, ..SandboxPolicy::default() };
    /// let thread = runtime
    ///     .create_thread_with_sandbox(CreateThreadRequest::in_workspace("/work/repo"), Some(online))
    ///     .await?;
    /// assert!(thread.sandbox.is_some());
    /// # Ok(()) }
    /// ```
    pub async fn create_thread_with_sandbox(
        &self,
        request: CreateThreadRequest,
        sandbox: Option<roder_api::sandbox_policy::SandboxPolicy>,
    ) -> anyhow::Result<ThreadMetadata> {
        self.create_thread_settled(request, sandbox, Default::default(), None)
            .await
    }

    /// Creates a thread with everything it starts with, in one metadata
    /// write: its approvals and its resolved profile are on disk before
    /// anything else can see the thread.
    pub(crate) async fn create_thread_settled(
        &self,
        request: CreateThreadRequest,
        sandbox: Option<roder_api::sandbox_policy::SandboxPolicy>,
        approvals: roder_api::approval::ThreadApprovals,
        profile: Option<Box<roder_api::profile::ProfileSnapshot>>,
    ) -> anyhow::Result<ThreadMetadata> {
        reject_unsupported_thread_fields(&request)?;
        let credentials = self.config.all_credential_vars();
        let choice = binding::SandboxChoice {
            thread: sandbox.as_ref(),
            credentials: &credentials,
        };
        if let Some(provider) = &request.provider {
            engine_named(&self.engines, provider)?;
        }
        let thread_id = uuid::Uuid::new_v4().to_string();
        let runner_binding = match &request.runner {
            Some(selection) => {
                Some(binding::bind_selection(&self.providers, &thread_id, selection, choice).await?)
            }
            None => match &self.config.remote_runner_destination {
                Some(destination) => binding::auto_binding(&self.providers, destination, choice)?,
                None => None,
            },
        };
        let runner_destination = runner_binding
            .as_ref()
            .map(|binding| binding.destination.clone())
            .or_else(|| self.config.remote_runner_destination.clone());
        let now = OffsetDateTime::now_utc();
        let metadata = ThreadMetadata {
            thread_id: thread_id.clone(),
            title: request.title,
            workspace: absolute_local_path(&request.workspace)?,
            provider: request.provider,
            model: request.model,
            tool_allowlist: request.tool_allowlist,
            developer_instructions: request.developer_instructions,
            external_tools: request.external_tools,
            runner_destination,
            runner_binding,
            runner_state: None,
            runner_idle_paused: false,
            sandbox,
            usage: Default::default(),
            last_compaction_seq: None,
            archived: false,
            approvals,
            profile,
            created_at: now,
            updated_at: now,
        };
        self.store.create_thread(metadata.clone()).await?;
        let thread = self
            .threads
            .insert_if_absent(ThreadState::from_log(thread_id.clone(), &[]));
        self.bus
            .emit(
                &thread,
                None,
                RoderEvent::ThreadCreated(ThreadCreated {
                    thread_id,
                    workspace: metadata.workspace.clone(),
                    runner_provider_id: metadata
                        .runner_binding
                        .as_ref()
                        .map(|binding| binding.destination.provider_id.clone()),
                }),
            )
            .await?;
        Ok(metadata)
    }

    /// Metadata and persisted events of a thread, `None` if it does not exist.
    pub async fn load_thread(&self, thread_id: &str) -> anyhow::Result<Option<ThreadSnapshot>> {
        self.store.load_thread(thread_id).await
    }

    /// Metadata of every thread, most recently updated first.
    pub async fn list_threads(&self) -> anyhow::Result<Vec<ThreadMetadata>> {
        self.store.list_threads().await
    }

    /// Persisted events with `seq > cursor` (cursor 0: from the start). Works
    /// across restarts; a cursor past the end is an error.
    pub async fn read_thread_events(
        &self,
        thread_id: &str,
        cursor: u64,
    ) -> anyhow::Result<ThreadEventsPage> {
        // Taken under the log lock: ordered after any append in progress.
        let last_seq = self.last_seq(thread_id).await?;
        if cursor > last_seq {
            return Err(RuntimeError::CursorOutOfRange {
                thread_id: thread_id.to_string(),
                cursor,
                last_seq,
            }
            .into());
        }
        let events = self.store.load_events(thread_id, cursor).await?;
        let next_cursor = events.last().map_or(cursor, |event| event.seq);
        Ok(ThreadEventsPage {
            events,
            next_cursor,
        })
    }

    /// Answers a pending `ExternalToolCallRequested`.
    pub async fn resolve_external_tool_call(
        &self,
        request_id: &str,
        resolution: ExternalToolResolution,
    ) -> anyhow::Result<()> {
        Ok(self.external.resolve(request_id, resolution)?)
    }

    /// Live state of a thread, loaded from the store on first use.
    pub(crate) async fn thread_state(&self, thread_id: &str) -> anyhow::Result<Arc<ThreadState>> {
        if let Some(thread) = self.threads.get(thread_id) {
            return Ok(thread);
        }
        let Some(metadata) = self.store.load_metadata(thread_id).await? else {
            return Err(RuntimeError::ThreadNotFound(thread_id.to_string()).into());
        };
        let events = crate::reopen::rebuild_events(self.store.as_ref(), &metadata).await?;
        Ok(self
            .threads
            .insert_if_absent(ThreadState::from_log(thread_id.to_string(), &events)))
    }

    /// The `seq` of a thread's last persisted event (0 before any), without
    /// reading its log once the thread is live in this runtime.
    pub async fn last_seq(&self, thread_id: &str) -> anyhow::Result<u64> {
        let thread = self.thread_state(thread_id).await?;
        let cursor = thread.log.lock().await;
        Ok(cursor.next_seq - 1)
    }

    /// A thread's metadata (without its events).
    pub async fn thread_metadata(&self, thread_id: &str) -> anyhow::Result<ThreadMetadata> {
        self.store
            .load_metadata(thread_id)
            .await?
            .ok_or_else(|| RuntimeError::ThreadNotFound(thread_id.to_string()).into())
    }

    pub(crate) fn engine(&self, provider: &str) -> anyhow::Result<Arc<dyn InferenceEngine>> {
        engine_named(&self.engines, provider).cloned()
    }
}

fn engine_named<'a>(
    engines: &'a BTreeMap<String, Arc<dyn InferenceEngine>>,
    provider: &str,
) -> anyhow::Result<&'a Arc<dyn InferenceEngine>> {
    engines.get(provider).ok_or_else(|| {
        let installed: Vec<&str> = engines.keys().map(String::as_str).collect();
        anyhow::anyhow!(
            "inference provider \"{provider}\" is not installed (installed: {})",
            installed.join(", ")
        )
    })
}

fn reject_unsupported_thread_fields(request: &CreateThreadRequest) -> anyhow::Result<()> {
    for (field, set) in [
        ("workspace_id", request.workspace_id.is_some()),
        ("root_id", request.root_id.is_some()),
        ("selection_mode", request.selection_mode.is_some()),
    ] {
        if set {
            anyhow::bail!("{field} is not supported; leave it unset");
        }
    }
    Ok(())
}

/// The local workspace as an absolute path (relative: against the current
/// directory). It need not exist: a runner-bound thread never touches it.
fn absolute_local_path(workspace: &str) -> anyhow::Result<String> {
    if workspace.is_empty() {
        anyhow::bail!("workspace is empty; give the thread's local workspace directory");
    }
    let path = PathBuf::from(workspace);
    if path.is_absolute() {
        return Ok(workspace.to_string());
    }
    Ok(std::env::current_dir()?.join(path).display().to_string())
}

//! Tools a client declared for one thread (`roder_api::thread_tools`).
//!
//! A factory starts them; the runtime keeps their executors in memory, by
//! thread, and offers them to that thread's turns only (`policy.rs`), routed
//! like registry tools (`routing.rs`). They are never persisted (a
//! declaration can hold secrets and executors are processes): a runtime that
//! reopens a thread offers them again once the client declares them again.
//! A turn takes a snapshot when it starts, so a new declaration never
//! changes the tools of a turn that is running.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use roder_api::events::{RoderEvent, ThreadToolsStarted};
use roder_api::sandbox_policy::SandboxMode;
use roder_api::thread::ThreadMetadata;
use roder_api::thread_tools::{HostAccess, ThreadToolFactory, ThreadToolRequest};
use roder_api::tools::{ToolExecutor, ToolRegistry};

use crate::runtime::Runtime;

/// One thread's declared tools, by factory. Never changed in place: a new
/// declaration builds a new set.
#[derive(Default)]
pub(crate) struct ThreadTools {
    by_factory: BTreeMap<String, ToolRegistry>,
}

impl ThreadTools {
    pub fn get(&self, name: &str) -> Option<&Arc<dyn ToolExecutor>> {
        self.by_factory
            .values()
            .find_map(|registry| registry.get(name))
    }

    pub fn executors(&self) -> impl Iterator<Item = &Arc<dyn ToolExecutor>> + '_ {
        self.by_factory.values().flat_map(ToolRegistry::executors)
    }
}

/// Every thread's declared tools.
#[derive(Default)]
pub(crate) struct ThreadToolTable {
    threads: Mutex<HashMap<String, Arc<ThreadTools>>>,
}

impl ThreadToolTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ThreadTools>>> {
        self.threads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The thread's current set (empty when it declared none).
    pub fn of(&self, thread_id: &str) -> Arc<ThreadTools> {
        self.lock().get(thread_id).cloned().unwrap_or_default()
    }

    /// Puts `registry` in place of the factory's previous set for the
    /// thread; the previous executors are dropped (their servers stop once
    /// no running turn holds them).
    fn replace(&self, thread_id: &str, factory: &str, registry: ToolRegistry) {
        let mut threads = self.lock();
        let mut by_factory = threads
            .get(thread_id)
            .map(|tools| tools.by_factory.clone())
            .unwrap_or_default();
        by_factory.insert(factory.to_string(), registry);
        threads.insert(thread_id.to_string(), Arc::new(ThreadTools { by_factory }));
    }

    /// Gives thread `to` the same executors as `from` (a fork).
    pub fn share(&self, from: &str, to: &str) {
        let mut threads = self.lock();
        if let Some(tools) = threads.get(from).cloned() {
            threads.insert(to.to_string(), tools);
        }
    }

    pub fn remove(&self, thread_id: &str) -> bool {
        self.lock().remove(thread_id).is_some()
    }
}

impl Runtime {
    /// Whether `declaration` is one the factory `factory` would take, without
    /// starting anything: check it before creating the thread it is for.
    ///
    /// ```no_run
    /// # fn demo(runtime: &roder_core::Runtime) -> anyhow::Result<()> {
    /// use roder_api::thread_tools::MCP_SERVERS;
    ///
    /// let servers = serde_json::json!({ "time": { "command": "mcp-server-time" } });
    /// runtime.check_thread_tools(MCP_SERVERS, &servers)?;
    /// # Ok(()) }
    /// ```
    pub fn check_thread_tools(
        &self,
        factory: &str,
        declaration: &serde_json::Value,
    ) -> anyhow::Result<()> {
        self.thread_tool_factory(factory)?.check(declaration)
    }

    /// Starts the tool sources `declaration` declares for `thread_id` and
    /// offers their tools to its next turns, in place of what the same
    /// factory started for it before. Emits (and returns)
    /// [`ThreadToolsStarted`]. A source that fails to start is a `failed`
    /// entry there, not an error; a tool whose name an installed or external
    /// tool already has is not offered, and its entry says so.
    ///
    /// What may run on this host is decided here ([`HostAccess`]): nothing
    /// for a runner-bound thread or when local execution is disabled, and
    /// nothing unless the thread's host commands are unconfined themselves.
    ///
    /// ```no_run
    /// # async fn demo(runtime: &roder_core::Runtime) -> anyhow::Result<()> {
    /// use roder_api::thread_tools::MCP_SERVERS;
    ///
    /// let servers = serde_json::json!({
    ///     "probe": { "command": "/opt/tools/probe", "placement": "runner", "enabledTools": ["whereami"] }
    /// });
    /// let started = runtime.start_thread_tools("thread-1", MCP_SERVERS, servers).await?;
    /// for source in started.sources {
    ///     println!("{}: {:?} {:?}", source.name, source.state, source.tools);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn start_thread_tools(
        &self,
        thread_id: &str,
        factory_id: &str,
        declaration: serde_json::Value,
    ) -> anyhow::Result<ThreadToolsStarted> {
        let factory = self.thread_tool_factory(factory_id)?;
        let thread = self.thread_state(thread_id).await?;
        let metadata = self.thread_metadata(thread_id).await?;
        let mut started = factory
            .start(ThreadToolRequest {
                thread_id: thread_id.to_string(),
                workspace: metadata.workspace.clone().into(),
                host: self.host_access(&metadata),
                declaration,
            })
            .await?;
        let current = self.thread_tools.of(thread_id);
        let mut registry = ToolRegistry::new();
        for tool in started.tools {
            let name = tool.spec().name;
            let taken = self.tools.get(&name).is_some()
                || metadata.external_tools.iter().any(|spec| spec.name == name)
                || current
                    .by_factory
                    .iter()
                    .any(|(id, tools)| id != factory_id && tools.get(&name).is_some());
            if taken || registry.register(tool).is_err() {
                not_offered(&mut started.sources, &name);
            }
        }
        let event = ThreadToolsStarted {
            thread_id: thread_id.to_string(),
            factory: factory_id.to_string(),
            sources: started.sources,
        };
        let writer = self.open_writer(&thread).await?;
        let mut cursor = thread.log.lock().await;
        let emitted = self
            .bus
            .emit_locked(
                &mut cursor,
                thread_id,
                None,
                RoderEvent::ThreadToolsStarted(event.clone()),
            )
            .await;
        writer.release_locked(&mut cursor);
        emitted?;
        self.thread_tools.replace(thread_id, factory_id, registry);
        Ok(event)
    }

    /// Stops offering the tools clients declared for `thread_id` and drops
    /// them (their servers stop once no running turn holds them). False if
    /// it had none.
    pub fn stop_thread_tools(&self, thread_id: &str) -> bool {
        self.thread_tools.remove(thread_id)
    }

    fn thread_tool_factory(&self, id: &str) -> anyhow::Result<&Arc<dyn ThreadToolFactory>> {
        self.thread_tool_factories.get(id).ok_or_else(|| {
            let installed: Vec<&str> = self
                .thread_tool_factories
                .keys()
                .map(String::as_str)
                .collect();
            anyhow::anyhow!(
                "tools declared per thread by \"{id}\" are not supported by this runtime (installed: {})",
                if installed.is_empty() {
                    "none".to_string()
                } else {
                    installed.join(", ")
                }
            )
        })
    }

    /// What a client's declaration may run on this host for this thread.
    fn host_access(&self, metadata: &ThreadMetadata) -> HostAccess {
        if metadata.runner_binding.is_some() || !self.allows_local_workspaces() {
            return HostAccess::Forbidden;
        }
        let sandbox = metadata.sandbox.as_ref().unwrap_or(&self.config.sandbox);
        match sandbox.mode {
            SandboxMode::None => HostAccess::Unconfined,
            SandboxMode::Enforce => HostAccess::Confined,
        }
    }
}

/// Takes `name` out of its source's offered tools, saying why.
fn not_offered(sources: &mut [roder_api::thread_tools::ToolSourceStatus], name: &str) {
    for source in sources {
        if let Some(index) = source.tools.iter().position(|tool| tool == name) {
            source.tools.remove(index);
            let note = format!("tool \"{name}\" is not offered: an installed tool has that name");
            source.error = Some(match source.error.take() {
                Some(error) => format!("{error}; {note}"),
                None => note,
            });
        }
    }
}

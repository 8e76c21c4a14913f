//! How extensions install into a runtime.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::approval::SharedApprovalRuleStore;
use crate::checkpoint::WorkspaceCheckpointer;
use crate::inference::InferenceEngine;
use crate::remote_runner::{RemoteRunnerProvider, RemoteRunnerProviderId};
use crate::sandbox_policy::ProtectionReport;
use crate::thread::ThreadStoreFactory;
use crate::thread_tools::ThreadToolFactory;
use crate::tools::ToolContributor;
use crate::workdir::WorkdirMaterializer;

pub type InferenceEngineId = String;
pub type ToolProviderId = String;

/// Collects extensions; `build` checks that ids are unique.
#[derive(Default)]
pub struct ExtensionRegistryBuilder {
    inference_engines: Vec<Arc<dyn InferenceEngine>>,
    thread_store_factory: Option<Arc<dyn ThreadStoreFactory>>,
    remote_runner_providers: Vec<Arc<dyn RemoteRunnerProvider>>,
    tool_contributors: Vec<Arc<dyn ToolContributor>>,
    workdir_materializer: Option<Arc<dyn WorkdirMaterializer>>,
    protection_reports: Vec<Arc<dyn ProtectionReport>>,
    workspace_checkpointers: Vec<Arc<dyn WorkspaceCheckpointer>>,
    thread_tool_factories: Vec<Arc<dyn ThreadToolFactory>>,
    approval_rule_store: Option<SharedApprovalRuleStore>,
    trace_context: Option<Arc<dyn crate::telemetry::TraceContext>>,
    profile_resolver: Option<Arc<dyn crate::profile::ProfileResolver>>,
    duplicate_store: bool,
    duplicate_materializer: bool,
}

impl ExtensionRegistryBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn inference_engine(&mut self, engine: Arc<dyn InferenceEngine>) -> &mut Self {
        self.inference_engines.push(engine);
        self
    }

    /// The store threads persist to. At most one.
    pub fn thread_store_factory(&mut self, factory: Arc<dyn ThreadStoreFactory>) -> &mut Self {
        if self.thread_store_factory.is_some() {
            self.duplicate_store = true;
        }
        self.thread_store_factory = Some(factory);
        self
    }

    pub fn remote_runner_provider(&mut self, provider: Arc<dyn RemoteRunnerProvider>) -> &mut Self {
        self.remote_runner_providers.push(provider);
        self
    }

    pub fn tool_contributor(&mut self, contributor: Arc<dyn ToolContributor>) -> &mut Self {
        self.tool_contributors.push(contributor);
        self
    }

    /// Materializes per-thread working directories. At most one.
    pub fn workdir_materializer(
        &mut self,
        materializer: Arc<dyn WorkdirMaterializer>,
    ) -> &mut Self {
        if self.workdir_materializer.is_some() {
            self.duplicate_materializer = true;
        }
        self.workdir_materializer = Some(materializer);
        self
    }

    /// A backend's report of which sandbox protections it applies here
    /// (`Runtime::sandbox_status`, `roder sandbox status`).
    pub fn protection_report(&mut self, report: Arc<dyn ProtectionReport>) -> &mut Self {
        self.protection_reports.push(report);
        self
    }

    /// Checkpoints of some kind of workspace, for rollback and fork. The
    /// first installed that handles a workspace is its checkpointer.
    pub fn workspace_checkpointer(
        &mut self,
        checkpointer: Arc<dyn WorkspaceCheckpointer>,
    ) -> &mut Self {
        self.workspace_checkpointers.push(checkpointer);
        self
    }

    /// Starts tools a client declares for one thread (MCP servers of an app
    /// server's `thread/start {mcpServers}`, say). Ids are unique.
    pub fn thread_tool_factory(&mut self, factory: Arc<dyn ThreadToolFactory>) -> &mut Self {
        self.thread_tool_factories.push(factory);
        self
    }

    /// Where rules a person keeps for good (`allow_always`,
    /// `reject_always`) are written. Without one, those decisions still
    /// hold for the rest of the runtime's life, and the resolution says
    /// they were not persisted. At most one (the last wins).
    pub fn approval_rule_store(&mut self, store: SharedApprovalRuleStore) -> &mut Self {
        self.approval_rule_store = Some(store);
        self
    }

    /// What turns the runtime's spans into a trace (an OpenTelemetry
    /// exporter), and gives their `traceparent` to pass on. At most one
    /// (the last wins).
    pub fn trace_context(
        &mut self,
        trace_context: Arc<dyn crate::telemetry::TraceContext>,
    ) -> &mut Self {
        self.trace_context = Some(trace_context);
        self
    }

    /// What resolves agent profiles for `thread/start {profile}` and the
    /// like. At most one (the last wins).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use roder_api::extension::ExtensionRegistryBuilder;
    /// use roder_api::profile::{ProfileRequestSpec, ProfileResolver, ProfileSnapshot};
    ///
    /// struct Builtins;
    /// #[async_trait::async_trait]
    /// impl ProfileResolver for Builtins {
    ///     async fn resolve(&self, _: &ProfileRequestSpec, _: Option<&str>) -> anyhow::Result<ProfileSnapshot> {
    ///         Ok(ProfileSnapshot::default())
    ///     }
    /// }
    /// let mut builder = ExtensionRegistryBuilder::new();
    /// builder.profile_resolver(Arc::new(Builtins));
    /// ```
    pub fn profile_resolver(
        &mut self,
        resolver: Arc<dyn crate::profile::ProfileResolver>,
    ) -> &mut Self {
        self.profile_resolver = Some(resolver);
        self
    }

    pub fn build(self) -> anyhow::Result<ExtensionRegistry> {
        if self.duplicate_store {
            anyhow::bail!("more than one thread store factory was installed; install exactly one");
        }
        if self.duplicate_materializer {
            anyhow::bail!("more than one workdir materializer was installed; install at most one");
        }
        let mut inference_engines = BTreeMap::new();
        for engine in self.inference_engines {
            let id = engine.id();
            if inference_engines.insert(id.clone(), engine).is_some() {
                anyhow::bail!("inference engine \"{id}\" is installed twice");
            }
        }
        let mut remote_runner_providers = BTreeMap::new();
        for provider in self.remote_runner_providers {
            let id = provider.id();
            if remote_runner_providers
                .insert(id.clone(), provider)
                .is_some()
            {
                anyhow::bail!("remote runner provider \"{id}\" is installed twice");
            }
        }
        let mut contributor_ids = std::collections::BTreeSet::new();
        for contributor in &self.tool_contributors {
            let id = contributor.id();
            if !contributor_ids.insert(id.clone()) {
                anyhow::bail!("tool contributor \"{id}\" is installed twice");
            }
        }
        let mut thread_tool_factories = BTreeMap::new();
        for factory in self.thread_tool_factories {
            let id = factory.id();
            if thread_tool_factories.insert(id.clone(), factory).is_some() {
                anyhow::bail!("thread tool factory \"{id}\" is installed twice");
            }
        }
        Ok(ExtensionRegistry {
            inference_engines,
            thread_store_factory: self.thread_store_factory,
            remote_runner_providers,
            tool_contributors: self.tool_contributors,
            workdir_materializer: self.workdir_materializer,
            protection_reports: self.protection_reports,
            workspace_checkpointers: self.workspace_checkpointers,
            thread_tool_factories,
            approval_rule_store: self.approval_rule_store,
            trace_context: self.trace_context,
            profile_resolver: self.profile_resolver,
        })
    }
}

/// The installed extensions, ready for a runtime.
#[derive(Clone)]
pub struct ExtensionRegistry {
    pub inference_engines: BTreeMap<InferenceEngineId, Arc<dyn InferenceEngine>>,
    pub thread_store_factory: Option<Arc<dyn ThreadStoreFactory>>,
    pub remote_runner_providers: BTreeMap<RemoteRunnerProviderId, Arc<dyn RemoteRunnerProvider>>,
    pub tool_contributors: Vec<Arc<dyn ToolContributor>>,
    pub workdir_materializer: Option<Arc<dyn WorkdirMaterializer>>,
    pub protection_reports: Vec<Arc<dyn ProtectionReport>>,
    pub workspace_checkpointers: Vec<Arc<dyn WorkspaceCheckpointer>>,
    pub thread_tool_factories: BTreeMap<String, Arc<dyn ThreadToolFactory>>,
    pub approval_rule_store: Option<SharedApprovalRuleStore>,
    pub trace_context: Option<Arc<dyn crate::telemetry::TraceContext>>,
    pub profile_resolver: Option<Arc<dyn crate::profile::ProfileResolver>>,
}

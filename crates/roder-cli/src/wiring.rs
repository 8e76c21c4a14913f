//! Builds a runtime from the settings: the model engines, the JSONL store
//! under `$RODER_HOME/threads`, the builtin tools and every runner provider.

use std::path::Path;
use std::sync::Arc;

use roder_api::extension::ExtensionRegistryBuilder;
use roder_api::inference::InferenceEngine;
use roder_core::{Runtime, RuntimeConfig};
use roder_ext_anthropic::{AnthropicConfig, AnthropicEngine};
use roder_ext_openai::{ApiKeySource, OpenAiChatEngine, OpenAiConfig, OpenAiResponsesEngine};
use roder_ext_runner_docker::{DockerCheckpointer, DockerRunnerProvider};
use roder_ext_runner_git_worktree::{
    GitCheckpointer, GitWorktreeMaterializer, GitWorktreeRunnerProvider,
};
use roder_ext_runner_sprites::{SpritesProviderOptions, SpritesRunnerProvider};
use roder_ext_runner_unix_local::{DirectoryCheckpointer, UnixLocalRunnerProvider};

use crate::config::{ProviderEntry, ProviderKind, Settings};

/// A runtime and the providers the CLI talks to directly.
pub struct Wired {
    pub runtime: Arc<Runtime>,
    pub docker: Arc<DockerRunnerProvider>,
}

impl Wired {
    /// Applies each live sandbox's `on_idle` (docker: paused, woken by the
    /// thread's next turn) and removes warm-pool containers nobody claimed;
    /// call before exiting.
    pub async fn shutdown(&self) {
        self.runtime.settle_checkpoint_collections().await;
        for (thread_id, outcome) in self.runtime.release_idle_runners().await {
            if let Err(error) = outcome {
                tracing::warn!("thread {thread_id}: its sandbox was left as it is: {error:#}");
            }
        }
        if let Err(error) = self.docker.shutdown_pool().await {
            tracing::warn!("could not remove the docker warm pool: {error:#}");
        }
    }
}

/// A runtime for `workspace`, with `adjust` applied to its config.
pub fn runtime(
    settings: &Settings,
    workspace: &Path,
    adjust: impl FnOnce(&mut RuntimeConfig),
) -> anyhow::Result<Wired> {
    let docker = Arc::new(DockerRunnerProvider::default().with_home_id(&settings.home_id)?);
    let mut builder = ExtensionRegistryBuilder::new();
    for (name, entry) in &settings.providers {
        builder.inference_engine(engine(name, entry)?);
    }
    builder.thread_store_factory(crate::config::store::factory(settings)?);
    // Profiles for thread/start {profile} (`roder exec` resolves its own
    // before the runtime exists).
    builder.profile_resolver(Arc::new(crate::profiles_cmd::resolver(settings, None)));
    builder.tool_contributor(roder_tools::builtin_coding_tools_contributor(workspace)?);
    crate::mcp_tools::install(&mut builder, settings, workspace)?;
    builder.remote_runner_provider(Arc::new(UnixLocalRunnerProvider::default()));
    let sprites = Arc::new(SpritesRunnerProvider::new(SpritesProviderOptions {
        credential_vars: settings.credential_vars(),
        ..SpritesProviderOptions::default()
    }));
    builder.remote_runner_provider(sprites.clone());
    crate::protection_reports::install(&mut builder, &docker, &sprites);
    builder.remote_runner_provider(docker.clone());
    builder.remote_runner_provider(Arc::new(GitWorktreeRunnerProvider::new(
        settings.worktrees_dir(),
    )));
    // Per-turn checkpoints of worktree threads and of local workspaces in
    // a git repository (rollback, fork); forks become worktrees here.
    builder.workspace_checkpointer(Arc::new(GitCheckpointer::new(settings.worktrees_dir())));
    builder.workspace_checkpointer(Arc::new(DirectoryCheckpointer::new(
        settings.home.join("checkpoints"),
    )));
    // Docker threads whose destination says `"checkpoints": "per_turn"`.
    builder.workspace_checkpointer(Arc::new(DockerCheckpointer::new(docker.clone())));
    builder.workdir_materializer(Arc::new(GitWorktreeMaterializer::new(
        settings.worktrees_dir(),
    )));
    if let Some(context) = crate::telemetry::trace_context() {
        builder.trace_context(context);
    }
    // `allow_always` / `reject_always` rules go to config.toml.
    builder.approval_rule_store(Arc::new(crate::config::ConfigRuleStore {
        path: settings.config_path(),
    }));
    let mut config = RuntimeConfig {
        default_provider: settings.model.provider.clone(),
        default_model: settings.model.model.clone(),
        workspace: Some(workspace.display().to_string()),
        sandbox: settings.sandbox.clone(),
        credential_vars: settings.credential_vars(),
        auto_compact_token_limit: settings.auto_compact_token_limit,
        writer_lease_ttl: settings.writer_lease_ttl_secs.map_or(
            RuntimeConfig::default().writer_lease_ttl,
            std::time::Duration::from_secs,
        ),
        reasoning: settings.reasoning_effort,
        policy_mode: settings.policy_mode.unwrap_or_default(),
        approvals: settings.approvals.clone(),
        telemetry_capture_content: settings
            .telemetry
            .as_ref()
            .is_some_and(|telemetry| telemetry.capture_content),
        named_runners: named_runners(settings),
        checkpoint_keep_turns: Some(settings.checkpoint_keep_turns),
        ..RuntimeConfig::default()
    };
    adjust(&mut config);
    let runtime = Arc::new(Runtime::new(builder.build()?, config)?);
    crate::telemetry::watch(&runtime);
    Ok(Wired { runtime, docker })
}

/// `[runners.NAME]` as selections a profile's `runner` can name. One that
/// cannot be made (no workspace path for its provider) is left out with a
/// warning; a profile naming it then gets the runtime's "not configured".
fn named_runners(
    settings: &Settings,
) -> std::collections::BTreeMap<String, roder_core::ThreadRunnerSelection> {
    settings
        .runners
        .keys()
        .filter_map(|name| match crate::exec::runner_selection(settings, name) {
            Ok(selection) => Some((name.clone(), selection)),
            Err(error) => {
                tracing::warn!("runner \"{name}\" cannot be named by a profile: {error:#}");
                None
            }
        })
        .collect()
}

fn engine(name: &str, entry: &ProviderEntry) -> anyhow::Result<Arc<dyn InferenceEngine>> {
    Ok(match entry.kind {
        ProviderKind::OpenaiChat | ProviderKind::OpenaiResponses => {
            let mut config = OpenAiConfig::openai();
            config.id = name.to_string();
            if let Some(base_url) = &entry.base_url {
                config.base_url = base_url.clone();
            }
            config.api_key = api_key(name, entry);
            if entry.context_window.is_some() {
                config.context_window = entry.context_window;
            }
            if entry.kind == ProviderKind::OpenaiChat {
                Arc::new(OpenAiChatEngine::new(config)?)
            } else {
                Arc::new(OpenAiResponsesEngine::new(config)?)
            }
        }
        ProviderKind::Anthropic => {
            let mut config = AnthropicConfig::anthropic();
            config.id = name.to_string();
            if let Some(base_url) = &entry.base_url {
                config.base_url = base_url.clone();
            }
            config.api_key = api_key(name, entry);
            if entry.context_window.is_some() {
                config.context_window = entry.context_window;
            }
            Arc::new(AnthropicEngine::new(config)?)
        }
    })
}

/// Where provider `name`'s key comes from: its `api_key_env`, else the
/// vendor's own variable for Anthropic and the built-in `openai`; a custom
/// OpenAI-compatible server without one is a local server and sends none.
pub fn api_key(name: &str, entry: &ProviderEntry) -> ApiKeySource {
    match (&entry.api_key_env, entry.kind) {
        (Some(variable), _) => ApiKeySource::env(variable),
        (None, ProviderKind::Anthropic) => AnthropicConfig::anthropic().api_key,
        (None, _) if name == "openai" => OpenAiConfig::openai().api_key,
        (None, _) => ApiKeySource::None,
    }
}

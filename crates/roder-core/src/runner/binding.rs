//! Turning a client's runner selection into a persisted thread binding.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use roder_api::remote_runner::{
    RemoteRunnerProvider, RunnerDestination, RunnerManifest, ThreadRunnerBinding,
};

use roder_api::runner_workspace::{WORKSPACE_CONFIG_KEY, bound_workspace};
use roder_api::sandbox_policy::{SANDBOX_CONFIG_KEY, SandboxPolicy};

use crate::requests::ThreadRunnerSelection;

pub(crate) type Providers = BTreeMap<String, Arc<dyn RemoteRunnerProvider>>;

/// The installed provider `provider_id`, or an error listing what is installed.
pub(crate) fn provider<'a>(
    providers: &'a Providers,
    provider_id: &str,
) -> anyhow::Result<&'a Arc<dyn RemoteRunnerProvider>> {
    providers.get(provider_id).ok_or_else(|| {
        let installed: Vec<&str> = providers.keys().map(String::as_str).collect();
        anyhow::anyhow!(
            "remote runner provider \"{provider_id}\" is not installed (installed: {})",
            if installed.is_empty() {
                "none".to_string()
            } else {
                installed.join(", ")
            }
        )
    })
}

fn absolute_runner_path(value: &str, what: &str) -> anyhow::Result<PathBuf> {
    let path = PathBuf::from(value);
    if !path.is_absolute() {
        anyhow::bail!("runner {what} \"{value}\" must be an absolute path on the runner");
    }
    Ok(path)
}

/// Validates an explicit selection for thread `thread_id`. The destination id
/// is `thread-<thread_id>`: each explicitly bound thread has its own.
pub(crate) async fn bind_selection(
    providers: &Providers,
    thread_id: &str,
    selection: &ThreadRunnerSelection,
    sandbox: SandboxChoice<'_>,
) -> anyhow::Result<ThreadRunnerBinding> {
    let provider = provider(providers, &selection.provider_id)?;
    let workspace = absolute_runner_path(&selection.workspace, "workspace")?;
    let read_roots = selection
        .read_roots
        .iter()
        .map(|root| absolute_runner_path(root, "read root"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let destination = RunnerDestination {
        id: format!("thread-{thread_id}"),
        provider_id: selection.provider_id.clone(),
        config: with_sandbox(
            with_bound_workspace(&selection.config, &selection.workspace)?,
            sandbox,
        )?,
        default_manifest: RunnerManifest::default(),
    };
    check_on_idle(provider.as_ref(), &destination.config)?;
    provider.validate_destination(&destination).await?;
    Ok(ThreadRunnerBinding {
        destination,
        workspace,
        read_roots,
    })
}

/// The binding a runtime-level destination gives a new thread, when a
/// workspace is known for it: the config's `working_dir`, else the provider's
/// default workspace. `None` leaves the thread unbound.
pub(crate) fn auto_binding(
    providers: &Providers,
    destination: &RunnerDestination,
    sandbox: SandboxChoice<'_>,
) -> anyhow::Result<Option<ThreadRunnerBinding>> {
    let provider = provider(providers, &destination.provider_id)?;
    let configured = destination
        .config
        .get("working_dir")
        .and_then(serde_json::Value::as_str)
        .map(str::to_string);
    let Some(workspace) = configured.or_else(|| provider.default_workspace()) else {
        return Ok(None);
    };
    check_on_idle(provider.as_ref(), &destination.config)?;
    let mut destination = destination.clone();
    destination.config = with_sandbox(
        with_bound_workspace(&destination.config, &workspace)?,
        sandbox,
    )?;
    Ok(Some(ThreadRunnerBinding {
        destination,
        workspace: absolute_runner_path(&workspace, "working_dir")?,
        read_roots: Vec::new(),
    }))
}

/// Refuses an `on_idle` the provider cannot honour, when the thread is
/// bound, instead of when it goes idle.
fn check_on_idle(
    provider: &dyn roder_api::remote_runner::RemoteRunnerProvider,
    config: &serde_json::Value,
) -> anyhow::Result<()> {
    roder_api::runner_idle::on_idle(config, provider.capabilities().pausable)
        .map(|_| ())
        .map_err(anyhow::Error::msg)
}

/// `config` with the bound workspace under [`WORKSPACE_CONFIG_KEY`], so the
/// provider resolves files and runs commands in the root the tools use. A
/// config that already names a different workspace is refused.
fn with_bound_workspace(
    config: &serde_json::Value,
    workspace: &str,
) -> anyhow::Result<serde_json::Value> {
    let mut object = match config {
        serde_json::Value::Null => serde_json::Map::new(),
        serde_json::Value::Object(object) => object.clone(),
        other => anyhow::bail!("runner config must be a JSON object, not {other}"),
    };
    match bound_workspace(config) {
        Some(existing) if existing != workspace => anyhow::bail!(
            "runner config \"{WORKSPACE_CONFIG_KEY}\" is \"{existing}\" but the thread is bound at \"{workspace}\"; they must be the same"
        ),
        _ => {}
    }
    object.insert(
        WORKSPACE_CONFIG_KEY.to_string(),
        serde_json::Value::String(workspace.to_string()),
    );
    Ok(serde_json::Value::Object(object))
}

/// Which sandbox policy a new binding carries to its provider.
#[derive(Clone, Copy)]
pub(crate) struct SandboxChoice<'a> {
    /// The thread's own policy: wins over the destination's.
    pub thread: Option<&'a SandboxPolicy>,
    /// Variables no command may see: removed from what the policy passes or
    /// sets, so a provider that knows only the usual names still never
    /// hands a configured provider's key to a sandbox.
    pub credentials: &'a [String],
}

/// `config` with the policy the provider enforces under
/// [`SANDBOX_CONFIG_KEY`]: the thread's own when it has one (a provider that
/// does not know the key refuses the binding rather than ignore it), else
/// the destination's own, checked here so a typo fails at thread creation.
/// Without either, the provider applies its default confinement.
fn with_sandbox(
    mut config: serde_json::Value,
    choice: SandboxChoice<'_>,
) -> anyhow::Result<serde_json::Value> {
    let mut policy: SandboxPolicy = match (choice.thread, config.get(SANDBOX_CONFIG_KEY)) {
        (Some(policy), _) => policy.clone(),
        (None, Some(own)) => serde_json::from_value(own.clone()).map_err(|error| {
            anyhow::anyhow!(
                "runner config \"{SANDBOX_CONFIG_KEY}\" is not a sandbox policy: {error}"
            )
        })?,
        (None, None) => return Ok(config),
    };
    let secret = |name: &String| choice.credentials.contains(name);
    policy.env.pass.retain(|name| !secret(name));
    policy.env.set.retain(|name, _| !secret(name));
    if let serde_json::Value::Object(object) = &mut config {
        object.insert(
            SANDBOX_CONFIG_KEY.to_string(),
            serde_json::to_value(policy)?,
        );
    }
    Ok(config)
}

/// The policy a binding's provider enforces (what [`with_sandbox`] wrote).
pub(crate) fn binding_sandbox(binding: &ThreadRunnerBinding) -> Option<SandboxPolicy> {
    binding
        .destination
        .config
        .get(SANDBOX_CONFIG_KEY)
        .and_then(|value| serde_json::from_value(value.clone()).ok())
}

//! The provider: turns destinations into sprites and persisted state back
//! into sessions.
//!
//! The token is looked up each time a session is created, resumed or
//! rejoined, never stored in config or state, so rotating `SPRITES_TOKEN`
//! takes effect on the next session without touching persisted threads.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerProviderId, RemoteRunnerSession, RunnerCapabilities,
    RunnerDestination, RunnerMountCapabilities, RunnerSessionState,
};
use roder_api::sandbox_policy::{Protection, SandboxPolicy};

use crate::client::{ApiToken, ExecCall, Repeat, SpritesClient};
use crate::config::{Cleanup, DEFAULT_WORKING_DIR, PersistedSession, SpritesConfig};
use crate::error::SpritesError;
use crate::exec::{CommandSandbox, environment};
use crate::exec_frames::{DEFAULT_STREAM_LIMIT, ExecCollector};
use crate::retry::RetryPolicy;
use crate::sandbox;
use crate::session::SpritesSession;
use crate::{API_URL_ENV, DEFAULT_API_URL, PROVIDER_ID, TOKEN_ENV};

/// Connecting must not hang a session start when the API is unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Generated names tried before giving up when each one is taken (409).
const NAME_ATTEMPTS: usize = 3;

/// Where the API token comes from.
#[derive(Clone, Default)]
pub enum TokenSource {
    /// The `SPRITES_TOKEN` environment variable, read at each session start.
    #[default]
    Env,
    /// A fixed token (tests, embedders with their own secret store). An empty
    /// string counts as no token.
    Static(String),
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenSource::Env => write!(f, "Env({TOKEN_ENV})"),
            TokenSource::Static(_) => f.write_str("Static(<redacted>)"),
        }
    }
}

/// Where the variables a sandbox policy passes through (`env.pass`, `LANG`,
/// `TERM`) are read from.
#[derive(Clone, Default)]
pub enum HostEnv {
    /// Roder's own process environment, read at each session start.
    #[default]
    Process,
    /// A fixed set (tests, embedders), so nothing reads the process
    /// environment.
    Static(Vec<(String, String)>),
}

impl fmt::Debug for HostEnv {
    /// Names only: values may be secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostEnv::Process => f.write_str("Process"),
            HostEnv::Static(vars) => f
                .debug_tuple("Static")
                .field(&vars.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>())
                .finish(),
        }
    }
}

impl HostEnv {
    fn vars(&self) -> Vec<(String, String)> {
        match self {
            HostEnv::Process => std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
            HostEnv::Static(vars) => vars.clone(),
        }
    }
}

/// How a [`SpritesRunnerProvider`] finds the API.
#[derive(Debug, Clone, Default)]
pub struct SpritesProviderOptions {
    /// The token's source; [`TokenSource::Env`] by default.
    pub token: TokenSource,
    /// Base URL when a destination names none. `None` reads `SPRITES_API_URL`,
    /// falling back to `https://api.sprites.dev`.
    pub base_url: Option<String>,
    /// Retry bounds for idempotent requests.
    pub retry: RetryPolicy,
    /// Where passed-through variables come from; the process by default.
    pub host_env: HostEnv,
    /// Credential variables never sent to a sprite, besides
    /// `roder_api::sandbox_policy::KNOWN_CREDENTIAL_VARS` (e.g. the
    /// configured providers' key variables).
    pub credential_vars: Vec<String>,
}

/// Runner provider for Fly.io Sprites.
pub struct SpritesRunnerProvider {
    options: SpritesProviderOptions,
    /// Built once and shared by every session (one connection pool). Kept as
    /// a `Result` so a TLS set-up failure surfaces as a session error, not a
    /// panic in `Default`.
    http: Result<reqwest::Client, String>,
}

impl Default for SpritesRunnerProvider {
    /// Reads the token from `SPRITES_TOKEN` and the base URL from
    /// `SPRITES_API_URL` (else the public API) when sessions start.
    fn default() -> Self {
        Self::new(SpritesProviderOptions::default())
    }
}

impl fmt::Debug for SpritesRunnerProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpritesRunnerProvider")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl SpritesRunnerProvider {
    /// A provider with explicit options.
    pub fn new(options: SpritesProviderOptions) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!(
                "roder-ext-runner-sprites/",
                env!("CARGO_PKG_VERSION")
            ))
            .build()
            .map_err(|err| format!("cannot build the HTTP client: {err}"));
        Self { options, http }
    }

    fn token(&self) -> Result<ApiToken, SpritesError> {
        let raw = match &self.options.token {
            TokenSource::Env => std::env::var(TOKEN_ENV).unwrap_or_default(),
            TokenSource::Static(token) => token.clone(),
        };
        ApiToken::new(raw).ok_or(SpritesError::MissingToken)
    }

    fn default_base_url(&self) -> String {
        if let Some(url) = &self.options.base_url {
            return url.clone();
        }
        match std::env::var(API_URL_ENV) {
            Ok(url) if !url.trim().is_empty() => url,
            _ => DEFAULT_API_URL.to_string(),
        }
    }

    fn client(&self, base_url: String) -> anyhow::Result<SpritesClient> {
        let token = self.token()?;
        let http = self.http.clone().map_err(anyhow::Error::msg)?;
        Ok(SpritesClient::new(
            http,
            base_url,
            token,
            self.options.retry.clone(),
        ))
    }

    /// What a session's sprite enforces of `policy`, and what it does not,
    /// with why: one [`Protection`] per protection, for `roder sandbox status`
    /// and `runners/list`.
    ///
    /// ```
    /// use roder_api::sandbox_policy::SandboxPolicy;
    /// use roder_ext_runner_sprites::SpritesRunnerProvider;
    ///
    /// let list = SpritesRunnerProvider::default().protections(&SandboxPolicy::default());
    /// let network = list.iter().find(|p| p.name == "network").unwrap();
    /// assert!(network.active);
    /// let memory = list.iter().find(|p| p.name == "memory").unwrap();
    /// assert!(!memory.active);
    /// ```
    pub fn protections(&self, policy: &SandboxPolicy) -> Vec<Protection> {
        sandbox::protections(policy)
    }

    /// What every command of a session gets from `policy`, with the host's
    /// variables filtered now so no secret is kept in the session.
    fn command_sandbox(&self, policy: &SandboxPolicy) -> CommandSandbox {
        let credentials = sandbox::credential_names(&self.options.credential_vars);
        CommandSandbox {
            base_env: sandbox::base_env(policy, self.options.host_env.vars(), &credentials),
            credentials,
            output_limit: policy
                .limits
                .output_bytes
                .and_then(|bytes| usize::try_from(bytes).ok())
                .unwrap_or(DEFAULT_STREAM_LIMIT),
        }
    }

    fn parse_destination(&self, destination: &RunnerDestination) -> anyhow::Result<SpritesConfig> {
        if destination.provider_id != PROVIDER_ID {
            anyhow::bail!(
                "destination \"{}\" is for runner provider \"{}\", not \"{PROVIDER_ID}\"",
                destination.id,
                destination.provider_id
            );
        }
        Ok(SpritesConfig::parse(
            &destination.config,
            &self.default_base_url(),
        )?)
    }

    /// Reattaches to the sprite named in `state`; fails if it is gone.
    async fn attach(
        &self,
        state: RunnerSessionState,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        if state.provider_id != PROVIDER_ID {
            anyhow::bail!(
                "runner state belongs to provider \"{}\", not \"{PROVIDER_ID}\"",
                state.provider_id
            );
        }
        let persisted = PersistedSession::from_state(
            &state.session_id,
            &state.metadata,
            &self.default_base_url(),
        )?;
        let client = self.client(persisted.base_url.clone())?;
        if client.get_sprite(&persisted.name).await?.is_none() {
            return Err(SpritesError::SpriteNotFound {
                name: persisted.name,
                action: "resuming the runner session".to_string(),
            }
            .into());
        }
        // Set again: someone may have changed the sprite's policy since.
        apply_network_policy(&client, &persisted.name, &persisted.sandbox).await?;
        let sandbox = self.command_sandbox(&persisted.sandbox);
        Ok(Arc::new(SpritesSession::new(
            client,
            persisted,
            sandbox,
            state.destination_id,
            state.snapshot,
        )))
    }
}

#[async_trait::async_trait]
impl RemoteRunnerProvider for SpritesRunnerProvider {
    fn id(&self) -> RemoteRunnerProviderId {
        PROVIDER_ID.to_string()
    }

    /// Not `pausable`: sprites hibernate by themselves after ~30 s idle and
    /// wake on the next request. `detachable`: the sprite outlives the handle
    /// and is found again by name.
    fn capabilities(&self) -> RunnerCapabilities {
        RunnerCapabilities {
            command_exec: true,
            file_read: true,
            file_write: true,
            port_preview: true,
            snapshots: true,
            cancellation: true,
            artifact_export: false,
            mounts: RunnerMountCapabilities::default(),
            pausable: false,
            detachable: true,
        }
    }

    fn setup_hint(&self) -> Option<String> {
        match self.token() {
            Ok(_) => None,
            Err(_) => Some(format!(
                "set the {TOKEN_ENV} environment variable to a Sprites API token to use the sprites runner"
            )),
        }
    }

    /// [`DEFAULT_WORKING_DIR`], the root a destination without
    /// `working_dir` works in. The runtime binds threads there and passes the
    /// bound workspace back in the config (`workspace`).
    fn default_workspace(&self) -> Option<String> {
        Some(DEFAULT_WORKING_DIR.to_string())
    }

    /// Checks the config, including that its `working_dir`, if set, is the
    /// workspace the thread is bound at (`workspace`), and that a token is
    /// set. Sends no request.
    async fn validate_destination(&self, destination: &RunnerDestination) -> anyhow::Result<()> {
        self.parse_destination(destination)?;
        self.token()?;
        Ok(())
    }

    /// Creates (or, with `sprite_name`, adopts) a sprite and makes sure the
    /// working directory exists. A sprite this call created is deleted again
    /// if preparing it fails and cleanup is `delete-on-close`.
    async fn create_session(
        &self,
        destination: RunnerDestination,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        let config = self.parse_destination(&destination)?;
        let client = self.client(config.base_url.clone())?;
        let (name, created) = match &config.sprite_name {
            Some(name) => match client.get_sprite(name).await? {
                Some(_) => (name.clone(), false),
                None => match client.create_sprite(name).await {
                    Ok(sprite) => (sprite.name, true),
                    // Someone made it between the lookup and the create: adopt it.
                    Err(SpritesError::NameTaken { .. }) => (name.clone(), false),
                    Err(err) => return Err(err.into()),
                },
            },
            None => (create_generated(&client, &config).await?, true),
        };
        let sandbox = self.command_sandbox(&config.sandbox);
        // The network policy first: no command may run before it holds.
        let prepared = match apply_network_policy(&client, &name, &config.sandbox).await {
            Ok(()) => make_working_dir(&client, &name, &config.working_dir, &sandbox)
                .await
                .map_err(|err| {
                    err.context(format!(
                        "could not make working_dir {} in sprite \"{name}\"",
                        config.working_dir
                    ))
                }),
            Err(err) => Err(err),
        };
        if let Err(err) = prepared {
            if created && config.cleanup == Cleanup::DeleteOnClose {
                // Best effort: the original error matters more than a failed clean-up.
                let deleted = client.delete_sprite(&name).await.is_ok();
                return Err(err.context(format!(
                    "sprite \"{name}\" was created but could not be prepared, so it was {}",
                    if deleted {
                        "deleted again"
                    } else {
                        "to be deleted, but deleting it failed too"
                    }
                )));
            }
            return Err(err);
        }
        let persisted = PersistedSession {
            name,
            working_dir: config.working_dir,
            base_url: config.base_url,
            cleanup: config.cleanup,
            sandbox: config.sandbox,
        };
        Ok(Arc::new(SpritesSession::new(
            client,
            persisted,
            sandbox,
            destination.id,
            None,
        )))
    }

    async fn resume_session(
        &self,
        state: RunnerSessionState,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        self.attach(state).await
    }

    /// Same as resume: a sprite is found by name, whatever the handle did.
    async fn rejoin_session(
        &self,
        state: RunnerSessionState,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        self.attach(state).await
    }
}

/// Creates a sprite under a generated name, drawing a new name when one is
/// taken (409), at most [`NAME_ATTEMPTS`] times.
async fn create_generated(
    client: &SpritesClient,
    config: &SpritesConfig,
) -> anyhow::Result<String> {
    let mut last = None;
    for _ in 0..NAME_ATTEMPTS {
        match client.create_sprite(&config.generate_name()).await {
            Ok(sprite) => return Ok(sprite.name),
            Err(err @ SpritesError::NameTaken { .. }) => last = Some(err),
            Err(err) => return Err(err.into()),
        }
    }
    let last = last.map_or_else(String::new, |err| format!(" (last: {err})"));
    anyhow::bail!(
        "{NAME_ATTEMPTS} generated sprite names with prefix \"{}\" were all taken{last}; set another sprite_name_prefix",
        config.sprite_name_prefix
    )
}

/// `mkdir -p` the working directory: the first exec after a create. It runs
/// from `/` (the directory may not exist yet) with the path made relative to
/// `/`: the same directory on a sprite, and inside the sprite's directory on
/// a fake server that runs commands on its host. Being idempotent, it is
/// retried on 5xx as well as while the new sprite is "not ready".
async fn make_working_dir(
    client: &SpritesClient,
    name: &str,
    dir: &str,
    sandbox: &CommandSandbox,
) -> anyhow::Result<()> {
    let relative = dir.trim_start_matches('/');
    if relative.is_empty() {
        return Ok(());
    }
    let call = ExecCall {
        argv: vec!["mkdir".into(), "-p".into(), "--".into(), relative.into()],
        dir: "/".into(),
        env: environment(sandbox, &[]),
    };
    let mut collector = ExecCollector::default();
    client
        .exec(name, &call, Repeat::Idempotent, &mut collector)
        .await?;
    let output = collector.take_output();
    if output.exit_code != Some(0) {
        anyhow::bail!(
            "mkdir -p {dir} in sprite \"{name}\" exited with code {}: {}",
            output
                .exit_code
                .map_or_else(|| "unknown".to_string(), |c| c.to_string()),
            output.stderr.trim()
        );
    }
    Ok(())
}

/// Sets sprite `name`'s network policy from `policy` (nothing with
/// `mode = "none"`). A failure refuses the session: commands must not run
/// with a network the policy says is off, and not in silence either.
async fn apply_network_policy(
    client: &SpritesClient,
    name: &str,
    policy: &SandboxPolicy,
) -> anyhow::Result<()> {
    let Some(rules) = sandbox::network_rules(policy) else {
        return Ok(());
    };
    client
        .set_network_policy(name, &rules)
        .await
        .map_err(|err| {
            let wanted = if policy.network.allows() {
                "no restriction (sandbox network = \"on\")"
            } else {
                "deny all egress (sandbox network = \"off\")"
            };
            anyhow::Error::new(err).context(format!(
                "could not set the network policy of sprite \"{name}\" to {wanted}, so no command runs there; fix the cause above, or opt out of the sandbox with [sandbox] mode = \"none\""
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_tokens_never_print() {
        let provider = SpritesRunnerProvider::new(SpritesProviderOptions {
            token: TokenSource::Static("s3cret".into()),
            ..Default::default()
        });
        assert!(!format!("{provider:?}").contains("s3cret"));
        assert_eq!(provider.setup_hint(), None);
    }

    #[test]
    fn the_setup_hint_names_the_variable() {
        let provider = SpritesRunnerProvider::new(SpritesProviderOptions {
            token: TokenSource::Static(String::new()),
            ..Default::default()
        });
        assert!(provider.setup_hint().unwrap().contains(TOKEN_ENV));
    }

    #[test]
    fn capabilities_match_the_platform() {
        let caps = SpritesRunnerProvider::default().capabilities();
        assert!(caps.command_exec && caps.file_read && caps.file_write);
        assert!(caps.snapshots && caps.cancellation && caps.port_preview && caps.detachable);
        assert!(!caps.pausable && !caps.artifact_export);
        assert_eq!(
            SpritesRunnerProvider::default()
                .default_workspace()
                .as_deref(),
            Some(DEFAULT_WORKING_DIR)
        );
    }
}

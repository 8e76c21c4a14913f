//! One sandbox policy for every backend: where commands may write, whether
//! they reach the network, what environment they see and what they may use.
//!
//! The policy is data. Each backend enforces it with what it has: Landlock
//! and namespaces for host commands (`roder-sandbox`), container settings for
//! docker, the provider's API for hosted sandboxes. What a backend can't
//! enforce it reports ([`Protection`]), and commands are refused rather than
//! run unconfined in silence unless the policy says `mode = "none"`.
//!
//! The runtime hands the policy to tools in `ToolExecutionContext` and to
//! runner providers in the destination config under [`SANDBOX_CONFIG_KEY`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The destination-config key holding a thread's [`SandboxPolicy`].
pub const SANDBOX_CONFIG_KEY: &str = "sandbox";

/// The environment every confined command gets, from Roder's own (when set).
pub const BASE_ENV: &[&str] = &["PATH", "HOME", "LANG", "TERM"];

/// How commands are confined.
///
/// ```
/// use roder_api::sandbox_policy::SandboxPolicy;
///
/// let policy: SandboxPolicy = toml_like(r#"{"network": "on", "writable_roots": ["/opt/cache"]}"#);
/// assert!(policy.network.allows());
/// assert_eq!(policy.mode, roder_api::sandbox_policy::SandboxMode::Enforce);
/// # fn toml_like(json: &str) -> SandboxPolicy { serde_json::from_str(json).unwrap() }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    /// How host commands are confined (local workspaces, unix-local and
    /// git-worktree runners); container and hosted backends have their own.
    pub mechanism: HostMechanism,
    /// Where commands may write besides the workspace and their private
    /// temporary directory. Absolute paths.
    pub writable_roots: Vec<PathBuf>,
    pub network: NetworkAccess,
    pub env: EnvPolicy,
    pub limits: ResourceLimits,
}

/// Whether the policy is enforced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Confine every command with what the backend offers; refuse commands
    /// where nothing works.
    #[default]
    Enforce,
    /// Run commands unconfined (the environment is still filtered). An
    /// explicit opt-out, never a fallback.
    None,
}

/// The kernel mechanism that confines host commands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostMechanism {
    /// Landlock (no privileges, set up once per workspace, well under a
    /// millisecond per command): filesystem writes outside the writable
    /// roots and, when the network is off, TCP connect and bind are refused.
    #[default]
    Landlock,
    /// Bubblewrap namespaces (a few milliseconds per command): a read-only
    /// mount of everything but the writable roots, no network of any kind,
    /// its own process tree, and `.git/hooks` and `.git/config` mounted
    /// read-only. (Not combined with Landlock, which forbids the mount
    /// changes bubblewrap makes.)
    Bubblewrap,
}

/// Network access of sandboxed commands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkAccess {
    #[default]
    Off,
    On,
}

impl NetworkAccess {
    pub fn allows(self) -> bool {
        matches!(self, NetworkAccess::On)
    }
}

/// What a command's environment holds: [`BASE_ENV`], the variables named in
/// `pass` (from Roder's environment) and those in `set`. Never a credential
/// of a configured provider, whatever these say.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvPolicy {
    /// Variable names, or [`PASS_ALL`] for every variable.
    pub pass: Vec<String>,
    pub set: BTreeMap<String, String>,
}

/// Resource bounds; `None` leaves a resource to the backend's default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResourceLimits {
    /// Processes (and threads) a sandbox may run at once.
    pub max_processes: Option<u64>,
    pub memory_mib: Option<u64>,
    /// CPU share, in cores (`1.5` = one and a half).
    pub cpus: Option<f64>,
    /// Bytes of a command's output kept (the rest is cut, and the cut said).
    pub output_bytes: Option<u64>,
    /// What a sandbox may write to its own disk, where the backend bounds it.
    pub disk_mib: Option<u64>,
}

/// An `env.pass` entry that passes every variable of Roder's environment
/// (credentials still excepted): for a Roder that runs inside a container
/// that is itself the sandbox, such as an evaluation harness's task
/// container, whose commands expect the image's whole environment.
///
/// ```
/// use roder_api::sandbox_policy::{PASS_ALL, SandboxPolicy};
///
/// let mut policy = SandboxPolicy::default();
/// policy.env.pass = vec![PASS_ALL.into()];
/// let host = [("PATH", "/bin"), ("JAVA_HOME", "/j"), ("OPENAI_API_KEY", "sk-x")]
///     .map(|(k, v)| (k.to_string(), v.to_string()));
/// let env = policy.command_env(host, &["OPENAI_API_KEY".to_string()]);
/// assert_eq!(env.get("JAVA_HOME").map(String::as_str), Some("/j"));
/// assert!(!env.contains_key("OPENAI_API_KEY"));
/// ```
pub const PASS_ALL: &str = "*";

impl SandboxPolicy {
    /// The environment of a confined command, from `host` (Roder's own
    /// environment). `credentials` names variables that hold a configured
    /// provider's secret: they are never passed, even when `pass` or `set`
    /// names them.
    ///
    /// ```
    /// use roder_api::sandbox_policy::SandboxPolicy;
    ///
    /// let mut policy = SandboxPolicy::default();
    /// policy.env.pass = vec!["CARGO_HOME".into(), "OPENAI_API_KEY".into()];
    /// let host = [("PATH", "/bin"), ("CARGO_HOME", "/c"), ("OPENAI_API_KEY", "sk-x"), ("SECRET", "s")]
    ///     .map(|(k, v)| (k.to_string(), v.to_string()));
    /// let env = policy.command_env(host, &["OPENAI_API_KEY".to_string()]);
    /// assert_eq!(env.get("PATH").map(String::as_str), Some("/bin"));
    /// assert_eq!(env.get("CARGO_HOME").map(String::as_str), Some("/c"));
    /// assert!(!env.contains_key("OPENAI_API_KEY"));
    /// assert!(!env.contains_key("SECRET"));
    /// ```
    pub fn command_env(
        &self,
        host: impl IntoIterator<Item = (String, String)>,
        credentials: &[String],
    ) -> BTreeMap<String, String> {
        let denied = |name: &str| credentials.iter().any(|secret| secret == name);
        let mut env: BTreeMap<String, String> = host
            .into_iter()
            .filter(|(name, _)| {
                BASE_ENV.contains(&name.as_str())
                    || self
                        .env
                        .pass
                        .iter()
                        .any(|pass| pass == name || pass == PASS_ALL)
            })
            .filter(|(name, _)| !denied(name))
            .collect();
        for (name, value) in &self.env.set {
            if !denied(name) {
                env.insert(name.clone(), value.clone());
            }
        }
        env
    }
}

/// The credential variables Roder knows of, whatever the configuration:
/// the engines' and providers' documented key variables.
pub const KNOWN_CREDENTIAL_VARS: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "SPRITES_TOKEN",
    "OPENROUTER_API_KEY",
    "GITHUB_TOKEN",
    "GH_TOKEN",
];

/// One protection a backend applies, or not, on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protection {
    /// What it protects: `"filesystem writes"`, `"network"`, `".git/hooks"`,
    /// `"processes"`, `"memory"`, ...
    pub name: String,
    pub active: bool,
    /// By what it is enforced, or why it is not.
    pub detail: String,
}

/// A backend that can say which protections of a policy it enforces on
/// this machine: the local host mechanism, a container engine, a hosted
/// sandbox. Installed with `ExtensionRegistryBuilder::protection_report`.
///
/// ```
/// use roder_api::sandbox_policy::{Protection, ProtectionReport, SandboxPolicy};
///
/// struct Nothing;
/// impl ProtectionReport for Nothing {
///     fn backend(&self) -> String { "none".into() }
///     fn protections(&self, _policy: &SandboxPolicy) -> Vec<Protection> {
///         vec![Protection { name: "filesystem writes".into(), active: false, detail: "not confined".into() }]
///     }
/// }
/// assert!(!Nothing.protections(&SandboxPolicy::default())[0].active);
/// ```
pub trait ProtectionReport: Send + Sync + 'static {
    /// The backend's name (`"local"`, `"docker"`, `"sprites"`, ...).
    fn backend(&self) -> String;

    /// Each protection of `policy`, active or not here, and why.
    fn protections(&self, policy: &SandboxPolicy) -> Vec<Protection>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_refused() {
        let error = serde_json::from_str::<SandboxPolicy>(r#"{"netwrok": "on"}"#)
            .err()
            .map(|error| error.to_string())
            .unwrap_or_default();
        assert!(error.contains("netwrok"), "{error}");
    }

    #[test]
    fn set_cannot_smuggle_a_credential() {
        let mut policy = SandboxPolicy::default();
        policy
            .env
            .set
            .insert("ANTHROPIC_API_KEY".into(), "x".into());
        policy.env.set.insert("MY_FLAG".into(), "1".into());
        let env = policy.command_env(Vec::new(), &["ANTHROPIC_API_KEY".to_string()]);
        assert_eq!(env.len(), 1);
        assert_eq!(env.get("MY_FLAG").map(String::as_str), Some("1"));
    }
}

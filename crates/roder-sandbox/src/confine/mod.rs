//! Confining host commands to a [`SandboxPolicy`].
//!
//! Landlock domains and `no_new_privs` belong to a *thread* and are
//! inherited by every process it starts. So instead of a `pre_exec` hook
//! (which would make std fork Roder instead of `posix_spawn`, milliseconds
//! with a big heap), each distinct confinement gets one long-lived
//! **spawner thread** that restricts itself once and then spawns the
//! commands sent to it over a channel ([`spawner`]). Per command the cost is
//! one channel hop each way.
//!
//! * `mechanism = "landlock"`: the spawner thread is in a Landlock domain
//!   that allows writes only beneath the writable roots and, with the
//!   network off, refuses TCP connect and bind ([`landlock_rules`]).
//! * `mechanism = "bubblewrap"`: Landlock forbids a restricted thread to
//!   mount anything, so bubblewrap cannot run inside a Landlock domain; its
//!   spawner thread only sets `no_new_privs`, and each command runs as
//!   `bwrap ... -- program args` ([`bwrap`]): a read-only view of `/` with
//!   the writable roots bound read-write, `.git/hooks` and `.git/config`
//!   bound read-only, no network namespace access, its own pid namespace.
//! * `mode = "none"`: no spawner; only the environment is filtered.
//!
//! What cannot be honoured on this machine is refused ([`Refusal`]) with the
//! way to opt out, never run unconfined.

pub(crate) mod bwrap;
pub(crate) mod git_guard;
pub(crate) mod landlock_rules;
pub(crate) mod launch;
pub(crate) mod protections;
pub(crate) mod spawner;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use roder_api::sandbox_policy::{HostMechanism, SandboxMode, SandboxPolicy};

/// What confines one command: the policy, the directory it works on, and
/// where its environment comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Confinement {
    pub policy: SandboxPolicy,
    /// The workspace the command works on: always writable.
    pub workspace: PathBuf,
    /// More directories this backend needs writable besides the policy's
    /// (a git worktree's common git directory). Missing ones are skipped:
    /// nothing can be created there anyway, their parent not being writable.
    pub extra_writable: Vec<PathBuf>,
    /// Variables holding a configured provider's credential: never passed.
    pub credential_vars: Vec<String>,
    /// Roder's environment as the policy filters it; `None` reads this
    /// process's own. Tests inject one instead of mutating the process's.
    pub host_env: Option<Vec<(String, String)>>,
}

impl Confinement {
    /// The default policy (enforced, network off) over `workspace`, with the
    /// credential variables Roder knows of.
    pub fn new(policy: SandboxPolicy, workspace: PathBuf) -> Self {
        Self {
            policy,
            workspace,
            extra_writable: Vec::new(),
            credential_vars: roder_api::sandbox_policy::KNOWN_CREDENTIAL_VARS
                .iter()
                .map(ToString::to_string)
                .collect(),
            host_env: None,
        }
    }

    /// Whether commands get a spawner thread (anything but `mode = "none"`).
    pub(crate) fn enforced(&self) -> bool {
        self.policy.mode == SandboxMode::Enforce
    }

    /// Whether `.git/hooks` and `.git/config` are held by comparing and
    /// restoring them around each command: enforced under Landlock, which
    /// cannot make them read-only (bubblewrap mounts them so).
    pub(crate) fn guards_git(&self) -> bool {
        self.enforced() && self.policy.mechanism == HostMechanism::Landlock
    }

    /// Every writable root as configured (workspace first), before the
    /// spawner adds its private temporary directory.
    pub(crate) fn writable_roots(&self) -> Vec<PathBuf> {
        let mut roots = vec![self.workspace.clone()];
        roots.extend(self.policy.writable_roots.iter().cloned());
        roots.extend(self.extra_writable.iter().cloned());
        roots
    }

    /// The spawner this confinement runs on: one per distinct key.
    pub(crate) fn key(&self) -> spawner::SpawnerKey {
        let mut roots = self.writable_roots();
        let workspace = roots.remove(0);
        roots.sort();
        roots.dedup();
        spawner::SpawnerKey {
            bubblewrap: self.policy.mechanism == HostMechanism::Bubblewrap,
            network: self.policy.network,
            workspace,
            roots,
        }
    }

    /// The command's whole environment: the policy's (base variables, the
    /// ones it passes and sets), then the caller's `extra` (a runner's
    /// configured env, a request's env), then `TMPDIR` when confined. No
    /// credential survives any of these steps; names in `remove` are
    /// dropped after `pass` (so `pass = ["GIT_DIR"]` cannot undo a runner
    /// that removes it).
    pub(crate) fn command_env(
        &self,
        extra: &[(OsString, OsString)],
        remove: &[OsString],
        tmpdir: Option<&std::path::Path>,
    ) -> BTreeMap<OsString, OsString> {
        let host = match &self.host_env {
            Some(host) => self
                .policy
                .command_env(host.iter().cloned(), &self.credential_vars),
            None => self
                .policy
                .command_env(std::env::vars(), &self.credential_vars),
        };
        let mut env: BTreeMap<OsString, OsString> = host
            .into_iter()
            .map(|(key, value)| (key.into(), value.into()))
            .filter(|(key, _)| !remove.contains(key))
            .collect();
        let denied = |key: &OsString| {
            self.credential_vars
                .iter()
                .any(|secret| OsString::from(secret) == *key)
        };
        for (key, value) in extra {
            if !denied(key) {
                env.insert(key.clone(), value.clone());
            }
        }
        if let Some(tmpdir) = tmpdir {
            env.insert("TMPDIR".into(), tmpdir.as_os_str().to_os_string());
        }
        env
    }
}

/// The text of a command refused because this machine cannot confine it as
/// the policy asks: what is missing and how to opt out.
pub(crate) fn refusal(what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        format!(
            "command refused by the sandbox: {what}. Commands are never run unconfined in silence; to run them without confinement set `[sandbox] mode = \"none\"` in config.toml (the environment is still filtered)"
        ),
    )
}

/// The outcome type of the confinement steps.
pub(crate) type Refusal = std::io::Error;

#[cfg(test)]
mod tests;

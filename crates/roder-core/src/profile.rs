//! Starting a thread from a resolved agent profile.
//!
//! The profile is resolved elsewhere (`roder-profiles`); here its snapshot
//! becomes the thread's own settings, through the rules that already decide
//! a tool call's fate: `tools` is the thread's allowlist, `disallowed_tools`
//! are the thread's deny rules and `policy_mode` its approval mode, all read
//! by `policy.rs` like any other thread's. The snapshot itself is stored in
//! the thread's metadata in the same write, before the first turn, so every
//! later turn, resume and process uses what the thread started with.
//!
//! `runner` names one of the runtime's named runners
//! ([`RuntimeConfig::named_runners`](crate::RuntimeConfig)): a thread
//! without a runner of its own binds to it, and a caller's runner wins
//! (recorded as an override). `mcp_servers` name wiring the runtime does
//! not hold (the host's MCP servers): the caller starts them.

use roder_api::approval::{ApprovalRule, ThreadApprovals};
use roder_api::events::RoderEvent;
use roder_api::profile::{ProfileOverride, ProfileSnapshot};
use roder_api::sandbox_policy::{NetworkAccess, SandboxPolicy};
use roder_api::thread::ThreadMetadata;

use crate::requests::CreateThreadRequest;
use crate::runtime::Runtime;

impl Runtime {
    /// Resolves a profile with the installed resolver, for a thread whose
    /// local workspace is `workspace`. A runtime without one refuses.
    ///
    /// ```no_run
    /// # async fn demo(runtime: &roder_core::Runtime) -> anyhow::Result<()> {
    /// use roder_api::profile::ProfileRequestSpec;
    ///
    /// let request = ProfileRequestSpec { selector: "builtin:review".into(), archive: None };
    /// let review = runtime.resolve_profile(&request, Some("/work/repo")).await?;
    /// assert_eq!(review.canonical, "builtin:review");
    /// # Ok(()) }
    /// ```
    pub async fn resolve_profile(
        &self,
        request: &roder_api::profile::ProfileRequestSpec,
        workspace: Option<&str>,
    ) -> anyhow::Result<ProfileSnapshot> {
        let resolver = self.profile_resolver.as_ref().ok_or_else(|| {
            anyhow::anyhow!(
                "profiles are not supported by this runtime: no profile resolver is installed"
            )
        })?;
        resolver.resolve(request, workspace).await
    }

    /// Creates a thread that runs as `profile` says, with what the caller
    /// set in `request` and `approvals` winning over the profile's values
    /// (each such override is recorded in the stored snapshot).
    ///
    /// ```no_run
    /// # async fn demo(runtime: &roder_core::Runtime) -> anyhow::Result<()> {
    /// use roder_api::profile::ProfileSnapshot;
    /// use roder_core::CreateThreadRequest;
    ///
    /// let reviewer = ProfileSnapshot {
    ///     selector: "reviewer".into(),
    ///     canonical: "reviewer".into(),
    ///     name: "reviewer".into(),
    ///     instructions: "Review; never edit.".into(),
    ///     disallowed_tools: vec!["write_file".into(), "exec:git push".into()],
    ///     ..ProfileSnapshot::default()
    /// };
    /// let thread = runtime
    ///     .create_thread_with_profile(
    ///         CreateThreadRequest::in_workspace("/work/repo"),
    ///         None,
    ///         Default::default(),
    ///         reviewer,
    ///     )
    ///     .await?;
    /// assert!(thread.profile.is_some());
    /// # Ok(()) }
    /// ```
    pub async fn create_thread_with_profile(
        &self,
        mut request: CreateThreadRequest,
        sandbox: Option<SandboxPolicy>,
        approvals: ThreadApprovals,
        mut profile: ProfileSnapshot,
    ) -> anyhow::Result<ThreadMetadata> {
        self.apply_runner(&mut request, &mut profile)?;
        let shaped = self.shape(request, sandbox, approvals, profile)?;
        self.create_thread_settled(
            shaped.request,
            shaped.sandbox,
            shaped.approvals,
            Some(Box::new(shaped.profile)),
        )
        .await
    }

    /// Gives a thread that has not run a turn yet (and has no profile) the
    /// profile, as [`create_thread_with_profile`](Self::create_thread_with_profile)
    /// would have: for a client that chooses the profile after the thread
    /// exists (an ACP session's profile option). The snapshot and every
    /// setting it changes go in one metadata write. A profile that names a
    /// runner needs the thread to have been created with one (the runner
    /// is bound at creation); otherwise it is refused.
    ///
    /// ```no_run
    /// # async fn demo(runtime: &roder_core::Runtime, thread_id: &str) -> anyhow::Result<()> {
    /// use roder_api::profile::ProfileSnapshot;
    ///
    /// let plan = ProfileSnapshot { canonical: "builtin:plan".into(), ..ProfileSnapshot::default() };
    /// let thread = runtime.set_thread_profile(thread_id, plan).await?;
    /// assert!(thread.profile.is_some());
    /// # Ok(()) }
    /// ```
    pub async fn set_thread_profile(
        &self,
        thread_id: &str,
        mut profile: ProfileSnapshot,
    ) -> anyhow::Result<ThreadMetadata> {
        let thread = self.thread_state(thread_id).await?;
        let ran = thread.active_turn().is_some()
            || self
                .store
                .load_events(thread_id, 0)
                .await?
                .iter()
                .any(|envelope| matches!(envelope.event, RoderEvent::TurnStarted(_)));
        if ran {
            anyhow::bail!(
                "thread {thread_id} has run a turn: a thread's profile is chosen before its first turn"
            );
        }
        let current = self
            .store
            .load_metadata(thread_id)
            .await?
            .ok_or_else(|| crate::RuntimeError::ThreadNotFound(thread_id.to_string()))?;
        if let Some(already) = &current.profile {
            anyhow::bail!(
                "thread {thread_id} already runs as profile \"{}\": a thread's profile is chosen once",
                already.canonical
            );
        }
        if let Some(name) = profile.runner.clone() {
            match &current.runner_binding {
                Some(binding) => runner_overridden(
                    &mut profile,
                    name,
                    format!("{} (the thread's runner)", binding.destination.provider_id),
                ),
                None => anyhow::bail!(
                    "profile \"{}\" names runner \"{name}\": a runner is bound when a thread is created, so start the thread with this profile instead",
                    profile.canonical
                ),
            }
        }
        let mut request = CreateThreadRequest::in_workspace(current.workspace.clone());
        request.provider = current.provider.clone();
        request.model = current.model.clone();
        request.tool_allowlist = current.tool_allowlist.clone();
        request.developer_instructions = current.developer_instructions.clone();
        let shaped = self.shape(
            request,
            current.sandbox.clone(),
            current.approvals.clone(),
            profile,
        )?;
        crate::runner::state::update_metadata(self.store.as_ref(), &thread, |metadata| {
            metadata.provider = shaped.request.provider;
            metadata.model = shaped.request.model;
            metadata.tool_allowlist = shaped.request.tool_allowlist;
            metadata.developer_instructions = shaped.request.developer_instructions;
            metadata.sandbox = shaped.sandbox;
            metadata.approvals = shaped.approvals;
            metadata.profile = Some(Box::new(shaped.profile));
        })
        .await
    }

    /// The profile's runner, unless the caller chose one.
    fn apply_runner(
        &self,
        request: &mut CreateThreadRequest,
        profile: &mut ProfileSnapshot,
    ) -> anyhow::Result<()> {
        let Some(name) = profile.runner.clone() else {
            return Ok(());
        };
        if let Some(chosen) = &request.runner {
            runner_overridden(
                profile,
                name,
                format!("{} (the caller's runner)", chosen.provider_id),
            );
            return Ok(());
        }
        let selection = self.config.named_runners.get(&name).ok_or_else(|| {
            anyhow::anyhow!(
                "profile \"{}\" names runner \"{name}\", which is not configured (configured: {}); add a [runners.{name}] table",
                profile.canonical,
                if self.config.named_runners.is_empty() {
                    "none".to_string()
                } else {
                    self.config.named_runners.keys().cloned().collect::<Vec<_>>().join(", ")
                }
            )
        })?;
        request.runner = Some(selection.clone());
        Ok(())
    }

    /// What the profile makes of a thread's settings, the caller's own
    /// winning: its model, allowlist, deny rules, mode, instructions and
    /// sandbox (the runner is decided by the caller of this).
    fn shape(
        &self,
        mut request: CreateThreadRequest,
        sandbox: Option<SandboxPolicy>,
        mut approvals: ThreadApprovals,
        mut profile: ProfileSnapshot,
    ) -> anyhow::Result<Shaped> {
        apply_model(&mut request, &mut profile)?;
        apply_tools(&mut request, &profile);
        for entry in &profile.disallowed_tools {
            let rule: ApprovalRule = entry.parse().map_err(|error| {
                anyhow::anyhow!(
                    "profile \"{}\": disallowed_tools entry {entry:?}: {error}",
                    profile.canonical
                )
            })?;
            if !approvals.rules.deny.contains(&rule) {
                approvals.rules.deny.push(rule);
            }
        }
        match (approvals.mode, profile.policy_mode) {
            (Some(mode), Some(profile_mode)) if mode != profile_mode => {
                profile.overrides.push(ProfileOverride {
                    field: "policy_mode".into(),
                    profile_value: Some(format!("{profile_mode:?}")),
                    value: format!("{mode:?}"),
                });
            }
            (None, Some(profile_mode)) => approvals.mode = Some(profile_mode),
            _ => {}
        }
        if !profile.instructions.trim().is_empty() {
            request.developer_instructions = Some(match request.developer_instructions.take() {
                Some(own) if !own.trim().is_empty() => {
                    format!("{}\n\n{own}", profile.instructions)
                }
                _ => profile.instructions.clone(),
            });
        }
        let sandbox = narrow_sandbox(sandbox, &self.config.sandbox, &profile)?;
        Ok(Shaped {
            request,
            sandbox,
            approvals,
            profile,
        })
    }
}

/// A thread's settings as a profile shaped them.
struct Shaped {
    request: CreateThreadRequest,
    sandbox: Option<SandboxPolicy>,
    approvals: ThreadApprovals,
    profile: ProfileSnapshot,
}

/// Records that `value`, a runner the thread has anyway, won over the
/// profile's runner `name`.
fn runner_overridden(profile: &mut ProfileSnapshot, name: String, value: String) {
    profile.overrides.push(ProfileOverride {
        field: "runner".into(),
        profile_value: Some(name),
        value,
    });
}

/// The profile's `provider/model`, unless the caller named its own.
fn apply_model(
    request: &mut CreateThreadRequest,
    profile: &mut ProfileSnapshot,
) -> anyhow::Result<()> {
    let Some(label) = profile.model.clone() else {
        return Ok(());
    };
    if request.provider.is_some() || request.model.is_some() {
        let value = format!(
            "{}/{}",
            request.provider.as_deref().unwrap_or("(runtime default)"),
            request.model.as_deref().unwrap_or("(runtime default)")
        );
        if value != label {
            profile.overrides.push(ProfileOverride {
                field: "model".into(),
                profile_value: Some(label),
                value,
            });
        }
        return Ok(());
    }
    let Some((provider, model)) = label.split_once('/') else {
        anyhow::bail!(
            "profile \"{}\": model {label:?} is not of the form provider/model",
            profile.canonical
        );
    };
    request.provider = Some(provider.to_string());
    request.model = Some(model.to_string());
    Ok(())
}

/// Both lists narrow: a caller's allowlist and the profile's meet.
fn apply_tools(request: &mut CreateThreadRequest, profile: &ProfileSnapshot) {
    if profile.tools.is_empty() {
        return;
    }
    if request.tool_allowlist.is_empty() {
        request.tool_allowlist = profile.tools.clone();
    } else {
        request
            .tool_allowlist
            .retain(|tool| profile.tools.contains(tool));
        if request.tool_allowlist.is_empty() {
            // Nothing both allow: no tool at all, not every tool.
            request.tool_allowlist.push(NO_TOOL.to_string());
        }
    }
}

/// An allowlist entry no tool can be named (tool names have no spaces), so
/// an empty intersection offers nothing.
const NO_TOOL: &str = "(no tool allowed by both the caller and the profile)";

/// A profile may take the network away, never give it.
fn narrow_sandbox(
    sandbox: Option<SandboxPolicy>,
    runtime: &SandboxPolicy,
    profile: &ProfileSnapshot,
) -> anyhow::Result<Option<SandboxPolicy>> {
    let Some(network) = profile.sandbox.network else {
        return Ok(sandbox);
    };
    let base = sandbox.clone().unwrap_or_else(|| runtime.clone());
    match (network, base.network) {
        (false, NetworkAccess::On) => Ok(Some(SandboxPolicy {
            network: NetworkAccess::Off,
            ..base
        })),
        (false, _) => Ok(sandbox),
        (true, NetworkAccess::On) => Ok(sandbox),
        (true, configured) => anyhow::bail!(
            "profile \"{}\": sandbox.network = true would widen the configured sandbox policy \
             (network {configured:?}); a profile may only narrow it",
            profile.canonical
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> ProfileSnapshot {
        ProfileSnapshot {
            canonical: "p".into(),
            ..ProfileSnapshot::default()
        }
    }

    #[test]
    fn the_callers_model_wins_and_is_recorded() {
        let mut request = CreateThreadRequest::in_workspace("/tmp");
        request.model = Some("other".into());
        let mut snapshot = ProfileSnapshot {
            model: Some("mock/mock".into()),
            ..profile()
        };
        apply_model(&mut request, &mut snapshot).unwrap();
        assert_eq!(request.provider, None);
        assert_eq!(snapshot.overrides.len(), 1);
        assert_eq!(snapshot.overrides[0].field, "model");
        assert_eq!(
            snapshot.overrides[0].profile_value.as_deref(),
            Some("mock/mock")
        );
    }

    #[test]
    fn the_profiles_model_is_split_into_provider_and_model() {
        let mut request = CreateThreadRequest::in_workspace("/tmp");
        let mut snapshot = ProfileSnapshot {
            model: Some("openrouter/anthropic/claude".into()),
            ..profile()
        };
        apply_model(&mut request, &mut snapshot).unwrap();
        assert_eq!(request.provider.as_deref(), Some("openrouter"));
        assert_eq!(request.model.as_deref(), Some("anthropic/claude"));
        assert!(snapshot.overrides.is_empty());
    }

    #[test]
    fn allowlists_meet() {
        let mut request = CreateThreadRequest::in_workspace("/tmp");
        request.tool_allowlist = vec!["shell".into()];
        let snapshot = ProfileSnapshot {
            tools: vec!["read_file".into()],
            ..profile()
        };
        apply_tools(&mut request, &snapshot);
        assert_eq!(request.tool_allowlist, vec![NO_TOOL.to_string()]);
    }

    #[test]
    fn a_profile_cannot_turn_the_network_on() {
        let off = SandboxPolicy::default();
        assert_eq!(off.network, NetworkAccess::Off);
        let snapshot = ProfileSnapshot {
            sandbox: roder_api::profile::ProfileSandbox {
                network: Some(true),
            },
            ..profile()
        };
        let error = narrow_sandbox(None, &off, &snapshot).unwrap_err();
        assert!(error.to_string().contains("only narrow"), "{error}");
        let on = SandboxPolicy {
            network: NetworkAccess::On,
            ..SandboxPolicy::default()
        };
        let snapshot = ProfileSnapshot {
            sandbox: roder_api::profile::ProfileSandbox {
                network: Some(false),
            },
            ..profile()
        };
        let narrowed = narrow_sandbox(None, &on, &snapshot).unwrap().unwrap();
        assert_eq!(narrowed.network, NetworkAccess::Off);
    }
}

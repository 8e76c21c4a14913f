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
        mut approvals: ThreadApprovals,
        mut profile: ProfileSnapshot,
    ) -> anyhow::Result<ThreadMetadata> {
        apply_model(&mut request, &mut profile)?;
        self.apply_runner(&mut request, &mut profile)?;
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
        self.create_thread_settled(request, sandbox, approvals, Some(Box::new(profile)))
            .await
    }
}

/// The profile's `provider/model`, unless the caller named its own.
impl Runtime {
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
            profile.overrides.push(ProfileOverride {
                field: "runner".into(),
                profile_value: Some(name),
                value: format!("{} (the caller's runner)", chosen.provider_id),
            });
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
}

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

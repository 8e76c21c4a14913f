//! The backends' protection reports, installed into the runtime so that
//! `roder sandbox status` and the app server's `runners/list` can show them.

use std::sync::Arc;

use roder_api::extension::ExtensionRegistryBuilder;
use roder_api::sandbox_policy::{Protection, ProtectionReport, SandboxPolicy};
use roder_ext_runner_docker::DockerRunnerProvider;
use roder_ext_runner_sprites::SpritesRunnerProvider;

/// A report from a function of the policy.
struct Report<F> {
    backend: &'static str,
    protections: F,
}

impl<F> ProtectionReport for Report<F>
where
    F: Fn(&SandboxPolicy) -> Vec<Protection> + Send + Sync + 'static,
{
    fn backend(&self) -> String {
        self.backend.to_string()
    }

    fn protections(&self, policy: &SandboxPolicy) -> Vec<Protection> {
        (self.protections)(policy)
    }
}

/// Installs a report for each backend the CLI wires: host commands (local
/// workspaces, unix-local and git-worktree runners), docker, sprites.
pub fn install(
    builder: &mut ExtensionRegistryBuilder,
    docker: &Arc<DockerRunnerProvider>,
    sprites: &Arc<SpritesRunnerProvider>,
) {
    builder.protection_report(Arc::new(roder_sandbox::HostProtections::new(
        "host (local workspace, unix-local, git-worktree)",
    )));
    let docker = docker.clone();
    builder.protection_report(Arc::new(Report {
        backend: "docker",
        protections: move |policy: &SandboxPolicy| docker.protections(policy),
    }));
    let sprites = sprites.clone();
    builder.protection_report(Arc::new(Report {
        backend: "sprites",
        protections: move |policy: &SandboxPolicy| sprites.protections(policy),
    }));
}

//! What the host backends (local workspace, unix-local, git-worktree)
//! protect on this machine under a policy, probed, not assumed.

use roder_api::sandbox_policy::{HostMechanism, Protection, SandboxMode, SandboxPolicy};

use super::{bwrap, landlock_rules};

fn protection(name: &str, active: bool, detail: impl Into<String>) -> Protection {
    Protection {
        name: name.to_string(),
        active,
        detail: detail.into(),
    }
}

/// Each protection host commands get under `policy` on this machine (the
/// kernel's Landlock ABI, whether `bwrap` is on `PATH`), active or not, and
/// by what or why not. Blocking (a few `stat`s): call it off async threads.
pub fn host_protections(policy: &SandboxPolicy) -> Vec<Protection> {
    protections_for(
        policy,
        landlock_rules::kernel_abi(),
        bwrap::find().is_some(),
    )
}

/// [`host_protections`] as a runtime's protection report, under the name
/// of a host backend (`"local"`, `"unix-local"`, `"git-worktree"`: they
/// share the mechanism).
#[derive(Debug, Clone)]
pub struct HostProtections {
    backend: String,
}

impl HostProtections {
    pub fn new(backend: impl Into<String>) -> Self {
        Self {
            backend: backend.into(),
        }
    }
}

impl roder_api::sandbox_policy::ProtectionReport for HostProtections {
    fn backend(&self) -> String {
        self.backend.clone()
    }

    fn protections(&self, policy: &SandboxPolicy) -> Vec<Protection> {
        host_protections(policy)
    }
}

fn protections_for(policy: &SandboxPolicy, abi: i32, has_bwrap: bool) -> Vec<Protection> {
    let environment = protection(
        "environment",
        true,
        "commands get PATH, HOME, LANG, TERM, the variables `[sandbox.env]` passes and sets, and a private TMPDIR; never a provider credential",
    );
    let output = protection(
        "output size",
        true,
        match policy.limits.output_bytes {
            Some(bytes) => format!("at most {bytes} bytes of a command's output are kept"),
            None => "output is capped by each tool's own limit".to_string(),
        },
    );
    let limits = ["processes", "memory", "cpu"].map(|name| {
        protection(
            name,
            false,
            "not enforced for host commands: rlimits are per process and would need a fork of Roder per command, cgroups are not used; use the docker runner for limits",
        )
    });
    if policy.mode == SandboxMode::None {
        let off = "`[sandbox] mode = \"none\"`: commands run unconfined";
        let mut all = vec![
            protection("filesystem writes", false, off),
            protection("network", false, off),
            protection(".git/hooks", false, off),
            protection("process tree", false, off),
        ];
        all.extend(limits);
        all.extend([output, environment]);
        return all;
    }
    let mut all = match policy.mechanism {
        HostMechanism::Landlock => landlock_protections(policy, abi),
        HostMechanism::Bubblewrap => bubblewrap_protections(policy, has_bwrap),
    };
    all.extend(limits);
    all.extend([output, environment]);
    all
}

fn landlock_protections(policy: &SandboxPolicy, abi: i32) -> Vec<Protection> {
    if let Err(refused) = landlock_rules::check_abi(abi, policy.network) {
        let refused = refused.to_string();
        return ["filesystem writes", "network", ".git/hooks", "process tree"]
            .map(|name| protection(name, false, refused.clone()))
            .to_vec();
    }
    let network = if policy.network.allows() {
        protection(
            "network",
            false,
            "the policy allows the network (`network = \"on\"`)",
        )
    } else {
        protection(
            "network",
            true,
            format!(
                "Landlock ABI {abi}: TCP connect and bind refused{}; UDP and pathname unix sockets are not covered (use mechanism = \"bubblewrap\" for no network at all)",
                if abi >= 6 {
                    ", abstract unix sockets outside the sandbox refused"
                } else {
                    ""
                }
            ),
        )
    };
    vec![
        protection(
            "filesystem writes",
            true,
            format!(
                "Landlock ABI {abi}: writes only beneath the workspace, the private TMPDIR, `writable_roots` and /dev/null-like devices; reads are not restricted"
            ),
        ),
        network,
        protection(
            ".git/hooks",
            true,
            "Landlock cannot make them read-only inside the writable workspace, so .git/hooks and .git/config are compared before and after each command and put back, and the attempt is reported in the command's output; a process the command leaves running in the background can change them after that check (mechanism = \"bubblewrap\" mounts them read-only)",
        ),
        protection(
            "process tree",
            false,
            "a descendant that calls setsid leaves the process group and is not killed with the command; mechanism = \"bubblewrap\" gives each command its own pid namespace",
        ),
    ]
}

fn bubblewrap_protections(policy: &SandboxPolicy, has_bwrap: bool) -> Vec<Protection> {
    if !has_bwrap {
        let missing = format!(
            "`bwrap` is not installed: commands are refused; install the `{}` package",
            bwrap::PACKAGE
        );
        return ["filesystem writes", "network", ".git/hooks", "process tree"]
            .map(|name| protection(name, false, missing.clone()))
            .to_vec();
    }
    vec![
        protection(
            "filesystem writes",
            true,
            "bubblewrap: / mounted read-only, the workspace, the private TMPDIR and `writable_roots` read-write, all capabilities dropped; reads are not restricted (Landlock cannot be combined: it forbids the mounts bubblewrap makes)",
        ),
        if policy.network.allows() {
            protection(
                "network",
                false,
                "the policy allows the network (`network = \"on\"`)",
            )
        } else {
            protection(
                "network",
                true,
                "bubblewrap: an empty network namespace, no protocol reaches anything (pathname unix sockets on the file system still connect)",
            )
        },
        protection(
            ".git/hooks",
            true,
            "bubblewrap: .git/hooks and .git/config mounted read-only",
        ),
        protection(
            "process tree",
            true,
            "bubblewrap: own pid namespace, so every descendant (setsid ones too) dies with the command",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::sandbox_policy::NetworkAccess;

    fn active(protections: &[Protection], name: &str) -> bool {
        protections
            .iter()
            .find(|protection| protection.name == name)
            .unwrap_or_else(|| panic!("{name} in {protections:?}"))
            .active
    }

    #[test]
    fn landlock_protects_writes_tcp_and_hooks_by_restoring() {
        let all = protections_for(&SandboxPolicy::default(), 7, false);
        assert!(active(&all, "filesystem writes"));
        assert!(active(&all, "network"));
        assert!(active(&all, ".git/hooks"));
        let hooks = all.iter().find(|p| p.name == ".git/hooks").unwrap();
        assert!(hooks.detail.contains("put back"), "{hooks:?}");
        assert!(!active(&all, "memory"));
        assert!(active(&all, "environment"));
    }

    #[test]
    fn an_old_kernel_or_a_missing_bwrap_says_commands_are_refused() {
        let old = protections_for(&SandboxPolicy::default(), 3, true);
        assert!(!active(&old, "filesystem writes"));
        assert!(old.iter().any(|p| p.detail.contains("ABI 4")), "{old:?}");
        let policy = SandboxPolicy {
            mechanism: HostMechanism::Bubblewrap,
            ..SandboxPolicy::default()
        };
        let missing = protections_for(&policy, 7, false);
        assert!(!active(&missing, ".git/hooks"));
        assert!(missing.iter().any(|p| p.detail.contains("bubblewrap")));
        let present = protections_for(&policy, 7, true);
        assert!(active(&present, ".git/hooks") && active(&present, "process tree"));
    }

    #[test]
    fn mode_none_and_network_on_are_reported_inactive() {
        let none = SandboxPolicy {
            mode: SandboxMode::None,
            ..SandboxPolicy::default()
        };
        let all = protections_for(&none, 7, true);
        assert!(!active(&all, "filesystem writes") && !active(&all, "network"));
        assert!(active(&all, "environment"));
        let on = SandboxPolicy {
            network: NetworkAccess::On,
            ..SandboxPolicy::default()
        };
        assert!(!active(&protections_for(&on, 7, true), "network"));
    }
}

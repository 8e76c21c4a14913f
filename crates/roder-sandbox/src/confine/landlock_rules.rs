//! The Landlock domain of a spawner thread: writes only beneath the writable
//! roots, and with the network off no TCP connect or bind, no abstract unix
//! socket outside the domain; never a signal to a process outside it.
//!
//! Reads and execution are not handled (left unrestricted): commands read
//! the toolchain, the caches and the rest of the system as before.

use std::path::PathBuf;
use std::sync::OnceLock;

use landlock::{
    ABI, AccessFs, AccessNet, CompatLevel, Compatible as _, Ruleset, RulesetAttr as _,
    RulesetCreatedAttr as _, RulesetStatus, Scope, path_beneath_rules,
};
use roder_api::sandbox_policy::NetworkAccess;

use super::{Refusal, refusal};

/// Device files commands write to as a matter of course (`> /dev/null`,
/// a terminal): writable in every domain. `/dev/shm` is not among them: it
/// is shared with every other process.
pub(crate) const DEVICE_ROOTS: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/pts",
    "/dev/ptmx",
];

/// The oldest Landlock ABI with TCP rules (Linux 6.7).
const NETWORK_ABI: i32 = 4;
/// The oldest ABI with scopes (abstract unix sockets, signals; Linux 6.12).
const SCOPE_ABI: i32 = 6;

/// The kernel's Landlock ABI version: 0 or less when Landlock is missing or
/// disabled. Asked once; the kernel's answer does not change while we run.
pub(crate) fn kernel_abi() -> i32 {
    static ABI_VERSION: OnceLock<i32> = OnceLock::new();
    *ABI_VERSION.get_or_init(|| {
        // SAFETY: LANDLOCK_CREATE_RULESET_VERSION with a null attribute and
        // size 0 only returns the ABI version (or -1 and errno); it reads
        // and writes no memory.
        let version = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0_usize,
                1_u32,
            )
        };
        i32::try_from(version).unwrap_or(-1)
    })
}

/// Refuses a policy this kernel cannot enforce with Landlock.
pub(crate) fn check(network: NetworkAccess) -> Result<(), Refusal> {
    check_abi(kernel_abi(), network)
}

pub(crate) fn check_abi(abi: i32, network: NetworkAccess) -> Result<(), Refusal> {
    if abi < 1 {
        return Err(refusal(
            "this kernel has no Landlock (it is not built in or not enabled at boot: add `landlock` to the `lsm=` kernel parameter), so commands cannot be confined",
        ));
    }
    if !network.allows() && abi < NETWORK_ABI {
        return Err(refusal(&format!(
            "the policy has `network = \"off\"`, which needs Landlock ABI {NETWORK_ABI} (Linux 6.7) to refuse TCP connections, and this kernel has ABI {abi}; set `[sandbox] network = \"on\"` to confine only file writes"
        )));
    }
    Ok(())
}

/// The ABI the rules are written for: the kernel's, capped at the newest
/// one whose rights we ask for, so a hard requirement never asks the kernel
/// for rights it lacks.
fn target_abi() -> ABI {
    ABI::from(kernel_abi().min(SCOPE_ABI))
}

/// Restricts the calling thread (only it; Landlock's default) and sets its
/// `no_new_privs`. Every process the thread starts afterwards inherits both.
/// `roots` must exist (missing ones are skipped).
pub(crate) fn restrict_thread(roots: &[PathBuf], network: NetworkAccess) -> Result<(), Refusal> {
    check(network)?;
    let abi = target_abi();
    let write = AccessFs::from_write(abi);
    let failed = |error: landlock::RulesetError| {
        refusal(&format!(
            "the Landlock ruleset could not be applied ({error})"
        ))
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(write)
        .map_err(failed)?;
    if !network.allows() {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(failed)?;
    }
    if kernel_abi() >= SCOPE_ABI {
        let scopes = if network.allows() {
            Scope::Signal.into()
        } else {
            Scope::Signal | Scope::AbstractUnixSocket
        };
        ruleset = ruleset.scope(scopes).map_err(failed)?;
    }
    let writable = roots
        .iter()
        .map(|root| root.as_path())
        .chain(DEVICE_ROOTS.iter().map(std::path::Path::new));
    let status = ruleset
        .create()
        .map_err(failed)?
        .add_rules(path_beneath_rules(writable, write))
        .map_err(failed)?
        .restrict_self()
        .map_err(failed)?;
    if status.ruleset != RulesetStatus::FullyEnforced || !status.no_new_privs {
        return Err(refusal(&format!(
            "Landlock enforced the ruleset only partly ({:?}, no_new_privs {})",
            status.ruleset, status.no_new_privs
        )));
    }
    Ok(())
}

/// Sets `no_new_privs` on the calling thread only (bubblewrap spawners:
/// set-uid programs run by a command gain nothing).
pub(crate) fn no_new_privs() -> Result<(), Refusal> {
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only.
    let done = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    if done == 0 {
        Ok(())
    } else {
        Err(refusal(&format!(
            "no_new_privs could not be set ({})",
            std::io::Error::last_os_error()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_or_missing_landlock_is_refused_with_the_way_out() {
        let none = check_abi(0, NetworkAccess::On).unwrap_err().to_string();
        assert!(none.contains("no Landlock"), "{none}");
        assert!(none.contains("mode = \"none\""), "{none}");
        let old = check_abi(3, NetworkAccess::Off).unwrap_err().to_string();
        assert!(old.contains("ABI 4"), "{old}");
        assert!(old.contains("this kernel has ABI 3"), "{old}");
        assert!(old.contains("network = \\\"on\\\"") || old.contains("network = \"on\""));
        assert!(check_abi(3, NetworkAccess::On).is_ok());
        assert!(check_abi(4, NetworkAccess::Off).is_ok());
    }
}

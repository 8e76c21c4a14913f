//! The bubblewrap command line of one confined command.
//!
//! `/` is bound read-only, then each writable root read-write over it, then
//! the git metadata that runs code later (`hooks`, `config`, whose
//! `core.hooksPath` and aliases choose what runs) read-only over those.
//! Fresh `/dev` (the standard devices, a private `/dev/shm` and `/dev/pts`)
//! and `/proc` (its `sys` read-only: a command running as root keeps uid 0
//! and `/proc/sys` files are owner-writable). All capabilities dropped, so
//! root inside cannot remount. Own pid and IPC namespaces (the command's
//! descendants, `setsid` ones included, die with it), a new session (no
//! terminal injection), and with the network off an empty network namespace
//! (loopback down: no protocol at all reaches anything).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use roder_api::sandbox_policy::NetworkAccess;

/// The program run for each command.
pub(crate) const BWRAP: &str = "bwrap";

/// The Debian/Ubuntu/Fedora package that ships it.
pub(crate) const PACKAGE: &str = "bubblewrap";

/// Where `bwrap` is on this process's `PATH`, if anywhere.
pub(crate) fn find() -> Option<PathBuf> {
    find_in(&std::env::var_os("PATH")?)
}

/// Where `bwrap` is on the search path `path`, if anywhere.
pub(crate) fn find_in(path: &std::ffi::OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(BWRAP))
        .find(|candidate| {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::metadata(candidate).is_ok_and(|metadata| {
                metadata.is_file() && metadata.permissions().mode() & 0o111 != 0
            })
        })
}

/// The arguments before `program args...`. Runs on the spawner thread: it
/// looks for (and makes, when a repository has none) the `hooks`
/// directories to protect, so a command cannot create one.
pub(crate) fn args(roots: &[PathBuf], network: NetworkAccess, cwd: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--unshare-pid",
        "--unshare-ipc",
    ]
    .map(OsString::from)
    .to_vec();
    if !network.allows() {
        args.push("--unshare-net".into());
    }
    for flag in [
        ["--ro-bind", "/", "/"],
        ["--dev", "/dev", ""],
        ["--proc", "/proc", ""],
        ["--ro-bind", "/proc/sys", "/proc/sys"],
    ] {
        args.extend(
            flag.iter()
                .filter(|part| !part.is_empty())
                .map(OsString::from),
        );
    }
    for root in roots {
        push_bind(&mut args, "--bind", root);
    }
    for protected in roots.iter().flat_map(|root| protected_paths(root)) {
        push_bind(&mut args, "--ro-bind", &protected);
    }
    args.push("--chdir".into());
    args.push(cwd.as_os_str().to_os_string());
    args.push("--".into());
    args
}

fn push_bind(args: &mut Vec<OsString>, flag: &str, path: &Path) {
    args.push(flag.into());
    args.push(path.as_os_str().to_os_string());
    args.push(path.as_os_str().to_os_string());
}

/// The git metadata under `root` that must stay read-only: a checkout's
/// `.git/hooks` and `.git/config`, or those of `root` itself when it is a
/// git directory (a worktree's common dir).
pub(crate) fn protected_paths(root: &Path) -> Vec<PathBuf> {
    let dot_git = root.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else if root.join("HEAD").is_file() && root.join("objects").is_dir() {
        root.to_path_buf()
    } else {
        return Vec::new();
    };
    let hooks = git_dir.join("hooks");
    // A repository without `hooks` gets an empty one, so there is a
    // mount point to protect and a command cannot create the directory.
    let _ = std::fs::create_dir(&hooks);
    [hooks, git_dir.join("config")]
        .into_iter()
        .filter(|path| path.exists())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(args: &[OsString]) -> String {
        args.iter()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn git_metadata_is_bound_read_only_after_the_writable_roots() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::write(ws.join(".git/config"), "").unwrap();
        let args = text(&args(std::slice::from_ref(&ws), NetworkAccess::Off, &ws));
        let ws = ws.display();
        let bind = format!("--bind {ws} {ws}");
        let hooks = format!("--ro-bind {ws}/.git/hooks {ws}/.git/hooks");
        let config = format!("--ro-bind {ws}/.git/config {ws}/.git/config");
        assert!(args.contains("--unshare-net"), "{args}");
        assert!(args.contains("--cap-drop ALL"), "{args}");
        let at = |needle: &str| {
            args.find(needle)
                .unwrap_or_else(|| panic!("{needle} in {args}"))
        };
        assert!(at(&bind) < at(&hooks) && at(&hooks) < at(&config), "{args}");
        assert!(args.ends_with(&format!("--chdir {ws} --")), "{args}");
    }

    #[test]
    fn network_on_keeps_the_host_network_and_plain_dirs_protect_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let args = text(&args(
            &[dir.path().to_path_buf()],
            NetworkAccess::On,
            dir.path(),
        ));
        assert!(!args.contains("--unshare-net"), "{args}");
        assert!(!args.contains(".git"), "{args}");
    }

    #[test]
    fn a_common_git_dir_protects_its_own_hooks() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("objects")).unwrap();
        std::fs::write(dir.path().join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(dir.path().join("config"), "").unwrap();
        let protected = protected_paths(dir.path());
        assert_eq!(
            protected,
            vec![dir.path().join("hooks"), dir.path().join("config")]
        );
    }
}

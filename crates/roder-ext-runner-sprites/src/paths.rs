//! Resolving caller paths against the session's workspace root.
//!
//! The runtime hands over paths relative to the workspace root (files inside
//! it) and absolute ones (files under a read root outside it). They are
//! resolved here, on the client, and sent absolute and normalised (with
//! `workingDir` alongside), so the result does not depend on how a given
//! server version treats relative paths or `..`.
//!
//! * A relative path is joined to the root and its `.`/`..` are folded. It
//!   must stay inside the root at every step: `a/../b` is fine, `../x` and
//!   `a/../../x` are refused, even when a later step would come back in.
//! * An absolute path is the caller's choice (the runtime has already
//!   checked it against its read roots); it is only folded, and `..` never
//!   climbs above `/`.
//!
//! Both rules are `roder_sandbox::paths::runner_path`, where they are
//! property-tested (folding never escapes the root, is idempotent, and no
//! input panics); the examples below pin this runner's use of it.

use std::path::Path;

/// The absolute, normalised sprite path for `path` under workspace `root`
/// (an absolute path, normalised as the config leaves it). `""` and `.` mean
/// `root`. The rules are [`roder_sandbox::paths::runner_path`]'s, shared with
/// the docker runner.
pub(crate) fn resolve(root: &str, path: &Path) -> anyhow::Result<String> {
    Ok(roder_sandbox::paths::runner_path(root, path, "workspace")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WD: &str = "/home/sprite/workspace";

    #[test]
    fn relative_paths_join_the_working_dir() {
        assert_eq!(
            resolve(WD, Path::new("a/b.txt")).unwrap(),
            "/home/sprite/workspace/a/b.txt"
        );
        assert_eq!(
            resolve(WD, Path::new("./a")).unwrap(),
            "/home/sprite/workspace/a"
        );
        assert_eq!(resolve(WD, Path::new("")).unwrap(), WD);
        assert_eq!(resolve(WD, Path::new(".")).unwrap(), WD);
        assert_eq!(resolve(WD, Path::new("/etc/hosts")).unwrap(), "/etc/hosts");
        assert_eq!(resolve("/", Path::new("x")).unwrap(), "/x");
        assert!(resolve(WD, Path::new("a\0b")).is_err());
    }

    #[test]
    fn dot_dot_is_folded_and_stays_in_the_workspace() {
        assert_eq!(resolve(WD, Path::new("a/../b")).unwrap(), format!("{WD}/b"));
        assert_eq!(
            resolve(WD, Path::new("a/b/../../c/./d/")).unwrap(),
            format!("{WD}/c/d")
        );
        assert_eq!(resolve(WD, Path::new("a/..")).unwrap(), WD);
        for escaping in ["..", "../x", "a/../../x", "../workspace/x", "./.."] {
            let err = resolve(WD, Path::new(escaping)).unwrap_err().to_string();
            assert!(
                err.contains("climbs out of the workspace"),
                "{escaping}: {err}"
            );
            assert!(err.contains(WD), "{escaping}: {err}");
        }
        assert_eq!(resolve(WD, Path::new("/a/../../etc/x")).unwrap(), "/etc/x");
        assert_eq!(resolve(WD, Path::new("/..")).unwrap(), "/");
        assert_eq!(resolve("/", Path::new("a/../b")).unwrap(), "/b");
        assert!(resolve("/", Path::new("..")).is_err());
    }
}

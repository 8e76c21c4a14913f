//! The worktree's rules on top of the shared path confinement.
//!
//! Confinement itself (lexical `..` that never climbs above the root, then
//! canonicalising the deepest existing ancestor so symlinks cannot lead out)
//! is [`roder_sandbox::paths`]; this module names the checkout in its errors
//! and checks the working directory a claim asks for. The
//! functions here block on the filesystem; async callers run them on
//! `spawn_blocking`.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use roder_sandbox::paths::ConfinedRoot;

/// What confinement errors call a checkout (`path "x" is outside the
/// worktree`): the user chose a worktree, not a directory.
pub(crate) const ROOT_LABEL: &str = "worktree";

/// The working directory a claim asks for: `relative_cwd` must be relative,
/// must not climb out with `..` (the confinement refuses that), must exist
/// as a directory and must stay in the checkout once symlinks are resolved.
/// Blocks on the filesystem.
pub(crate) fn claimed_cwd(checkout: &Path, relative_cwd: Option<&Path>) -> anyhow::Result<PathBuf> {
    let confinement = ConfinedRoot::open(checkout, ROOT_LABEL)?;
    let Some(relative) = relative_cwd else {
        return Ok(confinement.canonical().to_path_buf());
    };
    if relative.is_absolute() {
        bail!(
            "relative_cwd `{}` must be relative to the worktree's checkout",
            relative.display()
        );
    }
    confinement
        .resolve_dir(confinement.canonical(), relative, "directory")
        .with_context(|| format!("relative_cwd `{}` is not usable", relative.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_refused_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/target", dir.path().join("dangling")).unwrap();
        let confinement = ConfinedRoot::open(dir.path(), ROOT_LABEL).unwrap();
        let base = confinement.canonical().to_path_buf();
        let error = confinement.resolve(&base, Path::new("../x")).unwrap_err();
        assert!(
            error
                .to_string()
                .contains(r#"path "../x" is outside the worktree"#),
            "{error}"
        );
        let error = confinement
            .resolve(&base, Path::new("/etc/passwd"))
            .unwrap_err();
        assert!(error.to_string().contains(r#""/etc/passwd" is outside"#));
        let error = confinement.resolve(&base, Path::new("link/f")).unwrap_err();
        assert!(error.to_string().contains("leaves the worktree"), "{error}");
        let error = confinement
            .resolve(&base, Path::new("dangling"))
            .unwrap_err();
        assert!(error.to_string().contains("cannot be resolved"));
    }

    #[test]
    fn claimed_cwd_rules() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/bin")).unwrap();
        std::fs::write(dir.path().join("file"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink("src", dir.path().join("alias")).unwrap();
        let canonical = std::fs::canonicalize(dir.path()).unwrap();

        assert_eq!(claimed_cwd(dir.path(), None).unwrap(), canonical);
        assert_eq!(
            claimed_cwd(dir.path(), Some(Path::new("src/./bin"))).unwrap(),
            canonical.join("src/bin")
        );
        assert_eq!(
            claimed_cwd(dir.path(), Some(Path::new("alias"))).unwrap(),
            canonical.join("src")
        );
        let error = |path: &str| {
            format!(
                "{:#}",
                claimed_cwd(dir.path(), Some(Path::new(path))).unwrap_err()
            )
        };
        assert!(error("..").contains("outside the worktree"));
        assert!(error("src/../../x").contains("outside the worktree"));
        assert!(error("/tmp").contains("must be relative"));
        assert!(error("out").contains("leaves the worktree"));
        assert!(error("missing").contains("does not exist"));
        assert!(error("file").contains("is not a directory"));
    }
}

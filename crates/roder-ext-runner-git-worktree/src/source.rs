//! The source repository of a materialization: where it is, what the
//! selector names in it, and whether it is clean.
//!
//! Only local repositories are accepted. A remote URL would need a clone
//! (credentials, network, a place to keep it) that is not this crate's job;
//! the caller clones it and passes the local path.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::git::Git;

/// The selector used when the request names none.
pub(crate) const DEFAULT_SELECTOR: &str = "HEAD";

/// A local repository, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Source {
    /// Top level of the working tree (the git directory for a bare one).
    pub(crate) repository: PathBuf,
    /// The common git directory (shared by all its worktrees).
    pub(crate) common_dir: PathBuf,
    pub(crate) bare: bool,
}

/// What a selector resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub(crate) commit: String,
    pub(crate) tree: String,
}

/// Whether `text` looks like a URL or an scp-style remote (`host:path`)
/// rather than a local path.
pub(crate) fn looks_remote(text: &str) -> bool {
    if text.contains("://") {
        return true;
    }
    // `git@host:owner/repo`, `host:repo`: a colon before any slash.
    match (text.find(':'), text.find('/')) {
        (Some(colon), Some(slash)) => colon < slash,
        (Some(_), None) => true,
        _ => false,
    }
}

/// Whether `selector` means "the source's current HEAD", whose uncommitted
/// changes a checkout would silently leave behind.
pub(crate) fn is_head(selector: &str) -> bool {
    matches!(selector, "HEAD" | "@")
}

/// Refuses selectors git could read as an option or that cannot be an
/// argument at all.
pub(crate) fn validate_selector(selector: &str) -> anyhow::Result<()> {
    if selector.trim().is_empty() {
        bail!("selector is empty; name a branch, tag or commit, or leave it out for HEAD");
    }
    if selector.starts_with('-') {
        bail!("selector {selector:?} must not start with '-'");
    }
    if selector.chars().any(char::is_control) {
        bail!("selector {selector:?} contains a control character");
    }
    Ok(())
}

impl Source {
    /// Resolves a requested repository path, refusing remote URLs and
    /// anything that is not an existing local git repository.
    pub(crate) async fn open(requested: &Path) -> anyhow::Result<Self> {
        let text = requested.to_string_lossy();
        if looks_remote(&text) {
            bail!(
                "repository {text:?} is a remote URL; only local repositories are supported \
                 (clone it first and pass the clone's absolute path)"
            );
        }
        if !requested.is_absolute() {
            bail!("repository {text:?} must be an absolute path of a local git repository");
        }
        match tokio::fs::metadata(requested).await {
            Ok(metadata) if metadata.is_dir() => {}
            Ok(_) => bail!("repository `{text}` is not a directory"),
            Err(error) => {
                return Err(error).with_context(|| format!("repository `{text}` does not exist"));
            }
        }
        let probe = Git::new(requested)
            .args([
                "rev-parse",
                "--is-bare-repository",
                "--path-format=absolute",
                "--git-common-dir",
            ])
            .text()
            .await
            .with_context(|| format!("`{text}` is not a git repository"))?;
        let mut lines = probe.lines();
        let (Some(bare), Some(common_dir)) = (lines.next(), lines.next()) else {
            bail!("unexpected `git rev-parse` output in `{text}`: {probe:?}");
        };
        let bare = bare == "true";
        let common_dir = tokio::fs::canonicalize(common_dir)
            .await
            .with_context(|| format!("cannot resolve the git directory of `{text}`"))?;
        let repository = if bare {
            common_dir.clone()
        } else {
            let top = Git::new(requested)
                .args(["rev-parse", "--show-toplevel"])
                .text()
                .await?;
            tokio::fs::canonicalize(&top)
                .await
                .with_context(|| format!("cannot resolve the top level of `{text}`"))?
        };
        Ok(Self {
            repository,
            common_dir,
            bare,
        })
    }

    fn git(&self) -> Git {
        Git::new(&self.repository)
    }

    /// The commit and tree `selector` names.
    pub(crate) async fn resolve(&self, selector: &str) -> anyhow::Result<Resolved> {
        let commit = self
            .git()
            .args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
            .arg(format!("{selector}^{{commit}}"))
            .text()
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "selector {selector:?} does not name a commit in `{}`",
                    self.repository.display()
                )
            })?;
        let tree = self
            .git()
            .args(["rev-parse", "--verify"])
            .arg(format!("{commit}^{{tree}}"))
            .text()
            .await?;
        Ok(Resolved { commit, tree })
    }

    /// Whether the working tree has no changes (`git status --porcelain`
    /// empty; untracked files count, ignored ones do not). A bare repository
    /// has no working tree and is clean. Optional locks are off so looking
    /// never rewrites the user's index.
    pub(crate) async fn is_clean(&self) -> anyhow::Result<bool> {
        if self.bare {
            return Ok(true);
        }
        let status = self
            .git()
            .args(["--no-optional-locks", "status", "--porcelain"])
            .run()
            .await?;
        Ok(status.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_urls_are_recognised() {
        for remote in [
            "https://github.com/o/r.git",
            "ssh://git@host/r",
            "file:///srv/repo",
            "git@github.com:o/r.git",
            "host:repo",
        ] {
            assert!(looks_remote(remote), "{remote}");
        }
        for local in ["/srv/repo", "/srv/a:b", "relative/dir", "/"] {
            assert!(!looks_remote(local), "{local}");
        }
    }

    #[test]
    fn selectors_that_look_like_options_are_refused() {
        validate_selector("main").unwrap();
        validate_selector("v1.0~2").unwrap();
        assert!(validate_selector("").is_err());
        assert!(validate_selector("--output=/etc/x").is_err());
        assert!(validate_selector("a\nb").is_err());
        assert!(is_head("HEAD") && is_head("@") && !is_head("main"));
    }
}

// The git commit a build's sources come from, for `roder --version`. Used
// by build.rs, and compiled into the crate's tests too (a build script has
// no test harness of its own).

use std::path::{Path, PathBuf};
use std::process::Command;

/// `git ARGS` in `dir`: its trimmed stdout when it succeeds.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    Some(text.trim().to_string())
}

/// The abbreviated commit `HEAD` names for the crate in `dir`, or `None`
/// when git is missing, `dir` is in no repository (a source tarball), or
/// the repository found does not track the crate (a tarball unpacked inside
/// some other checkout, whose commit would be a lie).
pub fn commit(dir: &Path) -> Option<String> {
    git(dir, &["ls-files", "--error-unmatch", "Cargo.toml"])?;
    git(dir, &["rev-parse", "--short=12", "HEAD"])
}

/// The files whose change means `HEAD` may name another commit: `HEAD`
/// itself, the branch it points to (or, before its first loose write, the
/// directory it will appear in) and `packed-refs`. Worktrees keep `HEAD`
/// apart from the shared refs; `git rev-parse --git-path` knows where each is.
pub fn watched(dir: &Path) -> Vec<PathBuf> {
    let git_path =
        |name: &str| git(dir, &["rev-parse", "--git-path", name]).map(|path| dir.join(path));
    let mut paths: Vec<PathBuf> = git_path("HEAD").into_iter().collect();
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"])
        && let Some(path) = git_path(&branch)
    {
        match (path.exists(), path.parent()) {
            (true, _) => paths.push(path),
            (false, Some(parent)) => paths.push(parent.to_path_buf()),
            (false, None) => {}
        }
    }
    paths.extend(git_path("packed-refs").filter(|path| path.exists()));
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_git(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }

    #[test]
    fn a_tarball_has_no_commit_and_a_checkout_names_its_head() {
        let tarball = tempfile::tempdir().unwrap();
        std::fs::write(tarball.path().join("Cargo.toml"), "[package]\n").unwrap();
        assert_eq!(commit(tarball.path()), None);

        let checkout = tempfile::tempdir().unwrap();
        run_git(checkout.path(), &["init", "-q", "-b", "main"]);
        std::fs::write(checkout.path().join("Cargo.toml"), "[package]\n").unwrap();
        run_git(checkout.path(), &["add", "Cargo.toml"]);
        run_git(checkout.path(), &["commit", "-q", "-m", "one"]);
        let head = git(checkout.path(), &["rev-parse", "--short=12", "HEAD"]).unwrap();
        assert_eq!(head.len(), 12);
        assert_eq!(commit(checkout.path()), Some(head));
        let watched = watched(checkout.path());
        let git_dir = checkout.path().join(".git");
        assert!(watched.contains(&git_dir.join("HEAD")), "{watched:?}");
        assert!(
            watched.contains(&git_dir.join("refs/heads/main")),
            "{watched:?}"
        );

        // Unpacked inside another checkout: that checkout's commit is not ours.
        let unpacked = checkout.path().join("unpacked");
        std::fs::create_dir(&unpacked).unwrap();
        std::fs::write(unpacked.join("Cargo.toml"), "[package]\n").unwrap();
        assert_eq!(commit(&unpacked), None);
    }
}

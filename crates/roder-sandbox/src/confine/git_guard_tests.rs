//! The guard on real directories, without a command: what a command could
//! do to `.git/hooks` and `.git/config` is done between `enter` and
//! `finish`, and everything must be back as it was after.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use super::{enter, git_dirs};

/// A checkout-shaped directory: `.git/hooks` with two hooks (one
/// executable, one sample), `.git/config`.
fn repository() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let hooks = root.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(
        hooks.join("pre-commit"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::write(hooks.join("pre-push.sample"), "sample\n").unwrap();
    std::fs::write(root.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
    (dir, root)
}

/// Every path under `.git/hooks` with its content and mode, and the
/// config: what must come back.
fn state(root: &Path) -> Vec<(String, String, u32)> {
    let mut all = Vec::new();
    let git = root.join(".git");
    fn visit(base: &Path, dir: &Path, all: &mut Vec<(String, String, u32)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let name = path.strip_prefix(base).unwrap().display().to_string();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.is_dir() {
                all.push((name, "<dir>".into(), mode));
                visit(base, &path, all);
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                all.push((name, format!("-> {}", target.display()), 0));
            } else {
                all.push((name, std::fs::read_to_string(&path).unwrap(), mode));
            }
        }
    }
    if git.join("hooks").is_dir() {
        visit(&git, &git.join("hooks"), &mut all);
    }
    all.push((
        "config".into(),
        std::fs::read_to_string(git.join("config")).unwrap_or_default(),
        0,
    ));
    all.sort();
    all
}

#[test]
fn a_planted_hook_and_a_changed_config_are_put_back_and_reported() {
    let (_dir, root) = repository();
    let before = state(&root);
    let watch = enter(std::slice::from_ref(&root));
    let hooks = root.join(".git/hooks");
    std::fs::write(hooks.join("post-checkout"), "#!/bin/sh\ntouch /tmp/x\n").unwrap();
    std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\ncurl evil\n").unwrap();
    std::fs::remove_file(hooks.join("pre-push.sample")).unwrap();
    std::fs::write(root.join(".git/config"), "[core]\n\thooksPath = /tmp\n").unwrap();
    let reports = watch.finish();
    assert_eq!(state(&root), before);
    let text = reports.join("\n");
    for name in ["post-checkout", "pre-commit", "pre-push.sample", "config"] {
        assert!(text.contains(name), "{name} in {text}");
    }
    // Nothing left beside them by the restore.
    assert!(!text.contains("could not"), "{text}");
}

#[test]
fn a_write_that_keeps_size_and_mtime_is_still_seen() {
    let (_dir, root) = repository();
    let before = state(&root);
    let hook = root.join(".git/hooks/pre-commit");
    let mtime = std::fs::metadata(&hook).unwrap().modified().unwrap();
    let watch = enter(std::slice::from_ref(&root));
    // Same length, same modification time: only the change time moves.
    std::fs::write(&hook, "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&hook)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let reports = watch.finish();
    assert_eq!(state(&root), before, "{reports:?}");
    assert_eq!(reports.len(), 1, "{reports:?}");
}

#[test]
fn a_hooks_directory_replaced_by_a_link_or_removed_comes_back() {
    let (dir, root) = repository();
    let before = state(&root);
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("post-checkout"), "evil").unwrap();

    let watch = enter(std::slice::from_ref(&root));
    std::fs::rename(root.join(".git/hooks"), dir.path().join("moved")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, root.join(".git/hooks")).unwrap();
    let reports = watch.finish();
    assert_eq!(state(&root), before, "{reports:?}");
    // The link's target was not written through.
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("post-checkout")).unwrap(),
        "evil"
    );

    let watch = enter(std::slice::from_ref(&root));
    std::fs::remove_dir_all(root.join(".git/hooks")).unwrap();
    std::fs::remove_file(root.join(".git/config")).unwrap();
    let reports = watch.finish();
    assert_eq!(state(&root), before, "{reports:?}");
    assert_eq!(reports.len(), 2, "{reports:?}");
}

#[test]
fn a_hooks_directory_created_where_there_was_none_is_removed() {
    let (_dir, root) = repository();
    std::fs::remove_dir_all(root.join(".git/hooks")).unwrap();
    let watch = enter(std::slice::from_ref(&root));
    std::fs::create_dir(root.join(".git/hooks")).unwrap();
    std::fs::write(root.join(".git/hooks/post-merge"), "evil").unwrap();
    let reports = watch.finish();
    assert!(!root.join(".git/hooks").exists(), "{reports:?}");
    assert_eq!(reports.len(), 1, "{reports:?}");
}

#[test]
fn the_persons_own_change_between_commands_is_kept_and_nothing_reported() {
    let (_dir, root) = repository();
    enter(std::slice::from_ref(&root)).finish();
    // The person installs a hook while no command runs.
    std::fs::write(root.join(".git/hooks/commit-msg"), "mine").unwrap();
    let mine = state(&root);
    let watch = enter(std::slice::from_ref(&root));
    assert!(watch.finish().is_empty());
    assert_eq!(state(&root), mine);
}

#[test]
fn a_command_beside_another_does_not_make_its_plant_the_baseline() {
    let (_dir, root) = repository();
    let before = state(&root);
    let first = enter(std::slice::from_ref(&root));
    std::fs::write(root.join(".git/hooks/post-checkout"), "evil").unwrap();
    // A second command starts while the first runs: the baseline stays.
    let second = enter(std::slice::from_ref(&root));
    let first_reports = first.finish();
    assert_eq!(state(&root), before);
    assert_eq!(first_reports.len(), 1, "{first_reports:?}");
    // The second finds everything as the baseline has it (the restore is
    // not blamed on it).
    assert!(second.finish().is_empty());
    assert_eq!(state(&root), before);
}

#[test]
fn a_dropped_watch_still_restores() {
    let (_dir, root) = repository();
    let before = state(&root);
    let watch = enter(std::slice::from_ref(&root));
    std::fs::write(root.join(".git/hooks/post-checkout"), "evil").unwrap();
    // No runtime here: the drop checks at once.
    drop(watch);
    assert_eq!(state(&root), before);
}

#[test]
fn checkouts_and_common_dirs_are_found_and_plain_directories_skipped() {
    let (dir, root) = repository();
    let plain = dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let common = dir.path().join("common.git");
    std::fs::create_dir_all(common.join("objects")).unwrap();
    std::fs::write(common.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    // A worktree's `.git` is a file: its hooks live in the common dir.
    let worktree = dir.path().join("wt");
    std::fs::create_dir(&worktree).unwrap();
    std::fs::write(worktree.join(".git"), "gitdir: ../common.git\n").unwrap();
    assert_eq!(
        git_dirs(&[root.clone(), plain, common.clone(), worktree]),
        {
            let mut expected = vec![root.join(".git"), common];
            expected.sort();
            expected
        }
    );
}

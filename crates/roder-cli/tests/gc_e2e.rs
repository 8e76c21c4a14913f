//! Checkpoint retention and `roder gc` through the real binary: a local
//! thread in a git repository (a checkpoint ref per turn), a unix-local
//! thread (a directory copy per turn) and a copy left by a deleted thread,
//! collected with `gc --keep-turns 1` (`keep_turns` itself stays at its
//! default of 10, so the runtime's own collection after each turn removes
//! nothing); another home's thread checkpoints the same repository. Refs
//! and copies are counted before and after `--dry-run` (nothing changes),
//! `gc` (each thread keeps its last turn's, the other home keeps all of its
//! own) and `threads delete` (the thread's last checkpoint goes with it).
//! With `keep_turns = 1` in `config.toml`, each turn's process collects the
//! thread's older checkpoints itself, without `gc`.

mod support;

use std::path::Path;

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use support::{roder, thread_id_from, write_config};

fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A repository of one commit at `dir/repo`.
fn repo_in(dir: &Path) -> std::path::PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let repo = repo.canonicalize().unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "hello\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    repo
}

/// The checkpoint refs of `thread` in `repo`.
fn refs_of(repo: &Path, thread: &str) -> usize {
    git(
        repo,
        &[
            "for-each-ref",
            "--format=%(refname)",
            &format!("refs/roder/checkpoints/{thread}/"),
        ],
    )
    .lines()
    .count()
}

/// The directory copies under `dir` (one directory per turn).
fn copies_in(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| entries.count())
}

/// Runs `turns` turns of one thread (a text reply each) and returns its id.
async fn turns(
    server: &FakeModelServer,
    home: &Path,
    workspace: &Path,
    first: &[&str],
    turns: usize,
) -> String {
    server.push(ChatStream::text_reply("turn done"));
    let mut args = vec!["exec"];
    args.extend_from_slice(first);
    args.push("first turn");
    let run = roder(home, workspace, &args).await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let thread = thread_id_from(&run.stderr);
    for _ in 1..turns {
        server.push(ChatStream::text_reply("turn done"));
        let run = roder(home, workspace, &["exec", "--thread", &thread, "again"]).await;
        assert_eq!(run.code, Some(0), "{}", run.stderr);
    }
    thread
}

#[tokio::test]
async fn gc_keeps_the_last_turns_and_never_touches_another_home() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_in(dir.path());
    let runner_root = dir.path().join("runner-root");
    std::fs::create_dir(&runner_root).unwrap();

    let server = FakeModelServer::start().await.unwrap();
    let home = dir.path().join("home");
    let other_home = dir.path().join("other-home");
    for home in [&home, &other_home] {
        std::fs::create_dir(home).unwrap();
        write_config(home, &server, Some(&runner_root));
    }

    let local = turns(&server, &home, &repo, &[], 3).await;
    let copied = turns(&server, &home, &repo, &["--runner", "local"], 2).await;
    let others = turns(&server, &other_home, &repo, &[], 2).await;
    let copies = home.join("checkpoints").join(&copied);
    // A copy a thread deleted before retention existed left behind.
    let orphan = home.join("checkpoints").join("thread-deleted-long-ago");
    std::fs::create_dir_all(orphan.join("turn")).unwrap();
    std::fs::write(orphan.join("turn").join("file"), "12345").unwrap();
    assert_eq!(
        (
            refs_of(&repo, &local),
            copies_in(&copies),
            refs_of(&repo, &others)
        ),
        (3, 2, 2)
    );

    let dry = roder(&home, &repo, &["gc", "--keep-turns", "1", "--dry-run"]).await;
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    let listed: Vec<&str> = dry
        .stdout
        .lines()
        .filter(|line| line.starts_with("would remove checkpoint"))
        .collect();
    assert_eq!(listed.len(), 4, "2 refs, 1 copy, 1 orphan:\n{}", dry.stdout);
    assert!(
        dry.stdout.contains("thread-deleted-long-ago") && dry.stdout.contains("bytes=5"),
        "{}",
        dry.stdout
    );
    assert!(!dry.stdout.contains(&others), "{}", dry.stdout);
    assert_eq!(
        (
            refs_of(&repo, &local),
            copies_in(&copies),
            refs_of(&repo, &others)
        ),
        (3, 2, 2),
        "a dry run removes nothing"
    );
    assert!(orphan.exists());

    let collected = roder(&home, &repo, &["gc", "--keep-turns", "1"]).await;
    assert_eq!(collected.code, Some(0), "{}", collected.stderr);
    assert_eq!(
        (
            refs_of(&repo, &local),
            copies_in(&copies),
            refs_of(&repo, &others)
        ),
        (1, 1, 2),
        "{}",
        collected.stdout
    );
    assert!(!orphan.exists());
    // The kept checkpoint is the last turn's: rolling back that turn works.
    let rolled_back = roder(
        &home,
        &repo,
        &["threads", "rollback", &local, "--turn", "2"],
    )
    .await;
    assert_eq!(rolled_back.code, Some(0), "{}", rolled_back.stderr);
    // A second collection finds nothing more.
    let again = roder(&home, &repo, &["gc", "--keep-turns", "1", "--dry-run"]).await;
    assert!(
        !again.stdout.contains("would remove checkpoint"),
        "{}",
        again.stdout
    );

    // Deleting a thread removes its checkpoints with it.
    for thread in [&local, &copied] {
        let deleted = roder(&home, &repo, &["threads", "delete", thread]).await;
        assert_eq!(deleted.code, Some(0), "{}", deleted.stderr);
    }
    assert_eq!(
        (
            refs_of(&repo, &local),
            copies_in(&copies),
            refs_of(&repo, &others)
        ),
        (0, 0, 2)
    );
}

/// A profile archive of one `reviewer` entrypoint saying `instructions`,
/// written to `path`; its digest and size.
fn archive_at(path: &Path, instructions: &str) -> (String, String) {
    let bundle = tempfile::tempdir().unwrap();
    std::fs::create_dir(bundle.path().join("profiles")).unwrap();
    std::fs::write(
        bundle.path().join("roder-bundle.toml"),
        "id = \"team\"\n[entrypoints]\nreviewer = \"profiles/reviewer.md\"\n",
    )
    .unwrap();
    std::fs::write(
        bundle.path().join("profiles/reviewer.md"),
        format!("+++\nname = \"reviewer\"\n+++\n{instructions}\n"),
    )
    .unwrap();
    let (reference, bytes) = roder_profiles::pack(bundle.path()).unwrap();
    std::fs::write(path, bytes).unwrap();
    (reference.digest, reference.size.to_string())
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test]
async fn gc_removes_deleted_threads_worktrees_and_archives_no_thread_names() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_in(dir.path());
    let server = FakeModelServer::start().await.unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    write_config(&home, &server, None);

    // Two worktree threads; the second is deleted (its worktree is kept).
    let kept = turns(&server, &home, &repo, &["--worktree"], 1).await;
    let deleted = turns(&server, &home, &repo, &["--worktree"], 1).await;
    // Two threads from two profile archives; the second is deleted.
    let (in_use, unused) = (dir.path().join("a.tar"), dir.path().join("b.tar"));
    let (digest_a, size_a) = archive_at(&in_use, "Archive A.");
    let (digest_b, size_b) = archive_at(&unused, "Archive B.");
    let with_archive = |tar: &Path, digest: &str, size: &str| {
        [
            "--profile".to_string(),
            "reviewer".into(),
            "--profile-archive".into(),
            tar.display().to_string(),
            "--profile-digest".into(),
            digest.into(),
            "--profile-size".into(),
            size.into(),
        ]
    };
    let flags_a = with_archive(&in_use, &digest_a, &size_a);
    let flags_b = with_archive(&unused, &digest_b, &size_b);
    let flags_a: Vec<&str> = flags_a.iter().map(String::as_str).collect();
    let flags_b: Vec<&str> = flags_b.iter().map(String::as_str).collect();
    turns(&server, &home, &repo, &flags_a, 1).await;
    let from_b = turns(&server, &home, &repo, &flags_b, 1).await;
    for thread in [&deleted, &from_b] {
        let run = roder(&home, &repo, &["threads", "delete", thread]).await;
        assert_eq!(run.code, Some(0), "{}", run.stderr);
    }
    let worktrees = home.join("worktrees");
    let blobs = home.join("cache/profiles/sha256");
    let hex = |digest: &str| format!("{}.tar", digest.trim_start_matches("sha256:"));
    let before = (entries(&worktrees), entries(&blobs));
    assert_eq!(before.0.len(), 2, "{before:?}");
    assert_eq!(before.1, {
        let mut both = vec![hex(&digest_a), hex(&digest_b)];
        both.sort();
        both
    });
    let registered = || git(&repo, &["worktree", "list"]).lines().count();
    assert_eq!(registered(), 3, "the checkout and two worktrees");

    let dry = roder(&home, &repo, &["gc", "--dry-run"]).await;
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    let listed = |prefix: &str| {
        dry.stdout
            .lines()
            .filter(|line| line.starts_with(prefix))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let worktree_lines = listed("would remove worktree");
    assert_eq!(worktree_lines.len(), 1, "{}", dry.stdout);
    assert!(!worktree_lines[0].contains(&kept), "{}", dry.stdout);
    assert!(!worktree_lines[0].contains("bytes=0"), "{}", dry.stdout);
    let archive_lines = listed("would remove profile archive");
    assert_eq!(
        archive_lines,
        [format!(
            "would remove profile archive {digest_b} bytes={size_b}"
        )]
    );
    assert_eq!(
        (entries(&worktrees), entries(&blobs)),
        before,
        "a dry run removes nothing"
    );

    let collected = roder(&home, &repo, &["gc"]).await;
    assert_eq!(collected.code, Some(0), "{}", collected.stderr);
    assert_eq!(entries(&worktrees).len(), 1, "{}", collected.stdout);
    assert_eq!(entries(&blobs), [hex(&digest_a)]);
    assert_eq!(registered(), 2, "git forgot the removed worktree");
    // The live worktree thread still works in its worktree.
    server.push(ChatStream::text_reply("still here"));
    let again = roder(&home, &repo, &["exec", "--thread", &kept, "again"]).await;
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    let nothing = roder(&home, &repo, &["gc", "--dry-run"]).await;
    assert!(
        !nothing.stdout.contains("would remove"),
        "{}",
        nothing.stdout
    );
}

#[tokio::test]
async fn with_keep_turns_set_each_turn_collects_the_older_checkpoints_itself() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_in(dir.path());
    let runner_root = dir.path().join("runner-root");
    std::fs::create_dir(&runner_root).unwrap();
    let server = FakeModelServer::start().await.unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    write_config(&home, &server, Some(&runner_root));
    let config = home.join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("checkpoints = {{ keep_turns = 2 }}\n{text}"),
    )
    .unwrap();

    // Five turns, one process each: every process collects before it exits.
    let local = turns(&server, &home, &repo, &[], 5).await;
    let copied = turns(&server, &home, &repo, &["--runner", "local"], 4).await;
    assert_eq!(refs_of(&repo, &local), 2, "the last two turns' refs");
    assert_eq!(
        copies_in(&home.join("checkpoints").join(&copied)),
        2,
        "the last two turns' copies"
    );
    // Nothing is left for gc at that retention; the newest turn rolls back.
    let dry = roder(&home, &repo, &["gc", "--dry-run"]).await;
    assert!(
        !dry.stdout.contains("would remove checkpoint"),
        "{}",
        dry.stdout
    );
    let rolled_back = roder(
        &home,
        &repo,
        &["threads", "rollback", &local, "--turn", "4"],
    )
    .await;
    assert_eq!(rolled_back.code, Some(0), "{}", rolled_back.stderr);
}

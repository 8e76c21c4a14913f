//! Checkpoint retention and `roder gc` through the real binary: a local
//! thread in a git repository (a checkpoint ref per turn), a unix-local
//! thread (a directory copy per turn) and a copy left by a deleted thread,
//! with `[checkpoints] keep_turns = 1`; another home's thread checkpoints
//! the same repository. Refs and copies are counted before and after
//! `--dry-run` (nothing changes), `gc` (each thread keeps its last turn's,
//! the other home keeps all of its own) and `threads delete` (the thread's
//! last checkpoint goes with it).

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
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let repo = repo.canonicalize().unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "hello\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    let runner_root = dir.path().join("runner-root");
    std::fs::create_dir(&runner_root).unwrap();

    let server = FakeModelServer::start().await.unwrap();
    let home = dir.path().join("home");
    let other_home = dir.path().join("other-home");
    for home in [&home, &other_home] {
        std::fs::create_dir(home).unwrap();
        write_config(home, &server, Some(&runner_root));
    }
    let config = home.join("config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text = format!("checkpoints = {{ keep_turns = 1 }}\n{text}");
    std::fs::write(&config, text).unwrap();

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

    let dry = roder(&home, &repo, &["gc", "--dry-run"]).await;
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

    let collected = roder(&home, &repo, &["gc"]).await;
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
    let again = roder(&home, &repo, &["gc", "--dry-run"]).await;
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

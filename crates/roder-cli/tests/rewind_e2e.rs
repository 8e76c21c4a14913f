//! The `roder` binary end to end against a fake Chat Completions server, in
//! a real git repository: `roder threads show` lists the rewind targets,
//! `roder threads rollback ID --turn N` restores the files and the next
//! request leaves the undone turn out, `roder threads fork ID --turn N`
//! prints only the fork's id on stdout and the fork has its own worktree,
//! and `roder exec --worktree` leaves the user's checkout untouched.

use std::path::{Path, PathBuf};
use std::time::Duration;

use roder_testkit::fake_models::{ChatStream, FakeModelServer, FakeStream};

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn roder(home: &Path, workspace: &Path, args: &[&str]) -> Run {
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"))
            .args(args)
            .current_dir(workspace)
            .env("RODER_HOME", home)
            .env_remove("RODER_MODEL")
            .output(),
    )
    .await
    .expect("roder should finish within 60 s")
    .unwrap();
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

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

fn thread_id_from(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|line| line.strip_prefix("roder: thread "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no thread id in stderr:\n{stderr}"))
        .to_string()
}

fn works_in(shown: &str) -> PathBuf {
    shown
        .lines()
        .find_map(|line| line.split("works in ").nth(1))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no workspace in:\n{shown}"))
}

fn write(path: &str, content: &str) -> FakeStream {
    let arguments = serde_json::json!({ "path": path, "content": content }).to_string();
    ChatStream::tool_calls_reply(&[("call", "write_file", &arguments)])
}

#[tokio::test]
async fn rollback_fork_and_worktree_exec_through_the_binary() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().canonicalize().unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "hello\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    let server = FakeModelServer::start().await.unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"fake/m\"\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\n",
            server.openai_base_url()
        ),
    )
    .unwrap();

    server.push(write("one.txt", "turn one\n"));
    server.push(ChatStream::text_reply("one done"));
    let first = roder(home.path(), &repo, &["exec", "first turn"]).await;
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let thread_id = thread_id_from(&first.stderr);
    server.push(write("two.txt", "turn two\n"));
    server.push(write("README.md", "edited in turn two\n"));
    server.push(ChatStream::text_reply("two done"));
    let second = roder(
        home.path(),
        &repo,
        &["exec", "--thread", &thread_id, "second turn"],
    )
    .await;
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    assert!(repo.join("two.txt").exists());

    let shown = roder(home.path(), &repo, &["threads", "show", &thread_id]).await;
    assert!(shown.stdout.contains("rewind targets"), "{}", shown.stdout);
    assert!(
        shown.stdout.contains("turn 1  checkpoint"),
        "{}",
        shown.stdout
    );

    // Fork at turn 1: a new worktree with turn one's files only.
    let forked = roder(
        home.path(),
        &repo,
        &["threads", "fork", &thread_id, "--turn", "1"],
    )
    .await;
    assert_eq!(forked.code, Some(0), "{}", forked.stderr);
    let fork_id = forked.stdout.trim().to_string();
    assert_eq!(
        forked.stdout,
        format!("{fork_id}\n"),
        "only the id on stdout"
    );
    assert_ne!(fork_id, thread_id);
    let fork_shown = roder(home.path(), &repo, &["threads", "show", &fork_id]).await;
    let fork_dir = works_in(&fork_shown.stdout);
    assert!(fork_dir.join("one.txt").exists());
    assert!(!fork_dir.join("two.txt").exists());
    assert_eq!(
        std::fs::read_to_string(fork_dir.join("README.md")).unwrap(),
        "hello\n"
    );

    let rolled_back = roder(
        home.path(),
        &repo,
        &["threads", "rollback", &thread_id, "--turn", "1"],
    )
    .await;
    assert_eq!(rolled_back.code, Some(0), "{}", rolled_back.stderr);
    assert!(!repo.join("two.txt").exists(), "created file gone");
    assert_eq!(
        std::fs::read_to_string(repo.join("README.md")).unwrap(),
        "hello\n",
        "edited file back"
    );
    assert!(repo.join("one.txt").exists());

    server.push(ChatStream::text_reply("three done"));
    let third = roder(
        home.path(),
        &repo,
        &["exec", "--thread", &thread_id, "third turn"],
    )
    .await;
    assert_eq!(third.code, Some(0), "{}", third.stderr);
    let last = server.model_requests().last().unwrap().body.to_string();
    assert!(
        last.contains("first turn") && last.contains("third turn"),
        "{last}"
    );
    assert!(
        !last.contains("second turn"),
        "the undone turn is left out: {last}"
    );

    let missing = roder(
        home.path(),
        &repo,
        &["threads", "rollback", &thread_id, "--turn", "9"],
    )
    .await;
    assert_ne!(missing.code, Some(0));
    assert!(
        missing.stderr.contains("is at turn 2"),
        "{}",
        missing.stderr
    );

    // `exec --worktree` works in a fresh worktree: the checkout stays as is.
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "turn one"]);
    server.push(write("in-worktree.txt", "w\n"));
    server.push(ChatStream::text_reply("worktree done"));
    let isolated = roder(home.path(), &repo, &["exec", "--worktree", "isolated"]).await;
    assert_eq!(isolated.code, Some(0), "{}", isolated.stderr);
    let worktree = isolated
        .stderr
        .lines()
        .find_map(|line| line.split("works in worktree ").nth(1))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no worktree path:\n{}", isolated.stderr));
    assert!(worktree.join("in-worktree.txt").exists());
    assert!(!repo.join("in-worktree.txt").exists());
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
}

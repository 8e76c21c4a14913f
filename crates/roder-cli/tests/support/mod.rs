//! What the signal, busy-thread and incomplete-answer e2e tests share: a
//! `$RODER_HOME` wired to a fake model server, the real `roder` binary, and
//! ways to watch the processes a tool call started.
#![allow(dead_code)] // each test file uses its own part

pub mod browser;
pub mod otlp;
pub mod replica;
pub mod ws;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use roder_testkit::fake_models::FakeModelServer;
use serde_json::Value;

/// Whether `program args` runs. Under `CI=true` a missing program panics,
/// since `.ci/run` installs it (`install` says how).
pub fn installed(program: &str, args: &[&str], install: &str) -> bool {
    let found = std::process::Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        if std::env::var("CI").is_ok_and(|value| value == "true") {
            panic!(
                "`{program} {}` does not run; .ci/run installs it ({install})",
                args.join(" ")
            );
        }
        eprintln!(
            "skipping: `{program} {}` does not run ({install})",
            args.join(" ")
        );
    }
    found
}

/// A home whose config points the `fake` provider at `server`, plus a
/// `[runners.local]` unix-local runner rooted at `runner_root` when given.
pub fn write_config(home: &Path, server: &FakeModelServer, runner_root: Option<&Path>) {
    let mut config = format!(
        "model = \"fake/m\"\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\n",
        server.openai_base_url()
    );
    if let Some(root) = runner_root {
        config.push_str(&format!(
            "\n[runners.local]\nprovider = \"unix-local\"\nconfig = {{ root = \"{}\" }}\n",
            root.display()
        ));
    }
    std::fs::write(home.join("config.toml"), config).unwrap();
}

/// `roder ARGS` in `workspace`, output piped, killed if the test drops it.
pub fn spawn_roder(home: &Path, workspace: &Path, args: &[&str]) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"))
        .args(args)
        .current_dir(workspace)
        .env("RODER_HOME", home)
        // The key of providers whose config names `api_key_env = "FAKE_MODEL_KEY"`.
        .env("FAKE_MODEL_KEY", "test-key")
        .env_remove("RODER_MODEL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

pub struct Finished {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

pub async fn finish(child: tokio::process::Child) -> Finished {
    use std::os::unix::process::ExitStatusExt as _;
    let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("roder should exit within 120 s")
        .unwrap();
    Finished {
        code: output.status.code(),
        signal: output.status.signal(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `roder ARGS` to its end.
pub async fn roder(home: &Path, workspace: &Path, args: &[&str]) -> Finished {
    finish(spawn_roder(home, workspace, args)).await
}

/// A shell script for `exec_command` that starts a tree and writes the pids
/// of its parts into `dir`: the shell itself, a background child, and an
/// orphan (its parent subshell exits at once, so it is reparented away from
/// the shell; it stays in the command's process group). It then sleeps in
/// the foreground, so the tool call stays running.
pub fn sleeping_tree(dir: &Path) -> String {
    let dir = dir.display();
    format!(
        "sleep 30 & echo $! > {dir}/background.pid; \
         (sleep 30 & echo $! > {dir}/orphan.pid); \
         echo $$ > {dir}/shell.pid; sleep 30; echo done"
    )
}

pub const TREE_PARTS: [&str; 3] = ["background", "orphan", "shell"];

/// Polls `condition` (no event exists for what it checks) until `within`.
pub async fn eventually(within: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    condition()
}

/// The pids [`sleeping_tree`] wrote, once all are written: the tool call is
/// then running.
pub async fn tree_pids(dir: &Path) -> Vec<(&'static str, i32)> {
    let mut pids = Vec::new();
    for part in TREE_PARTS {
        let path = dir.join(format!("{part}.pid"));
        assert!(
            eventually(Duration::from_secs(30), || std::fs::read_to_string(&path)
                .is_ok_and(|text| text.ends_with('\n')))
            .await,
            "the tool never wrote {}",
            path.display()
        );
        let pid = std::fs::read_to_string(&path)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(!process_is_gone(pid), "{part} {pid} is not running");
        pids.push((part, pid));
    }
    pids
}

/// Gone, or a zombie nobody reaped yet (it no longer runs).
pub fn process_is_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Asserts every pid stops running within `within` of `since`.
pub async fn assert_all_gone(pids: &[(&str, i32)], since: Instant, within: Duration) {
    for (part, pid) in pids {
        let remaining = within.saturating_sub(since.elapsed());
        assert!(
            eventually(remaining, || process_is_gone(*pid)).await,
            "{part} {pid} of the tool call still runs {within:?} after roder was stopped"
        );
    }
}

pub fn send_signal(child: &tokio::process::Child, signal: i32) {
    let pid = i32::try_from(child.id().unwrap()).unwrap();
    // SAFETY: signalling our own child process.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

/// The only thread under `home` (for a run killed before it printed its id).
pub fn only_thread(home: &Path) -> String {
    let mut threads: Vec<String> = std::fs::read_dir(home.join("threads"))
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.path().join("events.jsonl").exists())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(threads.len(), 1, "threads: {threads:?}");
    threads.remove(0)
}

pub fn events_path(home: &Path, thread_id: &str) -> PathBuf {
    home.join("threads").join(thread_id).join("events.jsonl")
}

pub fn thread_id_from(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|line| line.strip_prefix("roder: thread "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no thread id in stderr:\n{stderr}"))
        .to_string()
}

/// Asserts a Chat Completions request is well formed for the model: every
/// assistant tool call has a tool message answering it. Returns the tool
/// messages' contents by call id.
pub fn assert_calls_answered(body: &Value) -> Vec<(String, String)> {
    let messages = body["messages"].as_array().expect("a messages array");
    let mut answers = Vec::new();
    for message in messages {
        if message["role"] == "tool" {
            answers.push((
                message["tool_call_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                message["content"].to_string(),
            ));
        }
    }
    let mut calls = 0;
    for message in messages.iter().filter(|m| m["role"] == "assistant") {
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            calls += 1;
            let id = call["id"].as_str().unwrap_or_default();
            assert!(
                answers.iter().any(|(answered, _)| answered == id),
                "assistant tool call {id} has no tool result in the request: {body:#}"
            );
        }
    }
    assert!(
        calls > 0,
        "the request carries no tool call at all: {body:#}"
    );
    answers
}

/// A git repository in `dir` with one empty commit.
pub fn git_repo(dir: &Path) {
    for args in [
        vec!["init", "-q"],
        vec![
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
    ] {
        let status = std::process::Command::new("git")
            .args(&args)
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

/// The write end of a pipe whose reader is already gone: a write to it
/// fails with EPIPE, as when `roder ... | head -c 1` has read its byte and
/// exited (without the race of whether `head` has exited yet).
pub fn closed_pipe() -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd as _;
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills both descriptors on success; each is owned once.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (read, write) = unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    drop(read);
    write
}

/// `roder ARGS` with stdout into a [`closed_pipe`]; `input` is written to
/// its stdin, which then stays open until it exits (a client that is still
/// there, only no longer reading).
pub async fn roder_into_closed_pipe(
    home: &Path,
    workspace: &Path,
    args: &[&str],
    input: &str,
) -> Finished {
    use std::os::unix::process::ExitStatusExt as _;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"))
        .args(args)
        .current_dir(workspace)
        .env("RODER_HOME", home)
        .env("FAKE_MODEL_KEY", "test-key")
        .env_remove("RODER_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::from(closed_pipe()))
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    let mut stderr = String::new();
    let mut pipe = child.stderr.take().unwrap();
    let status = tokio::time::timeout(Duration::from_secs(120), async {
        pipe.read_to_string(&mut stderr).await.unwrap();
        child.wait().await.unwrap()
    })
    .await
    .unwrap_or_else(|_| panic!("roder {args:?} still runs 120 s after its stdout closed"));
    drop(stdin);
    Finished {
        code: status.code(),
        signal: status.signal(),
        stdout: String::new(),
        stderr,
    }
}

/// What `git` or `grep` does when its reader goes away: killed by SIGPIPE,
/// nothing about it on stderr.
pub fn assert_stopped_like_sigpipe(run: &Finished, args: &[&str]) {
    assert_eq!(
        run.signal,
        Some(libc::SIGPIPE),
        "roder {args:?} with a closed stdout: exit code {:?}, stderr:\n{}",
        run.code,
        run.stderr
    );
    for noise in ["panicked", "Broken pipe", "os error", "backtrace"] {
        assert!(
            !run.stderr.contains(noise),
            "roder {args:?} said {noise:?} on stderr:\n{}",
            run.stderr
        );
    }
}

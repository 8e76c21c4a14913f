//! `roder exec --mode default` under a real pseudo-terminal: the ask is
//! shown on the terminal and answered with one key; `y` runs the command,
//! `n` rejects it. Without a terminal nothing is asked.

mod support;

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use support::write_config;

/// A new pseudo-terminal: (master, slave).
fn openpty() -> (std::fs::File, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    let opened = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(opened, 0, "openpty");
    unsafe {
        (
            std::fs::File::from_raw_fd(master),
            OwnedFd::from_raw_fd(slave),
        )
    }
}

/// Runs `roder exec --mode default` on a terminal, answering its ask with
/// `key`; returns what the terminal showed and the exit code.
fn exec_on_a_terminal(
    home: &std::path::Path,
    workspace: &std::path::Path,
    key: u8,
) -> (String, i32) {
    let (master, slave) = openpty();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_roder"))
        .args(["exec", "--mode", "default", "make the file"])
        .current_dir(workspace)
        .env("RODER_HOME", home)
        .env("FAKE_MODEL_KEY", "test-key")
        .env_remove("RODER_MODEL")
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Reads the terminal on its own thread; chunks come back on a channel.
    let (chunks, received) = mpsc::channel::<String>();
    let mut reader = master.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(read) = reader.read(&mut buffer) {
            if read == 0
                || chunks
                    .send(String::from_utf8_lossy(&buffer[..read]).into_owned())
                    .is_err()
            {
                return;
            }
        }
    });
    let mut shown = String::new();
    while !shown.contains("[n] reject") {
        let chunk = received
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no prompt within 60 s; the terminal showed: {shown}"));
        shown.push_str(&chunk);
    }
    let mut writer = master;
    writer.write_all(&[key]).unwrap();
    let status = child.wait().unwrap();
    while let Ok(chunk) = received.recv_timeout(Duration::from_millis(200)) {
        shown.push_str(&chunk);
    }
    (shown, status.code().unwrap_or(-1))
}

#[tokio::test]
async fn exec_asks_on_the_terminal_and_takes_one_key() {
    for (key, runs) in [(b'y', true), (b'n', false)] {
        let model = FakeModelServer::start().await.unwrap();
        let home = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        write_config(home.path(), &model, None);
        model.push(ChatStream::tool_calls_reply(&[(
            "c1",
            "exec_command",
            r#"{"cmd":"touch made.txt"}"#,
        )]));
        model.push(ChatStream::text_reply("done"));
        let (home_path, workspace_path) =
            (home.path().to_path_buf(), workspace.path().to_path_buf());
        let (shown, code) = tokio::task::spawn_blocking(move || {
            exec_on_a_terminal(&home_path, &workspace_path, key)
        })
        .await
        .unwrap();
        assert_eq!(code, 0, "{shown}");
        assert!(
            shown.contains("approval needed: exec_command (execute)"),
            "{shown}"
        );
        assert!(shown.contains("run `touch made.txt` in"), "{shown}");
        assert!(
            shown.contains("[a] always allow (exec:touch made.txt)"),
            "{shown}"
        );
        assert_eq!(workspace.path().join("made.txt").exists(), runs, "{shown}");
        let answered = if runs {
            "roder: allow_once"
        } else {
            "roder: reject"
        };
        assert!(shown.contains(answered), "{shown}");
    }
}

#[tokio::test]
async fn without_a_terminal_no_approver_decides() {
    let model = FakeModelServer::start().await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    write_config(home.path(), &model, None);
    let mut config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    config.push_str("\n[approvals]\nno_approver = \"reject\"\n");
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    model.push(ChatStream::tool_calls_reply(&[(
        "c1",
        "exec_command",
        r#"{"cmd":"touch made.txt"}"#,
    )]));
    model.push(ChatStream::text_reply("done"));
    let finished = support::roder(
        home.path(),
        workspace.path(),
        &["exec", "--mode", "default", "--json", "make the file"],
    )
    .await;
    assert_eq!(finished.code, Some(0), "{}", finished.stderr);
    assert!(!workspace.path().join("made.txt").exists());
    assert!(
        finished.stdout.contains("no approver is attached"),
        "{}",
        finished.stdout
    );
    assert!(!finished.stdout.contains("approval_requested"));
}

//! The thread store's disk fills during a turn: the real `roder` binary
//! with `RODER_HOME` on a small tmpfs of its own, a fake model whose tool
//! call fills that tmpfs. The turn must end (no hang) with an error naming
//! the disk and the file, the log must stay readable (every line whole),
//! and once space is freed the thread's next turn must work.
//!
//! Mounting needs root: the tests run as root in CI, so a refused mount
//! fails there and is skipped (with a note) only elsewhere.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use roder_testkit::tmpfs::Tmpfs;
use support::{finish, spawn_roder, thread_id_from};

fn exec_command(cmd: &str) -> roder_testkit::fake_models::FakeStream {
    let arguments = serde_json::json!({ "cmd": cmd }).to_string();
    ChatStream::tool_calls_reply(&[("call-fill", "exec_command", &arguments)])
}

/// Every line of the thread's log is one whole JSON object.
fn assert_log_whole(home: &Path, thread_id: &str) -> usize {
    let log = home.join("threads").join(thread_id).join("events.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.ends_with('\n'), "the log ends with a whole line");
    for line in text.lines() {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|error| panic!("a torn line in {}: {error}: {line}", log.display()));
    }
    text.lines().count()
}

#[tokio::test]
async fn a_full_store_disk_fails_the_turn_clearly_and_the_next_turn_works() {
    let Some(tmpfs) = Tmpfs::mount("4m").unwrap() else {
        return;
    };
    let home = tmpfs.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let server = FakeModelServer::start().await.unwrap();
    // The model's command may write the tmpfs (a writable root), so it
    // can fill it mid-turn, as a build filling the disk would.
    std::fs::write(
        home.join("config.toml"),
        format!(
            "model = \"fake/m\"\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\n\n[sandbox]\nwritable_roots = [\"{}\"]\n",
            server.openai_base_url(),
            tmpfs.path().display()
        ),
    )
    .unwrap();

    let filler = tmpfs.path().join("filler");
    server.push(exec_command(&format!(
        "head -c 8000000 /dev/zero > {} ; echo filled",
        filler.display()
    )));
    let child = spawn_roder(&home, workspace.path(), &["exec", "fill the disk"]);
    let failed = tokio::time::timeout(Duration::from_secs(60), finish(child))
        .await
        .expect("roder exec ends on a full disk instead of hanging");
    assert_eq!(failed.code, Some(1), "{}", failed.stderr);
    let thread_id = thread_id_from(&failed.stderr);
    let mount = tmpfs.path().display().to_string();
    assert!(
        failed.stderr.contains("is full")
            && failed.stderr.contains(&mount)
            && failed.stderr.contains("events.jsonl"),
        "the error names the disk and the file:\n{}",
        failed.stderr
    );

    // The log is readable, whole up to its last complete event.
    let lines_before = assert_log_whole(&home, &thread_id);
    let shown = finish(spawn_roder(
        &home,
        workspace.path(),
        &["threads", "show", &thread_id],
    ))
    .await;
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);

    // Space freed: the next turn of the same thread works.
    std::fs::remove_file(&filler).unwrap();
    server.push(ChatStream::text_reply("back to work"));
    let next = finish(spawn_roder(
        &home,
        workspace.path(),
        &["exec", "--thread", &thread_id, "go on"],
    ))
    .await;
    assert_eq!(next.code, Some(0), "{}", next.stderr);
    assert!(next.stdout.contains("back to work"), "{}", next.stdout);
    let lines_after = assert_log_whole(&home, &thread_id);
    assert!(lines_after > lines_before);
    let log = std::fs::read_to_string(home.join("threads").join(&thread_id).join("events.jsonl"))
        .unwrap();
    assert!(log.contains("\"turn_completed\""), "{log}");
}

#[tokio::test]
async fn a_read_only_store_is_a_clear_error_at_start_and_nothing_is_written() {
    let Some(tmpfs) = Tmpfs::mount("1m").unwrap() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let server = FakeModelServer::start().await.unwrap();
    support::write_config(home.path(), &server, None);
    // `$RODER_HOME/threads` is a read-only filesystem.
    let threads = home.path().join("threads");
    std::fs::create_dir(&threads).unwrap();
    let remounted = std::process::Command::new("mount")
        .args(["--bind"])
        .arg(tmpfs.path())
        .arg(&threads)
        .status()
        .unwrap()
        .success()
        && std::process::Command::new("mount")
            .args(["-o", "remount,bind,ro"])
            .arg(&threads)
            .status()
            .unwrap()
            .success();
    assert!(remounted, "bind-mounting the tmpfs read-only");
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(threads.clone());
    server.push(ChatStream::text_reply("never asked"));
    let run = finish(spawn_roder(
        home.path(),
        workspace.path(),
        &["exec", "hello"],
    ))
    .await;
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("is read-only") && run.stderr.contains(&threads.display().to_string()),
        "{}",
        run.stderr
    );
    assert_eq!(server.remaining_replies(), 1, "no model request was made");
    assert_eq!(std::fs::read_dir(&threads).unwrap().count(), 0);
}

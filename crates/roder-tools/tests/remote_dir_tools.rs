//! Every tool through a runner session (a directory-backed fake that runs
//! real host processes), so the remote paths — file requests, `find`, `grep`,
//! `mkdir -p`, `rm` through the shell — are exercised for real.

mod common;

use std::sync::Arc;

use common::{DirSession, Harness, ok};
use serde_json::json;

macro_rules! shared_cases {
    ($($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                common::cases::$name(&Harness::dir_remote()).await;
            }
        )*
    };
}

shared_cases!(
    read_file_numbers_and_pages,
    read_file_errors,
    read_roots_allow_reads_only,
    write_file_creates_parents_and_reports_diff,
    write_file_refuses_escapes,
    edit_replaces_a_unique_match,
    edit_errors,
    multi_edit_is_all_or_nothing,
    apply_patch_codex_format,
    apply_patch_unified_diff,
    apply_patch_is_all_or_nothing,
    list_files_tree,
    list_files_truncates,
    glob_patterns,
    grep_lines,
    grep_errors_and_limits,
    shell_reports_exit_codes,
    shell_workdir_stays_inside,
    exec_command_report,
    exec_command_times_out,
    deadline_caps_the_timeout,
    cancellation_interrupts,
    git_metadata_needs_bypass,
    read_only_policy_refuses_mutation,
    bad_arguments_are_error_results,
);

fn harness() -> (Harness, Arc<DirSession>) {
    let dir = tempfile::tempdir().unwrap();
    let session = Arc::new(DirSession::new(std::fs::canonicalize(dir.path()).unwrap()));
    (Harness::with_session(dir, session.clone()), session)
}

#[tokio::test]
async fn file_requests_are_relative_to_the_root() {
    let (h, session) = harness();
    ok(&h
        .call("write_file", json!({"path": "a/b.txt", "content": "x"}))
        .await);
    let absolute = h.path("c.txt").display().to_string();
    ok(&h
        .call("write_file", json!({"path": absolute, "content": "y"}))
        .await);
    let writes = session.writes.lock().unwrap().clone();
    // The first write of a/b.txt failed (no parent), then `mkdir -p` and a retry.
    assert_eq!(
        writes,
        vec![
            std::path::PathBuf::from("a/b.txt"),
            "a/b.txt".into(),
            "c.txt".into()
        ]
    );
    let mkdir = session.commands.lock().unwrap()[0].clone();
    assert_eq!(mkdir.program, "sh");
    assert!(mkdir.args.last().unwrap().starts_with("mkdir -p -- "));
    assert_eq!(mkdir.cwd.as_deref(), Some(h.root().as_path()));
}

#[tokio::test]
async fn edit_is_one_read_and_one_write() {
    let (h, session) = harness();
    h.write("e.txt", "alpha beta\n");
    ok(&h
        .call(
            "edit",
            json!({"path": "e.txt", "old_string": "alpha", "new_string": "ALPHA"}),
        )
        .await);
    assert_eq!(session.reads.lock().unwrap().len(), 1);
    assert_eq!(session.writes.lock().unwrap().len(), 1);
    assert!(session.commands.lock().unwrap().is_empty());
    assert_eq!(h.read("e.txt"), "ALPHA beta\n");
}

#[tokio::test]
async fn a_cancelled_command_is_cancelled_on_the_runner() {
    let (h, session) = harness();
    common::cases::cancellation_interrupts(&h).await;
    let command_id = session.commands.lock().unwrap()[0].command_id.clone();
    assert_eq!(session.cancels.lock().unwrap().clone(), vec![command_id]);
}

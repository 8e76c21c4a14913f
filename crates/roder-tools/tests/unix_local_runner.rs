//! Every tool through a real `unix-local` runner session: the provider the
//! runtime uses for host-directory runners, with its own path confinement,
//! process handling and cancellation.

mod common;

use common::Harness;
use roder_api::remote_runner::{RemoteRunnerProvider, RunnerDestination, RunnerManifest};
use roder_ext_runner_unix_local::UnixLocalRunnerProvider;
use serde_json::json;

async fn harness() -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let session = UnixLocalRunnerProvider::default()
        .create_session(RunnerDestination {
            id: "tools-test".to_string(),
            provider_id: "unix-local".to_string(),
            config: json!({ "root": root.display().to_string() }),
            default_manifest: RunnerManifest::default(),
        })
        .await
        .unwrap();
    Harness::with_session(dir, session)
}

macro_rules! shared_cases {
    ($($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                common::cases::$name(&harness().await).await;
            }
        )*
    };
}

// `read_roots_allow_reads_only` is left out: unix-local confines every file
// request to its root, so it has no read roots outside it.
shared_cases!(
    read_file_numbers_and_pages,
    read_file_errors,
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

#[tokio::test]
async fn exec_command_timeout_kills_the_runner_process_group() {
    let h = harness().await;
    let result = h
        .call(
            "exec_command",
            json!({"cmd": "sleep 30 & echo $! > pid; wait", "timeout_ms": 300}),
        )
        .await;
    assert!(result.text.contains("Status: timed_out"), "{}", result.text);
    let pid = common::read_pid(&h.path("pid")).await;
    assert!(
        common::eventually(|| common::process_is_gone(pid)).await,
        "background sleep {pid} survived the timeout"
    );
}

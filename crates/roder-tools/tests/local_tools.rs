//! Every tool in a local workspace directory, plus what only a host
//! directory has: symlinks, `.gitignore`, process groups.

mod common;

use std::os::unix::fs::symlink;

use common::{Harness, err_contains, ok};
use roder_api::tools::{LocalWorkspace, ToolExecutionContext, ToolWorkspace};
use serde_json::json;

macro_rules! shared_cases {
    ($($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                common::cases::$name(&Harness::local()).await;
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

#[tokio::test]
async fn no_workspace_refuses_every_tool() {
    let h = Harness::local();
    let ctx = ToolExecutionContext::for_workspace(ToolWorkspace::None);
    for tool in roder_api::tools::WORKSPACE_TOOL_NAMES {
        let args = match *tool {
            "read_file" | "list_files" => json!({"path": "."}),
            "write_file" => json!({"path": "a", "content": ""}),
            "edit" => json!({"path": "a", "old_string": "a", "new_string": "b"}),
            "multi_edit" => json!({"path": "a", "edits": []}),
            "apply_patch" => json!({"patch": ""}),
            "glob" | "grep" => json!({"pattern": "a"}),
            "shell" => json!({"command": "touch leaked"}),
            _ => json!({"cmd": "touch leaked"}),
        };
        let result = h.call_with(ctx.clone(), tool, args).await;
        err_contains(
            &result,
            "this thread has no workspace: file and shell tools are unavailable",
        );
    }
}

#[tokio::test]
async fn a_symlinked_directory_leaving_the_root_is_refused() {
    let h = Harness::local();
    std::fs::write(h.outside.path().join("secret.txt"), "secret\n").unwrap();
    symlink(h.outside.path(), h.path("link")).unwrap();

    let read = h
        .call("read_file", json!({"path": "link/secret.txt"}))
        .await;
    err_contains(
        &read,
        "path \"link/secret.txt\" resolves through a symbolic link",
    );
    err_contains(&read, "outside the workspace");

    let write = h
        .call(
            "write_file",
            json!({"path": "link/new.txt", "content": "x"}),
        )
        .await;
    err_contains(&write, "outside the workspace");
    let nested = h
        .call(
            "write_file",
            json!({"path": "link/a/b/new.txt", "content": "x"}),
        )
        .await;
    err_contains(&nested, "outside the workspace");
    assert!(!h.outside.path().join("new.txt").exists());
    assert!(!h.outside.path().join("a").exists());

    let list = h.call("list_files", json!({"path": "link"})).await;
    err_contains(&list, "outside the workspace");
    let grep = h
        .call("grep", json!({"pattern": "secret", "path": "link"}))
        .await;
    err_contains(&grep, "outside the workspace");
    let shell = h
        .call(
            "shell",
            json!({"command": "touch pwned", "workdir": "link"}),
        )
        .await;
    err_contains(&shell, "outside the workspace");
    assert!(!h.outside.path().join("pwned").exists());

    // A walk of the root does not follow the link out.
    let all = h.call("grep", json!({"pattern": "secret"})).await;
    assert!(ok(&all).starts_with("no matches"), "{}", all.text);
}

#[tokio::test]
async fn symlinked_files_leaving_the_root_are_refused() {
    let h = Harness::local();
    let target = h.outside.path().join("target.txt");
    std::fs::write(&target, "outside\n").unwrap();
    symlink(&target, h.path("file-link")).unwrap();
    let read = h.call("read_file", json!({"path": "file-link"})).await;
    err_contains(&read, "outside the workspace");
    let edit = h
        .call(
            "edit",
            json!({"path": "file-link", "old_string": "outside", "new_string": "owned"}),
        )
        .await;
    err_contains(&edit, "outside the workspace");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "outside\n");

    // A dangling link would create its target wherever it points.
    symlink(h.outside.path().join("later.txt"), h.path("dangling")).unwrap();
    let write = h
        .call("write_file", json!({"path": "dangling", "content": "x"}))
        .await;
    err_contains(&write, "dangling symbolic link");
    assert!(!h.outside.path().join("later.txt").exists());
}

#[tokio::test]
async fn symlinks_inside_the_root_work() {
    let h = Harness::local();
    h.write("real/file.txt", "inside\n");
    symlink(h.path("real"), h.path("alias")).unwrap();
    let read = h.call("read_file", json!({"path": "alias/file.txt"})).await;
    assert!(ok(&read).contains("inside"));
    let write = h
        .call(
            "write_file",
            json!({"path": "alias/new.txt", "content": "ok"}),
        )
        .await;
    ok(&write);
    assert_eq!(h.read("real/new.txt"), "ok");

    // A link into .git is refused like .git itself.
    h.write(".git/config", "[core]\n");
    symlink(h.path(".git"), h.path("gitdir")).unwrap();
    let sneaky = h
        .call(
            "write_file",
            json!({"path": "gitdir/config", "content": "x"}),
        )
        .await;
    err_contains(&sneaky, ".git directory");
    assert_eq!(h.read(".git/config"), "[core]\n");
}

#[tokio::test]
async fn gitignore_is_respected_by_listing_and_search() {
    let h = Harness::local();
    h.write(".gitignore", "target/\n*.log\n");
    h.write("target/debug/out.rs", "needle\n");
    h.write("app.log", "needle\n");
    h.write("src/main.rs", "needle\n");
    let listed = h.call("list_files", json!({"depth": 3})).await;
    assert_eq!(ok(&listed), ".gitignore\nsrc/\nsrc/main.rs");
    let globbed = h.call("glob", json!({"pattern": "*.rs"})).await;
    assert_eq!(ok(&globbed), "src/main.rs");
    let grepped = h.call("grep", json!({"pattern": "needle"})).await;
    assert_eq!(ok(&grepped), "src/main.rs:1:needle");
    // Ignored files can still be read by name.
    ok(&h.call("read_file", json!({"path": "app.log"})).await);
}

#[tokio::test]
async fn exec_command_timeout_kills_the_process_group() {
    let h = Harness::local();
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

#[tokio::test]
async fn long_output_keeps_head_and_tail() {
    let h = Harness::local();
    let result = h
        .call(
            "exec_command",
            json!({"cmd": "echo first; head -c 200000 /dev/zero | tr '\\0' x; echo; echo last"}),
        )
        .await;
    let text = ok(&result);
    assert!(text.contains("Output:\nfirst\n"), "{}", &text[..200]);
    assert!(text.ends_with("\nlast\n"));
    assert!(text.contains("bytes of output omitted"));
    assert!(text.len() < 70 * 1024);
    assert!(result.data["omitted_bytes"].as_u64().unwrap() > 100_000);
}

#[tokio::test]
async fn a_relative_local_root_is_not_an_escape_hatch() {
    // The root the runtime passes is used as given; `..` still cannot leave it.
    let h = Harness::local();
    let ctx = ToolExecutionContext::for_workspace(ToolWorkspace::Local(LocalWorkspace {
        root: h.root().join("sub/.."),
        read_roots: Vec::new(),
    }));
    let result = h
        .call_with(ctx, "write_file", json!({"path": "../x", "content": ""}))
        .await;
    err_contains(&result, "outside the workspace");
}

#[tokio::test]
async fn an_already_interrupted_turn_starts_no_command() {
    let h = Harness::local();
    let ctx = h.ctx();
    ctx.cancellation.cancel();
    let result = h
        .call_with(ctx, "exec_command", json!({"cmd": "touch started"}))
        .await;
    err_contains(&result, "interrupted");
    assert!(!h.exists("started"));
}

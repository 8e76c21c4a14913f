//! Tool cases that must hold in every kind of workspace.

use roder_api::policy_mode::PolicyMode;
use serde_json::json;

use super::{Harness, err_contains, ok, process_is_gone, read_pid};

pub async fn read_file_numbers_and_pages(h: &Harness) {
    let text: String = (1..=2500).map(|n| format!("line {n}\n")).collect();
    h.write("big.txt", &text);
    h.write("small.txt", "alpha\nbeta\n");

    let small = h.call("read_file", json!({"path": "small.txt"})).await;
    assert_eq!(ok(&small), "     1\talpha\n     2\tbeta");

    let first = h.call("read_file", json!({"path": "big.txt"})).await;
    let first = ok(&first);
    assert_eq!(first.lines().filter(|l| l.contains('\t')).count(), 2000);
    assert!(
        first.ends_with("... 500 more lines; continue with start_line=2001"),
        "{}",
        &first[first.len() - 80..]
    );

    let page = h
        .call(
            "read_file",
            json!({"path": "big.txt", "start_line": 2001, "limit": 2}),
        )
        .await;
    assert_eq!(
        ok(&page),
        "  2001\tline 2001\n  2002\tline 2002\n... 498 more lines; continue with start_line=2003"
    );

    // Absolute paths inside the root work too.
    let absolute = h.path("small.txt").display().to_string();
    let by_absolute = h.call("read_file", json!({"path": absolute})).await;
    assert!(ok(&by_absolute).contains("alpha"));
}

pub async fn read_file_errors(h: &Harness) {
    let missing = h.call("read_file", json!({"path": "missing.txt"})).await;
    err_contains(&missing, "missing.txt");

    std::fs::write(h.path("blob.bin"), [0_u8, 159, 146, 150, 0, 1]).unwrap();
    let binary = h.call("read_file", json!({"path": "blob.bin"})).await;
    err_contains(&binary, "binary");

    h.write("two.txt", "a\nb\n");
    let past = h
        .call("read_file", json!({"path": "two.txt", "start_line": 5}))
        .await;
    err_contains(&past, "start_line 5 is past the end of two.txt (2 lines)");

    let escape = h.call("read_file", json!({"path": "../etc/passwd"})).await;
    err_contains(&escape, "path \"../etc/passwd\" is outside the workspace");

    let outside = h.outside.path().join("secret.txt");
    std::fs::write(&outside, "secret").unwrap();
    let absolute = h
        .call("read_file", json!({"path": outside.display().to_string()}))
        .await;
    err_contains(&absolute, "is outside the workspace");
    assert!(!absolute.text.contains("secret\n"));
}

pub async fn read_roots_allow_reads_only(h: &Harness) {
    let docs = std::fs::canonicalize(h.outside.path()).unwrap();
    std::fs::write(docs.join("guide.md"), "read me\n").unwrap();
    let mut ctx = h.ctx();
    ctx.workspace = h.workspace_with_read_roots(vec![docs.clone()]);
    let guide = docs.join("guide.md").display().to_string();

    let read = h
        .call_with(ctx.clone(), "read_file", json!({"path": guide}))
        .await;
    assert!(ok(&read).contains("read me"));

    let grep = h
        .call_with(
            ctx.clone(),
            "grep",
            json!({"pattern": "read", "path": docs.display().to_string()}),
        )
        .await;
    assert_eq!(ok(&grep), format!("{guide}:1:read me"));

    let write = h
        .call_with(
            ctx.clone(),
            "write_file",
            json!({"path": guide, "content": "x"}),
        )
        .await;
    err_contains(&write, "outside the workspace");
    let workdir = h
        .call_with(
            ctx,
            "shell",
            json!({"command": "touch pwned", "workdir": docs.display().to_string()}),
        )
        .await;
    err_contains(&workdir, "outside the workspace");
    assert_eq!(
        std::fs::read_to_string(docs.join("guide.md")).unwrap(),
        "read me\n"
    );
    assert!(!docs.join("pwned").exists());
}

pub async fn write_file_creates_parents_and_reports_diff(h: &Harness) {
    let created = h
        .call(
            "write_file",
            json!({"path": "deep/er/new.txt", "content": "one\ntwo\n"}),
        )
        .await;
    assert_eq!(ok(&created), "wrote deep/er/new.txt");
    assert_eq!(h.read("deep/er/new.txt"), "one\ntwo\n");
    assert_eq!(created.data["path"], "deep/er/new.txt");
    assert_eq!(created.data["bytes"], 8);
    let change = &created.data["file_changes"][0];
    assert_eq!(change["path"], "deep/er/new.txt");
    assert!(change["diff"].as_str().unwrap().contains("+one\n+two\n"));

    let replaced = h
        .call(
            "write_file",
            json!({"path": "deep/er/new.txt", "content": "one\nTWO\n"}),
        )
        .await;
    ok(&replaced);
    let diff = replaced.data["file_changes"][0]["diff"].as_str().unwrap();
    assert!(diff.contains("-two\n+TWO\n"), "{diff}");
    assert!(!diff.contains("+one"), "{diff}");
}

pub async fn write_file_refuses_escapes(h: &Harness) {
    let outside = h.outside.path().join("escaped.txt");
    let relative = h
        .call(
            "write_file",
            json!({"path": "../escaped.txt", "content": "x"}),
        )
        .await;
    err_contains(
        &relative,
        "path \"../escaped.txt\" is outside the workspace",
    );

    let sneaky = h
        .call(
            "write_file",
            json!({"path": "sub/../../escaped.txt", "content": "x"}),
        )
        .await;
    err_contains(&sneaky, "outside the workspace");

    let absolute = h
        .call(
            "write_file",
            json!({"path": outside.display().to_string(), "content": "x"}),
        )
        .await;
    err_contains(&absolute, &format!("{:?}", outside.display().to_string()));
    assert!(!outside.exists());
    assert!(!h.root().parent().unwrap().join("escaped.txt").exists());
}

pub async fn edit_replaces_a_unique_match(h: &Harness) {
    h.write("src/lib.rs", "fn a() {}\nfn b() {}\n");
    let edited = h
        .call(
            "edit",
            json!({"path": "src/lib.rs", "old_string": "fn b() {}", "new_string": "fn b() { a() }"}),
        )
        .await;
    assert_eq!(ok(&edited), "edited src/lib.rs");
    assert_eq!(h.read("src/lib.rs"), "fn a() {}\nfn b() { a() }\n");
    let diff = edited.data["file_changes"][0]["diff"].as_str().unwrap();
    assert!(diff.contains("-fn b() {}\n+fn b() { a() }\n"), "{diff}");
}

pub async fn edit_errors(h: &Harness) {
    h.write("f.txt", "x x\ny\n");
    let none = h
        .call(
            "edit",
            json!({"path": "f.txt", "old_string": "zzz", "new_string": "q"}),
        )
        .await;
    err_contains(&none, "old_string not found in f.txt");

    let several = h
        .call(
            "edit",
            json!({"path": "f.txt", "old_string": "x", "new_string": "q"}),
        )
        .await;
    err_contains(
        &several,
        "old_string occurs 2 times in f.txt; include more context to make it unique",
    );

    let same = h
        .call(
            "edit",
            json!({"path": "f.txt", "old_string": "y", "new_string": "y"}),
        )
        .await;
    err_contains(&same, "identical");

    let missing = h
        .call(
            "edit",
            json!({"path": "nope.txt", "old_string": "a", "new_string": "b"}),
        )
        .await;
    err_contains(&missing, "nope.txt");
    assert!(!h.exists("nope.txt"));

    let no_new = h
        .call("edit", json!({"path": "f.txt", "old_string": "y"}))
        .await;
    err_contains(&no_new, "missing field `new_string`");

    let escape = h
        .call(
            "edit",
            json!({"path": "../f.txt", "old_string": "a", "new_string": "b"}),
        )
        .await;
    err_contains(&escape, "outside the workspace");
    assert_eq!(h.read("f.txt"), "x x\ny\n");
}

pub async fn multi_edit_is_all_or_nothing(h: &Harness) {
    h.write("m.txt", "one two three\n");
    let applied = h
        .call(
            "multi_edit",
            json!({"path": "m.txt", "edits": [
                {"old_string": "one", "new_string": "1"},
                {"old_string": "1 two", "new_string": "1 2"}
            ]}),
        )
        .await;
    assert_eq!(ok(&applied), "applied 2 edits to m.txt");
    assert_eq!(h.read("m.txt"), "1 2 three\n");

    let failed = h
        .call(
            "multi_edit",
            json!({"path": "m.txt", "edits": [
                {"old_string": "three", "new_string": "3"},
                {"old_string": "four", "new_string": "4"}
            ]}),
        )
        .await;
    err_contains(&failed, "edits[1]");
    err_contains(&failed, "old_string not found in m.txt");
    assert_eq!(h.read("m.txt"), "1 2 three\n");

    let empty = h
        .call("multi_edit", json!({"path": "m.txt", "edits": []}))
        .await;
    err_contains(&empty, "at least one edit");
    let extra = h
        .call(
            "multi_edit",
            json!({"path": "m.txt", "edits": [{"old_string": "a", "new_string": "b", "all": true}]}),
        )
        .await;
    err_contains(&extra, "unknown field `all`");
}

pub async fn apply_patch_codex_format(h: &Harness) {
    h.write(
        "src/app.py",
        "def greet():\n    return 'hi'\n\ndef main():\n    greet()\n",
    );
    h.write("old.txt", "bye\n");
    h.write("rename_me.txt", "keep\nchange\n");
    let patch = "*** Begin Patch
*** Add File: docs/new.md
+# New
+text
*** Delete File: old.txt
*** Update File: src/app.py
@@ def greet():
-    return 'hi'
+    return 'hello'
*** Update File: rename_me.txt
*** Move to: moved/renamed.txt
@@
 keep
-change
+changed
*** End Patch";
    let result = h.call("apply_patch", json!({"patch": patch})).await;
    let text = ok(&result);
    assert!(text.starts_with("applied patch:"), "{text}");
    for line in [
        "A docs/new.md",
        "D old.txt",
        "M src/app.py",
        "A moved/renamed.txt",
        "D rename_me.txt",
    ] {
        assert!(text.contains(line), "{line} missing from {text}");
    }
    assert_eq!(h.read("docs/new.md"), "# New\ntext\n");
    assert!(!h.exists("old.txt"));
    assert_eq!(
        h.read("src/app.py"),
        "def greet():\n    return 'hello'\n\ndef main():\n    greet()\n"
    );
    assert_eq!(h.read("moved/renamed.txt"), "keep\nchanged\n");
    assert!(!h.exists("rename_me.txt"));
    let changes = result.data["file_changes"].as_array().unwrap();
    assert_eq!(changes.len(), 5);
}

pub async fn apply_patch_unified_diff(h: &Harness) {
    h.write("a.txt", "1\n2\n3\n4\n5\n6\n7\n8\n");
    let diff = "diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 1
-2
+two
 3
@@ -6,3 +6,4 @@
 6
 7
+7.5
 8
--- /dev/null
+++ b/b.txt
@@ -0,0 +1 @@
+new file
";
    let result = h.call("apply_patch", json!({"patch": diff})).await;
    ok(&result);
    assert_eq!(h.read("a.txt"), "1\ntwo\n3\n4\n5\n6\n7\n7.5\n8\n");
    assert_eq!(h.read("b.txt"), "new file\n");
}

pub async fn apply_patch_is_all_or_nothing(h: &Harness) {
    h.write("first.txt", "alpha\n");
    h.write("second.txt", "beta\n");
    let patch = "*** Begin Patch
*** Update File: first.txt
@@
-alpha
+ALPHA
*** Add File: third.txt
+gamma
*** Update File: second.txt
@@
-not beta
+BETA
*** End Patch";
    let result = h.call("apply_patch", json!({"patch": patch})).await;
    err_contains(&result, "second.txt");
    err_contains(&result, "\"not beta\"");
    assert_eq!(h.read("first.txt"), "alpha\n");
    assert_eq!(h.read("second.txt"), "beta\n");
    assert!(!h.exists("third.txt"));

    let missing = h
        .call(
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Update File: ghost.txt\n@@\n-a\n+b\n*** End Patch"}),
        )
        .await;
    err_contains(&missing, "ghost.txt");

    let escape = h
        .call(
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Add File: ../evil.txt\n+x\n*** End Patch"}),
        )
        .await;
    err_contains(&escape, "path \"../evil.txt\" is outside the workspace");
    assert!(!h.root().parent().unwrap().join("evil.txt").exists());

    let garbage = h.call("apply_patch", json!({"patch": "just words"})).await;
    err_contains(&garbage, "unrecognized patch format");
}

pub async fn list_files_tree(h: &Harness) {
    h.write("b.txt", "");
    h.write("a/one.rs", "");
    h.write("a/deeper/two.rs", "");
    h.write(".hidden/x", "");
    h.write(".git/config", "");
    let listed = h.call("list_files", json!({})).await;
    assert_eq!(
        ok(&listed),
        ".hidden/\n.hidden/x\na/\na/deeper/\na/one.rs\nb.txt",
        "depth 2 by default, sorted, dirs end with /, .git skipped"
    );
    let deep = h.call("list_files", json!({"path": "a", "depth": 5})).await;
    assert_eq!(ok(&deep), "a/deeper/\na/deeper/two.rs\na/one.rs");
    let shallow = h.call("list_files", json!({"depth": 1})).await;
    assert_eq!(ok(&shallow), ".hidden/\na/\nb.txt");

    std::fs::create_dir(h.path("empty")).unwrap();
    let empty = h.call("list_files", json!({"path": "empty"})).await;
    assert_eq!(ok(&empty), "(empty is empty)");

    let file = h.call("list_files", json!({"path": "b.txt"})).await;
    err_contains(&file, "not a directory");
    let escape = h.call("list_files", json!({"path": ".."})).await;
    err_contains(&escape, "outside the workspace");
    let zero = h.call("list_files", json!({"depth": 0})).await;
    err_contains(&zero, "depth must be at least 1");
}

pub async fn list_files_truncates(h: &Harness) {
    for n in 0..1005 {
        h.write(&format!("many/f{n:04}"), "");
    }
    let listed = h.call("list_files", json!({"path": "many"})).await;
    let text = ok(&listed);
    assert_eq!(text.lines().count(), 1001);
    assert!(
        text.ends_with("... truncated at 1000 entries; list a subdirectory or lower the depth")
    );
    assert_eq!(listed.data["truncated"], true);
}

pub async fn glob_patterns(h: &Harness) {
    h.write("src/main.rs", "");
    h.write("src/util/mod.rs", "");
    h.write("README.md", "");
    h.write(".git/objects/x.rs", "");
    let names = h.call("glob", json!({"pattern": "*.rs"})).await;
    assert_eq!(ok(&names), "src/main.rs\nsrc/util/mod.rs");
    let anchored = h.call("glob", json!({"pattern": "src/*.rs"})).await;
    assert_eq!(ok(&anchored), "src/main.rs");
    let recursive = h.call("glob", json!({"pattern": "src/**/*.rs"})).await;
    assert_eq!(ok(&recursive), "src/main.rs\nsrc/util/mod.rs");
    let under = h
        .call("glob", json!({"pattern": "*.rs", "path": "src/util"}))
        .await;
    assert_eq!(ok(&under), "src/util/mod.rs");
    let none = h.call("glob", json!({"pattern": "*.zig"})).await;
    assert!(ok(&none).starts_with("no files match"));
    let bad = h.call("glob", json!({"pattern": "a["})).await;
    err_contains(&bad, "invalid glob pattern");
    let escape = h.call("glob", json!({"pattern": "*", "path": "../"})).await;
    err_contains(&escape, "outside the workspace");
}

pub async fn grep_lines(h: &Harness) {
    h.write("src/a.rs", "fn alpha() {}\n// nothing\nfn beta() {}\n");
    h.write("src/b.txt", "fn gamma\n");
    h.write("notes.md", "FN upper\n");
    h.write(".git/HEAD", "fn in git\n");
    std::fs::write(h.path("bin.dat"), b"fn \x00 binary").unwrap();

    let all = h.call("grep", json!({"pattern": "fn [a-z]+"})).await;
    assert_eq!(
        ok(&all),
        "src/a.rs:1:fn alpha() {}\nsrc/a.rs:3:fn beta() {}\nsrc/b.txt:1:fn gamma"
    );
    let filtered = h
        .call("grep", json!({"pattern": "fn", "glob": "*.rs"}))
        .await;
    assert_eq!(
        ok(&filtered),
        "src/a.rs:1:fn alpha() {}\nsrc/a.rs:3:fn beta() {}"
    );
    let insensitive = h
        .call(
            "grep",
            json!({"pattern": "fn upper", "case_insensitive": true}),
        )
        .await;
    assert_eq!(ok(&insensitive), "notes.md:1:FN upper");
    let one_file = h
        .call("grep", json!({"pattern": "beta", "path": "src/a.rs"}))
        .await;
    assert_eq!(ok(&one_file), "src/a.rs:3:fn beta() {}");
    let none = h.call("grep", json!({"pattern": "zebra"})).await;
    assert!(ok(&none).starts_with("no matches for \"zebra\""));
}

pub async fn grep_errors_and_limits(h: &Harness) {
    h.write("many.txt", &"hit\n".repeat(50));
    let limited = h
        .call("grep", json!({"pattern": "hit", "max_results": 3}))
        .await;
    let text = ok(&limited);
    assert!(
        text.starts_with("many.txt:1:hit\nmany.txt:2:hit\nmany.txt:3:hit\n"),
        "{text}"
    );
    assert!(text.contains("stopped after 3 matches"), "{text}");
    assert_eq!(limited.data["truncated"], true);

    let invalid = h.call("grep", json!({"pattern": "(unclosed"})).await;
    err_contains(&invalid, "invalid regex");
    let escape = h
        .call("grep", json!({"pattern": "x", "path": "/etc"}))
        .await;
    err_contains(&escape, "outside the workspace");
    let missing = h
        .call("grep", json!({"pattern": "x", "path": "nowhere"}))
        .await;
    err_contains(&missing, "nowhere");
    let bad = h
        .call("grep", json!({"pattern": "x", "max_results": "3"}))
        .await;
    err_contains(&bad, "invalid arguments for grep");
}

pub async fn shell_reports_exit_codes(h: &Harness) {
    let hello = h
        .call("shell", json!({"command": "echo hello; echo oops >&2"}))
        .await;
    let text = ok(&hello);
    assert!(text.starts_with("Exit code: 0\nWall time: "), "{text}");
    assert!(text.ends_with("Output:\nhello\noops\n"), "{text}");
    assert_eq!(hello.data["exit_code"], 0);

    let failing = h.call("shell", json!({"command": "echo no; exit 7"})).await;
    let text = ok(&failing);
    assert!(text.starts_with("Exit code: 7\n"), "{text}");
    assert_eq!(failing.data["exit_code"], 7);

    let pwd = h.call("shell", json!({"command": "pwd"})).await;
    assert!(ok(&pwd).ends_with(&format!("\n{}\n", h.root().display())));

    let empty = h.call("shell", json!({"command": "  "})).await;
    err_contains(&empty, "command must not be empty");
}

pub async fn shell_workdir_stays_inside(h: &Harness) {
    std::fs::create_dir_all(h.path("sub/dir")).unwrap();
    let inside = h
        .call("shell", json!({"command": "pwd", "workdir": "sub/dir"}))
        .await;
    assert!(ok(&inside).ends_with(&format!("{}\n", h.path("sub/dir").display())));
    let absolute_inside = h
        .call(
            "shell",
            json!({"command": "pwd", "workdir": h.path("sub").display().to_string()}),
        )
        .await;
    assert!(ok(&absolute_inside).ends_with(&format!("{}\n", h.path("sub").display())));
    let escape = h
        .call("shell", json!({"command": "touch x", "workdir": ".."}))
        .await;
    err_contains(&escape, "path \"..\" is outside the workspace");
    let exec_escape = h
        .call("exec_command", json!({"cmd": "touch x", "workdir": "/tmp"}))
        .await;
    err_contains(&exec_escape, "outside the workspace");
}

pub async fn exec_command_report(h: &Harness) {
    let done = h.call("exec_command", json!({"cmd": "echo ready"})).await;
    let text = ok(&done);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Exit code: 0");
    assert_eq!(lines[1], "Status: completed");
    assert!(
        lines[2].starts_with("Wall time: ") && lines[2].ends_with(" seconds"),
        "{text}"
    );
    let seconds: f64 = lines[2]["Wall time: ".len()..lines[2].len() - " seconds".len()]
        .parse()
        .unwrap();
    assert!(seconds < 30.0);
    assert_eq!(lines[3], "Output:");
    assert_eq!(lines[4], "ready");
    assert_eq!(done.data["status"], "completed");

    let failed = h
        .call("exec_command", json!({"cmd": "echo bad >&2; exit 2"}))
        .await;
    assert!(failed.is_error);
    assert!(
        failed
            .text
            .starts_with("Exit code: 2\nStatus: failed\nWall time: "),
        "{}",
        failed.text
    );
    assert!(failed.text.ends_with("Output:\nbad\n"), "{}", failed.text);
    assert_eq!(failed.data["exit_code"], 2);

    let missing_cmd = h.call("exec_command", json!({"command": "ls"})).await;
    err_contains(&missing_cmd, "invalid arguments for exec_command");
}

pub async fn exec_command_times_out(h: &Harness) {
    let timed_out = h
        .call(
            "exec_command",
            json!({"cmd": "echo started; exec sleep 30", "timeout_ms": 300}),
        )
        .await;
    assert!(timed_out.is_error);
    assert!(
        timed_out
            .text
            .starts_with("Exit code: none\nStatus: timed_out\nWall time: "),
        "{}",
        timed_out.text
    );
    assert_eq!(timed_out.data["status"], "timed_out");
    assert_eq!(timed_out.data["timeout_ms"], 300);
    assert!(timed_out.data["wall_time_seconds"].as_f64().unwrap() < 20.0);

    let shell = h
        .call(
            "shell",
            json!({"command": "exec sleep 30", "timeout_ms": 200}),
        )
        .await;
    err_contains(&shell, "timed out after 200 ms");
}

/// A turn deadline caps the requested timeout, keeping the 30 s reserve.
pub async fn deadline_caps_the_timeout(h: &Harness) {
    let mut ctx = h.ctx();
    ctx.remaining_deadline_seconds = Some(31);
    let result = h
        .call_with(
            ctx,
            "exec_command",
            json!({"cmd": "true", "timeout_ms": 60000}),
        )
        .await;
    ok(&result);
    assert_eq!(result.data["timeout_ms"], 1000);
}

pub async fn cancellation_interrupts(h: &Harness) {
    let ctx = h.ctx();
    let token = ctx.cancellation.clone();
    let pid_path = h.path("pid");
    let cancel = async {
        let pid = read_pid(&pid_path).await;
        token.cancel();
        pid
    };
    let (result, pid) = tokio::join!(
        h.call_with(
            ctx.clone(),
            "exec_command",
            json!({"cmd": "sleep 30 & echo $! > pid; wait"})
        ),
        cancel
    );
    err_contains(&result, "interrupted");
    assert!(
        super::eventually(|| process_is_gone(pid)).await,
        "background sleep {pid} survived the interrupt"
    );
}

pub async fn git_metadata_needs_bypass(h: &Harness) {
    h.write(".git/config", "[core]\n");
    let write = h
        .call(
            "write_file",
            json!({"path": ".git/hooks/pre-commit", "content": "evil"}),
        )
        .await;
    err_contains(
        &write,
        "path \".git/hooks/pre-commit\" is inside a .git directory",
    );
    let edit = h
        .call(
            "edit",
            json!({"path": ".git/config", "old_string": "[core]", "new_string": "[evil]"}),
        )
        .await;
    err_contains(&edit, ".git directory");
    let patch = h
        .call(
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Delete File: .git/config\n*** End Patch"}),
        )
        .await;
    err_contains(&patch, ".git directory");
    assert_eq!(h.read(".git/config"), "[core]\n");
    assert!(!h.exists(".git/hooks/pre-commit"));

    // Reading is fine, and the bypass policy allows the write.
    ok(&h.call("read_file", json!({"path": ".git/config"})).await);
    let mut bypass = h.ctx();
    bypass.policy_mode = PolicyMode::Bypass;
    let allowed = h
        .call_with(
            bypass,
            "edit",
            json!({"path": ".git/config", "old_string": "[core]", "new_string": "[user]"}),
        )
        .await;
    ok(&allowed);
    assert_eq!(h.read(".git/config"), "[user]\n");
}

pub async fn read_only_policy_refuses_mutation(h: &Harness) {
    h.write("r.txt", "keep\n");
    let mut ctx = h.ctx();
    ctx.policy_mode = PolicyMode::ReadOnly;
    for (tool, args) in [
        ("write_file", json!({"path": "r.txt", "content": "x"})),
        (
            "edit",
            json!({"path": "r.txt", "old_string": "keep", "new_string": "x"}),
        ),
        (
            "multi_edit",
            json!({"path": "r.txt", "edits": [{"old_string": "keep", "new_string": "x"}]}),
        ),
        (
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Delete File: r.txt\n*** End Patch"}),
        ),
        ("shell", json!({"command": "rm r.txt"})),
        ("exec_command", json!({"cmd": "rm r.txt"})),
    ] {
        let result = h.call_with(ctx.clone(), tool, args).await;
        err_contains(&result, "plan mode");
        assert!(result.text.starts_with(tool), "{}", result.text);
    }
    assert_eq!(h.read("r.txt"), "keep\n");
    for (tool, args) in [
        ("read_file", json!({"path": "r.txt"})),
        ("list_files", json!({})),
        ("glob", json!({"pattern": "*.txt"})),
        ("grep", json!({"pattern": "keep"})),
    ] {
        ok(&h.call_with(ctx.clone(), tool, args).await);
    }
}

pub async fn bad_arguments_are_error_results(h: &Harness) {
    for (tool, args, needle) in [
        ("read_file", json!({}), "missing field `path`"),
        (
            "read_file",
            json!({"path": "a", "extra": 1}),
            "unknown field `extra`",
        ),
        ("read_file", json!({"path": 5}), "invalid type"),
        (
            "read_file",
            json!({"path": "a", "start_line": 0}),
            "1-based",
        ),
        ("read_file", json!({"path": ""}), "must not be empty"),
        (
            "write_file",
            json!({"path": "a"}),
            "missing field `content`",
        ),
        ("apply_patch", json!({"diff": "x"}), "unknown field `diff`"),
        ("list_files", json!({"depth": -1}), "invalid value"),
        ("glob", json!("not an object"), "not a JSON object"),
        ("grep", json!(["pattern"]), "expected a JSON object"),
        (
            "shell",
            json!({"command": "true", "timeout_ms": 0}),
            "timeout_ms must be at least 1",
        ),
    ] {
        let result = h.call(tool, args.clone()).await;
        assert!(result.is_error, "{tool} {args}: {}", result.text);
        assert!(
            result.text.contains(needle),
            "{tool} {args}: {:?} lacks {needle:?}",
            result.text
        );
    }
}

//! `apply_patch` errors, through the registered tool as a model calls it:
//! each names the operation (add, delete, update, move) and the file, and
//! says whether anything was applied. Run on a local directory and through a
//! directory-backed runner session.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::{DirSession, Harness, err_contains, ok};
use roder_api::remote_runner::{
    RemoteRunnerSession, RunnerCommandId, RunnerCommandRequest, RunnerCommandResult,
    RunnerFileReadRequest, RunnerFileReadResult, RunnerFileWriteRequest, RunnerPortRequest,
    RunnerPortResult, RunnerSessionState, RunnerSnapshotRef,
};
use serde_json::json;

async fn patch(h: &Harness, text: &str) -> roder_api::tools::ToolResult {
    h.call("apply_patch", json!({ "patch": text })).await
}

/// Asserts an error result holding every one of `needles`.
#[track_caller]
fn err_holds(result: &roder_api::tools::ToolResult, needles: &[&str]) {
    for needle in needles {
        err_contains(result, needle);
    }
}

async fn validation_errors_name_the_operation_and_the_file(h: &Harness) {
    h.write("a.txt", "alpha\n");
    h.write("dir/inner.txt", "x\n");
    let cases: &[(&str, &[&str])] = &[
        (
            "*** Begin Patch\n*** Update File: ghost.txt\n@@\n-a\n+b\n*** End Patch",
            &["apply_patch: cannot update ghost.txt:", "ghost.txt"],
        ),
        (
            "*** Begin Patch\n*** Delete File: ghost.txt\n*** End Patch",
            &["apply_patch: cannot delete ghost.txt:"],
        ),
        (
            "*** Begin Patch\n*** Update File: a.txt\n@@\n-beta\n+gamma\n*** End Patch",
            &[
                "apply_patch: cannot update a.txt: hunk 1 does not match the current contents",
                "\"beta\"",
            ],
        ),
        (
            "*** Begin Patch\n*** Update File: a.txt\n*** Move to: ../out.txt\n*** End Patch",
            &[
                "apply_patch: cannot move a.txt to ../out.txt:",
                "path \"../out.txt\" is outside the workspace",
            ],
        ),
        (
            "*** Begin Patch\n*** Add File: ../evil.txt\n+x\n*** End Patch",
            &[
                "apply_patch: cannot add ../evil.txt:",
                "outside the workspace",
            ],
        ),
        (
            "*** Begin Patch\n*** Delete File: a.txt\n*** Delete File: a.txt\n*** End Patch",
            &[
                "apply_patch: cannot delete a.txt: an earlier section of the patch already removes it",
            ],
        ),
        (
            "*** Begin Patch\n*** Delete File: a.txt\n*** Update File: a.txt\n@@\n-alpha\n+b\n*** End Patch",
            &["apply_patch: cannot update a.txt: an earlier section of the patch removes it"],
        ),
        (
            "*** Begin Patch\n*** Delete File: dir\n*** End Patch",
            &["apply_patch: cannot delete dir:"],
        ),
        (
            "*** Begin Patch\n*** Add File: b.txt\nno plus\n*** End Patch",
            &["apply_patch: line 3 (add b.txt):", "starts with `+`"],
        ),
        (
            "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-nope\n+x\n",
            &["apply_patch: cannot update a.txt: hunk 1 does not match"],
        ),
        ("just words", &["unrecognized patch format"]),
    ];
    for (text, needles) in cases {
        let result = patch(h, text).await;
        err_holds(&result, needles);
        assert!(
            result.text.ends_with("; nothing was applied"),
            "{text:?}: {}",
            result.text
        );
    }
    assert_eq!(h.read("a.txt"), "alpha\n");
    assert_eq!(h.read("dir/inner.txt"), "x\n");
    assert!(!h.exists("b.txt"));
    assert!(!h.root().parent().unwrap().join("out.txt").exists());
}

/// A patch that would leave a file where it also leaves a file inside it is
/// refused before anything is written.
async fn a_file_and_a_file_inside_it_are_refused(h: &Harness) {
    let result = patch(
        h,
        "*** Begin Patch\n*** Add File: first.txt\n+1\n*** Add File: d/x.txt\n+2\n*** Add File: d\n+3\n*** End Patch",
    )
    .await;
    err_holds(
        &result,
        &[
            "apply_patch: cannot add d: the patch also writes d/x.txt inside it",
            "; nothing was applied",
        ],
    );
    assert!(!h.exists("first.txt"));
    assert!(!h.exists("d"));
}

/// The case: a header indented by spaces is accepted, as Codex does
/// (after the update's hunks, a space-indented line is a context line, as in
/// Codex, so the other indented headers follow an add and a delete).
async fn an_indented_header_applies(h: &Harness) {
    h.write("foo.txt", "old\n");
    h.write("gone.txt", "x\n");
    let result = patch(
        h,
        "*** Begin Patch\n  *** Add File: bar.txt\n+bar\n   *** Delete File: gone.txt\n  *** Update File: foo.txt\n@@\n-old\n+new\n *** End Patch",
    )
    .await;
    let text = ok(&result);
    assert!(text.contains("M foo.txt"), "{text}");
    assert_eq!(h.read("foo.txt"), "new\n");
    assert_eq!(h.read("bar.txt"), "bar\n");
    assert!(!h.exists("gone.txt"));
}

macro_rules! both_workspaces {
    ($($name:ident),* $(,)?) => {
        mod local {
            use super::*;
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(&Harness::local()).await;
                }
            )*
        }
        mod dir_runner {
            use super::*;
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(&Harness::dir_remote()).await;
                }
            )*
        }
    };
}

both_workspaces!(
    validation_errors_name_the_operation_and_the_file,
    a_file_and_a_file_inside_it_are_refused,
    an_indented_header_applies,
);

/// A runner session whose writes to one path fail (a full disk, say), over a
/// directory-backed session.
struct FailingWrites {
    inner: DirSession,
    fail: PathBuf,
}

#[async_trait::async_trait]
impl RemoteRunnerSession for FailingWrites {
    fn state(&self) -> RunnerSessionState {
        self.inner.state()
    }
    async fn run_command(
        &self,
        request: RunnerCommandRequest,
    ) -> anyhow::Result<RunnerCommandResult> {
        self.inner.run_command(request).await
    }
    async fn cancel_command(&self, command_id: &RunnerCommandId) -> anyhow::Result<bool> {
        self.inner.cancel_command(command_id).await
    }
    async fn read_file(
        &self,
        request: RunnerFileReadRequest,
    ) -> anyhow::Result<RunnerFileReadResult> {
        self.inner.read_file(request).await
    }
    async fn write_file(&self, request: RunnerFileWriteRequest) -> anyhow::Result<()> {
        if request.path == self.fail {
            anyhow::bail!("no space left on device");
        }
        self.inner.write_file(request).await
    }
    async fn expose_port(&self, request: RunnerPortRequest) -> anyhow::Result<RunnerPortResult> {
        self.inner.expose_port(request).await
    }
    async fn snapshot(&self) -> anyhow::Result<Option<RunnerSnapshotRef>> {
        self.inner.snapshot().await
    }
    async fn close(&self) -> anyhow::Result<()> {
        self.inner.close().await
    }
}

fn failing_writes(fail: &str) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let session = Arc::new(FailingWrites {
        inner: DirSession::new(root),
        fail: PathBuf::from(fail),
    });
    Harness::with_session(dir, session)
}

/// Validation passes, then a write fails: the error names the operation and
/// the file, and lists what had already been applied — or says nothing was.
#[tokio::test]
async fn a_failed_write_says_what_was_applied() {
    let h = failing_writes("b.txt");
    h.write("b.txt", "old b\n");
    let result = patch(
        &h,
        "*** Begin Patch\n*** Add File: a.txt\n+a\n*** Update File: b.txt\n@@\n-old b\n+new b\n*** Add File: c.txt\n+c\n*** End Patch",
    )
    .await;
    err_holds(
        &result,
        &[
            "apply_patch: cannot update b.txt:",
            "no space left on device",
            "already applied: add a.txt; the rest was not applied",
        ],
    );
    assert!(
        !result.text.contains("nothing was applied"),
        "{}",
        result.text
    );
    assert_eq!(h.read("a.txt"), "a\n");
    assert_eq!(h.read("b.txt"), "old b\n");
    assert!(!h.exists("c.txt"));

    let first = patch(
        &h,
        "*** Begin Patch\n*** Update File: b.txt\n@@\n-old b\n+new b\n*** Add File: d.txt\n+d\n*** End Patch",
    )
    .await;
    err_holds(
        &first,
        &["apply_patch: cannot update b.txt:", "; nothing was applied"],
    );
    assert!(!h.exists("d.txt"));
}

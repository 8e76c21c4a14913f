//! An answer the output limit cut off, through the real binary: the text
//! still goes to stdout, stderr says it is incomplete, the exit code is 3.

mod support;

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use support::*;

#[tokio::test]
async fn an_answer_cut_off_by_the_output_limit_exits_3() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let server = FakeModelServer::start().await.unwrap();
    write_config(home.path(), &server, None);
    server.push(
        ChatStream::new()
            .text("The answer is cut")
            .finish("length")
            .usage(10, 5)
            .done(),
    );
    let run = roder(home.path(), workspace.path(), &["exec", "explain"]).await;
    assert_eq!(run.code, Some(3), "stderr:\n{}", run.stderr);
    assert_eq!(run.stdout, "The answer is cut\n");
    assert!(
        run.stderr
            .contains("roder: incomplete answer: the model's output limit cut the answer off"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("model stopped: max_output_tokens"),
        "{}",
        run.stderr
    );

    // A whole answer is still a plain success.
    server.push(ChatStream::text_reply("Whole."));
    let whole = roder(home.path(), workspace.path(), &["exec", "again"]).await;
    assert_eq!(whole.code, Some(0), "stderr:\n{}", whole.stderr);
}

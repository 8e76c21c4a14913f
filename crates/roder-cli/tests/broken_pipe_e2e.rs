//! Every `roder` command that writes to stdout, with stdout into a pipe
//! whose reader is already gone (what `roder threads list | head -1` comes
//! to): each stops as SIGPIPE would stop `git` or `grep`, with no panic and
//! no message. (`runners list` and `runners gc` need containers to print
//! anything: `runners_gc_e2e.rs` checks them.)

mod support;

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use support::{
    assert_stopped_like_sigpipe, git_repo, roder, roder_into_closed_pipe, thread_id_from,
};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
const MCP_INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

#[tokio::test]
async fn every_command_stops_quietly_when_its_reader_goes_away() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    git_repo(workspace.path());
    let server = FakeModelServer::start().await.unwrap();
    support::write_config(home.path(), &server, None);
    server.push(ChatStream::text_reply("First answer."));
    // Long enough for `threads compact` to have history to summarize: it
    // keeps the most recent quarter as it is.
    let long_prompt = "hello ".repeat(4000);
    let first = roder(home.path(), workspace.path(), &["exec", &long_prompt]).await;
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let thread = thread_id_from(&first.stderr);

    let quiet = async |args: &[&str], input: &str| {
        let run = roder_into_closed_pipe(home.path(), workspace.path(), args, input).await;
        assert_stopped_like_sigpipe(&run, args);
    };
    // The answer, after the turn (the thread is saved first) ...
    server.push(ChatStream::text_reply("Second answer."));
    quiet(&["exec", "--thread", &thread, "again"], "").await;
    // ... and the first event of a --json run.
    server.push(ChatStream::text_reply("Third answer."));
    quiet(&["exec", "--json", "once more"], "").await;
    server.push(ChatStream::text_reply("The summary."));
    quiet(&["threads", "compact", &thread], "").await;
    for args in [
        &["--help"][..],
        &["--version"],
        &["threads", "list"],
        &["threads", "show", &thread],
        &["threads", "fork", &thread],
        &["config", "show"],
        &["sandbox", "status"],
        &["sandbox", "status", "--json"],
        &["doctor"],
        &["doctor", "--json"],
        &["completions", "bash"],
        &["app-server", "--listen", "127.0.0.1:0"],
    ] {
        quiet(args, "").await;
    }
    // The stdio servers answer a request into the closed pipe while their
    // client keeps stdin open: they stop at once, not at end of input.
    quiet(&["app-server"], &format!("{INITIALIZE}\n")).await;
    quiet(&["mcp-server"], &format!("{MCP_INITIALIZE}\n")).await;
}

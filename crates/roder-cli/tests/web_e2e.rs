//! The web page `roder app-server --listen` serves, in a real Chromium
//! driven by Selenium, against the real binary and the fake model server.
//! One browser session walks through every check (a browser costs seconds
//! to start): the thread list follows a thread started elsewhere; a running
//! turn's message and tool call show while it runs; an approval is answered
//! by a click on its preview and the tool runs, its diff rendered; a turn
//! is interrupted; a 10,000-event thread opens on its last page and pages
//! older events in on scroll; another site's page cannot connect; a page
//! opened at a non-loopback address without the token is refused. A second
//! test clicks the pause and resume buttons of a docker sandbox.
//!
//! Screenshots go to `$CARGO_TARGET_TMPDIR/web-screenshots/`;
//! `UPDATE_SCREENSHOT=1` also writes the README's `docs/web.png`.

mod support;

use std::net::IpAddr;
use std::path::Path;

use roder_ext_jsonl_thread_store::JsonlThreadStore;
use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use roder_testkit::long_thread::write_long_thread;
use serde_json::{Value, json};
use support::browser::{self, Browser};
use support::write_config;
use support::ws::{ListeningServer, WsClient};

const LONG_THREAD: &str = "0b0e5e11-0000-4000-8000-000000010001";
const TOKEN: &str = "web-test-token";

/// This machine's address on its default route (no packet is sent).
fn non_loopback_ip() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("10.254.254.254:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

async fn set_mode(browser: &mut Browser, mode: &str) {
    browser
        .js(&format!(
            "const select = document.getElementById('mode'); select.value = '{mode}'; \
             select.dispatchEvent(new Event('change')); return true;"
        ))
        .await;
}

async fn mode_of(client: &mut WsClient, thread_id: &str) -> Value {
    let read = client
        .call("thread/read", json!({"threadId": thread_id}))
        .await
        .unwrap();
    read["thread"]["approvals"]["mode"].clone()
}

async fn wait_for_mode(client: &mut WsClient, thread_id: &str, mode: &str) {
    for _ in 0..200 {
        if mode_of(client, thread_id).await == mode {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the page did not set the mode {mode}");
}

async fn start_turn_in_page(browser: &mut Browser, message: &str) {
    browser.type_into("#message", message).await;
    browser.click("#send", None).await;
    browser.wait(".user", Some(message)).await;
}

async fn count(browser: &mut Browser, css: &str) -> u64 {
    browser
        .js(&format!(
            "return document.querySelectorAll(\"{css}\").length;"
        ))
        .await
        .as_u64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_page_follows_and_steers_threads_in_a_real_browser() {
    if !browser::available() {
        return;
    }
    let model = FakeModelServer::start().await.unwrap();
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), &model, None);
    let workspace = tempfile::tempdir().unwrap();
    let workspace_text = workspace.path().to_str().unwrap();
    // A git repository, so turns take checkpoints (rollback and fork).
    std::fs::write(workspace.path().join("README.md"), "demo\n").unwrap();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &["commit", "-q", "-m", "initial"],
    ] {
        let status = std::process::Command::new("git")
            .args(["-c", "user.name=T", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(workspace.path())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }
    let store = JsonlThreadStore::new(home.path().join("threads"));
    let last_seq = write_long_thread(&store, LONG_THREAD, workspace_text, 1250)
        .await
        .unwrap();
    assert_eq!(last_seq, 10_001);

    let server = ListeningServer::start(home.path(), workspace.path()).await;
    let page = server.address.replacen("ws://", "http://", 1);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-screenshots");
    let mut browser = Browser::start(&shots).await;
    browser.get(&format!("{page}/")).await;
    browser.wait("#status[data-state='connected']", None).await;
    browser
        .wait(
            &format!(".thread-item[data-thread-id='{LONG_THREAD}']"),
            None,
        )
        .await;

    // The thread list follows a thread started by another client.
    let mut elsewhere = WsClient::connect(&server.address, "elsewhere", false).await;
    let started = elsewhere
        .call(
            "thread/start",
            json!({"workspace": workspace_text, "title": "demo", "policyMode": "bypass"}),
        )
        .await
        .unwrap();
    let demo = started["thread"]["threadId"].as_str().unwrap().to_string();
    browser.wait(".thread-link", Some("demo")).await;

    // A turn started from the page: its message, reasoning (folded) and
    // tool call show while it runs, then its output, exit code and time.
    let command = json!({"cmd": "echo started; sleep 3; echo finished"}).to_string();
    model.push(
        ChatStream::new()
            .reasoning("Let me look around first.")
            .tool_call(0, "call-look", "exec_command", &[&command])
            .finish("tool_calls")
            .usage(10, 5)
            .done(),
    );
    model.push(ChatStream::text_reply("The workspace is ready."));
    browser.click(".thread-link", Some("demo")).await;
    browser.wait("#thread-title", Some("demo")).await;
    let url = browser.js("return location.pathname;").await;
    assert_eq!(url, format!("/threads/{demo}").as_str());
    start_turn_in_page(&mut browser, "what is here?").await;
    browser
        .wait(".tool[data-status='running']", Some("exec_command"))
        .await;
    let read = elsewhere
        .call("thread/read", json!({"threadId": demo}))
        .await
        .unwrap();
    assert!(
        read["runningTurnId"].is_string(),
        "the tool call showed while the turn ran: {read}"
    );
    browser
        .wait(".tool[data-status='done']", Some("exit 0"))
        .await;
    browser.wait(".tool .tool-output", Some("finished")).await;
    browser
        .wait(".assistant", Some("The workspace is ready."))
        .await;
    browser.wait(".turn-end.completed", None).await;
    let folded = browser
        .js("const d = document.querySelector('.reasoning details'); return d !== null && !d.open && d.textContent.includes('Let me look around first.');")
        .await;
    assert_eq!(folded, true, "reasoning is shown folded");
    browser.wait(".timeline-row .segment.tools", None).await;
    browser.screenshot("turn").await.unwrap();

    // An approval: the preview's diff, a button per decision; a click
    // answers it and the tool runs, its diff rendered in the call.
    set_mode(&mut browser, "default").await;
    wait_for_mode(&mut elsewhere, &demo, "default").await;
    let write = json!({"path": "hello.txt", "content": "hi\n"}).to_string();
    model.push(ChatStream::tool_calls_reply(&[(
        "call-write",
        "write_file",
        &write,
    )]));
    model.push(ChatStream::text_reply("Wrote hello.txt."));
    start_turn_in_page(&mut browser, "write hello").await;
    browser.wait(".approval", Some("write_file")).await;
    browser.wait(".approval .diff-add", Some("+hi")).await;
    assert_eq!(count(&mut browser, ".approval button.decision").await, 6);
    assert!(!workspace.path().join("hello.txt").exists(), "asked first");
    browser.wait(".timeline-row .segment.approval", None).await;
    let shot = browser.screenshot("approval").await.unwrap();
    if std::env::var("UPDATE_SCREENSHOT").is_ok_and(|value| value == "1") {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/web.png");
        std::fs::copy(&shot, docs).unwrap();
    }
    browser
        .click(".approval button[data-decision='allow_once']", None)
        .await;
    browser
        .wait(".tool[data-status='done'] .diff-add", Some("+hi"))
        .await;
    browser
        .wait(".approval-note", Some("allow once by web#"))
        .await;
    browser.wait(".assistant", Some("Wrote hello.txt.")).await;
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("hello.txt")).unwrap(),
        "hi\n"
    );
    assert_eq!(count(&mut browser, "#approvals .approval").await, 0);

    // Interrupt a running turn from the page.
    set_mode(&mut browser, "bypass").await;
    wait_for_mode(&mut elsewhere, &demo, "bypass").await;
    let sleep = json!({"cmd": "sleep 30"}).to_string();
    model.push(ChatStream::tool_calls_reply(&[(
        "call-sleep",
        "exec_command",
        &sleep,
    )]));
    start_turn_in_page(&mut browser, "wait a while").await;
    browser
        .wait(".tool[data-status='running']", Some("exec_command"))
        .await;
    browser
        .wait_js("return !document.getElementById('interrupt').disabled;")
        .await;
    browser.click("#interrupt", None).await;
    browser.wait(".turn-end.interrupted", None).await;
    // The command was killed: its call ends as failed (or stopped, when
    // the turn ended before its result).
    browser
        .wait(
            ".tool[data-call-id='call-sleep'][data-status='failed'], \
             .tool[data-call-id='call-sleep'][data-status='stopped']",
            None,
        )
        .await;
    let read = elsewhere
        .call("thread/read", json!({"threadId": demo}))
        .await
        .unwrap();
    assert!(read["runningTurnId"].is_null(), "{read}");
    browser.screenshot("interrupted").await.unwrap();

    // Roll back to turn 1 from the page (the file turn 2 wrote goes), then
    // fork: the page opens the fork.
    browser.wait("#turn-pick option[value='1']", None).await;
    browser
        .js("const pick = document.getElementById('turn-pick'); pick.value = '1'; return true;")
        .await;
    browser.click("#rollback", None).await;
    browser
        .wait(".note.rollback", Some("rolled back to turn 1"))
        .await;
    assert!(!workspace.path().join("hello.txt").exists(), "rolled back");
    // The turns after 1 are gone, so turn 1 is no longer a target: fork
    // now (which is the end of turn 1).
    browser
        .js("const pick = document.getElementById('turn-pick'); pick.value = ''; return true;")
        .await;
    browser.click("#fork", None).await;
    browser
        .wait(".note.fork", Some("forked at turn 1 from"))
        .await;
    let fork_path = browser.js("return location.pathname;").await;
    assert_ne!(fork_path, format!("/threads/{demo}").as_str());

    // A 10,000-event thread at its own address: its last page shows at
    // once, and scrolling up pages older events in.
    browser.get(&format!("{page}/threads/{LONG_THREAD}")).await;
    browser.wait(".assistant", Some("answer 1250")).await;
    let shown = count(&mut browser, "#events .event").await;
    assert!(shown < 1_000, "only the last page is rendered: {shown}");
    let oldest_shown = browser
        .js("return Number(document.querySelector('#events .event[data-seq]').dataset.seq);")
        .await
        .as_u64()
        .unwrap();
    assert!(oldest_shown > 9_000, "{oldest_shown}");
    browser
        .js("document.getElementById('log').scrollTop = 0; return true;")
        .await;
    browser
        .wait_js(&format!(
            "return Number(document.querySelector('#events .event[data-seq]').dataset.seq) < {oldest_shown};"
        ))
        .await;
    browser.wait(".user", Some("question 1190")).await;
    browser.screenshot("long-thread").await.unwrap();

    // Another site's page cannot drive the API (its Origin is not the
    // server's own).
    browser.get("data:text/html,<title>elsewhere</title>").await;
    browser
        .js(&format!(
            "window.outcome = null; const socket = new WebSocket('{}/'); \
             socket.onopen = () => {{ window.outcome = 'open'; }}; \
             socket.onerror = () => {{ window.outcome = 'refused'; }}; return true;",
            server.address
        ))
        .await;
    assert_eq!(browser.wait_js("return window.outcome;").await, "refused");

    // A page opened at a non-loopback address needs the token. (On a
    // machine without a route, 127.0.0.1: a server with a token refuses a
    // page without it at any address.)
    let guarded =
        ListeningServer::start_with(home.path(), workspace.path(), "0.0.0.0:0", Some(TOKEN)).await;
    let port = guarded.address.rsplit(':').next().unwrap().to_string();
    let host = non_loopback_ip().map_or("127.0.0.1".to_string(), |ip| ip.to_string());
    eprintln!("the guarded page is opened at http://{host}:{port}/");
    browser.get(&format!("http://{host}:{port}/")).await;
    browser.wait("#status[data-state='refused']", None).await;
    browser.wait("#login-why", Some("needs its token")).await;
    assert_eq!(count(&mut browser, ".thread-item").await, 0);
    browser.screenshot("refused").await.unwrap();
    browser.type_into("#token", "not-the-token").await;
    browser.click("#connect", None).await;
    browser.wait("#login-why", Some("refused the token")).await;
    assert_eq!(count(&mut browser, ".thread-item").await, 0);
    browser.type_into("#token", TOKEN).await;
    browser.click("#connect", None).await;
    browser.wait("#status[data-state='connected']", None).await;
    browser
        .wait(
            &format!(".thread-item[data-thread-id='{LONG_THREAD}']"),
            None,
        )
        .await;
    let url = browser.js("return location.href;").await;
    assert!(!url.as_str().unwrap().contains(TOKEN), "{url}");

    browser.quit().await;
    guarded.kill().await;
    server.kill().await;
}

mod docker_support;

/// The page's pause and resume buttons on a thread whose sandbox is a
/// docker container: the daemon reports it paused, then running again.
#[tokio::test]
async fn the_pause_and_resume_buttons_pause_and_resume_a_docker_sandbox() {
    if !browser::available() {
        return;
    }
    let Some(containers) = docker_support::docker_or_skip("web pause/resume").await else {
        return;
    };
    let model = FakeModelServer::start().await.unwrap();
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), &model, None);
    let workspace = tempfile::tempdir().unwrap();
    let server = ListeningServer::start(home.path(), workspace.path()).await;
    let mut client = WsClient::connect(&server.address, "setup", false).await;
    let started = client
        .call(
            "thread/start",
            json!({
                "title": "boxed",
                "policyMode": "bypass",
                "runner": {
                    "providerId": "docker",
                    "workspace": "/workspace",
                    "config": {
                        "image": docker_support::IMAGE,
                        "labels": { docker_support::TEST_LABEL: containers.label },
                    },
                },
            }),
        )
        .await
        .unwrap();
    let thread = started["thread"]["threadId"].as_str().unwrap().to_string();
    // A turn makes the container.
    model.push(ChatStream::tool_calls_reply(&[(
        "call-hi",
        "exec_command",
        r#"{"cmd":"echo hi"}"#,
    )]));
    model.push(ChatStream::text_reply("made."));
    client
        .call(
            "turn/start",
            json!({"threadId": thread, "message": "make the box"}),
        )
        .await
        .unwrap();
    client.events_until(&thread, "turn_completed").await;
    let made = containers.list().await;
    assert_eq!(made.len(), 1, "{made:?}");
    let container = made.keys().next().unwrap().clone();
    assert!(!containers.is_paused(&container).await);

    let page = server.address.replacen("ws://", "http://", 1);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-screenshots");
    let mut browser = Browser::start(&shots).await;
    browser.get(&format!("{page}/threads/{thread}")).await;
    browser.wait("#status[data-state='connected']", None).await;
    browser.wait("#pause:not([hidden])", None).await;
    browser.click("#pause", None).await;
    let until = |paused: bool| {
        let containers = &containers;
        let container = &container;
        async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while containers.is_paused(container).await != paused {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the container never became {}",
                    if paused { "paused" } else { "running" }
                );
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };
    until(true).await;
    browser.wait("#toast", Some("sandbox paused")).await;
    browser.click("#resume", None).await;
    until(false).await;
    browser.wait("#toast", Some("sandbox resumed")).await;
    browser.quit().await;
}

//! Agent profiles end to end with the real `roder` binary: a profile archive
//! served over HTTP on 127.0.0.1 (with an ETag, counting requests), a Claude
//! Code subagent file in the workspace, the fake model server recording what
//! the model is offered, and new processes continuing the threads after the
//! archive server stopped and the profile file changed.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use serde_json::Value;
use support::{git_repo, thread_id_from};

const MODEL_KEY: &str = "model-key-5f2c9a7e41d3";
const PROFILE_SECRET: &str = "profile-secret-8b1e4d6f0a92";

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn roder(home: &Path, workspace: &Path, args: &[&str]) -> Run {
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"))
            .args(args)
            .current_dir(workspace)
            .env("RODER_HOME", home)
            .env("FAKE_MODEL_KEY", MODEL_KEY)
            .env("PROFILE_SECRET", PROFILE_SECRET)
            .env_remove("RODER_MODEL")
            .output(),
    )
    .await
    .expect("roder should finish within 60 s")
    .unwrap();
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Serves one archive with an ETag; counts requests.
struct ArchiveServer {
    url: String,
    requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl ArchiveServer {
    async fn start(body: Vec<u8>) -> ArchiveServer {
        let requests = Arc::new(AtomicUsize::new(0));
        let counter = requests.clone();
        let etag = format!("\"v{}\"", body.len());
        let app = Router::new().route(
            "/agents.tar",
            axum::routing::get(move |headers: HeaderMap| {
                let (body, etag, counter) = (body.clone(), etag.clone(), counter.clone());
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    let fresh = headers
                        .get(header::IF_NONE_MATCH)
                        .is_some_and(|sent| sent.as_bytes() == etag.as_bytes());
                    if fresh {
                        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response();
                    }
                    let response: Response = ([(header::ETAG, etag)], body).into_response();
                    response
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/agents.tar", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        ArchiveServer {
            url,
            requests,
            task,
        }
    }
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Every file under `dir`, as text.
fn all_files(dir: &Path, found: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            all_files(&path, found);
        } else {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            found.push((path.display().to_string(), text));
        }
    }
}

fn pack_archive(dir: &Path) -> (String, u64, Vec<u8>) {
    std::fs::create_dir_all(dir.join("profiles")).unwrap();
    std::fs::write(
        dir.join("roder-bundle.toml"),
        "id = \"acme-agents\"\n[entrypoints]\nreviewer = \"profiles/reviewer.md\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("profiles/reviewer.md"),
        "+++\nname = \"reviewer\"\ndescription = \"Reviews, never writes\"\n\
         tools = [\"read_file\", \"grep\", \"write_file\", \"exec_command\"]\n\
         disallowed_tools = [\"write_file\"]\n\
         [mcp_servers.docs]\nurl = \"http://127.0.0.1:9/mcp\"\nbearer_token_env_var = \"PROFILE_SECRET\"\n\
         +++\nYou are the archive reviewer. Report findings; never edit.\n",
    )
    .unwrap();
    let (reference, bytes) = roder_profiles::pack(dir).unwrap();
    (reference.digest, reference.size, bytes)
}

#[tokio::test]
async fn a_thread_keeps_its_profile_snapshot_across_processes() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let bundle = tempfile::tempdir().unwrap();
    git_repo(workspace.path());
    let models = FakeModelServer::start().await.unwrap();
    models.require_api_key(MODEL_KEY);
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"fake/m\"\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\napi_key_env = \"FAKE_MODEL_KEY\"\n",
            models.openai_base_url()
        ),
    )
    .unwrap();
    let (digest, size, bytes) = pack_archive(bundle.path());
    let archive = ArchiveServer::start(bytes).await;

    // 1. An archive profile: the denied tool is never offered, and a call to
    //    it is refused.
    models.push(ChatStream::tool_calls_reply(&[(
        "call-write",
        "write_file",
        r#"{"path":"notes.txt","content":"no"}"#,
    )]));
    models.push(ChatStream::text_reply("Reviewed."));
    let size_text = size.to_string();
    let first = roder(
        home.path(),
        workspace.path(),
        &[
            "exec",
            "--profile",
            "reviewer",
            "--profile-archive",
            &archive.url,
            "--profile-digest",
            &digest,
            "--profile-size",
            &size_text,
            "review the repository",
        ],
    )
    .await;
    assert_eq!(first.code, Some(0), "stderr:\n{}", first.stderr);
    assert_eq!(first.stdout, "Reviewed.\n");
    assert_eq!(archive.requests.load(Ordering::SeqCst), 1);
    assert!(!workspace.path().join("notes.txt").exists());
    let requests = models.model_requests();
    let offered = tool_names(&requests[0].body);
    assert!(offered.contains(&"read_file".to_string()), "{offered:?}");
    assert!(
        !offered.contains(&"write_file".to_string()),
        "denied tool offered: {offered:?}"
    );
    assert!(
        !offered.contains(&"edit".to_string()),
        "outside the allowlist: {offered:?}"
    );
    let first_body = requests[0].body.to_string();
    assert!(first_body.contains("You are the archive reviewer."));
    let refused = requests[1].body.to_string();
    assert!(refused.contains("write_file"), "{refused}");
    let reviewer_thread = thread_id_from(&first.stderr);
    let metadata: Value = serde_json::from_str(
        &std::fs::read_to_string(
            home.path()
                .join("threads")
                .join(&reviewer_thread)
                .join("metadata.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(metadata["profile"]["canonical"], "reviewer");
    assert_eq!(metadata["profile"]["source"]["kind"], "archive");
    assert_eq!(metadata["profile"]["source"]["digest"], digest.as_str());
    assert_eq!(metadata["profile"]["source"]["id"], "acme-agents");

    // 2. A Claude Code subagent file, as it is.
    let profiles = workspace.path().join(".roder/profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(
        profiles.join("code-reviewer.md"),
        "---\nname: code-reviewer\ndescription: Expert code review specialist.\n\
         tools: Read, Grep, Glob\nmodel: inherit\n---\n\nYou are the Claude-format reviewer.\n",
    )
    .unwrap();
    models.push(ChatStream::text_reply("Looked."));
    let second = roder(
        home.path(),
        workspace.path(),
        &["exec", "--profile", "code-reviewer", "look around"],
    )
    .await;
    assert_eq!(second.code, Some(0), "stderr:\n{}", second.stderr);
    let claude_thread = thread_id_from(&second.stderr);
    let request = models.model_requests().pop().unwrap();
    let mut offered = tool_names(&request.body);
    offered.sort();
    assert_eq!(offered, vec!["glob", "grep", "read_file"]);
    assert!(
        request
            .body
            .to_string()
            .contains("You are the Claude-format reviewer.")
    );

    // 3. The archive server goes away and the file changes; new processes
    //    continue both threads with what they started with.
    archive.task.abort();
    let _ = archive.task.await;
    std::fs::write(
        profiles.join("code-reviewer.md"),
        "---\nname: code-reviewer\ndescription: changed\ntools: Read, Write, Edit, Bash\n---\n\nYou are CHANGED.\n",
    )
    .unwrap();
    models.push(ChatStream::text_reply("Still reviewing."));
    let again = roder(
        home.path(),
        workspace.path(),
        &["exec", "--thread", &reviewer_thread, "and now?"],
    )
    .await;
    assert_eq!(again.code, Some(0), "stderr:\n{}", again.stderr);
    let request = models.model_requests().pop().unwrap();
    let offered = tool_names(&request.body);
    assert!(!offered.contains(&"write_file".to_string()), "{offered:?}");
    assert!(
        request
            .body
            .to_string()
            .contains("You are the archive reviewer.")
    );

    models.push(ChatStream::text_reply("Still looking."));
    let again = roder(
        home.path(),
        workspace.path(),
        &["exec", "--thread", &claude_thread, "and now?"],
    )
    .await;
    assert_eq!(again.code, Some(0), "stderr:\n{}", again.stderr);
    let request = models.model_requests().pop().unwrap();
    let mut offered = tool_names(&request.body);
    offered.sort();
    assert_eq!(
        offered,
        vec!["glob", "grep", "read_file"],
        "the snapshot's tools"
    );
    let body = request.body.to_string();
    assert!(body.contains("You are the Claude-format reviewer."));
    assert!(!body.contains("You are CHANGED."));

    // 4. Nothing Roder persisted holds a secret: not the model key, not the
    //    value of the variable the profile's MCP server names.
    let mut files = Vec::new();
    all_files(home.path(), &mut files);
    assert!(
        files
            .iter()
            .any(|(path, _)| path.ends_with("metadata.json"))
    );
    for (path, text) in &files {
        assert!(!text.contains(MODEL_KEY), "{path} holds the model key");
        assert!(
            !text.contains(PROFILE_SECRET),
            "{path} holds the profile's secret"
        );
    }
    assert!(
        files.iter().any(
            |(_, text)| text.contains("\"bearer_token_env_var\": \"PROFILE_SECRET\"")
                || text.contains("\"bearer_token_env_var\":\"PROFILE_SECRET\"")
        ),
        "the reference itself is kept"
    );
}

#[tokio::test]
async fn builtin_selectors_and_bad_profiles_fail_before_anything_is_created() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    git_repo(workspace.path());
    let models = FakeModelServer::start().await.unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"fake/m\"\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\napi_key_env = \"FAKE_MODEL_KEY\"\n",
            models.openai_base_url()
        ),
    )
    .unwrap();
    let twice = roder(
        home.path(),
        workspace.path(),
        &["exec", "--profile", "builtin:builtin:plan", "hi"],
    )
    .await;
    assert_eq!(twice.code, Some(1), "{}", twice.stderr);
    assert!(twice.stderr.contains("prefix twice"), "{}", twice.stderr);
    assert!(
        !home.path().join("threads").exists()
            || std::fs::read_dir(home.path().join("threads"))
                .unwrap()
                .count()
                == 0
    );

    models.push(ChatStream::text_reply("A plan."));
    let plan = roder(
        home.path(),
        workspace.path(),
        &["exec", "--profile", "builtin:plan", "plan it"],
    )
    .await;
    assert_eq!(plan.code, Some(0), "{}", plan.stderr);
    let mut offered = tool_names(&models.model_requests()[0].body);
    offered.sort();
    assert_eq!(offered, vec!["glob", "grep", "list_files", "read_file"]);

    let listed = roder(home.path(), workspace.path(), &["profiles", "list"]).await;
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    assert!(
        listed.stdout.contains("builtin:review"),
        "{}",
        listed.stdout
    );
    let shown = roder(
        home.path(),
        workspace.path(),
        &["profiles", "show", "builtin:review", "--resolved"],
    )
    .await;
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);
    assert!(
        shown.stdout.contains("disallowed_tools = ")
            && shown.stdout.contains("# from builtin:review"),
        "{}",
        shown.stdout
    );
}

#[tokio::test]
async fn a_worktree_thread_runs_as_its_profile_and_the_checkout_stays_untouched() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    git_repo(workspace.path());
    let models = FakeModelServer::start().await.unwrap();
    support::write_config(home.path(), &models, None);
    models.push(ChatStream::tool_calls_reply(&[(
        "call-write",
        "write_file",
        r#"{"path":"notes.txt","content":"no"}"#,
    )]));
    models.push(ChatStream::text_reply("Reviewed in the worktree."));
    let run = roder(
        home.path(),
        workspace.path(),
        &[
            "exec",
            "--worktree",
            "--profile",
            "builtin:review",
            "review",
        ],
    )
    .await;
    assert_eq!(run.code, Some(0), "stderr:\n{}", run.stderr);
    assert_eq!(run.stdout, "Reviewed in the worktree.\n");
    let thread = thread_id_from(&run.stderr);
    let metadata: Value = serde_json::from_str(
        &std::fs::read_to_string(
            home.path()
                .join("threads")
                .join(&thread)
                .join("metadata.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        metadata["profile"]["canonical"], "builtin:review",
        "{metadata}"
    );
    let worktree = metadata["runner_binding"]["workspace"].as_str().unwrap();
    assert!(worktree.contains("worktrees"), "{worktree}");
    // The review profile denies write_file: not offered, and its call is
    // refused; neither the worktree nor the checkout has the file.
    let offered = tool_names(&models.model_requests()[0].body);
    assert!(!offered.contains(&"write_file".to_string()), "{offered:?}");
    assert!(!Path::new(worktree).join("notes.txt").exists());
    assert!(!workspace.path().join("notes.txt").exists());
}

#[tokio::test]
async fn a_profiles_mcp_server_serves_every_turn_of_its_thread_in_a_worktree_too() {
    if !support::installed(
        "mcp-server-time",
        &["--help"],
        "pip install mcp-server-time",
    ) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    git_repo(workspace.path());
    let models = FakeModelServer::start().await.unwrap();
    support::write_config(home.path(), &models, None);
    std::fs::create_dir(home.path().join("profiles")).unwrap();
    std::fs::write(
        home.path().join("profiles/timekeeper.md"),
        "+++\nname = \"timekeeper\"\n[mcp_servers.time]\ncommand = \"mcp-server-time\"\n+++\nTell the time.\n",
    )
    .unwrap();
    models.push(ChatStream::text_reply("first"));
    let first = roder(
        home.path(),
        workspace.path(),
        &[
            "exec",
            "--worktree",
            "--profile",
            "timekeeper",
            "what time is it",
        ],
    )
    .await;
    assert_eq!(first.code, Some(0), "stderr:\n{}", first.stderr);
    let thread = thread_id_from(&first.stderr);
    // The profile file changes; the thread keeps what it started with.
    std::fs::write(
        home.path().join("profiles/timekeeper.md"),
        "+++\nname = \"timekeeper\"\n+++\nNo servers any more.\n",
    )
    .unwrap();
    models.push(ChatStream::text_reply("second"));
    let second = roder(
        home.path(),
        workspace.path(),
        &["exec", "--thread", &thread, "and now"],
    )
    .await;
    assert_eq!(second.code, Some(0), "stderr:\n{}", second.stderr);
    let requests = models.model_requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        let offered = tool_names(&request.body);
        assert!(
            offered.contains(&"mcp__time__get_current_time".to_string()),
            "{offered:?}"
        );
    }
}

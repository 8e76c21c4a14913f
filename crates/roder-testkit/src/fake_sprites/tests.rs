//! The fake's wire format, checked with a plain HTTP client.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use super::{FakeRoute, FakeSpritesServer};

struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Client {
    fn new(fake: &FakeSpritesServer) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: fake.base_url(),
            token: fake.token().to_string(),
        }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    async fn create(&self, name: &str) -> reqwest::Response {
        self.request(reqwest::Method::POST, "/v1/sprites")
            .json(&json!({ "name": name }))
            .send()
            .await
            .unwrap()
    }

    /// Runs an exec and returns the raw chunks of its body.
    async fn exec(&self, sprite: &str, query: &[(&str, &str)]) -> (u16, Vec<Vec<u8>>) {
        let response = self
            .request(reqwest::Method::POST, &format!("/v1/sprites/{sprite}/exec"))
            .query(query)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let mut chunks = Vec::new();
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            chunks.push(chunk.unwrap().to_vec());
        }
        (status, chunks)
    }
}

async fn json_body(response: reqwest::Response) -> Value {
    response.json().await.unwrap()
}

/// A fake whose new sprites serve at once, for tests about other things.
async fn ready_fake() -> FakeSpritesServer {
    let fake = FakeSpritesServer::start().await.unwrap();
    fake.set_not_ready_window(0);
    fake
}

/// The payloads of the frames of `stream` in `chunks`, concatenated.
fn stream_text(chunks: &[Vec<u8>], stream: u8) -> String {
    chunks
        .iter()
        .filter_map(|c| c.split_first())
        .filter(|(id, _)| **id == stream)
        .map(|(_, payload)| String::from_utf8_lossy(payload).into_owned())
        .collect()
}

#[tokio::test]
async fn requests_without_the_token_get_401_json() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let response = reqwest::Client::new()
        .get(format!("{}/v1/sprites", fake.base_url()))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert!(json_body(response).await["error"].is_string());
    let log = fake.requests();
    assert_eq!(log.len(), 1);
    assert!(!log[0].authorized);
    assert_eq!(log[0].route, FakeRoute::ListSprites);
}

#[tokio::test]
async fn sprite_lifecycle_and_listing() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let client = Client::new(&fake);
    let created = client.create("alpha").await;
    assert_eq!(created.status(), 201);
    let sprite = json_body(created).await;
    assert_eq!(sprite["name"], "alpha");
    assert_eq!(sprite["status"], "cold");
    assert_eq!(sprite["url"], "https://alpha-fakeorg.sprites.app");
    let taken = client.create("alpha").await;
    assert_eq!(taken.status(), 409, "duplicate name");
    assert!(
        json_body(taken).await["error"]
            .as_str()
            .unwrap()
            .contains("already exists")
    );
    assert_eq!(client.create("Bad_Name").await.status(), 400);
    let no_name = client
        .request(reqwest::Method::POST, "/v1/sprites")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_name.status(), 400);
    assert_eq!(json_body(no_name).await["errors"][0], "name is required");
    for name in ["alpha-2", "beta"] {
        assert_eq!(client.create(name).await.status(), 201);
    }
    assert_eq!(fake.creates(), 3);

    let page = client
        .request(reqwest::Method::GET, "/v1/sprites")
        .query(&[("prefix", "alpha"), ("max_results", "1")])
        .send()
        .await
        .unwrap();
    let page = json_body(page).await;
    assert_eq!(page["sprites"][0]["name"], "alpha");
    assert_eq!(page["has_more"], true);
    let next = page["next_continuation_token"]
        .as_str()
        .unwrap()
        .to_string();
    let page = client
        .request(reqwest::Method::GET, "/v1/sprites")
        .query(&[("prefix", "alpha"), ("continuation_token", next.as_str())])
        .send()
        .await
        .unwrap();
    let page = json_body(page).await;
    assert_eq!(page["sprites"].as_array().unwrap().len(), 1);
    assert_eq!(page["sprites"][0]["name"], "alpha-2");
    assert_eq!(page["has_more"], false);

    let get = |name: &str| {
        client
            .request(reqwest::Method::GET, &format!("/v1/sprites/{name}"))
            .send()
    };
    assert_eq!(get("beta").await.unwrap().status(), 200);
    let deleted = client
        .request(reqwest::Method::DELETE, "/v1/sprites/beta")
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    assert_eq!(get("beta").await.unwrap().status(), 404);
    assert_eq!(fake.deletes(), 1);
    assert_eq!(fake.sprite_names(), vec!["alpha", "alpha-2"]);
}

#[tokio::test]
async fn exec_streams_one_frame_per_chunk_and_ends_with_the_exit_code() {
    let fake = ready_fake().await;
    let client = Client::new(&fake);
    client.create("ex").await;
    let (status, chunks) = client
        .exec(
            "ex",
            &[
                ("cmd", "sh"),
                ("cmd", "-c"),
                ("cmd", "printf out; printf err >&2; exit 5"),
                ("dir", "/home/sprite"),
            ],
        )
        .await;
    assert_eq!(status, 200);
    for chunk in &chunks {
        assert!(matches!(chunk.first(), Some(1..=3)), "{chunk:?}");
    }
    assert_eq!(chunks.last().unwrap(), &vec![3u8, 5]);
    let stdout: Vec<u8> = chunks
        .iter()
        .filter(|c| c[0] == 1)
        .flat_map(|c| c[1..].to_vec())
        .collect();
    let stderr: Vec<u8> = chunks
        .iter()
        .filter(|c| c[0] == 2)
        .flat_map(|c| c[1..].to_vec())
        .collect();
    assert_eq!(
        (stdout.as_slice(), stderr.as_slice()),
        (&b"out"[..], &b"err"[..])
    );

    let (_, chunks) = client.exec("ex", &[("cmd", "no-such-program-here")]).await;
    assert_eq!(chunks.last().unwrap(), &vec![3u8, 127]);

    let (status, _) = client
        .exec("ex", &[("cmd", "true"), ("dir", "/missing")])
        .await;
    assert_eq!(status, 400);
    let (status, _) = client.exec("nope", &[("cmd", "true")]).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn exec_maps_dir_into_the_sprite_and_replaces_env() {
    let fake = ready_fake().await;
    let client = Client::new(&fake);
    client.create("env").await;
    let (_, chunks) = client
        .exec(
            "env",
            &[
                ("cmd", "/bin/sh"),
                ("cmd", "-c"),
                ("cmd", "pwd; echo \"$ONLY:${HOME:-unset}\""),
                ("dir", "/home/sprite"),
                ("env", "ONLY=1"),
            ],
        )
        .await;
    let expected_dir = fake.host_path("env", "/home/sprite").unwrap();
    assert_eq!(
        stream_text(&chunks, 1),
        format!("{}\n1:unset\n", expected_dir.display())
    );
}

#[tokio::test]
async fn exec_without_env_gets_an_empty_environment_in_home_sprite() {
    let fake = ready_fake().await;
    let client = Client::new(&fake);
    client.create("bare").await;
    // `env` with no arguments prints the whole environment: nothing at all.
    let (status, chunks) = client.exec("bare", &[("cmd", "env")]).await;
    assert_eq!(status, 200);
    assert_eq!(stream_text(&chunks, 1), "", "no PATH, no HOME, nothing");
    assert_eq!(chunks.last().unwrap(), &vec![3u8, 0]);
    let (_, chunks) = client.exec("bare", &[("cmd", "pwd")]).await;
    let home = fake.host_path("bare", "/home/sprite").unwrap();
    assert_eq!(stream_text(&chunks, 1), format!("{}\n", home.display()));
}

#[tokio::test]
async fn websocket_only_parameters_are_refused() {
    let fake = ready_fake().await;
    let client = Client::new(&fake);
    client.create("ws").await;
    for key in ["tty", "id", "detachable", "cc"] {
        let (status, _) = client.exec("ws", &[("cmd", "true"), (key, "1")]).await;
        assert_eq!(status, 400, "{key}");
    }
}

#[tokio::test]
async fn a_new_sprite_is_not_ready_for_a_window_of_requests() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let client = Client::new(&fake);
    client.create("fresh").await;
    // The default window: the first supervisor-backed request gets 503.
    let (status, chunks) = client.exec("fresh", &[("cmd", "true")]).await;
    assert_eq!(status, 503);
    assert_eq!(
        String::from_utf8_lossy(&chunks.concat()),
        "Process not ready\n"
    );
    let (status, _) = client.exec("fresh", &[("cmd", "true")]).await;
    assert_eq!(status, 200);

    fake.set_not_ready_window(3);
    client.create("slow").await;
    let read = || {
        client
            .request(reqwest::Method::GET, "/v1/sprites/slow/fs/read")
            .query(&[("path", "/home/sprite/none")])
            .send()
    };
    let get = client
        .request(reqwest::Method::GET, "/v1/sprites/slow")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 200, "the sprite object is served meanwhile");
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(read().await.unwrap().status().as_u16());
    }
    assert_eq!(statuses, vec![503, 503, 503, 404]);

    fake.insert_sprite("adopted").await.unwrap();
    let (status, _) = client.exec("adopted", &[("cmd", "true")]).await;
    assert_eq!(status, 200, "an existing sprite is ready");
}

#[tokio::test]
async fn exec_feeds_the_body_as_stdin_when_asked() {
    let fake = ready_fake().await;
    let client = Client::new(&fake);
    client.create("in").await;
    let response = client
        .request(reqwest::Method::POST, "/v1/sprites/in/exec")
        .query(&[("cmd", "cat"), ("stdin", "true")])
        .body("piped")
        .send()
        .await
        .unwrap();
    let body = response.bytes().await.unwrap();
    assert_eq!(&body[..], b"\x01piped\x03\x00");
}

#[tokio::test]
async fn filesystem_reads_writes_and_reports_enoent() {
    let fake = ready_fake().await;
    let client = Client::new(&fake);
    client.create("fs").await;
    let written = client
        .request(reqwest::Method::PUT, "/v1/sprites/fs/fs/write")
        .query(&[
            ("path", "a/b.txt"),
            ("workingDir", "/home/sprite"),
            ("mkdirParents", "true"),
        ])
        .body("bytes")
        .send()
        .await
        .unwrap();
    assert_eq!(written.status(), 200);
    assert_eq!(
        json_body(written).await,
        json!({ "path": "/home/sprite/a/b.txt", "size": 5, "mode": "0644" })
    );
    let read = client
        .request(reqwest::Method::GET, "/v1/sprites/fs/fs/read")
        .query(&[("path", "/home/sprite/a/b.txt")])
        .send()
        .await
        .unwrap();
    assert_eq!(read.bytes().await.unwrap(), "bytes");
    assert!(
        fake.host_path("fs", "/home/sprite/a/b.txt")
            .unwrap()
            .is_file()
    );

    let missing = client
        .request(reqwest::Method::GET, "/v1/sprites/fs/fs/read")
        .query(&[("path", "nope"), ("workingDir", "/home/sprite")])
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let body = json_body(missing).await;
    assert_eq!(body["code"], "ENOENT");
    assert_eq!(body["path"], "/home/sprite/nope");

    let no_parent = client
        .request(reqwest::Method::PUT, "/v1/sprites/fs/fs/write")
        .query(&[("path", "/x/y/z"), ("mkdir", "false")])
        .body("z")
        .send()
        .await
        .unwrap();
    assert_eq!(no_parent.status(), 404);
    let with_mkdir = client
        .request(reqwest::Method::PUT, "/v1/sprites/fs/fs/write")
        .query(&[("path", "/x/y/z"), ("mkdir", "true"), ("mode", "0600")])
        .body("z")
        .send()
        .await
        .unwrap();
    assert_eq!(json_body(with_mkdir).await["mode"], "0600");
}

#[tokio::test]
async fn checkpoints_stream_ndjson_and_can_fail_in_band() {
    let fake = ready_fake().await;
    let client = Client::new(&fake);
    client.create("cp").await;
    let checkpoint = || {
        client
            .request(reqwest::Method::POST, "/v1/sprites/cp/checkpoint")
            .json(&json!({ "comment": "first" }))
            .send()
    };
    let response = checkpoint().await.unwrap();
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let text = response.text().await.unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.last().unwrap()["type"], "complete");
    assert_eq!(lines.last().unwrap()["data"], "Checkpoint v1 created");

    fake.fail_next_checkpoint_in_band("no space");
    let response = checkpoint().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.text().await.unwrap().contains(r#""type":"error""#));
    let list = client
        .request(reqwest::Method::GET, "/v1/sprites/cp/checkpoints")
        .send()
        .await
        .unwrap();
    let list = json_body(list).await;
    assert_eq!(
        list,
        json!([{ "id": "v1", "create_time": list[0]["create_time"], "comment": "first" }])
    );
    assert_eq!(fake.checkpoints("cp"), vec!["v1"]);
}

#[tokio::test]
async fn aborting_the_request_kills_the_process_group() {
    let fake = ready_fake().await;
    let client = Client::new(&fake);
    client.create("k").await;
    // `sh` forks `sleep`, which holds the output pipe: the command is gone
    // only when the whole group is, not just the `sh` it started.
    let request = client
        .request(reqwest::Method::POST, "/v1/sprites/k/exec")
        .query(&[
            ("cmd", "sh"),
            ("cmd", "-c"),
            ("cmd", "sleep 60; echo never"),
        ]);
    let running = tokio::spawn(async move {
        let response = request.send().await.unwrap();
        // Hold the body open until aborted.
        response.bytes().await
    });
    fake.wait_for_active_exec("k", Duration::from_secs(10))
        .await
        .unwrap();

    // Not a session: GET /exec lists tmux sessions only, kill can't reach it.
    let sessions = client
        .request(reqwest::Method::GET, "/v1/sprites/k/exec")
        .send()
        .await
        .unwrap();
    assert_eq!(json_body(sessions).await, json!({ "sessions": [] }));
    let kill = client
        .request(reqwest::Method::POST, "/v1/sprites/k/exec/1/kill")
        .send()
        .await
        .unwrap();
    assert_eq!(kill.status(), 404);
    assert_eq!(fake.active_exec_sessions("k"), 1);

    running.abort();
    fake.wait_for_no_active_exec("k", Duration::from_secs(10))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_command_that_runs_to_its_end_is_not_killed() {
    let fake = ready_fake().await;
    let client = Client::new(&fake);
    client.create("bg").await;
    let (_, chunks) = client
        .exec("bg", &[("cmd", "sh"), ("cmd", "-c"), ("cmd", "echo done")])
        .await;
    assert_eq!(stream_text(&chunks, 1), "done\n");
    assert_eq!(chunks.last().unwrap(), &vec![3u8, 0]);
    assert_eq!(fake.active_exec_sessions("bg"), 0);
}

#[tokio::test]
async fn an_exit_by_signal_reports_255() {
    let fake = ready_fake().await;
    let client = Client::new(&fake);
    client.create("sig").await;
    let (_, chunks) = client
        .exec(
            "sig",
            &[("cmd", "sh"), ("cmd", "-c"), ("cmd", "kill -9 $$")],
        )
        .await;
    assert_eq!(chunks.last().unwrap(), &vec![3u8, 255]);
}

#[tokio::test]
async fn injected_faults_answer_with_status_and_retry_after() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let client = Client::new(&fake);
    fake.fail_next(FakeRoute::CreateSprite, 1, 429, Some(7));
    let limited = client.create("f").await;
    assert_eq!(limited.status(), 429);
    assert_eq!(limited.headers()["retry-after"], "7");
    assert_eq!(json_body(limited).await["error"], "injected fault");
    assert_eq!(client.create("f").await.status(), 201);
    assert_eq!(fake.count(FakeRoute::CreateSprite), 2);
    assert_eq!(fake.creates(), 1);
}

#[tokio::test]
async fn the_network_policy_is_stored_echoed_and_visible_inside_the_sprite() {
    let fake = ready_fake().await;
    let client = Client::new(&fake);
    client.create("net").await;
    let path = "/v1/sprites/net/policy/network";
    let initial = json_body(
        client
            .request(reqwest::Method::GET, path)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(initial, json!({"rules": [{"include": "defaults"}]}));
    assert_eq!(fake.network_policy_sets("net"), 0);

    let deny_all = json!({"rules": [{"domain": "*", "action": "deny"}]});
    let response = client
        .request(reqwest::Method::POST, path)
        .json(&deny_all)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(json_body(response).await, deny_all);
    assert_eq!(fake.network_policy("net"), Some(deny_all.clone()));
    assert_eq!(fake.network_policy_sets("net"), 1);
    let read_back = client
        .request(reqwest::Method::GET, path)
        .send()
        .await
        .unwrap();
    assert_eq!(json_body(read_back).await, deny_all);

    // A command in the sprite reads it where the live sprite keeps it.
    let (status, chunks) = client
        .exec(
            "net",
            &[
                ("cmd", "cat"),
                ("cmd", ".sprite/policy/network.json"),
                ("dir", "/"),
            ],
        )
        .await;
    assert_eq!(status, 200);
    let text = stream_text(&chunks, 0x01);
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), deny_all);

    // A malformed policy is refused with the validation list and changes nothing.
    let response = client
        .request(reqwest::Method::POST, path)
        .json(&json!({"rules": [{"domain": "*", "action": "block"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body = json_body(response).await;
    assert!(
        body["errors"][0].as_str().unwrap().contains("action"),
        "{body}"
    );
    assert_eq!(fake.network_policy("net"), Some(deny_all));
    assert_eq!(fake.count(FakeRoute::SetNetworkPolicy), 2);
    assert_eq!(fake.count(FakeRoute::GetNetworkPolicy), 2);

    let missing = client
        .request(reqwest::Method::POST, "/v1/sprites/nope/policy/network")
        .json(&json!({"rules": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert_eq!(fake.network_policy("nope"), None);
}

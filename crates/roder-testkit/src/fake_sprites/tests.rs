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
    assert_eq!(client.create("alpha").await.status(), 400, "duplicate name");
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
    let fake = FakeSpritesServer::start().await.unwrap();
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
    let fake = FakeSpritesServer::start().await.unwrap();
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
    let stdout: String = chunks
        .iter()
        .filter(|c| c[0] == 1)
        .map(|c| String::from_utf8_lossy(&c[1..]).into_owned())
        .collect();
    let expected_dir = fake.host_path("env", "/home/sprite").unwrap();
    assert_eq!(stdout, format!("{}\n1:unset\n", expected_dir.display()));
}

#[tokio::test]
async fn exec_feeds_the_body_as_stdin_when_asked() {
    let fake = FakeSpritesServer::start().await.unwrap();
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
    let fake = FakeSpritesServer::start().await.unwrap();
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
    let fake = FakeSpritesServer::start().await.unwrap();
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
async fn sessions_can_be_listed_and_killed() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let client = Client::new(&fake);
    client.create("k").await;
    let running = {
        let request = client
            .request(reqwest::Method::POST, "/v1/sprites/k/exec")
            .query(&[("cmd", "sleep"), ("cmd", "60"), ("dir", "/home/sprite")]);
        tokio::spawn(async move { request.send().await.unwrap().bytes().await.unwrap() })
    };
    fake.wait_for_active_exec("k", Duration::from_secs(10))
        .await
        .unwrap();
    let sessions = client
        .request(reqwest::Method::GET, "/v1/sprites/k/exec")
        .send()
        .await
        .unwrap();
    let sessions = json_body(sessions).await;
    let session = &sessions["sessions"][0];
    assert_eq!(session["command"], "sleep 60");
    assert_eq!(session["workdir"], "/home/sprite");
    assert_eq!(session["is_active"], true);
    let id = session["id"].to_string();

    let kill = client
        .request(
            reqwest::Method::POST,
            &format!("/v1/sprites/k/exec/{id}/kill"),
        )
        .query(&[("signal", "TERM")])
        .send()
        .await
        .unwrap();
    let text = kill.text().await.unwrap();
    assert!(
        text.lines()
            .last()
            .unwrap()
            .contains(r#""type":"complete""#),
        "{text}"
    );
    assert_eq!(fake.active_exec_sessions("k"), 0);
    let body = running.await.unwrap();
    assert_eq!(body.last(), Some(&(128 + 9)), "killed by SIGKILL");

    let again = client
        .request(
            reqwest::Method::POST,
            &format!("/v1/sprites/k/exec/{id}/kill"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 410);
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

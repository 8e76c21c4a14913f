//! Profile archives over real HTTP on 127.0.0.1: a server that serves an
//! archive with an ETag, answers `If-None-Match` with 304 and counts what it
//! was asked and what it sent.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use base64::Engine;
use roder_api::profile::ProfileSource;
use roder_profiles::{
    ArchiveRef, ArchiveSource, FetchOutcome, ProfileError, ProfileRequest, Resolver, pack,
};

#[derive(Default)]
struct Served {
    body: Mutex<Vec<u8>>,
    etag: Mutex<String>,
    requests: AtomicUsize,
    conditional: AtomicUsize,
    not_modified: AtomicUsize,
    body_bytes_sent: AtomicUsize,
}

struct Server {
    url: String,
    served: Arc<Served>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(body: Vec<u8>) -> Server {
        let served = Arc::new(Served::default());
        served.set(body);
        let app = Router::new()
            .route("/bundle.tar", axum::routing::get(serve))
            .with_state(served.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/bundle.tar?token=never-stored",
            listener.local_addr().unwrap()
        );
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Server { url, served, task }
    }

    fn requests(&self) -> usize {
        self.served.requests.load(Ordering::SeqCst)
    }

    /// Stops listening: new connections are refused.
    async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

impl Served {
    fn set(&self, body: Vec<u8>) {
        *self.etag.lock().unwrap() = format!("\"{}\"", body.len() * 7 + body[100] as usize);
        *self.body.lock().unwrap() = body;
    }
}

async fn serve(State(served): State<Arc<Served>>, headers: HeaderMap) -> Response {
    served.requests.fetch_add(1, Ordering::SeqCst);
    let etag = served.etag.lock().unwrap().clone();
    if let Some(sent) = headers.get(header::IF_NONE_MATCH) {
        served.conditional.fetch_add(1, Ordering::SeqCst);
        if sent.to_str().unwrap() == etag {
            served.not_modified.fetch_add(1, Ordering::SeqCst);
            return Response::builder()
                .status(StatusCode::NOT_MODIFIED)
                .header(header::ETAG, etag)
                .body(Body::empty())
                .unwrap();
        }
    }
    let body = served.body.lock().unwrap().clone();
    served
        .body_bytes_sent
        .fetch_add(body.len(), Ordering::SeqCst);
    Response::builder()
        .header(header::ETAG, etag)
        .header(header::CONTENT_TYPE, "application/x-tar")
        .body(Body::from(body))
        .unwrap()
}

/// An archive with one entrypoint, `reviewer`, whose instructions are
/// `instructions`.
fn archive(id: &str, instructions: &str) -> (ArchiveRef, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("roder-bundle.toml"),
        format!(
            "id = \"{id}\"\nrevision = \"r1\"\n[entrypoints]\nreviewer = \"profiles/reviewer.md\"\n"
        ),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("profiles")).unwrap();
    std::fs::write(
        dir.path().join("profiles/reviewer.md"),
        format!(
            "+++\nname = \"reviewer\"\ndescription = \"from the archive\"\nextends = \"builtin:review\"\n\
             disallowed_tools = [\"exec_command\"]\n+++\n{instructions}\n"
        ),
    )
    .unwrap();
    pack(dir.path()).unwrap()
}

fn http(url: &str, reference: &ArchiveRef) -> ArchiveSource {
    ArchiveSource::Http {
        url: url.to_string(),
        reference: reference.clone(),
    }
}

fn request(source: ArchiveSource) -> ProfileRequest {
    ProfileRequest {
        selector: "reviewer".into(),
        archive: Some(source),
    }
}

fn blob_exists(home: &std::path::Path, reference: &ArchiveRef) -> bool {
    Resolver::new(Some(home.to_path_buf()))
        .cache()
        .unwrap()
        .blob_path(reference)
        .unwrap()
        .exists()
}

#[tokio::test]
async fn first_fetch_then_a_304_revalidation_without_the_body() {
    let home = tempfile::tempdir().unwrap();
    let (reference, bytes) = archive("acme", "Review carefully.");
    let server = Server::start(bytes.clone()).await;
    let resolver = Resolver::new(Some(home.path().to_path_buf()));

    let (_, outcome) = resolver
        .archive(&http(&server.url, &reference))
        .await
        .unwrap();
    assert_eq!(outcome, Some(FetchOutcome::Downloaded));
    assert_eq!(server.requests(), 1);
    assert_eq!(server.served.conditional.load(Ordering::SeqCst), 0);
    assert!(blob_exists(home.path(), &reference));

    // A new process (a new resolver) revalidates with the cached ETag.
    let again = Resolver::new(Some(home.path().to_path_buf()));
    let snapshot = again
        .resolve(&request(http(&server.url, &reference)))
        .await
        .unwrap();
    assert_eq!(server.requests(), 2);
    assert_eq!(server.served.not_modified.load(Ordering::SeqCst), 1);
    assert_eq!(
        server.served.body_bytes_sent.load(Ordering::SeqCst),
        bytes.len(),
        "the 304 sent no body"
    );
    assert_eq!(snapshot.instructions, "Review carefully.");
    assert_eq!(snapshot.description, "from the archive");
    // The parent's denies and the child's add up.
    assert!(
        snapshot
            .disallowed_tools
            .contains(&"write_file".to_string())
    );
    assert!(
        snapshot
            .disallowed_tools
            .contains(&"exec_command".to_string())
    );
    match &snapshot.source {
        ProfileSource::Archive {
            id,
            digest,
            size,
            url,
            ..
        } => {
            assert_eq!(id, "acme");
            assert_eq!(digest, &reference.digest);
            assert_eq!(*size, reference.size);
            let url = url.as_deref().unwrap();
            assert!(!url.contains("never-stored"), "query kept: {url}");
        }
        other => panic!("source {other:?}"),
    }
    assert!(
        snapshot.origins["instructions"].starts_with("archive:acme@sha256:"),
        "{:?}",
        snapshot.origins
    );
    assert_eq!(snapshot.origins["sandbox.network"], "builtin:review");
    server.stop().await;
}

#[tokio::test]
async fn a_new_digest_is_fetched_whole_and_cached_beside_the_old() {
    let home = tempfile::tempdir().unwrap();
    let (first, first_bytes) = archive("acme", "Version one.");
    let server = Server::start(first_bytes).await;
    let resolver = Resolver::new(Some(home.path().to_path_buf()));
    resolver.archive(&http(&server.url, &first)).await.unwrap();

    let (second, second_bytes) = archive("acme", "Version two.");
    assert_ne!(first.digest, second.digest);
    server.served.set(second_bytes.clone());
    let snapshot = resolver
        .resolve(&request(http(&server.url, &second)))
        .await
        .unwrap();
    assert_eq!(snapshot.instructions, "Version two.");
    assert_eq!(
        server.served.conditional.load(Ordering::SeqCst),
        0,
        "the cache did not hold the new digest, so no If-None-Match"
    );
    assert!(blob_exists(home.path(), &first));
    assert!(blob_exists(home.path(), &second));
    server.stop().await;
}

#[tokio::test]
async fn size_and_digest_mismatches_are_errors_and_cache_nothing() {
    let home = tempfile::tempdir().unwrap();
    let (reference, bytes) = archive("acme", "Served.");
    let server = Server::start(bytes).await;
    let resolver = Resolver::new(Some(home.path().to_path_buf()));

    let wrong_size = ArchiveRef {
        size: reference.size + 1,
        ..reference.clone()
    };
    let error = resolver
        .archive(&http(&server.url, &wrong_size))
        .await
        .unwrap_err();
    assert!(matches!(error, ProfileError::Verification(_)), "{error}");
    assert!(error.to_string().contains("size mismatch"), "{error}");
    assert!(!blob_exists(home.path(), &wrong_size));

    let (other, _) = archive("acme", "Not what is served.");
    let wrong_digest = ArchiveRef {
        digest: other.digest.clone(),
        ..reference.clone()
    };
    let error = resolver
        .archive(&http(&server.url, &wrong_digest))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("digest mismatch"), "{error}");
    assert!(!blob_exists(home.path(), &wrong_digest));
    let cache_root = resolver.cache().unwrap().root().to_path_buf();
    let blobs = std::fs::read_dir(cache_root.join("sha256"))
        .map(|dir| dir.count())
        .unwrap_or(0);
    assert_eq!(blobs, 0, "nothing was cached");
    let refs = std::fs::read_dir(cache_root.join("refs"))
        .map(|dir| dir.count())
        .unwrap_or(0);
    assert_eq!(refs, 0, "no ETag was recorded");
    server.stop().await;
}

#[tokio::test]
async fn a_corrupt_cache_entry_is_fetched_again() {
    let home = tempfile::tempdir().unwrap();
    let (reference, bytes) = archive("acme", "Whole.");
    let server = Server::start(bytes.clone()).await;
    let resolver = Resolver::new(Some(home.path().to_path_buf()));
    resolver
        .archive(&http(&server.url, &reference))
        .await
        .unwrap();

    let blob = resolver.cache().unwrap().blob_path(&reference).unwrap();
    let mut corrupt = bytes.clone();
    corrupt[0] ^= 0xff;
    std::fs::write(&blob, &corrupt).unwrap();

    let (_, outcome) = resolver
        .archive(&http(&server.url, &reference))
        .await
        .unwrap();
    assert_eq!(outcome, Some(FetchOutcome::Downloaded));
    assert_eq!(server.requests(), 2);
    assert_eq!(
        server.served.conditional.load(Ordering::SeqCst),
        0,
        "a corrupt entry is not revalidated, it is fetched"
    );
    assert_eq!(std::fs::read(&blob).unwrap(), bytes);
    server.stop().await;
}

#[tokio::test]
async fn with_the_server_down_a_cached_digest_works_and_an_uncached_one_fails_clearly() {
    let home = tempfile::tempdir().unwrap();
    let (reference, bytes) = archive("acme", "Cached.");
    let server = Server::start(bytes).await;
    let url = server.url.clone();
    Resolver::new(Some(home.path().to_path_buf()))
        .archive(&http(&url, &reference))
        .await
        .unwrap();
    server.stop().await;

    let resolver = Resolver::new(Some(home.path().to_path_buf()));
    let (_, outcome) = resolver.archive(&http(&url, &reference)).await.unwrap();
    assert_eq!(outcome, Some(FetchOutcome::CachedAfterError));
    let snapshot = resolver
        .resolve(&request(http(&url, &reference)))
        .await
        .unwrap();
    assert_eq!(snapshot.instructions, "Cached.");

    let (uncached, _) = archive("acme", "Never fetched.");
    let error = resolver.archive(&http(&url, &uncached)).await.unwrap_err();
    assert!(matches!(error, ProfileError::Fetch(_)), "{error}");
    let message = error.to_string();
    assert!(message.contains("cannot fetch"), "{message}");
    assert!(message.contains("is not cached"), "{message}");
    assert!(message.contains(&uncached.digest), "{message}");
    assert!(!message.contains("never-stored"), "{message}");
}

#[tokio::test]
async fn an_embedded_archive_needs_no_server_and_is_verified() {
    let home = tempfile::tempdir().unwrap();
    let (reference, bytes) = archive("inline", "Embedded.");
    let resolver = Resolver::new(Some(home.path().to_path_buf()));
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let snapshot = resolver
        .resolve(&request(ArchiveSource::Embedded {
            data: data.clone(),
            reference: reference.clone(),
        }))
        .await
        .unwrap();
    assert_eq!(snapshot.instructions, "Embedded.");
    assert!(matches!(
        snapshot.source,
        ProfileSource::Archive { url: None, .. }
    ));
    assert!(
        blob_exists(home.path(), &reference),
        "verified, then cached"
    );

    let (other, _) = archive("inline", "Something else entirely.");
    let error = resolver
        .resolve(&request(ArchiveSource::Embedded {
            data,
            reference: ArchiveRef {
                size: reference.size,
                ..other
            },
        }))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("digest mismatch"), "{error}");
}

#[tokio::test]
async fn the_wire_shape_of_an_archive_source() {
    let http: ArchiveSource = serde_json::from_str(
        r#"{"url":"http://127.0.0.1:1/b.tar","id":"a","digest":"sha256:00","size":3}"#,
    )
    .unwrap();
    assert!(matches!(http, ArchiveSource::Http { .. }));
    let embedded: ArchiveSource =
        serde_json::from_str(r#"{"data":"AAAA","id":"a","digest":"sha256:00","size":3}"#).unwrap();
    assert!(matches!(embedded, ArchiveSource::Embedded { .. }));
    // As the runtime's request type and back (`roder acp --profile`).
    for source in [http, embedded] {
        let request = ProfileRequest {
            selector: "reviewer".into(),
            archive: Some(source.clone()),
        };
        let spec = request.to_spec();
        assert_eq!(spec.selector, "reviewer");
        let back = ArchiveSource::from_spec(spec.archive.as_ref().unwrap()).unwrap();
        assert_eq!(back, source);
    }
}

#[tokio::test]
async fn a_resolved_archive_starts_again_at_once_and_is_revalidated_in_the_background() {
    let home = tempfile::tempdir().unwrap();
    let (reference, bytes) = archive("acme", "Fast again.");
    let server = Server::start(bytes).await;
    let resolver = Resolver::new(Some(home.path().to_path_buf()));
    let first = resolver
        .resolve(&request(http(&server.url, &reference)))
        .await
        .unwrap();
    assert_eq!(server.requests(), 1, "the first resolution fetched");

    // Again through the same resolver (a long-lived process): the same
    // snapshot, and the revalidation (a 304) arrives in the background.
    let again_at = std::time::Instant::now();
    let again = resolver
        .resolve(&request(http(&server.url, &reference)))
        .await
        .unwrap();
    assert_eq!(again, first);
    let waited = std::time::Instant::now();
    while server.served.not_modified.load(Ordering::SeqCst) == 0 {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(10),
            "no background revalidation reached the server"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(server.served.conditional.load(Ordering::SeqCst), 1);

    // A burst of starts sends at most one conditional request a second.
    for _ in 0..50 {
        resolver
            .resolve(&request(http(&server.url, &reference)))
            .await
            .unwrap();
    }
    let seconds = again_at.elapsed().as_secs() as usize;
    assert!(
        server.requests() <= 2 + seconds,
        "{} requests for 52 starts in {seconds} s",
        server.requests()
    );

    // With the server gone, a start still works from what was verified,
    // through the same URL or another one of the same digest.
    let moved = server.url.replace("/bundle.tar", "/moved.tar");
    server.stop().await;
    let offline = resolver
        .resolve(&request(http(&server_url_of(&first), &reference)))
        .await
        .unwrap();
    assert_eq!(offline, first);
    let elsewhere = resolver
        .resolve(&request(http(&moved, &reference)))
        .await
        .unwrap();
    assert_eq!(elsewhere.instructions, "Fast again.");
}

/// The URL a snapshot recorded (redacted).
fn server_url_of(snapshot: &roder_api::profile::ProfileSnapshot) -> String {
    match &snapshot.source {
        ProfileSource::Archive { url: Some(url), .. } => url.clone(),
        other => panic!("not from an HTTP archive: {other:?}"),
    }
}

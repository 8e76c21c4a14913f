//! `profiles`: what a profile costs a thread's start.
//!
//! * `start_ratio`: starting a thread with a profile from a cached HTTP
//!   archive (resolved, its deny rules parsed, snapshotted into the
//!   thread's metadata) against starting one without a profile, in the same
//!   runtime and run, alternating, median over median. The resolver is the
//!   one a long-lived process keeps: after the first start it reuses the
//!   snapshot the archive's digest fixes and revalidates in the background
//!   at most once a second (`roder-profiles/src/background.rs`); the
//!   number of requests the server saw is reported.
//! * `revalidate_ms`: the 304 revalidation alone (`Resolver::archive` with
//!   the digest cached), median. The detail's `first_resolve_ms` is what a
//!   new process pays for its first start: a new resolver's resolution
//!   with the digest cached on disk (a 304, the archive read, hashed,
//!   untarred, parsed and merged).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use roder_api::extension::ExtensionRegistryBuilder;
use roder_core::{CreateThreadRequest, Runtime, RuntimeConfig};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use roder_profiles::{ArchiveSource, ProfileRequest, Resolver};
use roder_testkit::ScriptedEngine;
use serde_json::json;

use crate::figure::{median, print, sized};

fn samples() -> usize {
    sized(300, 3)
}

pub async fn run() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let bundle = dir.path().join("bundle");
    std::fs::create_dir_all(bundle.join("profiles"))?;
    std::fs::write(
        bundle.join("roder-bundle.toml"),
        "id = \"bench\"\n[entrypoints]\nreviewer = \"profiles/reviewer.md\"\n",
    )?;
    std::fs::write(
        bundle.join("profiles/reviewer.md"),
        format!(
            "+++\nname = \"reviewer\"\nextends = \"builtin:review\"\ndisallowed_tools = [\"exec:git push\"]\n+++\n{}\n",
            "Review the change and report findings by severity. ".repeat(40)
        ),
    )?;
    let (reference, bytes) = roder_profiles::pack(&bundle)?;
    let archive_size = bytes.len();
    let requests = Arc::new(AtomicUsize::new(0));
    let url = serve(bytes, requests.clone()).await?;

    let home = dir.path().join("home");
    let resolver = Resolver::new(Some(home.clone()));
    let source = ArchiveSource::Http {
        url: url.clone(),
        reference,
    };
    // Fills the cache (one 200).
    resolver.archive(&source).await?;

    let mut revalidations = Vec::with_capacity(samples());
    for _ in 0..samples() {
        let began = Instant::now();
        resolver.archive(&source).await?;
        revalidations.push(began.elapsed().as_secs_f64() * 1000.0);
    }
    let request = ProfileRequest {
        selector: "reviewer".into(),
        archive: Some(source.clone()),
    };
    let mut first_resolves = Vec::with_capacity(samples());
    for _ in 0..samples() {
        let fresh = Resolver::new(Some(home.clone()));
        let began = Instant::now();
        fresh.resolve(&request).await?;
        first_resolves.push(began.elapsed().as_secs_f64() * 1000.0);
    }
    print(
        "profiles",
        "revalidate_ms",
        median(&mut revalidations),
        "ms",
        json!({ "archive_bytes": archive_size, "samples": samples(),
            "first_resolve_ms": median(&mut first_resolves) }),
    );

    let store = dir.path().join("threads");
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace)?;
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(ScriptedEngine::new(Vec::new()));
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
        base_path: store.clone(),
    }));
    let runtime = Runtime::new(
        builder.build()?,
        RuntimeConfig {
            workspace: Some(workspace.display().to_string()),
            ..RuntimeConfig::default()
        },
    )?;
    let workspace_text = workspace.display().to_string();
    let requests_before = requests.load(Ordering::SeqCst);
    let (mut plain, mut profiled, mut resolving) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..samples() {
        let began = Instant::now();
        runtime
            .create_thread_with(CreateThreadRequest::in_workspace(&workspace_text))
            .await?;
        plain.push(began.elapsed().as_secs_f64() * 1000.0);

        let began = Instant::now();
        let snapshot = resolver.resolve(&request).await?;
        resolving.push(began.elapsed().as_secs_f64() * 1000.0);
        runtime
            .create_thread_with_profile(
                CreateThreadRequest::in_workspace(&workspace_text),
                None,
                Default::default(),
                snapshot,
            )
            .await?;
        profiled.push(began.elapsed().as_secs_f64() * 1000.0);
    }
    let (plain_ms, profiled_ms) = (median(&mut plain), median(&mut profiled));
    print(
        "profiles",
        "start_ratio",
        profiled_ms / plain_ms,
        "ratio",
        json!({
            "profile_start_ms": profiled_ms,
            "plain_start_ms": plain_ms,
            "resolve_ms": median(&mut resolving),
            "samples": samples(),
            "archive_requests_during_starts": requests.load(Ordering::SeqCst) - requests_before,
        }),
    );
    Ok(())
}

/// Serves `body` with an ETag on 127.0.0.1; 304 to a matching
/// `If-None-Match`.
async fn serve(body: Vec<u8>, requests: Arc<AtomicUsize>) -> anyhow::Result<String> {
    let etag = format!("\"bench-{}\"", body.len());
    let app = Router::new().route(
        "/bundle.tar",
        axum::routing::get(move |headers: HeaderMap| {
            let (body, etag, requests) = (body.clone(), etag.clone(), requests.clone());
            async move {
                requests.fetch_add(1, Ordering::Relaxed);
                if headers
                    .get(header::IF_NONE_MATCH)
                    .is_some_and(|sent| sent.as_bytes() == etag.as_bytes())
                {
                    return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response();
                }
                ([(header::ETAG, etag)], body).into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/bundle.tar", listener.local_addr()?);
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            eprintln!("profiles bench server: {error}");
        }
    });
    Ok(url)
}

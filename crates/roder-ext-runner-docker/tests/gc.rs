//! `gc` against the real daemon. Its own test binary (cargo runs test
//! binaries one at a time), so no other test's containers are on the daemon
//! while it runs; it still only removes its own (see `live` below).

mod support;

use std::collections::{HashMap, HashSet};

use bollard::query_parameters::ListContainersOptionsBuilder;
use roder_api::remote_runner::RemoteRunnerProvider;
use roder_ext_runner_docker::{DockerRunnerProvider, GcOptions, GcVerdict, labels};
use serde_json::json;
use support::*;

#[tokio::test]
async fn gc_removes_containers_whose_thread_is_gone() {
    let Some(provider) = provider("gc_removes_containers_whose_thread_is_gone").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let docker = provider.docker().await.unwrap();
    let run_id = &label.value[..8];
    let thread = |name: &str| format!("gc-{name}-{run_id}");

    let live = session(
        &provider,
        &format!("thread-{}", thread("live")),
        label.config(json!({})),
    )
    .await;
    let dead = session(
        &provider,
        &format!("thread-{}", thread("dead")),
        label.config(json!({})),
    )
    .await;
    let kept_dead = session(
        &provider,
        &format!("thread-{}", thread("keep")),
        label.config(json!({"cleanup": "keep"})),
    )
    .await;
    let shared = session(&provider, "shared-destination", label.config(json!({}))).await;

    // A claimed pool container records its thread in its name only.
    let pooled_config = label.config(json!({"pool_size": 1}));
    provider
        .prewarm(&destination("thread-x", pooled_config.clone()))
        .await
        .unwrap();
    let pooled_dead = provider
        .create_session(destination(
            &format!("thread-{}", thread("pooled")),
            pooled_config.clone(),
        ))
        .await
        .unwrap();
    provider
        .prewarm(&destination("thread-x", pooled_config.clone()))
        .await
        .unwrap();
    let sessions: HashSet<String> = [&live, &dead, &kept_dead, &shared, &pooled_dead]
        .iter()
        .map(|session| session.state().session_id)
        .collect();
    let own_unclaimed: Vec<String> = label
        .containers()
        .await
        .into_iter()
        .filter(|id| !sessions.contains(id))
        .collect();
    assert_eq!(own_unclaimed.len(), 1, "the pool refilled to its size");

    // Another provider instance that went away without shutting its pool.
    let gone = DockerRunnerProvider::connect().unwrap();
    gone.prewarm(&destination(
        "thread-y",
        label.config(json!({"pool_size": 1})),
    ))
    .await
    .unwrap();
    drop(gone);

    // Live threads: ours, plus those of every container this test did not
    // make, so gc cannot touch anything else on the daemon.
    let mut live_threads: HashSet<String> = HashSet::from([thread("live")]);
    let filters = HashMap::from([("label", vec![format!("{}=true", labels::MANAGED)])]);
    let all = docker
        .list_containers(Some(
            ListContainersOptionsBuilder::default()
                .all(true)
                .filters(&filters)
                .build(),
        ))
        .await
        .unwrap();
    for summary in &all {
        let container_labels = summary.labels.clone().unwrap_or_default();
        let names = summary.names.clone().unwrap_or_default();
        if container_labels.get(TEST_LABEL) != Some(&label.value)
            && let Some(thread) = labels::thread_of_container(&container_labels, &names)
        {
            live_threads.insert(thread.to_string());
        }
    }

    let before: HashSet<String> = label.containers().await.into_iter().collect();
    let removed: HashSet<String> = provider
        .gc(&live_threads, GcOptions::default())
        .await
        .unwrap()
        .removed_ids()
        .into_iter()
        .collect();
    assert!(
        removed.is_subset(&before),
        "gc removed only this test's containers"
    );
    let after: HashSet<String> = label.containers().await.into_iter().collect();

    for (what, session) in [
        ("dead", &dead),
        ("keep", &kept_dead),
        ("pooled", &pooled_dead),
    ] {
        let id = session.state().session_id;
        assert!(removed.contains(&id), "{what} container removed");
        assert!(!after.contains(&id));
    }
    for (what, session) in [("live", &live), ("shared", &shared)] {
        assert!(
            after.contains(&session.state().session_id),
            "{what} container kept"
        );
    }
    for id in &own_unclaimed {
        assert!(after.contains(id), "this instance's own pool is kept");
    }
    let orphans: Vec<&String> = removed
        .iter()
        .filter(|id| {
            ![&dead, &kept_dead, &pooled_dead]
                .iter()
                .any(|session| session.state().session_id == **id)
        })
        .collect();
    assert_eq!(
        orphans.len(),
        1,
        "the gone instance's pool container is removed"
    );

    provider.shutdown_pool().await.unwrap();
    live.close().await.unwrap();
    shared.close().await.unwrap();
    assert!(label.containers().await.is_empty());
}

/// The label value of `key` on container `id`.
async fn label_of(provider: &DockerRunnerProvider, id: &str, key: &str) -> Option<String> {
    let docker = provider.docker().await.unwrap();
    let inspect = docker.inspect_container(id, None).await.unwrap();
    inspect.config?.labels?.get(key).cloned()
}

#[tokio::test]
async fn gc_of_one_home_never_removes_another_homes_containers() {
    let Some(homeless) = provider("gc_of_one_home_never_removes_another_homes_containers").await
    else {
        return;
    };
    let label = TestLabel::new(&homeless).await;
    let run_id = &label.value[..8];
    let home_a = format!("test-home-a-{run_id}");
    let home_b = format!("test-home-b-{run_id}");
    let a = DockerRunnerProvider::connect()
        .unwrap()
        .with_home_id(&home_a)
        .unwrap();
    let b = DockerRunnerProvider::connect()
        .unwrap()
        .with_home_id(&home_b)
        .unwrap();
    assert!(
        DockerRunnerProvider::connect()
            .unwrap()
            .with_home_id("not a label")
            .is_err()
    );
    let thread = |name: &str| format!("gc-home-{name}-{run_id}");
    let of_a = session(
        &a,
        &format!("thread-{}", thread("a")),
        label.config(json!({"cleanup": "keep"})),
    )
    .await;
    let of_b = session(
        &b,
        &format!("thread-{}", thread("b")),
        label.config(json!({"cleanup": "keep"})),
    )
    .await;
    let legacy = session(
        &homeless,
        &format!("thread-{}", thread("legacy")),
        label.config(json!({"cleanup": "keep"})),
    )
    .await;
    // Warm-pool containers carry the home too.
    let pooled = label.config(json!({"pool_size": 1}));
    a.prewarm(&destination("thread-pool", pooled))
        .await
        .unwrap();
    let ids = |session: &std::sync::Arc<dyn roder_api::remote_runner::RemoteRunnerSession>| {
        session.state().session_id
    };
    let (id_a, id_b, id_legacy) = (ids(&of_a), ids(&of_b), ids(&legacy));
    let mut homes = Vec::new();
    for id in label.containers().await {
        homes.push(label_of(&a, &id, labels::HOME).await);
    }
    homes.sort();
    assert_eq!(
        homes,
        vec![
            Some(String::new()),
            Some(home_a.clone()),
            Some(home_a.clone()),
            Some(home_b.clone())
        ],
        "the homeless container has a blank home label, the rest their home's"
    );

    // B knows no thread at all: it removes its own container only.
    let report = b.gc(&HashSet::new(), GcOptions::default()).await.unwrap();
    assert_eq!(report.removed_ids(), vec![id_b.clone()]);
    let kept = |report: &roder_ext_runner_docker::GcReport, id: &str| {
        report
            .kept
            .iter()
            .find(|entry| entry.id == id)
            .map(|entry| entry.verdict.clone())
    };
    assert_eq!(
        kept(&report, &id_a),
        Some(GcVerdict::OtherHome(home_a.clone()))
    );
    assert_eq!(kept(&report, &id_legacy), Some(GcVerdict::Unlabelled));
    assert_eq!(
        report.removed[0].thread.as_deref(),
        Some(thread("b").as_str())
    );
    assert_eq!(report.removed[0].home.as_deref(), Some(home_b.as_str()));

    // A keeps its live thread's container and its own pool.
    let live_a: HashSet<String> = [thread("a")].into();
    let report = a.gc(&live_a, GcOptions::default()).await.unwrap();
    assert!(report.removed.is_empty(), "{:#?}", report.removed);
    assert_eq!(kept(&report, &id_a), Some(GcVerdict::ThreadExists));
    let after: HashSet<String> = label.containers().await.into_iter().collect();
    assert!(after.contains(&id_a) && after.contains(&id_legacy));
    assert!(!after.contains(&id_b));
    assert_eq!(after.len(), 3, "A's pool container is kept");

    a.shutdown_pool().await.unwrap();
    for session in [&of_a, &legacy] {
        homeless
            .docker()
            .await
            .unwrap()
            .remove_container(
                &session.state().session_id,
                Some(
                    bollard::query_parameters::RemoveContainerOptionsBuilder::default()
                        .force(true)
                        .v(true)
                        .build(),
                ),
            )
            .await
            .unwrap();
    }
    assert!(label.containers().await.is_empty());
}

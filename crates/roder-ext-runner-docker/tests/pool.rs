//! The warm pool against the real daemon: containers started ahead of need,
//! handed out once, refilled in the background.

mod support;

use std::collections::HashSet;
use std::time::Duration;

use roder_api::remote_runner::RemoteRunnerProvider;
use roder_ext_runner_docker::labels;
use serde_json::json;
use support::*;

#[tokio::test]
async fn the_pool_hands_out_started_containers_once_and_refills() {
    let Some(provider) = provider("the_pool_hands_out_started_containers_once_and_refills").await
    else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let config = label.config(json!({"pool_size": 2}));
    let dest = |id: &str| destination(id, config.clone());
    let docker = provider.docker().await.unwrap();

    // Binding a thread (validation) starts warming the pool.
    provider
        .validate_destination(&dest("thread-p-bind"))
        .await
        .unwrap();
    eventually(Duration::from_secs(60), "the pool filling", || async {
        provider.pool_ready(&dest("thread-any")).unwrap() == 2
    })
    .await;
    let pooled: HashSet<String> = label.containers().await.into_iter().collect();
    assert_eq!(pooled.len(), 2);
    for id in &pooled {
        let inspect = docker.inspect_container(id, None).await.unwrap();
        assert!(inspect.name.unwrap().starts_with("/roder-pool."));
        assert_eq!(
            inspect.state.unwrap().running,
            Some(true),
            "pool containers are started"
        );
        let container_labels = inspect.config.unwrap().labels.unwrap();
        assert_eq!(container_labels[labels::POOL_OWNER], provider.instance_id());
        assert_eq!(container_labels[labels::MANAGED], "true");
        assert!(!container_labels[labels::POOL].is_empty());
    }

    let a = provider.create_session(dest("thread-p-a")).await.unwrap();
    let b = provider.create_session(dest("thread-p-b")).await.unwrap();
    let (a_id, b_id) = (a.state().session_id, b.state().session_id);
    assert_ne!(a_id, b_id);
    assert!(
        pooled.contains(&a_id) && pooled.contains(&b_id),
        "both came from the pool"
    );
    let name = docker
        .inspect_container(&a_id, None)
        .await
        .unwrap()
        .name
        .unwrap();
    assert!(
        name.starts_with("/roder-t.p-a."),
        "claiming records the thread: {name}"
    );
    assert_eq!(a.state().destination_id, "thread-p-a");
    assert_eq!(run(a.as_ref(), "pwd").await.stdout, "/workspace\n");

    // The pool refills behind the takes.
    provider.prewarm(&dest("thread-any")).await.unwrap();
    assert_eq!(label.containers().await.len(), 4);

    assert_eq!(provider.shutdown_pool().await.unwrap(), 2);
    let left: HashSet<String> = label.containers().await.into_iter().collect();
    assert_eq!(left, HashSet::from([a_id.clone(), b_id.clone()]));

    // Without a pool, sessions start cold.
    let c = provider.create_session(dest("thread-p-c")).await.unwrap();
    assert!(!pooled.contains(&c.state().session_id));
    for session in [a, b, c] {
        session.close().await.unwrap();
    }
    assert!(label.containers().await.is_empty());
}

#[tokio::test]
async fn concurrent_sessions_never_share_a_pool_container() {
    let Some(provider) = provider("concurrent_sessions_never_share_a_pool_container").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let config = label.config(json!({"pool_size": 3}));
    provider
        .prewarm(&destination("thread-q", config.clone()))
        .await
        .unwrap();
    let provider = std::sync::Arc::new(provider);
    let mut tasks = Vec::new();
    for index in 0..6 {
        let provider = provider.clone();
        let config = config.clone();
        tasks.push(tokio::spawn(async move {
            provider
                .create_session(destination(&format!("thread-q-{index}"), config))
                .await
                .unwrap()
        }));
    }
    let mut sessions = Vec::new();
    for task in tasks {
        sessions.push(task.await.unwrap());
    }
    let ids: HashSet<String> = sessions.iter().map(|s| s.state().session_id).collect();
    assert_eq!(ids.len(), 6, "every session got its own container");
    provider.shutdown_pool().await.unwrap();
    for session in sessions {
        session.close().await.unwrap();
    }
    assert!(label.containers().await.is_empty());
}

#[tokio::test]
async fn a_pool_that_cannot_fill_says_why() {
    let Some(provider) = provider("a_pool_that_cannot_fill_says_why").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let config = label.config(json!({"image": "roder-no-such-image:never", "pool_size": 1}));
    let error = provider
        .prewarm(&destination("thread-r", config.clone()))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("not present"), "{error}");
    let error = provider
        .create_session(destination("thread-r", config))
        .await
        .err()
        .unwrap();
    assert!(format!("{error:#}").contains("not present"), "{error:#}");
    provider.shutdown_pool().await.unwrap();
    assert!(label.containers().await.is_empty());
}

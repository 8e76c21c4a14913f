//! Garbage collection: removing Roder containers nobody can use any more.
//!
//! The daemon is the only record needed: every Roder container carries
//! `dev.roder.managed=true`, and its thread is in its thread label or, for a
//! claimed pool container, in its name (see `labels`).

use std::collections::{HashMap, HashSet};

use bollard::Docker;
use bollard::query_parameters::ListContainersOptionsBuilder;

use crate::client::message_of;
use crate::{container, labels};

/// Removes, whatever their state or cleanup setting:
///
/// * containers whose thread is not in `live_thread_ids`;
/// * unclaimed pool containers of another provider instance (`own_pool`
///   names this one), i.e. leftovers of a process that is gone. A pool of
///   another *running* process would lose its containers too; its next take
///   notices and falls back to a cold start.
///
/// Containers whose thread is unknown (created for a destination that names
/// no thread) are kept: nothing says they are unused. Returns the ids removed.
pub async fn collect(
    docker: &Docker,
    own_pool: &str,
    live_thread_ids: &HashSet<String>,
) -> anyhow::Result<Vec<String>> {
    let filters = HashMap::from([("label", vec![format!("{}=true", labels::MANAGED)])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let containers = docker
        .list_containers(Some(options))
        .await
        .map_err(|error| anyhow::anyhow!("cannot list containers: {}", message_of(&error)))?;
    let mut removed = Vec::new();
    for summary in containers {
        let Some(id) = summary.id else { continue };
        let container_labels = summary.labels.unwrap_or_default();
        let names = summary.names.unwrap_or_default();
        if is_garbage(&container_labels, &names, own_pool, live_thread_ids) {
            container::remove(docker, &id).await?;
            removed.push(id);
        }
    }
    Ok(removed)
}

fn is_garbage(
    container_labels: &HashMap<String, String>,
    names: &[String],
    own_pool: &str,
    live_thread_ids: &HashSet<String>,
) -> bool {
    if let Some(thread) = labels::thread_of_container(container_labels, names) {
        return !live_thread_ids.contains(thread);
    }
    let unclaimed_pool = labels::get(container_labels, labels::POOL).is_some()
        && names
            .iter()
            .any(|name| labels::is_unclaimed_pool_name(name));
    unclaimed_pool && labels::get(container_labels, labels::POOL_OWNER) != Some(own_pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels_of(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn verdicts() {
        let live: HashSet<String> = ["alive".to_string()].into();
        let by_label = |thread: &str| labels_of(&[(labels::THREAD, thread)]);
        assert!(!is_garbage(&by_label("alive"), &[], "me", &live));
        assert!(is_garbage(&by_label("gone"), &[], "me", &live));
        let claimed = vec!["/roder-t.gone.abc".to_string()];
        assert!(is_garbage(&HashMap::new(), &claimed, "me", &live));
        let pool = vec!["/roder-pool.abc".to_string()];
        let mine = labels_of(&[(labels::POOL, "fp"), (labels::POOL_OWNER, "me")]);
        let theirs = labels_of(&[(labels::POOL, "fp"), (labels::POOL_OWNER, "other")]);
        assert!(!is_garbage(&mine, &pool, "me", &live));
        assert!(is_garbage(&theirs, &pool, "me", &live));
        let unknown = vec!["/roder-d.abc".to_string()];
        assert!(!is_garbage(&HashMap::new(), &unknown, "me", &live));
    }
}

//! This home's sandboxes as the daemon sees them, for `roder runners list`:
//! each container, its state (running, paused, exited, ...) and the thread
//! it serves. Like `gc`, it trusts the daemon's labels and never lists
//! another home's containers.

use std::collections::HashMap;

use bollard::Docker;
use bollard::models::ContainerSummary;
use bollard::query_parameters::ListContainersOptionsBuilder;

use crate::client::message_of;
use crate::labels;

/// One of this home's containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxEntry {
    /// Full container id.
    pub id: String,
    /// Container name, without Docker's leading `/`.
    pub name: String,
    /// The daemon's state: `running`, `paused`, `exited`, ...
    pub state: String,
    /// The thread it serves; `None` for an unclaimed warm-pool container.
    pub thread: Option<String>,
}

/// Every container Roder manages on `docker`, in any state.
pub(crate) async fn managed(docker: &Docker) -> anyhow::Result<Vec<ContainerSummary>> {
    let filters = HashMap::from([("label", vec![format!("{}=true", labels::MANAGED)])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    docker
        .list_containers(Some(options))
        .await
        .map_err(|error| anyhow::anyhow!("cannot list containers: {}", message_of(&error)))
}

/// The containers of home `home` (for a provider without a home id: those
/// without a home label), sorted by thread then name.
pub(crate) async fn of_home(
    docker: &Docker,
    home: Option<&str>,
) -> anyhow::Result<Vec<SandboxEntry>> {
    let mut entries: Vec<SandboxEntry> = managed(docker)
        .await?
        .into_iter()
        .filter_map(|summary| entry(summary, home))
        .collect();
    entries.sort_by(|a, b| (&a.thread, &a.name).cmp(&(&b.thread, &b.name)));
    Ok(entries)
}

fn entry(summary: ContainerSummary, home: Option<&str>) -> Option<SandboxEntry> {
    let container_labels = summary.labels.unwrap_or_default();
    if labels::get(&container_labels, labels::HOME) != home {
        return None;
    }
    let names = summary.names.unwrap_or_default();
    Some(SandboxEntry {
        thread: labels::thread_of_container(&container_labels, &names).map(str::to_string),
        name: names
            .first()
            .map(|name| name.trim_start_matches('/').to_string())
            .unwrap_or_default(),
        state: summary
            .state
            .map(|state| state.to_string())
            .filter(|state| !state.is_empty())
            .unwrap_or_else(|| "unknown".to_string()),
        id: summary.id?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::ContainerSummaryStateEnum;

    fn summary(home: Option<&str>, thread: &str) -> ContainerSummary {
        let mut container_labels = HashMap::from([(labels::MANAGED.to_string(), "true".into())]);
        if let Some(home) = home {
            container_labels.insert(labels::HOME.to_string(), home.to_string());
        }
        container_labels.insert(labels::THREAD.to_string(), thread.to_string());
        ContainerSummary {
            id: Some("c0ffee".into()),
            names: Some(vec!["/roder-t".into()]),
            labels: Some(container_labels),
            state: Some(ContainerSummaryStateEnum::PAUSED),
            ..ContainerSummary::default()
        }
    }

    #[test]
    fn only_this_homes_containers_are_listed_with_state_and_thread() {
        let listed = entry(summary(Some("h1"), "t1"), Some("h1")).unwrap();
        assert_eq!(
            listed,
            SandboxEntry {
                id: "c0ffee".into(),
                name: "roder-t".into(),
                state: "paused".into(),
                thread: Some("t1".into()),
            }
        );
        assert_eq!(entry(summary(Some("h2"), "t1"), Some("h1")), None);
        assert_eq!(entry(summary(None, "t1"), Some("h1")), None);
        assert!(entry(summary(None, "t1"), None).is_some());
    }
}

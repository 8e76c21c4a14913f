//! Garbage collection: removing Roder containers nobody can use any more,
//! and saying why every other one was kept.
//!
//! The daemon is the only record needed: every Roder container carries
//! `dev.roder.managed=true`, the id of the home whose provider made it
//! (`dev.roder.home`), and its thread in its thread label or, for a claimed
//! pool container, in its name (see `labels`). One Docker daemon serves
//! every Roder home on the host, and a home only knows its own threads, so
//! a collection never touches another home's containers: their threads are
//! simply not in this home's store.

use std::collections::{HashMap, HashSet};

use bollard::Docker;

use crate::{container, labels};

/// What a collection may remove besides its own home's containers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcOptions {
    /// Also treat containers without a home label as this home's (they were
    /// made before home ids, or by a provider without one). Off by default:
    /// such a container may serve a thread of another home.
    pub include_unlabelled: bool,
}

/// Why a container was removed or kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GcVerdict {
    /// Removed: its thread is not in this home.
    ThreadGone,
    /// Removed: an unclaimed warm-pool container of another provider
    /// instance of this home (a process that is gone).
    OrphanPool,
    /// Kept: its thread exists in this home.
    ThreadExists,
    /// Kept: made by another home (the id is its label value).
    OtherHome(String),
    /// Kept: it has no home label and the collection has a home id (see
    /// [`GcOptions::include_unlabelled`]).
    Unlabelled,
    /// Kept: its destination names no thread, so nothing says it is unused.
    NoThread,
    /// Kept: this provider instance's own warm pool.
    OwnPool,
}

impl GcVerdict {
    /// Whether a container with this verdict is removed.
    pub fn removes(&self) -> bool {
        matches!(self, GcVerdict::ThreadGone | GcVerdict::OrphanPool)
    }
}

impl std::fmt::Display for GcVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GcVerdict::ThreadGone => write!(f, "its thread no longer exists in this home"),
            GcVerdict::OrphanPool => write!(
                f,
                "unclaimed warm-pool container of a provider instance that is gone"
            ),
            GcVerdict::ThreadExists => write!(f, "its thread exists in this home"),
            GcVerdict::OtherHome(home) => write!(
                f,
                "made by another Roder home (home id {home}); run gc with that RODER_HOME to collect it"
            ),
            GcVerdict::Unlabelled => write!(
                f,
                "it has no `{}` label (made before home ids); pass --include-unlabelled to collect it if no other home uses it",
                labels::HOME
            ),
            GcVerdict::NoThread => write!(f, "its destination names no thread"),
            GcVerdict::OwnPool => write!(f, "this process's own warm pool"),
        }
    }
}

/// One container a collection looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcEntry {
    /// Full container id.
    pub id: String,
    /// Container name, without Docker's leading `/`.
    pub name: String,
    /// The thread it serves, when known.
    pub thread: Option<String>,
    /// Its home label, when it has one.
    pub home: Option<String>,
    pub verdict: GcVerdict,
}

/// What a collection removed and what it kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    pub removed: Vec<GcEntry>,
    pub kept: Vec<GcEntry>,
}

impl GcReport {
    /// Ids of the removed containers.
    pub fn removed_ids(&self) -> Vec<String> {
        self.removed.iter().map(|entry| entry.id.clone()).collect()
    }
}

/// Who is collecting: the provider's home id and pool instance.
pub(crate) struct Collector<'a> {
    pub home: Option<&'a str>,
    pub own_pool: &'a str,
    pub options: GcOptions,
}

/// Lists every Roder container and removes, whatever their state or
/// cleanup setting, those of this home (same home label; for a collector
/// without a home id, no home label) that are
///
/// * serving a thread not in `live_thread_ids`, or
/// * unclaimed pool containers of another provider instance.
///
/// Everything else is kept and reported with the reason.
pub(crate) async fn collect(
    docker: &Docker,
    collector: &Collector<'_>,
    live_thread_ids: &HashSet<String>,
) -> anyhow::Result<GcReport> {
    let containers = crate::sandboxes::managed(docker).await?;
    let mut report = GcReport::default();
    for summary in containers {
        let Some(id) = summary.id else { continue };
        let container_labels = summary.labels.unwrap_or_default();
        let names = summary.names.unwrap_or_default();
        let verdict = judge(&container_labels, &names, collector, live_thread_ids);
        let entry = GcEntry {
            name: names
                .first()
                .map(|name| name.trim_start_matches('/').to_string())
                .unwrap_or_default(),
            thread: labels::thread_of_container(&container_labels, &names).map(str::to_string),
            home: labels::get(&container_labels, labels::HOME).map(str::to_string),
            verdict,
            id,
        };
        if entry.verdict.removes() {
            container::remove(docker, &entry.id).await?;
            report.removed.push(entry);
        } else {
            report.kept.push(entry);
        }
    }
    Ok(report)
}

fn judge(
    container_labels: &HashMap<String, String>,
    names: &[String],
    collector: &Collector<'_>,
    live_thread_ids: &HashSet<String>,
) -> GcVerdict {
    match (labels::get(container_labels, labels::HOME), collector.home) {
        (Some(theirs), ours) if Some(theirs) != ours => {
            return GcVerdict::OtherHome(theirs.to_string());
        }
        (None, Some(_)) if !collector.options.include_unlabelled => {
            return GcVerdict::Unlabelled;
        }
        _ => {}
    }
    if let Some(thread) = labels::thread_of_container(container_labels, names) {
        return if live_thread_ids.contains(thread) {
            GcVerdict::ThreadExists
        } else {
            GcVerdict::ThreadGone
        };
    }
    let unclaimed_pool = labels::get(container_labels, labels::POOL).is_some()
        && names
            .iter()
            .any(|name| labels::is_unclaimed_pool_name(name));
    if !unclaimed_pool {
        GcVerdict::NoThread
    } else if labels::get(container_labels, labels::POOL_OWNER) == Some(collector.own_pool) {
        GcVerdict::OwnPool
    } else {
        GcVerdict::OrphanPool
    }
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

    const HOMELESS: Collector<'static> = Collector {
        home: None,
        own_pool: "me",
        options: GcOptions {
            include_unlabelled: false,
        },
    };

    #[test]
    fn verdicts_without_a_home_id() {
        let live: HashSet<String> = ["alive".to_string()].into();
        let by_label = |thread: &str| labels_of(&[(labels::THREAD, thread)]);
        let judge = |labels: &HashMap<String, String>, names: &[String]| {
            judge(labels, names, &HOMELESS, &live)
        };
        assert_eq!(judge(&by_label("alive"), &[]), GcVerdict::ThreadExists);
        assert_eq!(judge(&by_label("gone"), &[]), GcVerdict::ThreadGone);
        let claimed = vec!["/roder-t.gone.abc".to_string()];
        assert_eq!(judge(&HashMap::new(), &claimed), GcVerdict::ThreadGone);
        let pool = vec!["/roder-pool.abc".to_string()];
        let mine = labels_of(&[(labels::POOL, "fp"), (labels::POOL_OWNER, "me")]);
        let theirs = labels_of(&[(labels::POOL, "fp"), (labels::POOL_OWNER, "other")]);
        assert_eq!(judge(&mine, &pool), GcVerdict::OwnPool);
        assert_eq!(judge(&theirs, &pool), GcVerdict::OrphanPool);
        let unknown = vec!["/roder-d.abc".to_string()];
        assert_eq!(judge(&HashMap::new(), &unknown), GcVerdict::NoThread);
        let homed = labels_of(&[(labels::THREAD, "gone"), (labels::HOME, "h1")]);
        assert_eq!(
            judge(&homed, &[]),
            GcVerdict::OtherHome("h1".to_string()),
            "a collector without a home id leaves every homed container alone"
        );
    }

    #[test]
    fn a_home_collects_only_its_own_containers() {
        let live: HashSet<String> = ["alive".to_string()].into();
        let mut collector = Collector {
            home: Some("a"),
            own_pool: "me",
            options: GcOptions::default(),
        };
        let container = |thread: &str, home: Option<&str>| {
            let mut pairs = vec![(labels::THREAD, thread)];
            if let Some(home) = home {
                pairs.push((labels::HOME, home));
            }
            labels_of(&pairs)
        };
        let verdict = |labels: HashMap<String, String>, collector: &Collector<'_>| {
            judge(&labels, &[], collector, &live)
        };
        assert_eq!(
            verdict(container("gone", Some("a")), &collector),
            GcVerdict::ThreadGone
        );
        assert_eq!(
            verdict(container("alive", Some("a")), &collector),
            GcVerdict::ThreadExists
        );
        assert_eq!(
            verdict(container("gone", Some("b")), &collector),
            GcVerdict::OtherHome("b".to_string())
        );
        assert_eq!(
            verdict(container("gone", None), &collector),
            GcVerdict::Unlabelled
        );
        let blank = labels_of(&[(labels::THREAD, "gone"), (labels::HOME, "")]);
        assert_eq!(
            verdict(blank.clone(), &collector),
            GcVerdict::Unlabelled,
            "a blank home label is no label"
        );
        let theirs_pool = labels_of(&[
            (labels::POOL, "fp"),
            (labels::POOL_OWNER, "other"),
            (labels::HOME, "b"),
        ]);
        assert_eq!(
            judge(
                &theirs_pool,
                &["/roder-pool.x".to_string()],
                &collector,
                &live
            ),
            GcVerdict::OtherHome("b".to_string())
        );
        collector.options.include_unlabelled = true;
        assert_eq!(
            verdict(container("gone", None), &collector),
            GcVerdict::ThreadGone
        );
        assert_eq!(verdict(blank, &collector), GcVerdict::ThreadGone);
        assert_eq!(
            verdict(container("gone", Some("b")), &collector),
            GcVerdict::OtherHome("b".to_string()),
            "including unlabelled containers never reaches another home's"
        );
    }

    #[test]
    fn only_removing_verdicts_remove_and_every_verdict_says_why() {
        let all = [
            GcVerdict::ThreadGone,
            GcVerdict::OrphanPool,
            GcVerdict::ThreadExists,
            GcVerdict::OtherHome("h".to_string()),
            GcVerdict::Unlabelled,
            GcVerdict::NoThread,
            GcVerdict::OwnPool,
        ];
        let removing: Vec<bool> = all.iter().map(GcVerdict::removes).collect();
        assert_eq!(removing, [true, true, false, false, false, false, false]);
        for verdict in &all {
            assert!(!verdict.to_string().is_empty());
        }
        assert!(GcVerdict::OtherHome("h9".into()).to_string().contains("h9"));
    }
}

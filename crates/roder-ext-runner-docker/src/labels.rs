//! How Roder marks its containers, and how it reads the marks back.
//!
//! Labels are the durable record (they survive a crash of the runtime), so
//! `gc` and `rejoin` can work from the daemon alone. Docker cannot change a
//! container's labels after creation, so a warm-pool container, created
//! before anyone knows its thread, records its claim in its *name* instead:
//! claiming renames it to `roder-t.<thread>.<suffix>` (see [`session_name`]).

use std::collections::HashMap;

/// Every Roder label key starts with this; user labels may not.
pub const LABEL_PREFIX: &str = "dev.roder.";
/// `true` on every container (and snapshot image) Roder creates.
pub const MANAGED: &str = "dev.roder.managed";
/// The destination id a container was created for (not on pool containers).
pub const DESTINATION: &str = "dev.roder.destination";
/// The thread a container serves, when the destination id names one.
pub const THREAD: &str = "dev.roder.thread";
/// `delete-on-close` or `keep`.
pub const CLEANUP: &str = "dev.roder.cleanup";
/// Config fingerprint of a warm-pool container.
pub const POOL: &str = "dev.roder.pool";
/// Id of the provider instance whose pool created the container.
pub const POOL_OWNER: &str = "dev.roder.pool.owner";
/// On snapshot images: the container they were committed from.
pub const SNAPSHOT_OF: &str = "dev.roder.snapshot.of";
/// On snapshot images of a confined container: the image directory holding
/// the workspace's files (the workspace itself is a volume, which a commit
/// does not capture); copied into the workspace when a container starts.
pub const SNAPSHOT_WORKSPACE: &str = "dev.roder.snapshot.workspace";
/// The id of the Roder home (thread store) whose provider made the
/// container; `gc` of one home never removes another home's containers.
pub const HOME: &str = "dev.roder.home";

/// Keys a committed image must not pass on to containers created from it
/// (new containers inherit image labels that they do not set themselves).
pub const CONTAINER_ONLY: [&str; 7] = [
    MANAGED,
    DESTINATION,
    THREAD,
    CLEANUP,
    POOL,
    POOL_OWNER,
    HOME,
];

/// Most characters a home id may have.
const MAX_HOME_ID_LEN: usize = 128;

/// Name prefix of a container claimed by (or created for) a known thread.
const THREAD_NAME_PREFIX: &str = "roder-t.";
/// Name prefix of an unclaimed warm-pool container.
const POOL_NAME_PREFIX: &str = "roder-pool.";
/// Name prefix of a container whose destination names no thread.
const OTHER_NAME_PREFIX: &str = "roder-d.";

/// The thread an explicit binding's destination id names: the runtime gives
/// a thread bound with a runner selection the destination `thread-<id>`.
/// Only ids Docker accepts in a name are returned (thread ids are path-safe
/// `[A-Za-z0-9._-]`, which is the same alphabet).
pub fn thread_of_destination(destination_id: &str) -> Option<&str> {
    destination_id
        .strip_prefix("thread-")
        .filter(|thread| is_name_safe(thread))
}

/// Whether `text` can be part of a container name.
fn is_name_safe(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 128
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && text.starts_with(|c: char| c.is_ascii_alphanumeric())
}

/// Checks a home id before it becomes a label value: non-empty, at most
/// 128 characters of `[A-Za-z0-9._-]`, so it reads the same in `docker ps`,
/// filters and error messages.
pub fn check_home_id(home_id: &str) -> anyhow::Result<()> {
    let ok = !home_id.is_empty()
        && home_id.len() <= MAX_HOME_ID_LEN
        && home_id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'));
    if !ok {
        anyhow::bail!(
            "home id {home_id:?} is not usable as the `{HOME}` label: use 1 to {MAX_HOME_ID_LEN} characters of A-Z, a-z, 0-9, '.', '_' or '-'"
        );
    }
    Ok(())
}

/// A short random suffix keeping names unique.
pub fn name_suffix() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    id[..12].to_string()
}

/// The name of a session container: `roder-t.<thread>.<suffix>` when the
/// thread is known (so a claimed pool container keeps the claim), else
/// `roder-d.<suffix>`.
pub fn session_name(thread: Option<&str>, suffix: &str) -> String {
    match thread {
        Some(thread) => format!("{THREAD_NAME_PREFIX}{thread}.{suffix}"),
        None => format!("{OTHER_NAME_PREFIX}{suffix}"),
    }
}

/// The name of an unclaimed pool container.
pub fn pool_name(suffix: &str) -> String {
    format!("{POOL_NAME_PREFIX}{suffix}")
}

/// Whether a container name (as Docker lists it, maybe with a leading `/`)
/// is that of an unclaimed pool container.
pub fn is_unclaimed_pool_name(name: &str) -> bool {
    name.trim_start_matches('/').starts_with(POOL_NAME_PREFIX)
}

/// The thread a container serves: its thread label, else the thread its
/// name records (a claimed pool container).
pub fn thread_of_container<'a>(
    labels: &'a HashMap<String, String>,
    names: &'a [String],
) -> Option<&'a str> {
    if let Some(thread) = labels.get(THREAD).filter(|thread| !thread.is_empty()) {
        return Some(thread);
    }
    names.iter().find_map(|name| {
        let rest = name
            .trim_start_matches('/')
            .strip_prefix(THREAD_NAME_PREFIX)?;
        let (thread, _suffix) = rest.rsplit_once('.')?;
        Some(thread).filter(|thread| !thread.is_empty())
    })
}

/// A label value, treating an empty value as absent (snapshot images blank
/// Roder's keys rather than dropping them, see [`CONTAINER_ONLY`]).
pub fn get<'a>(labels: &'a HashMap<String, String>, key: &str) -> Option<&'a str> {
    labels
        .get(key)
        .map(String::as_str)
        .filter(|value| !value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_comes_from_explicit_destination_ids() {
        assert_eq!(thread_of_destination("thread-abc-1"), Some("abc-1"));
        assert_eq!(thread_of_destination("thread-"), None);
        assert_eq!(thread_of_destination("default"), None);
        assert_eq!(thread_of_destination("thread-a/b"), None);
        assert_eq!(thread_of_destination("thread-.hidden"), None);
    }

    #[test]
    fn claimed_names_round_trip_to_the_thread() {
        let name = session_name(Some("0192-a.b_c"), "0123456789ab");
        assert_eq!(name, "roder-t.0192-a.b_c.0123456789ab");
        let labels = HashMap::new();
        let names = vec![format!("/{name}")];
        assert_eq!(thread_of_container(&labels, &names), Some("0192-a.b_c"));
        assert_eq!(
            thread_of_container(&labels, &["/roder-d.0123".to_string()]),
            None
        );
        assert!(is_unclaimed_pool_name(&format!("/{}", pool_name("x"))));
        assert!(!is_unclaimed_pool_name(&name));
    }

    #[test]
    fn home_ids_are_plain_label_values() {
        assert!(check_home_id("0123abcdef").is_ok());
        assert!(check_home_id("h.o_m-e").is_ok());
        for bad in ["", "a b", "a=b", "ä", &"x".repeat(129)] {
            let error = check_home_id(bad).unwrap_err().to_string();
            assert!(error.contains(HOME), "{error}");
        }
    }

    #[test]
    fn the_thread_label_wins_and_blank_labels_are_absent() {
        let mut labels = HashMap::new();
        labels.insert(THREAD.to_string(), "t1".to_string());
        let names = vec!["/roder-t.t2.x".to_string()];
        assert_eq!(thread_of_container(&labels, &names), Some("t1"));
        labels.insert(THREAD.to_string(), String::new());
        assert_eq!(thread_of_container(&labels, &names), Some("t2"));
        assert_eq!(get(&labels, THREAD), None);
    }
}

//! Which thread ids a store accepts: one rule for every store, so a thread
//! can move between stores and every client sees the same refusal. Ids
//! become directory names in the JSONL store, so only path-safe ids pass.

use anyhow::bail;

/// Longest accepted id; far beyond a UUID, well below any filename limit.
pub const MAX_THREAD_ID_LEN: usize = 128;

/// Accepts `[A-Za-z0-9._-]`, 1..=128 chars, not starting with `-` (looks like
/// an option to tools) or `.` (hidden, and rules out `.` and `..`).
/// The error names the id, so a client can tell which one it sent.
///
/// ```
/// use roder_api::thread_id::validate;
///
/// assert!(validate("0192f0e4-7d7b-7c2e-9b1a-3c5d6e7f8a9b").is_ok());
/// assert!(validate("../etc").is_err());
/// ```
pub fn validate(thread_id: &str) -> anyhow::Result<()> {
    if thread_id.is_empty() {
        bail!("invalid thread id \"\": it must not be empty");
    }
    if thread_id.len() > MAX_THREAD_ID_LEN {
        bail!(
            "invalid thread id {thread_id:?}: it is {} characters long, the limit is {MAX_THREAD_ID_LEN}",
            thread_id.len()
        );
    }
    if let Some(bad) = thread_id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        bail!(
            "invalid thread id {thread_id:?}: character {bad:?} is not allowed (use A-Z, a-z, 0-9, '.', '_', '-')"
        );
    }
    if thread_id.starts_with(['-', '.']) {
        bail!("invalid thread id {thread_id:?}: it must not start with '-' or '.'");
    }
    Ok(())
}

/// Whether a directory name could be a thread (used when listing, where
/// anything else, like a half-deleted `.deleted-*` dir, is skipped).
///
/// ```
/// assert!(!roder_api::thread_id::is_valid(".deleted-t1"));
/// ```
pub fn is_valid(name: &str) -> bool {
    validate(name).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_path_safe_ids() {
        for id in [
            "a",
            "thread-1",
            "A.b_c-9",
            "0",
            &"x".repeat(MAX_THREAD_ID_LEN),
        ] {
            assert!(validate(id).is_ok(), "{id}");
        }
        assert!(validate("0192f0e4-7d7b-7c2e-9b1a-3c5d6e7f8a9b").is_ok());
    }

    #[test]
    fn refuses_unsafe_ids_naming_them() {
        let long = "x".repeat(MAX_THREAD_ID_LEN + 1);
        for id in [
            "", ".", "..", ".hidden", "-rf", "a/b", "../x", "a b", "é", "a\0b", &long,
        ] {
            let error = validate(id).unwrap_err().to_string();
            assert!(error.contains(&format!("{id:?}")), "{id:?}: {error}");
        }
        assert!(!is_valid("a/b"));
    }
}

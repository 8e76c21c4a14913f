//! Thread ids, checked like the JSONL store checks them, so a thread can
//! move between the two stores and every client sees one rule.

use anyhow::bail;

/// Longest accepted id (the JSONL store's limit).
pub(crate) const MAX_THREAD_ID_LEN: usize = 128;

/// Accepts `[A-Za-z0-9._-]`, 1..=128 chars, not starting with `-` or `.`.
/// The error names the id.
pub(crate) fn validate(thread_id: &str) -> anyhow::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_uuids_and_refuses_paths() {
        validate("0b9c-4f.x_y").unwrap();
        for bad in ["", "../x", "a/b", ".h", "-x", "a b", &"x".repeat(129)] {
            assert!(validate(bad).is_err(), "{bad:?}");
        }
    }
}

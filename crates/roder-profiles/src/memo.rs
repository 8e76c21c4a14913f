//! Snapshots already resolved from an archive, kept by the resolver.
//!
//! A profile whose whole `extends` chain lies in one archive (and the
//! builtins compiled into this binary) depends on nothing but the archive's
//! verified bytes and the selector: no file that could be edited, no
//! workspace. Resolving it again gives the same snapshot, so a resolver
//! keeps it, keyed by the archive's reference and what the request said.
//! The archive is still fetched (revalidated) each time and its digest
//! still decides: a hit only saves opening the tar and parsing its files.
//! A chain that reaches a profile file is never kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use roder_api::profile::ProfileSnapshot;

use crate::archive::ArchiveRef;

/// What decides a snapshot resolved from an archive alone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct MemoKey {
    pub reference: ArchiveRef,
    /// The URL as a snapshot records it (redacted), `None` when embedded.
    pub url: Option<String>,
    pub selector: String,
    /// What `""` stands for.
    pub default_profile: Option<String>,
}

/// Shared by a resolver's clones; at most [`Memo::MAX_ENTRIES`], all
/// dropped when one more would not fit.
#[derive(Debug, Clone, Default)]
pub(crate) struct Memo(Arc<Mutex<HashMap<MemoKey, ProfileSnapshot>>>);

impl Memo {
    const MAX_ENTRIES: usize = 256;

    pub fn get(&self, key: &MemoKey) -> Option<ProfileSnapshot> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    pub fn insert(&self, key: MemoKey, snapshot: &ProfileSnapshot) {
        let mut entries = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= Self::MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(key, snapshot.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(selector: &str) -> MemoKey {
        MemoKey {
            reference: ArchiveRef::of("acme", b"bytes"),
            url: None,
            selector: selector.into(),
            default_profile: None,
        }
    }

    #[test]
    fn keeps_what_it_was_given_and_stays_bounded() {
        let memo = Memo::default();
        let snapshot = ProfileSnapshot {
            name: "reviewer".into(),
            ..ProfileSnapshot::default()
        };
        memo.insert(key("reviewer"), &snapshot);
        assert_eq!(memo.get(&key("reviewer")), Some(snapshot.clone()));
        assert_eq!(memo.get(&key("other")), None);
        for index in 0..Memo::MAX_ENTRIES {
            memo.insert(key(&format!("p{index}")), &snapshot);
        }
        let held = memo.0.lock().unwrap().len();
        assert!(held <= Memo::MAX_ENTRIES, "{held}");
    }
}

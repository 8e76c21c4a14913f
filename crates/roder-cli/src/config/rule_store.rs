//! Where `allow_always` and `reject_always` keep their rules: the
//! `[approvals]` table of `config.toml`, edited in place so the user's
//! comments and layout stay, and written whole through a temporary file so
//! a crash never leaves half a config. Several processes of one home (an
//! app server, a `roder exec`, an editor's `roder acp`) may keep rules at
//! once: each read-modify-write holds an exclusive lock on
//! `config.toml.lock`, so none loses another's rule.

use std::path::PathBuf;

use roder_api::approval::{ApprovalRule, ApprovalRuleStore, ApprovalRules};
use toml_edit::{Array, DocumentMut, Item, Table, Value};

/// `config.toml` as an [`ApprovalRuleStore`].
pub struct ConfigRuleStore {
    pub path: PathBuf,
}

impl ApprovalRuleStore for ConfigRuleStore {
    fn keep(&self, rules: &ApprovalRules) -> anyhow::Result<()> {
        let lock_path = self.path.with_extension("toml.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|error| anyhow::anyhow!("cannot open {}: {error}", lock_path.display()))?;
        lock.lock()
            .map_err(|error| anyhow::anyhow!("cannot lock {}: {error}", lock_path.display()))?;
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(error) => anyhow::bail!("cannot read {}: {error}", self.path.display()),
        };
        let updated = with_rules(&text, rules)
            .map_err(|error| anyhow::anyhow!("{}: {error}", self.path.display()))?;
        if updated == text {
            return Ok(());
        }
        let temporary = self.path.with_extension("toml.tmp");
        let written = std::fs::File::create(&temporary)
            .and_then(|mut file| {
                std::io::Write::write_all(&mut file, updated.as_bytes())?;
                file.sync_all()
            })
            .and_then(|()| std::fs::rename(&temporary, &self.path));
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        written.map_err(|error| anyhow::anyhow!("cannot write {}: {error}", self.path.display()))
        // The lock is released when `lock` is closed.
    }
}

/// `text` with `rules` added to `[approvals] allow` and `deny` (each once).
fn with_rules(text: &str, rules: &ApprovalRules) -> anyhow::Result<String> {
    let mut document: DocumentMut = text
        .parse()
        .map_err(|error| anyhow::anyhow!("not valid TOML: {error}"))?;
    let approvals = document
        .entry("approvals")
        .or_insert_with(|| Item::Table(Table::new()))
        .as_table_mut()
        .ok_or_else(|| anyhow::anyhow!("`approvals` is not a table"))?;
    for (key, kept) in [("allow", &rules.allow), ("deny", &rules.deny)] {
        if kept.is_empty() {
            continue;
        }
        let list = approvals
            .entry(key)
            .or_insert_with(|| Item::Value(Value::Array(Array::new())))
            .as_array_mut()
            .ok_or_else(|| anyhow::anyhow!("[approvals] {key} is not an array"))?;
        for rule in kept {
            let present = list.iter().any(|value| {
                value
                    .as_str()
                    .and_then(|text| text.parse::<ApprovalRule>().ok())
                    .is_some_and(|existing| &existing == rule)
            });
            if !present {
                list.push(rule.to_string());
            }
        }
    }
    Ok(document.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: &[&str], deny: &[&str]) -> ApprovalRules {
        ApprovalRules {
            allow: allow.iter().map(|rule| rule.parse().unwrap()).collect(),
            deny: deny.iter().map(|rule| rule.parse().unwrap()).collect(),
        }
    }

    #[test]
    fn rules_are_added_once_and_comments_stay() {
        let text = "# my config\nmodel = \"fake/m\" # the model\n";
        let once = with_rules(text, &rules(&["exec:cargo test"], &["exec:rm"])).unwrap();
        assert!(
            once.starts_with("# my config\nmodel = \"fake/m\" # the model\n"),
            "{once}"
        );
        let parsed: toml::Table = toml::from_str(&once).unwrap();
        assert_eq!(
            parsed["approvals"]["allow"].as_array().unwrap()[0].as_str(),
            Some("exec:cargo test")
        );
        assert_eq!(
            parsed["approvals"]["deny"].as_array().unwrap()[0].as_str(),
            Some("exec:rm")
        );
        let twice = with_rules(&once, &rules(&["exec:cargo test"], &[])).unwrap();
        assert_eq!(twice, once);
    }

    #[test]
    fn the_store_writes_the_file_and_refuses_a_broken_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = ConfigRuleStore {
            path: dir.path().join("config.toml"),
        };
        store.keep(&rules(&["write:docs/**"], &[])).unwrap();
        let text = std::fs::read_to_string(&store.path).unwrap();
        assert!(text.contains("write:docs/**"), "{text}");
        std::fs::write(&store.path, "approvals = 3\n").unwrap();
        let error = store
            .keep(&rules(&["tool:x"], &[]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("`approvals` is not a table"), "{error}");
    }

    #[test]
    fn rules_kept_at_once_by_many_writers_are_all_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "model = \"fake/m\"\n").unwrap();
        let writers: Vec<_> = (0..16)
            .map(|index| {
                let store = ConfigRuleStore { path: path.clone() };
                std::thread::spawn(move || {
                    store
                        .keep(&rules(&[&format!("exec:tool-{index}")], &[]))
                        .unwrap()
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        let parsed: toml::Table = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let allow = parsed["approvals"]["allow"].as_array().unwrap();
        assert_eq!(allow.len(), 16, "{allow:?}");
        assert_eq!(parsed["model"].as_str(), Some("fake/m"));
    }
}

//! Worktree ids: they name a directory under the root and a branch
//! (`roder/<id>`), so they are restricted to characters that are safe in
//! both and cannot climb out of the root or look like an option.

use anyhow::bail;

/// Longest id accepted: a directory name, with room for git's suffixes.
const MAX_LEN: usize = 128;

/// Accepts `[A-Za-z0-9._-]+` without a leading `-` (an option to git) or `.`
/// (hidden, `.` and `..`).
pub(crate) fn validate(id: &str) -> anyhow::Result<()> {
    let Some(first) = id.chars().next() else {
        bail!("worktree id is empty; use letters, digits, '.', '_' or '-'");
    };
    if first == '-' || first == '.' {
        bail!("worktree id {id:?} must not start with '{first}'");
    }
    if id.len() > MAX_LEN {
        bail!("worktree id {id:?} is longer than {MAX_LEN} characters");
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        bail!(
            "worktree id {id:?} contains {bad:?}; only letters, digits, '.', '_' and '-' are allowed"
        );
    }
    Ok(())
}

/// A fresh id, short enough to read in a branch name (`roder/wt-…`).
pub(crate) fn generate() -> String {
    let uuid = uuid::Uuid::new_v4().simple().to_string();
    format!("wt-{}", &uuid[..12])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_path_safe_ids() {
        for id in ["a", "wt-1", "A.b_c-9", "x..y", "9"] {
            validate(id).unwrap();
        }
        validate(&generate()).unwrap();
        assert_ne!(generate(), generate());
    }

    #[test]
    fn refuses_everything_else_naming_the_problem() {
        assert!(validate("").unwrap_err().to_string().contains("empty"));
        assert!(
            validate("-rf")
                .unwrap_err()
                .to_string()
                .contains("start with '-'")
        );
        assert!(
            validate(".hidden")
                .unwrap_err()
                .to_string()
                .contains("start with '.'")
        );
        assert!(
            validate("..")
                .unwrap_err()
                .to_string()
                .contains("start with '.'")
        );
        assert!(validate("a/b").unwrap_err().to_string().contains("'/'"));
        assert!(validate("a b").unwrap_err().to_string().contains("' '"));
        assert!(validate("é").unwrap_err().to_string().contains("'é'"));
        assert!(
            validate(&"a".repeat(129))
                .unwrap_err()
                .to_string()
                .contains("longer")
        );
    }
}

//! Resolving caller paths against the session's workspace root.
//!
//! The runtime hands over paths relative to the workspace root (files inside
//! it) and absolute ones (files under a read root outside it). They are
//! resolved here, on the client, and sent absolute and normalised (with
//! `workingDir` alongside), so the result does not depend on how a given
//! server version treats relative paths or `..`.
//!
//! * A relative path is joined to the root and its `.`/`..` are folded. It
//!   must stay inside the root at every step: `a/../b` is fine, `../x` and
//!   `a/../../x` are refused, even when a later step would come back in.
//! * An absolute path is the caller's choice (the runtime has already
//!   checked it against its read roots); it is only folded, and `..` never
//!   climbs above `/`.

use std::path::Path;

/// The absolute, normalised sprite path for `path` under workspace `root`
/// (an absolute path, normalised as the config leaves it). `""` and `.` mean
/// `root`.
pub(crate) fn resolve(root: &str, path: &Path) -> anyhow::Result<String> {
    let text = path
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("path {} is not valid UTF-8", path.display()))?;
    if text.contains('\0') {
        anyhow::bail!("path {text:?} contains NUL");
    }
    if let Some(absolute) = text.strip_prefix('/') {
        let mut parts = Vec::new();
        for part in absolute.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    parts.pop();
                }
                other => parts.push(other),
            }
        }
        return Ok(join(&parts));
    }
    let base: Vec<&str> = components(root).collect();
    let mut parts = base.clone();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.len() <= base.len() => anyhow::bail!(
                "path {text:?} climbs out of the workspace {root} ('..' past its root); use a path inside the workspace, or an absolute path"
            ),
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    Ok(join(&parts))
}

fn components(path: &str) -> impl Iterator<Item = &str> {
    path.split('/')
        .filter(|part| !part.is_empty() && *part != ".")
}

fn join(parts: &[&str]) -> String {
    if parts.is_empty() {
        return "/".to_string();
    }
    let mut out = String::new();
    for part in parts {
        out.push('/');
        out.push_str(part);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const WD: &str = "/home/sprite/workspace";

    #[test]
    fn relative_paths_join_the_working_dir() {
        assert_eq!(
            resolve(WD, Path::new("a/b.txt")).unwrap(),
            "/home/sprite/workspace/a/b.txt"
        );
        assert_eq!(
            resolve(WD, Path::new("./a")).unwrap(),
            "/home/sprite/workspace/a"
        );
        assert_eq!(resolve(WD, Path::new("")).unwrap(), WD);
        assert_eq!(resolve(WD, Path::new(".")).unwrap(), WD);
        assert_eq!(resolve(WD, Path::new("/etc/hosts")).unwrap(), "/etc/hosts");
        assert_eq!(resolve("/", Path::new("x")).unwrap(), "/x");
        assert!(resolve(WD, Path::new("a\0b")).is_err());
    }

    #[test]
    fn dot_dot_is_folded_and_stays_in_the_workspace() {
        assert_eq!(resolve(WD, Path::new("a/../b")).unwrap(), format!("{WD}/b"));
        assert_eq!(
            resolve(WD, Path::new("a/b/../../c/./d/")).unwrap(),
            format!("{WD}/c/d")
        );
        assert_eq!(resolve(WD, Path::new("a/..")).unwrap(), WD);
        for escaping in ["..", "../x", "a/../../x", "../workspace/x", "./.."] {
            let err = resolve(WD, Path::new(escaping)).unwrap_err().to_string();
            assert!(
                err.contains("climbs out of the workspace"),
                "{escaping}: {err}"
            );
            assert!(err.contains(WD), "{escaping}: {err}");
        }
        assert_eq!(resolve(WD, Path::new("/a/../../etc/x")).unwrap(), "/etc/x");
        assert_eq!(resolve(WD, Path::new("/..")).unwrap(), "/");
        assert_eq!(resolve("/", Path::new("a/../b")).unwrap(), "/b");
        assert!(resolve("/", Path::new("..")).is_err());
    }

    /// Path segments that exercise folding, plus odd ones.
    fn segment() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("..".to_string()),
            Just(".".to_string()),
            Just(String::new()),
            Just("a".to_string()),
            Just("bé".to_string()),
            "[^/\0]{1,6}",
        ]
    }

    proptest! {
        #[test]
        fn relative_results_are_normalised_and_inside_the_root(
            segments in proptest::collection::vec(segment(), 0..12),
        ) {
            let text = segments.join("/");
            // A leading empty segment makes the path absolute: the other test's case.
            prop_assume!(!text.starts_with('/'));
            let result = resolve(WD, Path::new(&text));
            // The model: `..` never takes the depth below the root's.
            let mut depth = 0i64;
            let mut escapes = false;
            for part in &segments {
                match part.as_str() {
                    "" | "." => {}
                    ".." => {
                        depth -= 1;
                        escapes |= depth < 0;
                    }
                    _ => depth += 1,
                }
            }
            prop_assert_eq!(result.is_err(), escapes, "{:?} -> {:?}", text, result);
            if let Ok(resolved) = result {
                prop_assert!(resolved == WD || resolved.starts_with(&format!("{WD}/")), "{}", resolved);
                prop_assert!(!resolved.contains("//"), "{}", resolved);
                prop_assert!(resolved.split('/').skip(1).all(|p| !p.is_empty() && p != "." && p != ".."), "{}", resolved);
                // Resolving again changes nothing.
                prop_assert_eq!(resolve(WD, Path::new(&resolved)).unwrap(), resolved);
            }
        }

        #[test]
        fn absolute_results_are_normalised(
            segments in proptest::collection::vec(segment(), 0..12),
        ) {
            let text = format!("/{}", segments.join("/"));
            let resolved = resolve(WD, Path::new(&text)).unwrap();
            prop_assert!(resolved.starts_with('/'));
            prop_assert!(resolved == "/" || !resolved.ends_with('/'), "{}", resolved);
            prop_assert!(resolved.split('/').skip(1).all(|p| p != "." && p != ".."), "{}", resolved);
            prop_assert_eq!(resolve(WD, Path::new(&resolved)).unwrap(), resolved);
        }

        #[test]
        fn any_string_resolves_or_errs_without_panicking(text in any::<String>(), root in "(/[a-z.]{0,4}){0,4}") {
            let root = if root.is_empty() { "/".to_string() } else { root };
            let _ = resolve(&root, Path::new(&text));
        }
    }
}

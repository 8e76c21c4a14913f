//! Container paths of file requests and working directories.
//!
//! Tools send paths inside the thread's workspace relative to it, and other
//! paths (read roots) absolute. The container is the sandbox, so an absolute
//! path may name anything in it; a relative one must stay under the workdir,
//! because climbing out of it with `..` is never what a tool meant.

use std::path::{Component, Path};

use anyhow::bail;

/// The absolute, lexically normalised container path `requested` names.
pub fn resolve(workdir: &str, requested: &Path) -> anyhow::Result<String> {
    let text = requested.to_str().ok_or_else(|| {
        anyhow::anyhow!(
            "path {:?} is not valid UTF-8, which the Docker archive API cannot carry",
            requested
        )
    })?;
    if text.is_empty() {
        bail!("empty path: name a file (relative to `{workdir}` or absolute)");
    }
    if text.contains('\0') {
        bail!("path {text:?} contains a NUL byte");
    }
    let mut parts: Vec<&str> = Vec::new();
    let base_depth = if requested.is_absolute() {
        0
    } else {
        parts.extend(workdir.split('/').filter(|part| !part.is_empty()));
        parts.len()
    };
    for component in requested.components() {
        match component {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                if parts.len() <= base_depth && base_depth > 0 {
                    bail!(
                        "relative path {text:?} climbs out of the workspace `{workdir}`; use an absolute container path"
                    );
                }
                parts.pop();
            }
            Component::Normal(part) => parts.push(part.to_str().unwrap_or_default()),
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

/// The parent directory and file name of an absolute normalised path, or
/// an error for `/` itself.
pub fn split(path: &str) -> anyhow::Result<(&str, &str)> {
    match path.rsplit_once('/') {
        Some((_, "")) | None => bail!("`{path}` is a directory, not a file"),
        Some(("", name)) => Ok(("/", name)),
        Some((parent, name)) => Ok((parent, name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_land_in_the_workdir() {
        assert_eq!(
            resolve("/workspace", Path::new("a/b.txt")).unwrap(),
            "/workspace/a/b.txt"
        );
        assert_eq!(
            resolve("/workspace", Path::new("./a/../b")).unwrap(),
            "/workspace/b"
        );
        assert_eq!(resolve("/", Path::new("x")).unwrap(), "/x");
    }

    #[test]
    fn absolute_paths_are_normalised_anywhere() {
        assert_eq!(
            resolve("/workspace", Path::new("/etc/../data/./f")).unwrap(),
            "/data/f"
        );
        assert_eq!(resolve("/workspace", Path::new("/../x")).unwrap(), "/x");
    }

    #[test]
    fn relative_escapes_and_empty_paths_are_refused() {
        let error = resolve("/workspace", Path::new("../etc/passwd")).unwrap_err();
        assert!(error.to_string().contains("climbs out"), "{error}");
        assert!(resolve("/workspace", Path::new("a/../../b")).is_err());
        assert!(resolve("/workspace", Path::new("")).is_err());
    }

    #[test]
    fn split_names_parent_and_file() {
        assert_eq!(split("/a/b").unwrap(), ("/a", "b"));
        assert_eq!(split("/a").unwrap(), ("/", "a"));
        assert!(split("/").is_err());
    }
}

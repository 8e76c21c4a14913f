//! Container paths of file requests and working directories.
//!
//! Tools send paths inside the thread's workspace relative to it, and other
//! paths (read roots) absolute. The container is the sandbox, so an absolute
//! path may name anything in it; a relative one must stay under the workdir,
//! because climbing out of it with `..` is never what a tool meant. The rules
//! are `roder_sandbox::paths`' (lexical: the container's filesystem is not
//! ours to inspect); this module adds the archive API's file/parent split.

use std::path::Path;

use anyhow::bail;

/// The absolute, lexically normalised container path `requested` names:
/// [`roder_sandbox::paths::runner_path`] (a relative path may not climb above
/// the workdir; an absolute one is folded), with the empty path refused,
/// because every request here names a file or a directory.
pub fn resolve(workdir: &str, requested: &Path) -> anyhow::Result<String> {
    if requested.as_os_str().is_empty() {
        bail!("empty path: name a file (relative to `{workdir}` or absolute)");
    }
    Ok(roder_sandbox::paths::runner_path(
        workdir,
        requested,
        "workspace",
    )?)
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
        assert!(resolve("/workspace", Path::new("a\0b")).is_err());
        // `..` above a workdir of `/` is refused too.
        assert!(resolve("/", Path::new("../x")).is_err());
    }

    #[test]
    fn split_names_parent_and_file() {
        assert_eq!(split("/a/b").unwrap(), ("/a", "b"));
        assert_eq!(split("/a").unwrap(), ("/", "a"));
        assert!(split("/").is_err());
    }
}

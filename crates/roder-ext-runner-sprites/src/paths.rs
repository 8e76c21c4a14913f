//! Resolving caller paths against the session's working directory.
//!
//! The runtime hands over paths relative to the workspace root as often as
//! absolute ones. They are resolved here, on the client, and sent absolute
//! (with `workingDir` alongside), so the result does not depend on how a
//! given server version treats relative paths.

use std::path::Path;

/// `path` if absolute, else `working_dir/path`; `""` and `.` mean `working_dir`.
pub(crate) fn resolve(working_dir: &str, path: &Path) -> anyhow::Result<String> {
    let text = path
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("path {} is not valid UTF-8", path.display()))?;
    if text.contains('\0') {
        anyhow::bail!("path {text:?} contains NUL");
    }
    if text.starts_with('/') {
        return Ok(text.to_string());
    }
    let relative = text.trim_start_matches("./");
    if relative.is_empty() || relative == "." {
        return Ok(working_dir.to_string());
    }
    Ok(if working_dir.ends_with('/') {
        format!("{working_dir}{relative}")
    } else {
        format!("{working_dir}/{relative}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_join_the_working_dir() {
        let wd = "/home/sprite/workspace";
        assert_eq!(
            resolve(wd, Path::new("a/b.txt")).unwrap(),
            "/home/sprite/workspace/a/b.txt"
        );
        assert_eq!(
            resolve(wd, Path::new("./a")).unwrap(),
            "/home/sprite/workspace/a"
        );
        assert_eq!(resolve(wd, Path::new("")).unwrap(), wd);
        assert_eq!(resolve(wd, Path::new(".")).unwrap(), wd);
        assert_eq!(resolve(wd, Path::new("/etc/hosts")).unwrap(), "/etc/hosts");
        assert_eq!(resolve("/", Path::new("x")).unwrap(), "/x");
        assert!(resolve(wd, Path::new("a\0b")).is_err());
    }
}

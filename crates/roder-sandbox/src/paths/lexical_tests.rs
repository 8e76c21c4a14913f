//! The lexical rules, by example and by property (folding never escapes the
//! root, is idempotent, and no byte string panics).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use proptest::prelude::*;

use super::*;

fn root() -> PathBuf {
    PathBuf::from("/work/repo")
}

fn confinement<'a>(read_roots: &'a [PathBuf], allow_vcs_metadata: bool) -> Confinement<'a> {
    Confinement {
        root: Path::new("/work/repo"),
        read_roots,
        label: "workspace",
        allow_vcs_metadata,
    }
}

fn write(requested: &str) -> Result<Confined, PathError> {
    confinement(&[], false).resolve(&root(), Path::new(requested), Access::Write)
}

fn relative(confined: &Confined) -> &Path {
    match &confined.location {
        Location::Root(relative) => relative,
        Location::ReadRoot => panic!("not under the root: {confined:?}"),
    }
}

#[test]
fn normalize_is_lexical() {
    assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
    assert_eq!(normalize(Path::new("/../../etc")), PathBuf::from("/etc"));
    assert_eq!(normalize(Path::new("a/../../b")), PathBuf::from("../b"));
    assert_eq!(normalize(Path::new("/a/b/")), PathBuf::from("/a/b"));
    assert_eq!(normalize(Path::new("./")), PathBuf::new());
}

#[test]
fn relative_and_absolute_paths_inside_the_root() {
    let resolved = write("src/main.rs").unwrap();
    assert_eq!(resolved.absolute, PathBuf::from("/work/repo/src/main.rs"));
    assert_eq!(relative(&resolved), Path::new("src/main.rs"));
    assert_eq!(
        relative(&write("/work/repo/out.txt").unwrap()),
        Path::new("out.txt")
    );
    assert_eq!(relative(&write("/work/repo/").unwrap()), Path::new(""));
    assert_eq!(relative(&write(".").unwrap()), Path::new(""));
    assert_eq!(relative(&write("").unwrap()), Path::new(""));
    assert_eq!(
        relative(&write("src/../README.md").unwrap()),
        Path::new("README.md")
    );
    // An absolute path is folded before the check.
    assert_eq!(
        relative(&write("/work/x/../repo/y").unwrap()),
        Path::new("y")
    );
}

#[test]
fn escapes_are_refused_naming_the_path_and_root() {
    let error = write("../x").unwrap_err().to_string();
    assert!(
        error
            .starts_with(r#"path "../x" is outside the workspace /work/repo: its '..' climbs out"#),
        "{error}"
    );
    let error = write("/etc/passwd").unwrap_err().to_string();
    assert_eq!(
        error,
        r#"path "/etc/passwd" is outside the workspace /work/repo"#
    );
    assert!(write("a/../../repo2/x").is_err());
    // Stricter than a join-then-fold: a `..` that climbs above the root is
    // refused even when the path comes back in.
    assert!(write("../repo/x").is_err());
    assert!(write("a/../../repo/x").is_err());
    // A sibling whose name starts with the root's name is not under it.
    assert!(write("/work/repository/x").is_err());
}

#[test]
fn relative_paths_start_at_the_base_and_stop_at_the_root() {
    let base = Path::new("/work/repo/sub");
    let c = confinement(&[], false);
    let resolved = c
        .resolve(base, Path::new("../top.txt"), Access::Write)
        .unwrap();
    assert_eq!(resolved.absolute, PathBuf::from("/work/repo/top.txt"));
    assert!(
        c.resolve(base, Path::new("../../x"), Access::Write)
            .is_err()
    );
    assert_eq!(
        c.resolve(base, Path::new(""), Access::Write)
            .unwrap()
            .absolute,
        base
    );
}

#[test]
fn read_roots_widen_reads_only() {
    let read_roots = vec![PathBuf::from("/opt/docs")];
    let c = confinement(&read_roots, false);
    let read = c
        .resolve(&root(), Path::new("/opt/docs/a.md"), Access::Read)
        .unwrap();
    assert_eq!(read.location, Location::ReadRoot);
    let error = c
        .resolve(&root(), Path::new("/opt/docs/a.md"), Access::Write)
        .unwrap_err()
        .to_string();
    assert!(error.contains("never writable"), "{error}");
    let error = c
        .resolve(&root(), Path::new("/opt/other"), Access::Read)
        .unwrap_err()
        .to_string();
    assert!(error.contains("read roots (/opt/docs)"), "{error}");
    assert!(
        c.resolve(&root(), Path::new("/opt/docs/../x"), Access::Read)
            .is_err()
    );
    // Relative paths never reach a read root: `..` cannot leave the root.
    assert!(
        c.resolve(&root(), Path::new("../../opt/docs/a.md"), Access::Read)
            .is_err()
    );
    // A relative read root counts for nothing.
    let relative_roots = vec![PathBuf::from("docs")];
    let c = confinement(&relative_roots, false);
    assert!(
        c.resolve(&root(), Path::new("/docs/a"), Access::Read)
            .is_err()
    );
}

#[test]
fn git_metadata_writes_need_the_bypass_policy() {
    let error = write(".git/config").unwrap_err().to_string();
    assert!(
        error.contains(r#"path ".git/config" is inside a .git directory"#),
        "{error}"
    );
    assert!(write("sub/.git/hooks/pre-commit").is_err());
    let bypass = confinement(&[], true);
    assert!(
        bypass
            .resolve(&root(), Path::new(".git/config"), Access::Write)
            .is_ok()
    );
    let strict = confinement(&[], false);
    assert!(
        strict
            .resolve(&root(), Path::new(".git/config"), Access::Read)
            .is_ok()
    );
    assert!(
        strict
            .resolve(&root(), Path::new(".git"), Access::Workdir)
            .is_ok()
    );
    assert!(write(".gitignore").is_ok());
    assert!(write("x.git/y").is_ok());
}

#[test]
fn nul_bytes_are_refused() {
    let error = write("a\0b").unwrap_err().to_string();
    assert!(error.contains("NUL"), "{error}");
    assert!(runner_path("/w", Path::new("a\0b"), "workspace").is_err());
}

#[test]
fn display_names_paths_under_the_root_relatively() {
    assert_eq!(display_path(Path::new("/w"), Some(Path::new(""))), ".");
    assert_eq!(display_path(Path::new("/w/a"), Some(Path::new("a"))), "a");
    assert_eq!(display_path(Path::new("/opt/d"), None), "/opt/d");
}

const WD: &str = "/home/sprite/workspace";

fn runner(requested: &str) -> Result<String, PathError> {
    runner_path(WD, Path::new(requested), "workspace")
}

#[test]
fn runner_paths_fold_and_stay_in_the_workspace() {
    assert_eq!(runner("a/b.txt").unwrap(), format!("{WD}/a/b.txt"));
    assert_eq!(runner("a/b/../../c/./d/").unwrap(), format!("{WD}/c/d"));
    assert_eq!(runner("").unwrap(), WD);
    assert_eq!(runner(".").unwrap(), WD);
    assert_eq!(runner("a/..").unwrap(), WD);
    for escaping in ["..", "../x", "a/../../x", "../workspace/x", "./.."] {
        let error = runner(escaping).unwrap_err().to_string();
        assert!(
            error.contains(&format!("climbs out of the workspace {WD}")),
            "{escaping}: {error}"
        );
    }
    // Absolute runner paths are the runtime's choice: folded, `..` stops at `/`.
    assert_eq!(runner("/etc/../data/./f").unwrap(), "/data/f");
    assert_eq!(runner("/a/../../etc/x").unwrap(), "/etc/x");
    assert_eq!(runner("/..").unwrap(), "/");
    assert_eq!(runner_path("/", Path::new("a/../b"), "w").unwrap(), "/b");
    assert_eq!(runner_path("/", Path::new("x"), "w").unwrap(), "/x");
    // Stricter than the docker copy was: `..` above a `/` workspace too.
    assert!(runner_path("/", Path::new(".."), "w").is_err());
    let not_utf8 = Path::new(OsStr::from_bytes(b"a\xff"));
    let error = runner_path(WD, not_utf8, "workspace")
        .unwrap_err()
        .to_string();
    assert!(error.contains("not valid UTF-8"), "{error}");
}

fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("..".to_string()),
        Just(".".to_string()),
        Just(String::new()),
        Just("repo".to_string()),
        Just("work".to_string()),
        Just(".git".to_string()),
        "[a-z]{1,3}",
        "[^/\0]{1,4}",
    ]
}

fn folded(path: &Path) -> bool {
    path.components()
        .all(|c| !matches!(c, Component::ParentDir | Component::CurDir))
}

proptest! {
    #[test]
    fn confined_paths_never_leave_the_root(
        absolute in any::<bool>(),
        parts in proptest::collection::vec(component(), 0..10),
    ) {
        let requested = format!("{}{}", if absolute { "/" } else { "" }, parts.join("/"));
        if let Ok(resolved) = write(&requested) {
            prop_assert!(resolved.absolute.starts_with(root()));
            prop_assert!(folded(&resolved.absolute));
            let relative = relative(&resolved).to_path_buf();
            prop_assert_eq!(root().join(&relative), resolved.absolute.clone());
            prop_assert!(!is_vcs_metadata(&relative));
            // Resolving the result again changes nothing.
            let again = write(&resolved.absolute.to_string_lossy()).unwrap();
            prop_assert_eq!(again, resolved);
        }
    }

    #[test]
    fn relative_escapes_are_exactly_the_climbs_above_the_root(
        parts in proptest::collection::vec(component(), 0..10),
    ) {
        let requested = parts.join("/");
        prop_assume!(!requested.starts_with('/'));
        let mut depth = 0i64;
        let mut climbs = false;
        for part in &parts {
            match part.as_str() {
                "" | "." => {}
                ".." => {
                    depth -= 1;
                    climbs |= depth < 0;
                }
                _ => depth += 1,
            }
        }
        let result = runner(&requested);
        prop_assert_eq!(result.is_err(), climbs, "{:?} -> {:?}", requested, result);
        if let Ok(resolved) = result {
            prop_assert!(resolved == WD || resolved.starts_with(&format!("{WD}/")), "{}", resolved);
            prop_assert!(!resolved.contains("//"), "{}", resolved);
            prop_assert_eq!(runner(&resolved).unwrap(), resolved);
        }
    }

    #[test]
    fn normalize_is_idempotent(
        absolute in any::<bool>(),
        parts in proptest::collection::vec(component(), 0..10),
    ) {
        let path = PathBuf::from(format!("{}{}", if absolute { "/" } else { "" }, parts.join("/")));
        let once = normalize(&path);
        prop_assert_eq!(normalize(&once), once.clone());
        if absolute {
            prop_assert!(folded(&once));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..64),
        base in proptest::collection::vec(any::<u8>(), 0..16),
        access in prop_oneof![Just(Access::Read), Just(Access::Write), Just(Access::Workdir)],
    ) {
        let requested = Path::new(OsStr::from_bytes(&bytes));
        let base = Path::new(OsStr::from_bytes(&base));
        let read_roots = vec![PathBuf::from("/opt")];
        let _ = confinement(&read_roots, false).resolve(base, requested, access);
        let _ = confinement(&read_roots, false).resolve(&root(), requested, access);
        let _ = runner_path(&String::from_utf8_lossy(base.as_os_str().as_encoded_bytes()), requested, "w");
        let _ = normalize(requested);
        if let Ok(resolved) = confinement(&[], false).resolve(&root(), requested, access) {
            prop_assert!(resolved.absolute.starts_with(root()));
            prop_assert!(folded(&resolved.absolute));
        }
    }
}

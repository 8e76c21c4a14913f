//! The host rules against a real filesystem (temporary directories and
//! symlinks).

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use super::*;

fn open(dir: &Path) -> ConfinedRoot {
    ConfinedRoot::open(dir, "runner root").unwrap()
}

#[test]
fn resolves_relative_and_absolute_paths_inside_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = open(dir.path());
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let canonical = root.canonical().to_path_buf();
    let given = root.given().to_path_buf();
    assert_eq!(
        root.resolve(&given, Path::new("sub/new/file.txt")).unwrap(),
        canonical.join("sub/new/file.txt")
    );
    assert_eq!(
        root.resolve(&given, &dir.path().join("sub/../x")).unwrap(),
        canonical.join("x")
    );
    // The canonical spelling of the root works as the given one does.
    assert_eq!(
        root.resolve(&given, &canonical.join("x")).unwrap(),
        canonical.join("x")
    );
    assert_eq!(root.resolve(&given, Path::new("")).unwrap(), canonical);
    assert_eq!(root.resolve(&given, Path::new(".")).unwrap(), canonical);
}

#[test]
fn relative_paths_resolve_against_the_base_inside_the_root() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
    let root = open(dir.path());
    let canonical = root.canonical().to_path_buf();
    let base = canonical.join("sub");
    assert_eq!(
        root.resolve(&base, Path::new("new/file.txt")).unwrap(),
        canonical.join("sub/new/file.txt")
    );
    assert_eq!(
        root.resolve(&base, Path::new("../top.txt")).unwrap(),
        canonical.join("top.txt")
    );
    assert_eq!(root.resolve(&base, Path::new("")).unwrap(), base);
    let error = root.resolve(&base, Path::new("../../x")).unwrap_err();
    assert!(
        error.to_string().contains("climbs out of the runner root"),
        "{error}"
    );
}

#[test]
fn refuses_dot_dot_escapes_and_foreign_absolute_paths() {
    let dir = tempfile::tempdir().unwrap();
    let root = open(dir.path());
    let given = root.given().to_path_buf();
    let error = root.resolve(&given, Path::new("../outside")).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(r#"path "../outside" is outside the runner root"#),
        "{error}"
    );
    let error = root.resolve(&given, Path::new("/etc/passwd")).unwrap_err();
    assert!(
        error.to_string().contains(r#""/etc/passwd" is outside"#),
        "{error}"
    );
}

#[test]
fn refuses_symlinks_that_leave_the_root_or_dangle() {
    let outside = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = open(dir.path());
    let given = root.given().to_path_buf();
    symlink(outside.path(), dir.path().join("link")).unwrap();
    symlink("/nonexistent/target", dir.path().join("dangling")).unwrap();
    symlink("sub", dir.path().join("inner")).unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();

    let error = root.resolve(&given, Path::new("link/secret")).unwrap_err();
    assert!(
        error
            .to_string()
            .contains(r#""link/secret" resolves through a symbolic link"#),
        "{error}"
    );
    for dangling in ["dangling", "dangling/below"] {
        let error = root.resolve(&given, Path::new(dangling)).unwrap_err();
        assert!(
            error.to_string().contains("cannot be resolved")
                && error.to_string().contains("dangling symbolic link"),
            "{error}"
        );
    }
    assert_eq!(
        root.resolve(&given, Path::new("inner/f")).unwrap(),
        root.canonical().join("sub/f")
    );
}

#[test]
fn resolve_dir_names_what_is_missing_or_not_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("file"), "x").unwrap();
    let root = open(dir.path());
    let given = root.given().to_path_buf();
    let error = root
        .resolve_dir(&given, Path::new("missing"), "working directory")
        .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(r#"working directory "missing" does not exist"#),
        "{error}"
    );
    let error = root
        .resolve_dir(&given, Path::new("file"), "working directory")
        .unwrap_err();
    assert!(error.to_string().contains("is not a directory"), "{error}");
    assert!(ConfinedRoot::open(&dir.path().join("file"), "runner root").is_err());
    let error = ConfinedRoot::open(&dir.path().join("nope"), "runner root").unwrap_err();
    assert!(error.to_string().contains("cannot be resolved"), "{error}");
}

#[test]
fn real_path_keeps_the_missing_rest() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("file"), "x").unwrap();
    let canonical = std::fs::canonicalize(dir.path()).unwrap();
    let missing = dir.path().join("a/b/c");
    assert_eq!(
        real_path(&missing, Path::new("a/b/c")).unwrap(),
        canonical.join("a/b/c")
    );
    // Below a file: the rest is missing; the operation fails later.
    assert_eq!(
        real_path(&dir.path().join("file/x"), Path::new("file/x")).unwrap(),
        canonical.join("file/x")
    );
}

#[test]
fn check_real_follows_links_for_reads_and_writes() {
    let dir = tempfile::tempdir().unwrap();
    let docs = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    symlink(docs.path(), dir.path().join("docs")).unwrap();
    symlink(outside.path(), dir.path().join("out")).unwrap();
    symlink(".git", dir.path().join("meta")).unwrap();
    let read_roots = vec![docs.path().to_path_buf()];
    let confinement = Confinement {
        root: dir.path(),
        read_roots: &read_roots,
        label: "workspace",
        allow_vcs_metadata: false,
    };
    let check = |requested: &str, access: Access| {
        let requested = PathBuf::from(requested);
        let confined = confinement.resolve(dir.path(), &requested, access)?;
        check_real(&confinement, &confined, &requested, access)
    };
    assert!(check("docs/a.md", Access::Read).is_ok());
    let error = check("docs/a.md", Access::Write).unwrap_err().to_string();
    assert!(error.contains("leaves the workspace"), "{error}");
    assert!(error.contains("outside the workspace"), "{error}");
    assert!(check("out/x", Access::Read).is_err());
    let error = check("meta/config", Access::Write).unwrap_err().to_string();
    assert!(
        error.contains("symbolic link into a .git directory"),
        "{error}"
    );
    assert!(check("meta/config", Access::Read).is_ok());
    assert!(check("new/file", Access::Write).is_ok());
}

#[test]
fn a_root_reached_through_a_symlink_answers_to_both_spellings() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("real/sub")).unwrap();
    symlink(dir.path().join("real"), dir.path().join("alias")).unwrap();
    let root = open(&dir.path().join("alias"));
    let canonical = std::fs::canonicalize(dir.path().join("real")).unwrap();
    assert_eq!(root.canonical(), canonical);
    assert_eq!(root.given(), dir.path().join("alias"));
    let expected = canonical.join("sub/f");
    for base in [root.given().to_path_buf(), canonical.clone()] {
        assert_eq!(root.resolve(&base, Path::new("sub/f")).unwrap(), expected);
        assert_eq!(
            root.resolve(&base, &dir.path().join("alias/sub/f"))
                .unwrap(),
            expected
        );
        assert_eq!(
            root.resolve(&base, &canonical.join("sub/f")).unwrap(),
            expected
        );
        assert!(root.resolve(&base, Path::new("../x")).is_err());
        let error = root
            .resolve(&base, &dir.path().join("elsewhere"))
            .unwrap_err();
        assert!(
            error.to_string().contains("outside the runner root"),
            "{error}"
        );
    }
    // A working directory inside the canonical spelling stops at the root.
    let sub = canonical.join("sub");
    assert_eq!(
        root.resolve(&sub, Path::new("../g")).unwrap(),
        canonical.join("g")
    );
    assert!(root.resolve(&sub, Path::new("../../real/g")).is_err());
}

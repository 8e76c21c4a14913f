//! Records the git commit the binary is built from as `RODER_GIT_COMMIT`
//! (for `roder --version`): `unknown` when the sources are not a git
//! checkout of this crate (a source tarball) or git is missing.

#[path = "build/git_commit.rs"]
mod git_commit;

fn main() {
    let dir = std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = git_commit::commit(&dir);
    println!(
        "cargo:rustc-env=RODER_GIT_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/git_commit.rs");
    if commit.is_some() {
        for path in git_commit::watched(&dir) {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

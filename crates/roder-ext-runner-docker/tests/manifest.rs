//! Manifest entries copied into a new container (a read-only one cannot be
//! written) and the work exported out again, as a tar and as a patch,
//! against the real daemon. The host copies are never touched.

mod support;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use roder_api::remote_runner::{
    RemoteRunnerProvider, RunnerArtifactExportRequest, RunnerArtifactFormat,
    RunnerFileWriteRequest, RunnerManifest, RunnerManifestEntry,
};
use serde_json::json;
use support::*;

fn project(root: &Path) {
    std::fs::create_dir_all(root.join("proj/pkg")).unwrap();
    std::fs::write(root.join("proj/pkg/mod.py"), "def f():\n    return 1\n").unwrap();
    std::fs::write(root.join("proj/README"), "readme\n").unwrap();
    std::fs::write(root.join("proj/old.txt"), "to be deleted\n").unwrap();
    std::fs::write(root.join("proj/blob.bin"), vec![7u8; 1 << 20]).unwrap();
    std::fs::create_dir_all(root.join("ref")).unwrap();
    std::fs::write(root.join("ref/spec.txt"), "the spec\n").unwrap();
}

fn manifest(root: &Path) -> RunnerManifest {
    RunnerManifest {
        entries: vec![
            RunnerManifestEntry {
                source: root.join("proj"),
                target: "proj".into(),
                writable: true,
            },
            RunnerManifestEntry {
                source: root.join("ref"),
                target: "/workspace/ref".into(),
                writable: false,
            },
        ],
        mounts: Vec::new(),
    }
}

fn untar(path: &Path) -> BTreeMap<String, Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    let mut archive = tar::Archive::new(bytes.as_slice());
    let mut files = BTreeMap::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.header().entry_type().is_file() {
            let name = entry.path().unwrap().display().to_string();
            let mut contents = Vec::new();
            entry.read_to_end(&mut contents).unwrap();
            files.insert(name, contents);
        }
    }
    files
}

#[tokio::test]
async fn manifest_entries_go_in_and_the_work_comes_out() {
    let Some(provider) = provider("manifest_entries_go_in_and_the_work_comes_out").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let host = tempfile::tempdir().unwrap();
    project(host.path());
    let mut destination = destination(
        "thread-t-manifest",
        label.config(json!({"user": "1000:1000"})),
    );
    destination.default_manifest = manifest(host.path());
    provider.validate_destination(&destination).await.unwrap();
    let session = provider.create_session(destination).await.unwrap();

    let listing = run(
        session.as_ref(),
        "cat proj/pkg/mod.py ref/spec.txt; wc -c < proj/blob.bin; stat -c '%u %a %n' proj proj/pkg/mod.py ref ref/spec.txt",
    )
    .await;
    assert_eq!(listing.exit_code, Some(0), "{listing:?}");
    assert!(
        listing
            .stdout
            .starts_with("def f():\n    return 1\nthe spec\n1048576\n"),
        "{listing:?}"
    );
    assert!(
        listing.stdout.contains("1000 644 proj/pkg/mod.py"),
        "{listing:?}"
    );
    assert!(listing.stdout.contains("0 444 ref/spec.txt"), "{listing:?}");
    assert!(listing.stdout.contains("0 555 ref\n"), "{listing:?}");

    // The read-only entry cannot be written, by a tool or a command.
    let error = session
        .write_file(RunnerFileWriteRequest {
            path: "ref/spec.txt".into(),
            contents: b"changed\n".to_vec(),
        })
        .await
        .unwrap_err();
    assert!(
        format!("{error:#}").contains("ermission denied"),
        "{error:#}"
    );
    let attempt = run(
        session.as_ref(),
        "echo changed > ref/spec.txt; echo new > ref/new.txt; rm -f ref/spec.txt; cat ref/spec.txt",
    )
    .await;
    assert_eq!(attempt.stdout, "the spec\n", "{attempt:?}");

    // Work on the writable entry: an edit, a new file, a deletion.
    session
        .write_file(RunnerFileWriteRequest {
            path: "proj/pkg/mod.py".into(),
            contents: b"def f():\n    return 2\n".to_vec(),
        })
        .await
        .unwrap();
    run(
        session.as_ref(),
        "echo added > proj/pkg/new.py && rm proj/old.txt",
    )
    .await;

    let out = tempfile::tempdir().unwrap();
    let export = |path: &str, recursive: bool, format: RunnerArtifactFormat| {
        session.export_artifact(RunnerArtifactExportRequest {
            path: path.into(),
            recursive,
            format,
            output_dir: Some(out.path().to_path_buf()),
        })
    };
    let tar = export("proj", true, RunnerArtifactFormat::Tar)
        .await
        .unwrap();
    let file = tar.url.as_deref().unwrap().strip_prefix("file://").unwrap();
    let files = untar(Path::new(file));
    assert_eq!(files["proj/pkg/mod.py"], b"def f():\n    return 2\n");
    assert_eq!(files["proj/pkg/new.py"], b"added\n");
    assert_eq!(files["proj/blob.bin"].len(), 1 << 20);
    assert!(!files.contains_key("proj/old.txt"), "{:?}", files.keys());

    let patch = export("proj", true, RunnerArtifactFormat::Patch)
        .await
        .unwrap();
    assert_eq!(patch.metadata["files_changed"], 3, "{:?}", patch.metadata);
    let file = patch
        .url
        .as_deref()
        .unwrap()
        .strip_prefix("file://")
        .unwrap();
    let text = std::fs::read_to_string(file).unwrap();
    assert!(
        text.contains("--- a/pkg/mod.py\n+++ b/pkg/mod.py\n"),
        "{text}"
    );
    assert!(text.contains("-    return 1\n+    return 2\n"), "{text}");
    assert!(text.contains("--- /dev/null\n+++ b/pkg/new.py\n"), "{text}");
    assert!(text.contains("--- a/old.txt\n+++ /dev/null\n"), "{text}");

    let error = export("proj", false, RunnerArtifactFormat::Tar)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("recursive"), "{error}");
    let error = export("/etc", true, RunnerArtifactFormat::Patch)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("copied in"), "{error}");

    // Nothing reached the host copies.
    assert_eq!(
        std::fs::read_to_string(host.path().join("proj/pkg/mod.py")).unwrap(),
        "def f():\n    return 1\n"
    );
    assert!(host.path().join("proj/old.txt").exists());
    assert!(!host.path().join("proj/pkg/new.py").exists());
    session.close().await.unwrap();
    assert!(label.containers().await.is_empty());
}

#[tokio::test]
async fn a_read_only_entry_needs_a_user_root_cannot_be_held_to() {
    let Some(provider) = provider("a_read_only_entry_needs_a_user").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let host = tempfile::tempdir().unwrap();
    project(host.path());
    let mut destination = destination("thread-t-manifest-root", label.config(json!({})));
    destination.default_manifest = manifest(host.path());
    let error = provider
        .validate_destination(&destination)
        .await
        .unwrap_err();
    assert!(
        format!("{error:#}").contains("non-root `user`"),
        "{error:#}"
    );
    destination.default_manifest.entries[0].source = "relative/dir".into();
    let error = provider.create_session(destination).await.err().unwrap();
    assert!(
        format!("{error:#}").contains("absolute host path"),
        "{error:#}"
    );
    assert!(label.containers().await.is_empty());
}

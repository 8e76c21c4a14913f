//! `export_artifact`: the work out of the sandbox, as a host file.
//!
//! * `tar`: the path (a file, or with `recursive` a directory and
//!   everything under it) as the archive API hands it out, one download.
//! * `patch`: a unified diff of the path against the manifest entry it was
//!   copied in from, i.e. against that entry's source **as it is on the
//!   host now** (the container keeps no pristine copy). Paths in the patch
//!   are relative to the entry's target (`a/…`, `b/…`), so `patch -p1` (or
//!   `git apply`) in the source directory applies it. Files that are not
//!   UTF-8 text are listed as differing, not diffed.
//!
//! The file goes to the request's `output_dir`, or to
//! `$TMPDIR/roder-artifacts`; the result's `url` is its `file://` URL.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use bollard::Docker;
use bollard::query_parameters::DownloadFromContainerOptionsBuilder;
use futures::StreamExt;
use roder_api::remote_runner::{
    RunnerArtifactExportRequest, RunnerArtifactExportResult, RunnerArtifactFormat,
};
use serde_json::json;

use crate::client::{is_not_found, message_of};
use crate::manifest::Entry;

/// Most bytes one export may download.
pub const MAX_EXPORT_BYTES: usize = 1 << 30;

/// Exports absolute container `path` of `container` as `request` asks.
pub async fn export(
    docker: &Docker,
    container: &str,
    path: &str,
    manifest: &[Entry],
    request: RunnerArtifactExportRequest,
) -> anyhow::Result<RunnerArtifactExportResult> {
    let tar = download(docker, container, path).await?;
    let (tree, top_is_dir) = unpack(&tar)?;
    if top_is_dir && !request.recursive {
        bail!("`{path}` is a directory; export it with `recursive`");
    }
    let output_dir = request
        .output_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("roder-artifacts"));
    let short = container.get(..12).unwrap_or(container);
    let artifact_id = format!("{short}-{}", crate::labels::name_suffix());
    let (contents, extension, metadata) = match request.format {
        RunnerArtifactFormat::Tar => {
            let files = tree.len();
            let bytes = tar.len();
            (
                tar,
                "tar",
                json!({"format": "tar", "files": files, "bytes": bytes}),
            )
        }
        RunnerArtifactFormat::Patch => {
            let (entry, source) = source_of(path, manifest)?;
            let host_tree = tokio::task::spawn_blocking(move || read_host_tree(&source)).await??;
            let (patch, changed) = diff(&host_tree, &tree);
            (
                patch.into_bytes(),
                "patch",
                json!({
                    "format": "patch",
                    "files_changed": changed,
                    "against": entry.source,
                    "target": entry.target,
                }),
            )
        }
    };
    let file = output_dir.join(format!("{artifact_id}.{extension}"));
    let written = file.clone();
    tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&output_dir)?;
        std::fs::write(&written, contents)
    })
    .await?
    .with_context(|| format!("cannot write the artifact to {}", file.display()))?;
    let mut metadata = metadata;
    if let Some(object) = metadata.as_object_mut() {
        object.insert("file".to_string(), json!(file));
    }
    Ok(RunnerArtifactExportResult {
        path: request.path,
        artifact_id,
        url: Some(format!("file://{}", file.display())),
        metadata,
    })
}

async fn download(docker: &Docker, container: &str, path: &str) -> anyhow::Result<Vec<u8>> {
    let options = DownloadFromContainerOptionsBuilder::default()
        .path(path)
        .build();
    let mut stream = docker.download_from_container(container, Some(options));
    let mut tar = Vec::new();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(chunk) => {
                tar.extend_from_slice(&chunk);
                if tar.len() > MAX_EXPORT_BYTES {
                    bail!("`{path}` is larger than the {MAX_EXPORT_BYTES}-byte export limit");
                }
            }
            Err(error) if is_not_found(&error) => bail!("no such file `{path}` in the container"),
            Err(error) => bail!("cannot export `{path}`: {}", message_of(&error)),
        }
    }
    Ok(tar)
}

/// The regular files of an archive-API tar, by path below its top entry,
/// and whether the top entry is a directory.
fn unpack(tar: &[u8]) -> anyhow::Result<(BTreeMap<String, Vec<u8>>, bool)> {
    let mut files = BTreeMap::new();
    let mut top_is_dir = false;
    let mut archive = tar::Archive::new(tar);
    for (index, entry) in archive.entries()?.enumerate() {
        let mut entry = entry?;
        let name = entry.path()?.to_string_lossy().into_owned();
        if index == 0 {
            top_is_dir = entry.header().entry_type().is_dir();
        }
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let below = match name.split_once('/') {
            Some((_, rest)) => rest.to_string(),
            None => String::new(),
        };
        let mut contents = Vec::new();
        entry.read_to_end(&mut contents)?;
        files.insert(below, contents);
    }
    Ok((files, top_is_dir))
}

/// The manifest entry `path` lies in, and the host path it came from.
fn source_of<'a>(path: &str, manifest: &'a [Entry]) -> anyhow::Result<(&'a Entry, PathBuf)> {
    let entry = manifest
        .iter()
        .filter(|entry| {
            path == entry.target
                || path
                    .strip_prefix(entry.target.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        })
        .max_by_key(|entry| entry.target.len());
    let Some(entry) = entry else {
        let targets: Vec<&str> = manifest.iter().map(|entry| entry.target.as_str()).collect();
        bail!(
            "a patch is taken against the manifest entry a path was copied in from, and `{path}` is in none (copied in: {})",
            if targets.is_empty() {
                "nothing".to_string()
            } else {
                targets.join(", ")
            }
        );
    };
    let below = path
        .strip_prefix(entry.target.as_str())
        .unwrap_or_default()
        .trim_start_matches('/');
    let source = if below.is_empty() {
        entry.source.clone()
    } else {
        entry.source.join(below)
    };
    Ok((entry, source))
}

/// The regular files under a host path (itself, if it is a file), by path
/// below it.
fn read_host_tree(root: &Path) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    let mut files = BTreeMap::new();
    let Ok(metadata) = std::fs::symlink_metadata(root) else {
        return Ok(files);
    };
    if metadata.is_file() {
        files.insert(String::new(), std::fs::read(root)?);
        return Ok(files);
    }
    let mut pending = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = pending.pop() {
        for child in std::fs::read_dir(&dir)? {
            let child = child?;
            let name = child.file_name().to_string_lossy().into_owned();
            let below = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let file_type = child.file_type()?;
            if file_type.is_dir() {
                pending.push((child.path(), below));
            } else if file_type.is_file() {
                files.insert(below, std::fs::read(child.path())?);
            }
        }
    }
    Ok(files)
}

/// A file's contents as text: empty when absent, `None` when binary.
fn text(bytes: Option<&Vec<u8>>) -> Option<&str> {
    match bytes {
        None => Some(""),
        Some(bytes) if bytes.contains(&0) => None,
        Some(bytes) => std::str::from_utf8(bytes).ok(),
    }
}

/// A unified diff from `before` (host) to `after` (container), and how
/// many files differ.
pub fn diff(
    before: &BTreeMap<String, Vec<u8>>,
    after: &BTreeMap<String, Vec<u8>>,
) -> (String, usize) {
    let mut patch = String::new();
    let mut changed = 0;
    let names: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for name in names {
        let old = before.get(name);
        let new = after.get(name);
        if old == new {
            continue;
        }
        changed += 1;
        let shown = if name.is_empty() {
            "file"
        } else {
            name.as_str()
        };
        let old_header = if old.is_some() {
            format!("a/{shown}")
        } else {
            "/dev/null".to_string()
        };
        let new_header = if new.is_some() {
            format!("b/{shown}")
        } else {
            "/dev/null".to_string()
        };
        match (text(old), text(new)) {
            (Some(old), Some(new)) => {
                patch.push_str(&format!("diff -u {old_header} {new_header}\n"));
                let unified = similar::TextDiff::from_lines(old, new)
                    .unified_diff()
                    .context_radius(3)
                    .header(&old_header, &new_header)
                    .to_string();
                patch.push_str(&unified);
                if !unified.ends_with('\n') {
                    patch.push('\n');
                }
            }
            _ => patch.push_str(&format!(
                "Binary files {old_header} and {new_header} differ\n"
            )),
        }
    }
    (patch, changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_names_edited_new_and_deleted_files() {
        let before = BTreeMap::from([
            ("a.txt".to_string(), b"one\ntwo\n".to_vec()),
            ("gone.txt".to_string(), b"bye\n".to_vec()),
            ("same.txt".to_string(), b"same\n".to_vec()),
        ]);
        let after = BTreeMap::from([
            ("a.txt".to_string(), b"one\nthree\n".to_vec()),
            ("new.bin".to_string(), vec![0, 1, 2]),
            ("same.txt".to_string(), b"same\n".to_vec()),
        ]);
        let (patch, changed) = diff(&before, &after);
        assert_eq!(changed, 3);
        assert!(patch.contains("--- a/a.txt\n+++ b/a.txt\n"), "{patch}");
        assert!(patch.contains("-two\n+three\n"), "{patch}");
        assert!(patch.contains("--- a/gone.txt\n+++ /dev/null\n"), "{patch}");
        assert!(
            patch.contains("Binary files /dev/null and b/new.bin differ"),
            "{patch}"
        );
        assert!(!patch.contains("same.txt"), "{patch}");
    }
}

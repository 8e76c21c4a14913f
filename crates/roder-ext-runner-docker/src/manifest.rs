//! Manifest entries (seed 003): host files and directories copied into a
//! new container, so a user's repository gets into the sandbox without a
//! bind mount through which the container could write on the host.
//!
//! Every entry goes in with one archive upload per writable root (one for
//! an unconfined container), never one call per file. A writable entry's
//! files belong to the container's user; a read-only entry's belong to
//! root with every write bit cleared, which binds a non-root user only, so
//! a read-only entry in a container whose user is root is refused.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use bollard::Docker;
use bollard::query_parameters::UploadToContainerOptionsBuilder;
use roder_api::remote_runner::RunnerManifest;
use serde::{Deserialize, Serialize};

use crate::archive::{WriteRules, writable_base};
use crate::client::message_of;
use crate::config::{DockerConfig, parse_user};
use crate::paths;

/// One entry, checked: an absolute host source and container target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub source: PathBuf,
    pub target: String,
    pub writable: bool,
}

/// What a copy moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Copied {
    pub files: usize,
    pub bytes: u64,
}

/// Checks `manifest` against `config`: sources exist, targets resolve
/// (relative ones under the workspace) and are writable in the container,
/// read-only entries have a non-root user to bind.
pub fn plan(
    manifest: &RunnerManifest,
    config: &DockerConfig,
    rules: &WriteRules,
) -> anyhow::Result<Vec<Entry>> {
    if !manifest.mounts.is_empty() {
        bail!(
            "the docker runner does not take manifest mounts; use the config's `mounts` for host directories"
        );
    }
    let root_user = config
        .user
        .as_deref()
        .and_then(parse_user)
        .is_none_or(|(uid, _)| uid == 0);
    manifest
        .entries
        .iter()
        .map(|entry| {
            if !entry.source.is_absolute() {
                bail!(
                    "manifest entry source {} must be an absolute host path",
                    entry.source.display()
                );
            }
            std::fs::symlink_metadata(&entry.source).with_context(|| {
                format!("manifest entry source {} cannot be read", entry.source.display())
            })?;
            let target = paths::resolve(&config.workdir, &entry.target)?;
            if !entry.writable && root_user {
                bail!(
                    "manifest entry {} is read-only, which needs a non-root `user` (e.g. \"1000:1000\"): root in the container can write any file",
                    entry.target.display()
                );
            }
            if let Some(writable) = &rules.writable
                && writable_base(&target, writable).is_none()
            {
                let mut roots = writable.clone();
                roots.sort();
                bail!(
                    "manifest entry target {target} is on the container's read-only root filesystem; only {} are writable",
                    roots.join(", ")
                );
            }
            Ok(Entry {
                source: entry.source.clone(),
                target,
                writable: entry.writable,
            })
        })
        .collect()
}

/// Copies `entries` into `container`: one tar per writable root, built off
/// the async threads.
pub async fn copy_in(
    docker: &Docker,
    container: &str,
    entries: &[Entry],
    rules: &WriteRules,
) -> anyhow::Result<Copied> {
    let mut groups: Vec<(String, Vec<Entry>)> = Vec::new();
    for entry in entries {
        let base = match &rules.writable {
            None => "/".to_string(),
            Some(writable) => writable_base(&entry.target, writable)
                .cloned()
                .with_context(|| format!("{} is not writable", entry.target))?,
        };
        match groups.iter_mut().find(|(existing, _)| *existing == base) {
            Some((_, group)) => group.push(entry.clone()),
            None => groups.push((base, vec![entry.clone()])),
        }
    }
    let mut copied = Copied::default();
    for (base, group) in groups {
        let owner = rules.owner;
        let pack_base = base.clone();
        let (tar, packed) =
            tokio::task::spawn_blocking(move || pack(&pack_base, &group, owner)).await??;
        let options = UploadToContainerOptionsBuilder::default()
            .path(base.as_str())
            .build();
        docker
            .upload_to_container(container, Some(options), bollard::body_full(tar.into()))
            .await
            .map_err(|error| {
                anyhow::anyhow!(
                    "cannot copy the manifest entries into {base}: {}",
                    message_of(&error)
                )
            })?;
        copied.files += packed.files;
        copied.bytes += packed.bytes;
    }
    Ok(copied)
}

/// The tar of `entries`, names relative to `base`.
pub fn pack(
    base: &str,
    entries: &[Entry],
    owner: Option<(u32, u32)>,
) -> anyhow::Result<(Vec<u8>, Copied)> {
    let mut packer = Packer {
        builder: tar::Builder::new(Vec::new()),
        copied: Copied::default(),
        mtime: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_secs())
            .unwrap_or(0),
    };
    for entry in entries {
        let name = entry
            .target
            .strip_prefix(base.trim_end_matches('/'))
            .unwrap_or(&entry.target)
            .trim_start_matches('/')
            .to_string();
        let owner = if entry.writable { owner } else { None };
        // Parents between the base and the target, so they belong to the
        // entry's owner rather than to the daemon's root.
        let parents: Vec<&str> = name
            .match_indices('/')
            .map(|(at, _)| name.get(..at).unwrap_or_default())
            .collect();
        for parent in parents {
            packer.directory(parent, 0o755, owner)?;
        }
        packer.add(&entry.source, &name, entry.writable, owner)?;
    }
    let tar = packer.builder.into_inner()?;
    Ok((tar, packer.copied))
}

struct Packer {
    builder: tar::Builder<Vec<u8>>,
    copied: Copied,
    mtime: u64,
}

impl Packer {
    fn header(&self, kind: tar::EntryType, mode: u32, owner: Option<(u32, u32)>) -> tar::Header {
        let (uid, gid) = owner.unwrap_or((0, 0));
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_mode(mode);
        header.set_uid(uid.into());
        header.set_gid(gid.into());
        header.set_mtime(self.mtime);
        header.set_size(0);
        header
    }

    fn directory(
        &mut self,
        name: &str,
        mode: u32,
        owner: Option<(u32, u32)>,
    ) -> anyhow::Result<()> {
        let mut header = self.header(tar::EntryType::Directory, mode, owner);
        self.builder
            .append_data(&mut header, format!("{name}/"), std::io::empty())?;
        Ok(())
    }

    /// Adds `source` (a file, a directory with everything under it, or a
    /// symbolic link, kept as a link) as `name`.
    fn add(
        &mut self,
        source: &Path,
        name: &str,
        writable: bool,
        owner: Option<(u32, u32)>,
    ) -> anyhow::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let metadata = std::fs::symlink_metadata(source)
            .with_context(|| format!("cannot read {}", source.display()))?;
        let mode = metadata.permissions().mode() & 0o7777;
        let mode = if writable { mode } else { mode & !0o222 };
        let file_type = metadata.file_type();
        if file_type.is_symlink() {
            let target = std::fs::read_link(source)?;
            let mut header = self.header(tar::EntryType::Symlink, 0o777, owner);
            self.builder.append_link(&mut header, name, target)?;
        } else if file_type.is_dir() {
            self.directory(name, mode, owner)?;
            let mut children: Vec<PathBuf> = std::fs::read_dir(source)
                .with_context(|| format!("cannot list {}", source.display()))?
                .map(|child| child.map(|child| child.path()))
                .collect::<Result<_, _>>()?;
            children.sort();
            for child in children {
                let Some(file_name) = child.file_name().and_then(|name| name.to_str()) else {
                    bail!("{} has a name that is not UTF-8", child.display());
                };
                self.add(&child, &format!("{name}/{file_name}"), writable, owner)?;
            }
        } else if file_type.is_file() {
            let mut header = self.header(tar::EntryType::Regular, mode, owner);
            header.set_size(metadata.len());
            let file = std::fs::File::open(source)
                .with_context(|| format!("cannot open {}", source.display()))?;
            self.builder.append_data(&mut header, name, file)?;
            self.copied.files += 1;
            self.copied.bytes += metadata.len();
        }
        // Sockets, FIFOs and devices are not copied: they are not content.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::is_under;

    fn names(tar: &[u8]) -> Vec<(String, u32, u64)> {
        let mut archive = tar::Archive::new(tar);
        archive
            .entries()
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                let header = entry.header();
                (
                    entry.path().unwrap().display().to_string(),
                    header.mode().unwrap(),
                    header.uid().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn a_directory_packs_with_its_owner_and_read_only_entries_lose_write_bits() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/sub")).unwrap();
        std::fs::write(dir.path().join("src/sub/a.txt"), "a").unwrap();
        std::fs::write(dir.path().join("ro.txt"), "ro").unwrap();
        let entries = [
            Entry {
                source: dir.path().join("src"),
                target: "/workspace/proj".to_string(),
                writable: true,
            },
            Entry {
                source: dir.path().join("ro.txt"),
                target: "/workspace/ref/ro.txt".to_string(),
                writable: false,
            },
        ];
        let (tar, copied) = pack("/workspace", &entries, Some((1000, 1000))).unwrap();
        assert_eq!(copied, Copied { files: 2, bytes: 3 });
        let names = names(&tar);
        assert!(
            names.contains(&("proj/sub/a.txt".to_string(), 0o644, 1000)),
            "{names:?}"
        );
        assert!(
            names
                .iter()
                .any(|(name, _, uid)| name == "proj/sub/" && *uid == 1000),
            "{names:?}"
        );
        assert!(
            names.contains(&("ref/ro.txt".to_string(), 0o444, 0)),
            "{names:?}"
        );
    }

    #[test]
    fn under_is_component_wise() {
        assert!(is_under("/workspace/a", "/workspace"));
        assert!(!is_under("/workspaces", "/workspace"));
        assert_eq!(
            writable_base("/tmp/x", &["/tmp".to_string(), "/".to_string()]).map(String::as_str),
            Some("/tmp")
        );
    }
}

//! File transfer through the Engine API's archive endpoints.
//!
//! The archive API speaks tar in both directions and needs no shell or
//! helper binary in the image. A write uploads a one-file tar at `/` whose
//! entry name is the full path: Docker's extraction creates missing parent
//! directories (0755) itself, so no `mkdir` round trip is needed, and no
//! directory entries are sent, so existing directories keep their owner and
//! mode. A read downloads the path's tar and takes its single file, following
//! symbolic links (which the API archives as links) a bounded number of hops.

use std::io::Read;

use anyhow::{Context, bail};
use bollard::Docker;
use bollard::query_parameters::{
    ContainerArchiveInfoOptionsBuilder, DownloadFromContainerOptionsBuilder,
    UploadToContainerOptionsBuilder,
};
use futures::TryStreamExt;

use crate::client::{is_not_found, message_of};
use crate::paths;

/// Most bytes one read may download (the coding tools cap far lower).
pub const MAX_READ_BYTES: usize = 256 << 20;

/// Most symbolic links a read or write follows.
const MAX_LINK_HOPS: usize = 8;

/// Go's `os.FileMode` bits the stat header carries.
const MODE_DIR: u32 = 1 << 31;
const MODE_SYMLINK: u32 = 1 << 27;
const MODE_SETUID: u32 = 1 << 23;
const MODE_SETGID: u32 = 1 << 22;
const MODE_STICKY: u32 = 1 << 20;

/// Reads the regular file at absolute `path`.
pub async fn read(docker: &Docker, container: &str, path: &str) -> anyhow::Result<Vec<u8>> {
    let mut current = path.to_string();
    for _ in 0..=MAX_LINK_HOPS {
        let tar = download(docker, container, &current).await?;
        match single_entry(&tar, &current)? {
            Entry::File(contents) => return Ok(contents),
            Entry::Link(target) => current = link_target(&current, &target)?,
        }
    }
    bail!("`{path}` is a chain of more than {MAX_LINK_HOPS} symbolic links")
}

/// Where writes may land in a container, and whose files they make.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteRules {
    /// The writable directories of a container with a read-only root
    /// filesystem (its read-write mounts); `None` when everything is
    /// writable.
    pub writable: Option<Vec<String>>,
    /// Owner of the files and directories a write creates (root if `None`).
    pub owner: Option<(u32, u32)>,
}

/// Writes `contents` to absolute `path`, creating missing parents. An
/// existing file keeps its permission bits; an existing directory is refused
/// (extracting a file over it would delete the directory).
///
/// The daemon extracts archives into the container's filesystem from
/// outside, where a read-only root filesystem is only a check on the
/// upload's *destination*, and it follows symbolic links inside the tar's
/// entry names. So for a confined container the path is resolved here,
/// link by link, and must end under one of the writable mounts, which is
/// then the destination; a link out of the workspace is refused.
pub async fn write(
    docker: &Docker,
    container: &str,
    path: &str,
    contents: &[u8],
    rules: &WriteRules,
) -> anyhow::Result<()> {
    let mut target = path.to_string();
    let mut mode = 0o644;
    for hop in 0..=MAX_LINK_HOPS {
        match stat(docker, container, &target).await? {
            None => break,
            Some(stat) if stat.file_mode & MODE_DIR != 0 => {
                bail!("`{target}` is a directory, not a file")
            }
            Some(stat) if stat.file_mode & MODE_SYMLINK != 0 && !stat.link_target.is_empty() => {
                if hop == MAX_LINK_HOPS {
                    bail!("`{path}` is a chain of more than {MAX_LINK_HOPS} symbolic links");
                }
                target = link_target(&target, &stat.link_target)?;
            }
            Some(stat) => {
                mode = go_mode_to_unix(stat.file_mode);
                break;
            }
        }
    }
    let (base, missing) = match &rules.writable {
        None => ("/".to_string(), 0),
        Some(writable) => {
            let (resolved, missing) = resolve_dirs(docker, container, &target).await?;
            target = resolved;
            let base = writable_base(&target, writable).ok_or_else(|| {
                    let mut roots = writable.clone();
                    roots.sort();
                    anyhow::anyhow!(
                        "cannot write `{path}`{}: the container's root filesystem is read-only under the sandbox policy; only {} are writable",
                        if target == path { String::new() } else { format!(" (it leads to `{target}`)") },
                        roots.join(", ")
                    )
                })?;
            (base.clone(), missing)
        }
    };
    let tar = one_file_tar(&base, &target, missing, contents, mode, rules.owner)?;
    let options = UploadToContainerOptionsBuilder::default()
        .path(base.as_str())
        .build();
    docker
        .upload_to_container(container, Some(options), bollard::body_full(tar.into()))
        .await
        .map_err(|error| anyhow::anyhow!("cannot write `{target}`: {}", message_of(&error)))
}

/// The writable root `target` lands under: the longest that holds it.
pub(crate) fn writable_base<'a>(target: &str, writable: &'a [String]) -> Option<&'a String> {
    writable
        .iter()
        .filter(|root| is_under(target, root))
        .max_by_key(|root| root.len())
}

/// Whether absolute `path` is `root` or below it.
pub(crate) fn is_under(path: &str, root: &str) -> bool {
    let root = root.trim_end_matches('/');
    path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// `path` with every symbolic link among its parent directories resolved,
/// and how many of its trailing parent directories do not exist yet.
async fn resolve_dirs(
    docker: &Docker,
    container: &str,
    path: &str,
) -> anyhow::Result<(String, usize)> {
    let mut current = path.to_string();
    let mut hops = 0;
    'restart: loop {
        let (parent, _) = paths::split(&current)?;
        let parts: Vec<String> = parent
            .split('/')
            .filter(|part| !part.is_empty())
            .map(str::to_string)
            .collect();
        let mut prefix = String::new();
        for (index, part) in parts.iter().enumerate() {
            prefix.push('/');
            prefix.push_str(part);
            match stat(docker, container, &prefix).await? {
                None => return Ok((current, parts.len() - index)),
                Some(stat) if stat.file_mode & MODE_SYMLINK != 0 => {
                    hops += 1;
                    if hops > MAX_LINK_HOPS {
                        bail!("`{path}` goes through more than {MAX_LINK_HOPS} symbolic links");
                    }
                    let resolved = link_target(&prefix, &stat.link_target)?;
                    let rest = current.get(prefix.len()..).unwrap_or_default();
                    current =
                        paths::resolve("/", std::path::Path::new(&format!("{resolved}{rest}")))?;
                    continue 'restart;
                }
                Some(stat) if stat.file_mode & MODE_DIR == 0 => {
                    bail!("`{prefix}` is not a directory, so `{path}` cannot be written")
                }
                Some(_) => {}
            }
        }
        return Ok((current, 0));
    }
}

/// The daemon's stat of `path` (without following a final link), or `None`
/// when nothing is there.
async fn stat(
    docker: &Docker,
    container: &str,
    path: &str,
) -> anyhow::Result<Option<bollard::container::PathStatResponse>> {
    let options = ContainerArchiveInfoOptionsBuilder::default()
        .path(path)
        .build();
    match docker
        .get_container_archive_info(container, Some(options))
        .await
    {
        Ok(stat) => Ok(Some(stat)),
        Err(error) if is_not_found(&error) => Ok(None),
        Err(error) => Err(anyhow::anyhow!(
            "cannot inspect `{path}`: {}",
            message_of(&error)
        )),
    }
}

async fn download(docker: &Docker, container: &str, path: &str) -> anyhow::Result<Vec<u8>> {
    let options = DownloadFromContainerOptionsBuilder::default()
        .path(path)
        .build();
    let mut stream = docker.download_from_container(container, Some(options));
    let mut tar = Vec::new();
    loop {
        match stream.try_next().await {
            Ok(Some(chunk)) => {
                if tar.len() + chunk.len() > MAX_READ_BYTES + 64 * 1024 {
                    bail!("`{path}` is larger than the {MAX_READ_BYTES}-byte read limit");
                }
                tar.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(tar),
            Err(error) if is_not_found(&error) => bail!("no such file `{path}` in the container"),
            Err(error) => bail!("cannot read `{path}`: {}", message_of(&error)),
        }
    }
}

enum Entry {
    File(Vec<u8>),
    Link(String),
}

/// The first entry of a downloaded archive: the requested path itself.
fn single_entry(tar: &[u8], path: &str) -> anyhow::Result<Entry> {
    let mut archive = tar::Archive::new(tar);
    let mut entries = archive
        .entries()
        .with_context(|| format!("the archive of `{path}` is not a tar"))?;
    let mut entry = entries
        .next()
        .ok_or_else(|| anyhow::anyhow!("the archive of `{path}` is empty"))?
        .with_context(|| format!("the archive of `{path}` is damaged"))?;
    let kind = entry.header().entry_type();
    if kind.is_dir() {
        bail!("`{path}` is a directory, not a file");
    }
    if kind.is_symlink() {
        let target = entry
            .link_name()
            .with_context(|| format!("the link `{path}` has an unreadable target"))?
            .ok_or_else(|| anyhow::anyhow!("the link `{path}` has no target"))?;
        return Ok(Entry::Link(target.to_string_lossy().into_owned()));
    }
    if !kind.is_file() {
        bail!("`{path}` is not a regular file");
    }
    let mut contents = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
    entry
        .read_to_end(&mut contents)
        .with_context(|| format!("the archive of `{path}` is truncated"))?;
    Ok(Entry::File(contents))
}

/// Where a link at `link` pointing to `target` leads, as an absolute path.
fn link_target(link: &str, target: &str) -> anyhow::Result<String> {
    let (parent, _) = paths::split(link)?;
    let joined = if target.starts_with('/') {
        target.to_string()
    } else {
        format!("{parent}/{target}")
    };
    paths::resolve("/", std::path::Path::new(&joined))
}

/// Permission bits of a Go `os.FileMode` as a Unix mode.
fn go_mode_to_unix(mode: u32) -> u32 {
    let mut unix = mode & 0o777;
    if mode & MODE_SETUID != 0 {
        unix |= 0o4000;
    }
    if mode & MODE_SETGID != 0 {
        unix |= 0o2000;
    }
    if mode & MODE_STICKY != 0 {
        unix |= 0o1000;
    }
    unix
}

/// A tar, extracted at `base`, holding the regular file `path` (under
/// `base`) and entries for its last `missing` parent directories (0755),
/// all owned by `owner` (root if `None`).
pub(crate) fn one_file_tar(
    base: &str,
    path: &str,
    missing: usize,
    contents: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
) -> anyhow::Result<Vec<u8>> {
    let base = base.trim_end_matches('/');
    let name = path
        .strip_prefix(base)
        .unwrap_or(path)
        .trim_start_matches('/');
    let (uid, gid) = owner.unwrap_or((0, 0));
    let mtime = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0);
    let mut builder = tar::Builder::new(Vec::with_capacity(contents.len() + 2048));
    let parents: Vec<&str> = name
        .match_indices('/')
        .map(|(at, _)| name.get(..at).unwrap_or_default())
        .collect();
    for dir in parents.iter().skip(parents.len().saturating_sub(missing)) {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_size(0);
        header.set_mode(0o755);
        header.set_uid(uid.into());
        header.set_gid(gid.into());
        header.set_mtime(mtime);
        builder
            .append_data(&mut header, format!("{dir}/"), std::io::empty())
            .with_context(|| format!("cannot pack `{path}` for upload"))?;
    }
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(contents.len() as u64);
    header.set_mode(mode);
    header.set_uid(uid.into());
    header.set_gid(gid.into());
    header.set_mtime(mtime);
    builder
        .append_data(&mut header, name, contents)
        .with_context(|| format!("cannot pack `{path}` for upload"))?;
    builder
        .into_inner()
        .with_context(|| format!("cannot pack `{path}` for upload"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_file_unpacks_to_the_same_bytes() {
        let tar = one_file_tar("/", "/workspace/deep/f.txt", 0, b"hello", 0o755, None).unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let mut entries = archive.entries().unwrap();
        let mut entry = entries.next().unwrap().unwrap();
        assert_eq!(entry.path().unwrap().to_str(), Some("workspace/deep/f.txt"));
        assert_eq!(entry.header().mode().unwrap(), 0o755);
        let mut contents = String::new();
        entry.read_to_string(&mut contents).unwrap();
        assert_eq!(contents, "hello");
        assert!(entries.next().is_none());
        match single_entry(&tar, "/workspace/deep/f.txt").unwrap() {
            Entry::File(bytes) => assert_eq!(bytes, b"hello"),
            Entry::Link(_) => panic!("a file is not a link"),
        }
    }

    #[test]
    fn missing_parents_are_packed_for_the_owner_below_the_base() {
        let tar = one_file_tar("/w", "/w/a/b/f.txt", 1, b"x", 0o644, Some((7, 8))).unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let entries: Vec<(String, bool, u64)> = archive
            .entries()
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                (
                    entry.path().unwrap().to_string_lossy().into_owned(),
                    entry.header().entry_type().is_dir(),
                    entry.header().uid().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            entries,
            vec![
                ("a/b/".to_string(), true, 7),
                ("a/b/f.txt".to_string(), false, 7)
            ]
        );
    }

    #[test]
    fn under_means_the_root_or_below_it() {
        assert!(is_under("/workspace/a", "/workspace"));
        assert!(is_under("/workspace", "/workspace/"));
        assert!(!is_under("/workspace2/a", "/workspace"));
        assert!(!is_under("/etc/x", "/workspace"));
    }

    #[test]
    fn go_modes_convert() {
        assert_eq!(go_mode_to_unix(0o755), 0o755);
        assert_eq!(go_mode_to_unix(MODE_STICKY | 0o777), 0o1777);
        assert_eq!(go_mode_to_unix(MODE_SETUID | 0o755), 0o4755);
    }

    #[test]
    fn link_targets_resolve_from_the_link_directory() {
        assert_eq!(link_target("/w/a/link", "../b").unwrap(), "/w/b");
        assert_eq!(link_target("/w/link", "/etc/x").unwrap(), "/etc/x");
        assert_eq!(link_target("/w/link", "f").unwrap(), "/w/f");
    }

    proptest::proptest! {
        /// Whatever path, base and count of missing parents a write sends,
        /// packing never panics, and every entry stays below the base.
        #[test]
        fn packing_never_panics_and_stays_below_the_base(
            base in "(/[a-z.]{0,3}){0,3}",
            rest in "(/[a-z. ]{0,4}){1,5}",
            missing in 0_usize..10,
            owner in proptest::option::of((0_u32..70_000, 0_u32..70_000)),
        ) {
            let path = format!("{}{rest}", base.trim_end_matches('/'));
            if let Ok(tar) = one_file_tar(&base, &path, missing, b"x", 0o644, owner) {
                let mut archive = tar::Archive::new(tar.as_slice());
                for entry in archive.entries().unwrap() {
                    let entry = entry.unwrap();
                    let name = entry.path().unwrap().to_string_lossy().into_owned();
                    proptest::prop_assert!(!name.starts_with('/'), "{name}");
                    proptest::prop_assert!(!name.split('/').any(|part| part == ".."), "{name}");
                }
            }
        }

        /// `is_under` is component-wise: a root is never "under" a sibling
        /// that merely shares its prefix.
        #[test]
        fn under_is_component_wise(root in "/[a-z]{1,4}", tail in "[a-z/]{0,6}") {
            let path = format!("{root}{tail}");
            let expected = path == root || path.starts_with(&format!("{root}/"));
            proptest::prop_assert_eq!(is_under(&path, &root), expected);
        }
    }
}

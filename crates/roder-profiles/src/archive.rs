//! Profile archives (the seed's profile source archives): a tar with
//! `roder-bundle.toml` at its root, named by `{id, digest, size}` where the
//! digest is the sha256 of the archive's bytes.
//!
//! ```toml
//! # roder-bundle.toml
//! id = "acme-agents"
//! revision = "2026-12-01"          # optional, informational
//! [entrypoints]
//! reviewer = "profiles/reviewer.md"
//! ```
//!
//! An archive is verified (size, then digest) before anything in it is
//! read; members that are links, devices, absolute paths or contain `..`
//! are refused, as are archives past [`MAX_ARCHIVE_BYTES`].

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::ProfileError;

/// The largest archive Roder reads (and fetches).
pub const MAX_ARCHIVE_BYTES: u64 = 16 * 1024 * 1024;
/// The largest member.
const MAX_MEMBER_BYTES: u64 = 1024 * 1024;
/// The manifest's name at the archive's root.
pub const MANIFEST: &str = "roder-bundle.toml";

/// How a request names an archive.
///
/// ```
/// use roder_profiles::ArchiveRef;
///
/// let bytes = b"not really a tar";
/// let reference = ArchiveRef::of("demo", bytes);
/// assert_eq!(reference.size, 16);
/// assert!(reference.digest.starts_with("sha256:"));
/// reference.verify(bytes).unwrap();
/// assert!(reference.verify(b"other bytes of size 22").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveRef {
    pub id: String,
    /// `sha256:<64 lowercase hex>` of the archive's bytes.
    pub digest: String,
    pub size: u64,
}

impl ArchiveRef {
    /// The reference of `bytes`.
    pub fn of(id: &str, bytes: &[u8]) -> ArchiveRef {
        ArchiveRef {
            id: id.to_string(),
            digest: sha256_digest(bytes),
            size: bytes.len() as u64,
        }
    }

    /// The hex part of the digest, checked (it names cache files).
    pub fn hex(&self) -> Result<&str, ProfileError> {
        let hex = self.digest.strip_prefix("sha256:").unwrap_or("");
        if hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(hex)
        } else {
            Err(ProfileError::Invalid(format!(
                "archive digest {:?} is not sha256:<64 lowercase hex digits>",
                self.digest
            )))
        }
    }

    /// Checks that `bytes` are this archive: size first, then digest.
    pub fn verify(&self, bytes: &[u8]) -> Result<(), ProfileError> {
        if bytes.len() as u64 != self.size {
            return Err(ProfileError::Verification(format!(
                "profile archive {:?} size mismatch: expected {} bytes, got {}",
                self.id,
                self.size,
                bytes.len()
            )));
        }
        let got = sha256_digest(bytes);
        if got != self.digest {
            return Err(ProfileError::Verification(format!(
                "profile archive {:?} digest mismatch: expected {}, got {got}",
                self.id, self.digest
            )));
        }
        Ok(())
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut text = String::with_capacity(7 + 64);
    text.push_str("sha256:");
    for byte in hash {
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    id: String,
    #[serde(default)]
    revision: Option<String>,
    entrypoints: BTreeMap<String, String>,
}

/// An archive whose bytes matched its reference, unpacked in memory.
#[derive(Debug, Clone)]
pub struct VerifiedArchive {
    pub reference: ArchiveRef,
    pub revision: Option<String>,
    /// Profile name → member path.
    pub entrypoints: BTreeMap<String, String>,
    members: BTreeMap<String, Vec<u8>>,
    /// Where it was fetched from (no query or credentials), if fetched.
    pub url: Option<String>,
}

impl VerifiedArchive {
    /// Verifies `bytes` against `reference` and reads the archive.
    pub fn open(reference: &ArchiveRef, bytes: &[u8]) -> Result<VerifiedArchive, ProfileError> {
        reference.hex()?;
        reference.verify(bytes)?;
        let members = read_members(bytes, &reference.id)?;
        let text = members
            .get(MANIFEST)
            .ok_or_else(|| {
                ProfileError::Invalid(format!(
                    "profile archive {:?} has no {MANIFEST} at its root",
                    reference.id
                ))
            })
            .and_then(|bytes| {
                std::str::from_utf8(bytes).map_err(|_| {
                    ProfileError::Invalid(format!("{MANIFEST} of {:?} is not UTF-8", reference.id))
                })
            })?;
        let manifest: Manifest = toml::from_str(text).map_err(|error| {
            ProfileError::Invalid(format!("{MANIFEST} of {:?}: {error}", reference.id))
        })?;
        // An empty id takes the manifest's (a reference by digest alone).
        if !reference.id.is_empty() && manifest.id != reference.id {
            return Err(ProfileError::Verification(format!(
                "profile archive was referenced as {:?} but its {MANIFEST} says id = {:?}",
                reference.id, manifest.id
            )));
        }
        for (name, path) in &manifest.entrypoints {
            crate::selector::check_name(name).map_err(|why| {
                ProfileError::Invalid(format!("{MANIFEST} of {:?}: {why}", reference.id))
            })?;
            if !members.contains_key(&normalize(path, &reference.id)?) {
                return Err(ProfileError::Invalid(format!(
                    "{MANIFEST} of {:?}: entrypoint {name} names {path:?}, which the archive does not hold",
                    reference.id
                )));
            }
        }
        Ok(VerifiedArchive {
            reference: ArchiveRef {
                id: manifest.id,
                ..reference.clone()
            },
            revision: manifest.revision,
            entrypoints: manifest.entrypoints,
            members,
            url: None,
        })
    }

    /// The text of a member.
    pub fn member_text(&self, path: &str) -> Result<&str, ProfileError> {
        let key = normalize(path, &self.reference.id)?;
        let bytes = self.members.get(&key).ok_or_else(|| {
            ProfileError::NotFound(format!(
                "profile archive {:?} has no member {path:?}",
                self.reference.id
            ))
        })?;
        std::str::from_utf8(bytes).map_err(|_| {
            ProfileError::Invalid(format!(
                "member {path:?} of profile archive {:?} is not UTF-8",
                self.reference.id
            ))
        })
    }
}

/// A member path as a plain relative path (`./a/b` → `a/b`); `..`, absolute
/// paths and anything else that could leave the archive are refused.
fn normalize(path: &str, id: &str) -> Result<String, ProfileError> {
    let mut parts = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str().ok_or_else(|| {
                ProfileError::Verification(format!("archive {id:?}: member {path:?} is not UTF-8"))
            })?),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(ProfileError::Verification(format!(
                    "archive {id:?}: member path {path:?} is absolute or contains ..; refused"
                )));
            }
        }
    }
    if parts.is_empty() {
        return Err(ProfileError::Verification(format!(
            "archive {id:?}: empty member path"
        )));
    }
    Ok(parts.join("/"))
}

fn read_members(bytes: &[u8], id: &str) -> Result<BTreeMap<String, Vec<u8>>, ProfileError> {
    let bad = |why: String| ProfileError::Verification(format!("profile archive {id:?}: {why}"));
    let mut archive = tar::Archive::new(bytes);
    let mut members = BTreeMap::new();
    let entries = archive
        .entries()
        .map_err(|error| bad(format!("not a tar archive: {error}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|error| bad(format!("not a tar archive: {error}")))?;
        let raw_path = entry.path_bytes().into_owned();
        let path = String::from_utf8(raw_path)
            .map_err(|_| bad("a member path is not UTF-8".to_string()))?;
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            normalize(&path, id)?;
            continue;
        }
        if !kind.is_file() {
            return Err(bad(format!(
                "member {path:?} is a {} (only files and directories are allowed; links and devices are refused)",
                describe(kind)
            )));
        }
        let key = normalize(&path, id)?;
        let size = entry
            .header()
            .size()
            .map_err(|error| bad(error.to_string()))?;
        if size > MAX_MEMBER_BYTES {
            return Err(bad(format!(
                "member {path:?} is {size} bytes, over the {MAX_MEMBER_BYTES}-byte limit"
            )));
        }
        let mut content = Vec::new();
        (&mut entry)
            .take(MAX_MEMBER_BYTES + 1)
            .read_to_end(&mut content)
            .map_err(|error| bad(format!("member {path:?}: {error}")))?;
        if members.insert(key, content).is_some() {
            return Err(bad(format!("member {path:?} appears twice")));
        }
    }
    Ok(members)
}

fn describe(kind: tar::EntryType) -> &'static str {
    if kind.is_symlink() {
        "symbolic link"
    } else if kind.is_hard_link() {
        "hard link"
    } else if kind.is_character_special() || kind.is_block_special() {
        "device"
    } else if kind.is_fifo() {
        "fifo"
    } else {
        "special entry"
    }
}

/// Packs `dir` (which holds `roder-bundle.toml`) into an archive: regular
/// files only, in name order, with fixed metadata so the same tree always
/// gives the same digest.
pub fn pack(dir: &Path) -> Result<(ArchiveRef, Vec<u8>), ProfileError> {
    let io = |what: &Path, error: std::io::Error| {
        ProfileError::Io(format!("packing {}: {error}", what.display()))
    };
    let manifest_text = std::fs::read_to_string(dir.join(MANIFEST))
        .map_err(|error| io(&dir.join(MANIFEST), error))?;
    let manifest: Manifest = toml::from_str(&manifest_text).map_err(|error| {
        ProfileError::Invalid(format!("{}: {error}", dir.join(MANIFEST).display()))
    })?;
    let mut files = Vec::new();
    collect(dir, dir, &mut files)?;
    files.sort();
    let mut builder = tar::Builder::new(Vec::new());
    for relative in files {
        let path = dir.join(&relative);
        let content = std::fs::read(&path).map_err(|error| io(&path, error))?;
        let mut header = tar::Header::new_ustar();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        builder
            .append_data(&mut header, &relative, content.as_slice())
            .map_err(|error| io(&path, error))?;
    }
    let bytes = builder.into_inner().map_err(|error| io(dir, error))?;
    let reference = ArchiveRef::of(&manifest.id, &bytes);
    // What is packed must open.
    VerifiedArchive::open(&reference, &bytes)?;
    Ok((reference, bytes))
}

fn collect(root: &Path, dir: &Path, files: &mut Vec<String>) -> Result<(), ProfileError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|error| ProfileError::Io(format!("packing {}: {error}", dir.display())))?;
    for entry in entries {
        let entry = entry
            .map_err(|error| ProfileError::Io(format!("packing {}: {error}", dir.display())))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|error| ProfileError::Io(format!("packing {}: {error}", path.display())))?;
        if kind.is_dir() {
            collect(root, &path, files)?;
        } else if kind.is_file() {
            let relative = path
                .strip_prefix(root)
                .map_err(|error| ProfileError::Io(error.to_string()))?;
            let relative = relative.to_str().ok_or_else(|| {
                ProfileError::Invalid(format!("{} is not a UTF-8 path", path.display()))
            })?;
            files.push(relative.to_string());
        } else {
            return Err(ProfileError::Invalid(format!(
                "{} is not a regular file or directory; archives hold neither links nor devices",
                path.display()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_with(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, kind, content) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(*kind);
            header.set_size(content.len() as u64);
            header.set_mode(0o644);
            if kind.is_symlink() {
                header.set_link_name("/etc/passwd").unwrap();
            }
            // `set_path` refuses `..`; write the name bytes directly so the
            // reader is what gets tested.
            let name = &mut header.as_old_mut().name;
            name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_cksum();
            builder.append(&header, *content).unwrap();
        }
        builder.into_inner().unwrap()
    }

    const MANIFEST_TEXT: &[u8] = b"id = \"t\"\n[entrypoints]\nr = \"r.md\"\n";

    #[test]
    fn a_good_archive_opens() {
        let bytes = tar_with(&[
            ("roder-bundle.toml", tar::EntryType::Regular, MANIFEST_TEXT),
            ("./r.md", tar::EntryType::Regular, b"+++\n+++\nhi\n"),
        ]);
        let archive = VerifiedArchive::open(&ArchiveRef::of("t", &bytes), &bytes).unwrap();
        assert_eq!(archive.member_text("r.md").unwrap(), "+++\n+++\nhi\n");
    }

    #[test]
    fn links_devices_and_escaping_paths_are_refused() {
        for (path, kind) in [
            ("../evil.md", tar::EntryType::Regular),
            ("/etc/evil.md", tar::EntryType::Regular),
            ("link.md", tar::EntryType::Symlink),
            ("dev", tar::EntryType::Char),
            ("hard", tar::EntryType::Link),
        ] {
            let bytes = tar_with(&[
                ("roder-bundle.toml", tar::EntryType::Regular, MANIFEST_TEXT),
                ("r.md", tar::EntryType::Regular, b"+++\n+++\n"),
                (path, kind, b""),
            ]);
            let error = VerifiedArchive::open(&ArchiveRef::of("t", &bytes), &bytes).unwrap_err();
            assert!(
                matches!(error, ProfileError::Verification(_)),
                "{path}: {error}"
            );
        }
    }

    #[test]
    fn the_manifest_id_must_match_the_reference() {
        let bytes = tar_with(&[
            ("roder-bundle.toml", tar::EntryType::Regular, MANIFEST_TEXT),
            ("r.md", tar::EntryType::Regular, b"+++\n+++\n"),
        ]);
        let error = VerifiedArchive::open(&ArchiveRef::of("other", &bytes), &bytes).unwrap_err();
        assert!(error.to_string().contains("id = \"t\""), "{error}");
    }

    #[test]
    fn packing_is_reproducible() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(MANIFEST), MANIFEST_TEXT).unwrap();
        std::fs::write(dir.path().join("r.md"), "+++\n+++\nhi\n").unwrap();
        let (first, bytes) = pack(dir.path()).unwrap();
        let (second, _) = pack(dir.path()).unwrap();
        assert_eq!(first, second);
        VerifiedArchive::open(&first, &bytes).unwrap();
    }
}

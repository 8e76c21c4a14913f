//! File requests, served with the helper's own permissions: inside a
//! container that is the container's user, so a read-only root filesystem,
//! ownership and permissions hold exactly as they do for commands.

use std::ffi::OsStr;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use crate::message::{FileKind, FileStat, Reply, Request};

/// The reply for a failed OS call.
pub fn failed(error: &io::Error) -> Reply {
    Reply::Failed {
        errno: error.raw_os_error().unwrap_or(0),
        message: error.to_string(),
    }
}

fn refuse(errno: i32, message: String) -> Reply {
    Reply::Failed { errno, message }
}

/// Serves one file request (commands are not file requests).
pub fn handle(request: Request) -> Reply {
    let result = match request {
        Request::ReadFile { path, max } => read(as_path(&path), max),
        Request::WriteFile { path, data, mode } => write(as_path(&path), &data, mode),
        Request::Stat { path } => stat(as_path(&path)),
        Request::List { path } => list(as_path(&path)),
        Request::Resolve { path } => resolve(as_path(&path)),
        Request::Exec(_) | Request::Stdin(_) | Request::Kill => {
            Ok(refuse(0, "not a file request".to_string()))
        }
    };
    result.unwrap_or_else(|error| failed(&error))
}

fn as_path(bytes: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(bytes))
}

fn kind_of(file_type: fs::FileType) -> FileKind {
    if file_type.is_file() {
        FileKind::File
    } else if file_type.is_dir() {
        FileKind::Dir
    } else if file_type.is_symlink() {
        FileKind::Symlink
    } else {
        FileKind::Other
    }
}

fn read(path: &Path, max: u64) -> io::Result<Reply> {
    let file = fs::File::open(path)?;
    let metadata = file.metadata()?;
    if metadata.is_dir() {
        return Ok(refuse(
            libc::EISDIR,
            format!("`{}` is a directory, not a file", path.display()),
        ));
    }
    if !metadata.is_file() {
        return Ok(refuse(
            libc::EINVAL,
            format!("`{}` is not a regular file", path.display()),
        ));
    }
    if metadata.len() > max {
        return Ok(refuse(
            libc::EFBIG,
            format!(
                "`{}` is {} bytes, over the {max}-byte read limit",
                path.display(),
                metadata.len()
            ),
        ));
    }
    let mut contents = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.take(max.saturating_add(1))
        .read_to_end(&mut contents)?;
    if contents.len() as u64 > max {
        return Ok(refuse(
            libc::EFBIG,
            format!("`{}` grew past the {max}-byte read limit", path.display()),
        ));
    }
    Ok(Reply::Data(contents))
}

fn write(path: &Path, data: &[u8], mode: u32) -> io::Result<Reply> {
    if fs::metadata(path).is_ok_and(|metadata| metadata.is_dir()) {
        return Ok(refuse(
            libc::EISDIR,
            format!("`{}` is a directory, not a file", path.display()),
        ));
    }
    if let Some(parent) = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)?;
    }
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if mode == 0 { 0o644 } else { mode & 0o7777 })
        .open(path)?;
    file.write_all(data)?;
    Ok(Reply::Done)
}

fn stat(path: &Path) -> io::Result<Reply> {
    let metadata = fs::symlink_metadata(path)?;
    Ok(Reply::Stat(FileStat {
        kind: kind_of(metadata.file_type()),
        size: metadata.len(),
        mode: metadata.mode() & 0o7777,
        mtime_secs: metadata.mtime(),
    }))
}

fn resolve(path: &Path) -> io::Result<Reply> {
    let mut missing = Vec::new();
    let mut existing = path;
    let resolved = loop {
        match fs::canonicalize(existing) {
            Ok(resolved) => break resolved,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
                    return Err(error);
                };
                missing.push(name);
                existing = parent;
            }
            Err(error) => return Err(error),
        }
    };
    let resolved = missing
        .iter()
        .rev()
        .fold(resolved, |path, name| path.join(name));
    Ok(Reply::Data(resolved.into_os_string().into_vec()))
}

fn list(path: &Path) -> io::Result<Reply> {
    let mut entries = fs::read_dir(path)?
        .map(|entry| {
            let entry = entry?;
            Ok((
                entry.file_name().as_bytes().to_vec(),
                kind_of(entry.file_type()?),
            ))
        })
        .collect::<io::Result<Vec<_>>>()?;
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Reply::Listing(entries))
}

//! The id of a Roder home: a random id created once and kept in
//! `$RODER_HOME/home-id`.
//!
//! Docker containers carry it (`dev.roder.home`) so `roder runners gc` of one
//! home never removes another home's sandboxes: one Docker daemon serves
//! every home on a host, and a home only knows its own threads.
//!
//! Random rather than a hash of the home's path, because a path is not
//! unique where it matters: two machines or dev containers sharing one
//! Docker daemon (a mounted socket, a remote `DOCKER_HOST`) commonly have
//! the same home path (`/root/.roder`), and would then collect each other's
//! containers. A random id is unique there and survives moving the home. The
//! cost: a *copied* home shares its id; delete `home-id` in the copy to give
//! it its own.

use std::io::ErrorKind;
use std::path::Path;

use anyhow::Context;

/// The file under the home that holds the id.
pub const FILE_NAME: &str = "home-id";

/// The home's id, created (and the home directory with it) on first use.
///
/// Creation is race-free: the id is written to a temporary file that is then
/// hard-linked into place, which fails if another process got there first,
/// in which case that process's id is read. Blocking file I/O: call it
/// before the async runtime starts.
pub fn load_or_create(home: &Path) -> anyhow::Result<String> {
    let path = home.join(FILE_NAME);
    if let Some(id) = read(&path)? {
        return Ok(id);
    }
    std::fs::create_dir_all(home)
        .with_context(|| format!("cannot create the Roder home {}", home.display()))?;
    let id = random_id()?;
    let temporary = home.join(format!(".{FILE_NAME}.{id}"));
    std::fs::write(&temporary, format!("{id}\n"))
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    let linked = std::fs::hard_link(&temporary, &path);
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Ok(()) => Ok(id),
        Err(error) if error.kind() == ErrorKind::AlreadyExists => read(&path)?
            .with_context(|| format!("{} appeared while creating it but is empty", path.display())),
        Err(error) => Err(error).with_context(|| {
            format!(
                "cannot create {} (the id Roder labels this home's docker containers with)",
                path.display()
            )
        }),
    }
}

/// 128 random bits as 32 hex digits, from the system's random device (the
/// CLI has no RNG crate, and this runs once per home).
fn random_id() -> anyhow::Result<String> {
    use std::io::Read;
    let mut bytes = [0_u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut device| device.read_exact(&mut bytes))
        .context("cannot read /dev/urandom to make a home id")?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// The id in `path`, `None` when the file does not exist.
fn read(path: &Path) -> anyhow::Result<Option<String>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(error).with_context(|| format!("cannot read {}", path.display()));
        }
    };
    let id = text.trim();
    let valid = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'));
    if !valid {
        anyhow::bail!(
            "{} holds {id:?}, which is not a home id (1 to 128 characters of A-Z, a-z, 0-9, '.', '_', '-'); delete the file to get a new one (this home's existing docker containers then count as another home's)",
            path.display()
        );
    }
    Ok(Some(id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_created_once_and_then_read() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("new-home");
        let id = load_or_create(&home).unwrap();
        assert_eq!(id.len(), 32);
        assert_eq!(load_or_create(&home).unwrap(), id);
        assert_eq!(
            std::fs::read_to_string(home.join(FILE_NAME)).unwrap(),
            format!("{id}\n")
        );
        let other = tempfile::tempdir().unwrap();
        assert_ne!(load_or_create(other.path()).unwrap(), id);
        let leftovers: Vec<_> = std::fs::read_dir(&home)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from(FILE_NAME)]);
    }

    #[test]
    fn concurrent_first_uses_agree() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_path_buf();
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let home = home.clone();
                std::thread::spawn(move || load_or_create(&home).unwrap())
            })
            .collect();
        let ids: std::collections::HashSet<String> = handles
            .into_iter()
            .map(|handle| handle.join().unwrap())
            .collect();
        assert_eq!(ids.len(), 1, "{ids:?}");
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), "not an id\n").unwrap();
        let error = format!("{:#}", load_or_create(dir.path()).unwrap_err());
        assert!(
            error.contains(FILE_NAME) && error.contains("delete the file"),
            "{error}"
        );
        std::fs::write(dir.path().join(FILE_NAME), "\n").unwrap();
        assert!(load_or_create(dir.path()).is_err());
    }
}

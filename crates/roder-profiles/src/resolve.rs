//! From a selector (and an optional archive) to a [`ProfileSnapshot`].
//!
//! Lookup of a bare name, first found wins: the request's archive (its
//! `[entrypoints]`), the workspace's `.roder/profiles/NAME.{md,toml}`, then
//! `$RODER_HOME/profiles/NAME.{md,toml}`. Builtins only through
//! `builtin:NAME`. `extends` names one parent the same way (inside an
//! archive: another entrypoint of it, or a builtin, so an archive is
//! self-contained); cycles and chains deeper than [`MAX_DEPTH`] are refused.
//!
//! Merging, parent first: a field the child sets replaces the parent's;
//! `disallowed_tools` add up (a child can never lift a parent's deny);
//! `mcp_servers` merge by name; the sandbox may only narrow.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use roder_api::profile::{ProfileSnapshot, ProfileSource};
use serde::{Deserialize, Serialize};

use crate::archive::{ArchiveRef, VerifiedArchive, sha256_digest};
use crate::background::Revalidations;
use crate::builtins;
use crate::cache::ArchiveCache;
use crate::error::ProfileError;
use crate::fetch::{self, FetchOutcome, blocking};
use crate::file::{FileKind, ProfileDoc, parse};
use crate::memo::{Memo, MemoKey};
use crate::selector::Selector;

/// Longest `extends` chain.
pub const MAX_DEPTH: usize = 8;

/// Where an archive comes from, as a client sends it
/// (`thread/start {profile: {selector, archive: {url | data, digest, size}}}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ArchiveSource {
    /// Fetched over HTTP (revalidated with its ETag, cached by digest).
    Http {
        url: String,
        #[serde(flatten)]
        reference: ArchiveRef,
    },
    /// Sent inline, base64.
    Embedded {
        data: String,
        #[serde(flatten)]
        reference: ArchiveRef,
    },
}

/// What a caller asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfileRequest {
    pub selector: String,
    pub archive: Option<ArchiveSource>,
}

impl ProfileRequest {
    /// As the runtime's request type (`Runtime::resolve_profile`).
    pub fn to_spec(&self) -> roder_api::profile::ProfileRequestSpec {
        roder_api::profile::ProfileRequestSpec {
            selector: self.selector.clone(),
            archive: self.archive.as_ref().map(|source| {
                let (url, data) = match source {
                    ArchiveSource::Http { url, .. } => (Some(url.clone()), None),
                    ArchiveSource::Embedded { data, .. } => (None, Some(data.clone())),
                };
                let reference = source.reference();
                roder_api::profile::ProfileArchiveSpec {
                    url,
                    data,
                    id: reference.id.clone(),
                    digest: reference.digest.clone(),
                    size: reference.size,
                }
            }),
        }
    }
}

/// Resolves profiles for one home and (optionally) one workspace.
#[derive(Debug, Clone)]
pub struct Resolver {
    home: Option<PathBuf>,
    workspace: Option<PathBuf>,
    default_profile: Option<String>,
    cache: Option<ArchiveCache>,
    /// Snapshots resolved from archives alone (`memo.rs`).
    memo: Memo,
    /// Background revalidations in flight (`background.rs`).
    revalidations: Revalidations,
    /// Built once; building fails only where TLS cannot be set up (a
    /// static binary on a machine with no CA store), which is said when an
    /// archive is fetched, never a panic at start.
    client: Result<reqwest::Client, String>,
}

impl Resolver {
    /// A resolver reading `$RODER_HOME/profiles` and caching archives under
    /// `$RODER_HOME/cache/profiles` (`None`: builtins, paths and embedded
    /// archives only, nothing cached).
    pub fn new(home: Option<PathBuf>) -> Resolver {
        let cache = home
            .as_ref()
            .map(|home| ArchiveCache::new(home.join("cache").join("profiles")));
        Resolver {
            home,
            workspace: None,
            default_profile: None,
            cache,
            memo: Memo::default(),
            revalidations: Revalidations::default(),
            client: reqwest::Client::builder()
                .connect_timeout(std::time::Duration::from_secs(10))
                .timeout(std::time::Duration::from_secs(60))
                .build()
                .map_err(|error| error.to_string()),
        }
    }

    fn http(&self) -> Result<&reqwest::Client, ProfileError> {
        self.client.as_ref().map_err(|error| {
            ProfileError::Fetch(format!(
                "cannot make an HTTP client to fetch profile archives: {error}"
            ))
        })
    }

    /// Also look in `workspace/.roder/profiles`.
    pub fn with_workspace(mut self, workspace: Option<PathBuf>) -> Resolver {
        self.workspace = workspace;
        self
    }

    /// The selector `""` stands for (`default_profile` in `config.toml`).
    pub fn with_default_profile(mut self, selector: Option<String>) -> Resolver {
        self.default_profile = selector.filter(|selector| !selector.trim().is_empty());
        self
    }

    pub fn cache(&self) -> Option<&ArchiveCache> {
        self.cache.as_ref()
    }

    /// Resolves `request` to the snapshot a thread keeps. A profile this
    /// resolver resolved from the same HTTP archive before is reused at
    /// once and the archive revalidated in the background
    /// (`background.rs`). Otherwise the archive's bytes are obtained first
    /// (fetched or revalidated, or decoded, and verified); a profile
    /// resolved from them before is reused (`memo.rs`), else opening the
    /// archive, reading profile files and merging happen in one blocking
    /// task.
    pub async fn resolve(&self, request: &ProfileRequest) -> Result<ProfileSnapshot, ProfileError> {
        let key = request.archive.as_ref().map(|source| MemoKey {
            reference: source.reference().clone(),
            url: match source {
                ArchiveSource::Http { url, .. } => Some(fetch::redacted(url)),
                ArchiveSource::Embedded { .. } => None,
            },
            selector: request.selector.clone(),
            default_profile: self.default_profile.clone(),
        });
        // Resolved from this HTTP archive before: the digest fixes the
        // snapshot, so the revalidation need not hold the start up.
        if let (Some(ArchiveSource::Http { url, reference }), Some(key)) = (&request.archive, &key)
            && let (Some(cache), Ok(client)) = (&self.cache, self.http())
            && let Some(snapshot) = self.memo.get(key)
        {
            self.revalidations
                .start(client.clone(), cache.clone(), url, reference);
            return Ok(snapshot);
        }
        let pending = match &request.archive {
            Some(source) => Some(self.archive_bytes(source).await?.0),
            None => None,
        };
        if let Some(snapshot) = key.as_ref().and_then(|key| self.memo.get(key)) {
            return Ok(snapshot);
        }
        let given = request.selector.clone();
        let default_profile = self.default_profile.clone();
        let (home, workspace) = (self.home.clone(), self.workspace.clone());
        let (snapshot, archive_alone) = blocking(move || {
            let archive = pending.map(Pending::open).transpose()?;
            let selector =
                effective_selector(default_profile.as_deref(), &given, archive.as_ref())?;
            let context = Context {
                home,
                workspace,
                archive,
            };
            let chain = context.chain(&selector)?;
            let archive_alone = chain
                .iter()
                .all(|link| link.in_archive || link.source == ProfileSource::Builtin);
            Ok((merge(&given, &selector, chain)?, archive_alone))
        })
        .await?;
        if let (Some(key), true) = (key, archive_alone) {
            self.memo.insert(key, &snapshot);
        }
        Ok(snapshot)
    }

    /// The verified archive of `source`, and how an HTTP one was obtained.
    pub async fn archive(
        &self,
        source: &ArchiveSource,
    ) -> Result<(VerifiedArchive, Option<FetchOutcome>), ProfileError> {
        let (pending, outcome) = self.archive_bytes(source).await?;
        Ok((blocking(move || pending.open()).await?, outcome))
    }

    /// An archive's bytes, verified against its reference: decoded and
    /// hashed (embedded) or by the fetch (HTTP).
    async fn archive_bytes(
        &self,
        source: &ArchiveSource,
    ) -> Result<(Pending, Option<FetchOutcome>), ProfileError> {
        match source {
            ArchiveSource::Embedded { data, reference } => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data.as_bytes())
                    .map_err(|error| {
                        ProfileError::Invalid(format!(
                            "embedded profile archive {:?} is not base64: {error}",
                            reference.id
                        ))
                    })?;
                reference.verify(&bytes)?;
                Ok((
                    Pending {
                        reference: reference.clone(),
                        bytes: bytes.into(),
                        url: None,
                        cache_into: self.cache.clone(),
                    },
                    None,
                ))
            }
            ArchiveSource::Http { url, reference } => {
                let cache = self.cache.clone().ok_or_else(|| {
                    ProfileError::Fetch(
                        "fetching a profile archive needs a cache directory (RODER_HOME)".into(),
                    )
                })?;
                let (bytes, outcome) = fetch::fetch(self.http()?, &cache, url, reference).await?;
                Ok((
                    Pending {
                        reference: reference.clone(),
                        bytes,
                        url: Some(fetch::redacted(url)),
                        cache_into: None,
                    },
                    Some(outcome),
                ))
            }
        }
    }

    /// Every profile this resolver can see by name (not archives), with the
    /// source a bare name would pick.
    pub fn list(&self) -> Result<Vec<Listed>, ProfileError> {
        let mut listed: Vec<Listed> = builtins::BUILTINS
            .iter()
            .map(|(name, text)| Listed {
                selector: format!("builtin:{name}"),
                origin: format!("builtin:{name}"),
                description: parse(text, FileKind::Markdown, name)
                    .ok()
                    .and_then(|doc| doc.description)
                    .unwrap_or_default(),
                shadowed_by: None,
            })
            .collect();
        let mut named: Vec<Listed> = Vec::new();
        for dir in self.dirs() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut found: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| path.to_str().and_then(FileKind::of).is_some())
                .collect();
            found.sort();
            for path in found {
                let Some(name) = path.file_stem().and_then(|stem| stem.to_str()) else {
                    continue;
                };
                let origin = path.display().to_string();
                let description = std::fs::read_to_string(&path)
                    .map_err(|error| error.to_string())
                    .and_then(|text| {
                        parse(&text, kind_of(&path)?, &origin).map_err(|error| error.to_string())
                    })
                    .map(|doc| doc.description.unwrap_or_default())
                    .unwrap_or_else(|error| format!("(invalid: {error})"));
                let shadowed_by = named
                    .iter()
                    .find(|earlier| earlier.selector == name && earlier.shadowed_by.is_none())
                    .map(|earlier| earlier.origin.clone());
                named.push(Listed {
                    selector: name.to_string(),
                    origin,
                    description,
                    shadowed_by,
                });
            }
        }
        listed.extend(named);
        Ok(listed)
    }

    fn dirs(&self) -> Vec<PathBuf> {
        profile_dirs(self.workspace.as_deref(), self.home.as_deref())
    }
}

/// An archive's bytes on their way to being opened (blocking work).
struct Pending {
    reference: ArchiveRef,
    bytes: Arc<[u8]>,
    url: Option<String>,
    /// Embedded archives are cached once verified.
    cache_into: Option<ArchiveCache>,
}

impl Pending {
    fn open(self) -> Result<VerifiedArchive, ProfileError> {
        let mut archive = VerifiedArchive::open(&self.reference, &self.bytes)?;
        // Written once: an entry that is already there (and whole) stays.
        if let Some(cache) = &self.cache_into
            && cache.get(&self.reference)?.is_none()
        {
            cache.insert(&self.reference, &self.bytes)?;
        }
        archive.url = self.url;
        Ok(archive)
    }
}

/// What `given` means: `""` is the archive's `default` entrypoint, else
/// `default_profile`, else `builtin:default`.
fn effective_selector(
    default_profile: Option<&str>,
    given: &str,
    archive: Option<&VerifiedArchive>,
) -> Result<Selector, ProfileError> {
    match Selector::parse(given)? {
        Selector::RuntimeDefault => {
            if archive.is_some_and(|archive| archive.entrypoints.contains_key("default")) {
                return Ok(Selector::Named("default".into()));
            }
            match default_profile {
                Some(default) => match Selector::parse(default)? {
                    Selector::RuntimeDefault => Ok(Selector::Builtin("default".into())),
                    selector => Ok(selector),
                },
                None => Ok(Selector::Builtin("default".into())),
            }
        }
        selector => Ok(selector),
    }
}

/// One line of `roder profiles list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listed {
    pub selector: String,
    pub origin: String,
    pub description: String,
    /// Set when a file earlier in the lookup order has the same name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadowed_by: Option<String>,
}

fn profile_dirs(workspace: Option<&Path>, home: Option<&Path>) -> Vec<PathBuf> {
    workspace
        .map(|workspace| workspace.join(".roder").join("profiles"))
        .into_iter()
        .chain(home.map(|home| home.join("profiles")))
        .collect()
}

fn kind_of(path: &Path) -> Result<FileKind, String> {
    path.to_str().and_then(FileKind::of).ok_or_else(|| {
        format!(
            "{} is neither a .md nor a .toml profile file",
            path.display()
        )
    })
}

/// One link of an `extends` chain.
struct Link {
    selector: Selector,
    source: ProfileSource,
    /// How `origins` names it.
    label: String,
    text_digest: String,
    doc: ProfileDoc,
    /// For `extends` by path: the file's directory.
    dir: Option<PathBuf>,
    in_archive: bool,
}

struct Context {
    home: Option<PathBuf>,
    workspace: Option<PathBuf>,
    archive: Option<VerifiedArchive>,
}

impl Context {
    /// The chain from `selector` to its root ancestor.
    fn chain(&self, selector: &Selector) -> Result<Vec<Link>, ProfileError> {
        let mut chain: Vec<Link> = Vec::new();
        let mut next = self.load(selector, None, false)?;
        loop {
            if chain.len() >= MAX_DEPTH {
                return Err(ProfileError::Invalid(format!(
                    "profile {selector}: extends chain longer than {MAX_DEPTH}"
                )));
            }
            let parent = next.doc.extends.clone();
            let (dir, in_archive) = (next.dir.clone(), next.in_archive);
            let label = next.label.clone();
            chain.push(next);
            let Some(parent) = parent else {
                break;
            };
            let parent = match Selector::parse(&parent)? {
                Selector::RuntimeDefault => {
                    return Err(ProfileError::Invalid(format!(
                        "profile {label}: extends must name a profile"
                    )));
                }
                parent => parent,
            };
            let loaded = self.load(&parent, dir.as_deref(), in_archive)?;
            if chain.iter().any(|link| link.label == loaded.label) {
                return Err(ProfileError::Invalid(format!(
                    "profile {label}: extends {parent} makes a cycle ({})",
                    chain
                        .iter()
                        .map(|link| link.label.as_str())
                        .chain([loaded.label.as_str()])
                        .collect::<Vec<_>>()
                        .join(" -> ")
                )));
            }
            next = loaded;
        }
        Ok(chain)
    }

    fn load(
        &self,
        selector: &Selector,
        relative_to: Option<&Path>,
        from_archive: bool,
    ) -> Result<Link, ProfileError> {
        match selector {
            Selector::RuntimeDefault => Err(ProfileError::Selector(
                "the runtime default must be resolved before lookup".into(),
            )),
            Selector::Builtin(name) => {
                let text = builtins::text(name).ok_or_else(|| {
                    ProfileError::NotFound(format!(
                        "no builtin profile {name:?} (builtins: {})",
                        builtins::BUILTINS
                            .iter()
                            .map(|(name, _)| format!("builtin:{name}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })?;
                let label = format!("builtin:{name}");
                Ok(Link {
                    selector: selector.clone(),
                    source: ProfileSource::Builtin,
                    text_digest: sha256_digest(text.as_bytes()),
                    doc: parse(text, FileKind::Markdown, &label)?,
                    label,
                    dir: None,
                    in_archive: false,
                })
            }
            Selector::Named(name) => {
                if let Some(archive) = &self.archive
                    && let Some(member) = archive.entrypoints.get(name)
                {
                    return archive_link(archive, name, member, selector);
                }
                if from_archive {
                    return Err(ProfileError::NotFound(format!(
                        "profile {name:?} is not an entrypoint of the archive that extends it (an archive extends its own entrypoints or builtin: profiles)"
                    )));
                }
                let dirs = profile_dirs(self.workspace.as_deref(), self.home.as_deref());
                for dir in &dirs {
                    let candidates: Vec<PathBuf> = ["md", "toml"]
                        .iter()
                        .map(|extension| dir.join(format!("{name}.{extension}")))
                        .filter(|path| path.is_file())
                        .collect();
                    match candidates.as_slice() {
                        [] => continue,
                        [path] => {
                            let link = file_link(path, selector)?;
                            if let Some(own) = &link.doc.name
                                && own != name
                            {
                                return Err(ProfileError::Invalid(format!(
                                    "profile {}: its name is {own:?} but the file is named {name:?}; make them agree",
                                    path.display()
                                )));
                            }
                            return Ok(link);
                        }
                        _ => {
                            return Err(ProfileError::Invalid(format!(
                                "both {name}.md and {name}.toml are in {}; keep one",
                                dir.display()
                            )));
                        }
                    }
                }
                Err(ProfileError::NotFound(format!(
                    "no profile named {name:?}: looked in {}{} (builtins need the builtin: prefix)",
                    if self.archive.is_some() {
                        "the request's archive, "
                    } else {
                        ""
                    },
                    if dirs.is_empty() {
                        "no profile directories".to_string()
                    } else {
                        dirs.iter()
                            .map(|dir| dir.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                )))
            }
            Selector::Path(path) => {
                if from_archive {
                    return Err(ProfileError::Invalid(format!(
                        "a profile in an archive cannot extend a file path ({})",
                        path.display()
                    )));
                }
                let base = relative_to.or(self.workspace.as_deref());
                let path = match base {
                    Some(base) if path.is_relative() => base.join(path),
                    _ => path.clone(),
                };
                file_link(&path, selector)
            }
        }
    }
}

fn file_link(path: &Path, selector: &Selector) -> Result<Link, ProfileError> {
    let kind = kind_of(path).map_err(ProfileError::Invalid)?;
    let text = std::fs::read_to_string(path).map_err(|error| {
        ProfileError::NotFound(format!("profile file {}: {error}", path.display()))
    })?;
    let label = path.display().to_string();
    Ok(Link {
        selector: selector.clone(),
        source: ProfileSource::File {
            path: label.clone(),
        },
        text_digest: sha256_digest(text.as_bytes()),
        doc: parse(&text, kind, &label)?,
        label,
        dir: path.parent().map(Path::to_path_buf),
        in_archive: false,
    })
}

fn archive_link(
    archive: &VerifiedArchive,
    name: &str,
    member: &str,
    selector: &Selector,
) -> Result<Link, ProfileError> {
    let text = archive.member_text(member)?;
    let kind = FileKind::of(member).ok_or_else(|| {
        ProfileError::Invalid(format!(
            "archive {:?}: entrypoint {name} is {member:?}, neither .md nor .toml",
            archive.reference.id
        ))
    })?;
    let label = format!(
        "archive:{}@{}:{member}",
        archive.reference.id, archive.reference.digest
    );
    let doc = parse(text, kind, &label)?;
    if let Some(own) = &doc.name
        && own != name
    {
        return Err(ProfileError::Invalid(format!(
            "profile {label}: its name is {own:?} but its entrypoint is {name:?}"
        )));
    }
    Ok(Link {
        selector: selector.clone(),
        source: ProfileSource::Archive {
            id: archive.reference.id.clone(),
            digest: archive.reference.digest.clone(),
            size: archive.reference.size,
            entrypoint: member.to_string(),
            url: archive.url.clone(),
        },
        text_digest: sha256_digest(text.as_bytes()),
        doc,
        label,
        dir: None,
        in_archive: true,
    })
}

/// Applies the chain root first.
fn merge(
    given: &str,
    selector: &Selector,
    chain: Vec<Link>,
) -> Result<ProfileSnapshot, ProfileError> {
    let mut snapshot = ProfileSnapshot {
        selector: given.to_string(),
        canonical: selector.to_string(),
        ..ProfileSnapshot::default()
    };
    let mut digests = String::new();
    for link in &chain {
        digests.push_str(&link.text_digest);
        digests.push('\n');
    }
    snapshot.content_digest = sha256_digest(digests.as_bytes());
    let leaf_name = chain.first().map(|leaf| {
        leaf.doc
            .name
            .clone()
            .unwrap_or_else(|| match &leaf.selector {
                Selector::Named(name) | Selector::Builtin(name) => name.clone(),
                Selector::Path(path) => path
                    .file_stem()
                    .and_then(|stem| stem.to_str())
                    .unwrap_or("profile")
                    .to_string(),
                Selector::RuntimeDefault => "default".to_string(),
            })
    });
    snapshot.name = leaf_name.unwrap_or_default();
    if let Some(leaf) = chain.first() {
        snapshot.source = leaf.source.clone();
    }
    for link in chain.iter().rev() {
        let doc = &link.doc;
        macro_rules! set {
            ($field:expr) => {
                snapshot
                    .origins
                    .insert($field.to_string(), link.label.clone())
            };
        }
        macro_rules! take {
            ($field:ident) => {
                if let Some(value) = &doc.$field {
                    set!(stringify!($field));
                    snapshot.$field = Some(value.clone());
                }
            };
        }
        if let Some(description) = &doc.description {
            set!("description");
            snapshot.description = description.clone();
        }
        if let Some(instructions) = doc.instructions.as_ref().filter(|text| !text.is_empty()) {
            set!("instructions");
            snapshot.instructions = instructions.clone();
        }
        take!(model);
        take!(reasoning_effort);
        take!(policy_mode);
        take!(runner);
        if let Some(tools) = &doc.tools {
            set!("tools");
            snapshot.tools = tools.clone();
        }
        if !doc.disallowed_tools.is_empty() {
            set!("disallowed_tools");
            for rule in &doc.disallowed_tools {
                if !snapshot.disallowed_tools.contains(rule) {
                    snapshot.disallowed_tools.push(rule.clone());
                }
            }
        }
        if let Some(network) = doc.sandbox.network {
            if network && snapshot.sandbox.network == Some(false) {
                return Err(ProfileError::Invalid(format!(
                    "profile {}: sandbox.network = true would widen what {} narrowed; a profile may only narrow",
                    link.label,
                    snapshot
                        .origins
                        .get("sandbox.network")
                        .cloned()
                        .unwrap_or_default()
                )));
            }
            set!("sandbox.network");
            snapshot.sandbox.network = Some(network);
        }
        if let Some(deadline) = doc.limits.turn_deadline_s {
            set!("limits.turn_deadline_s");
            snapshot.limits.turn_deadline_s = Some(deadline);
        }
        if let Some(max) = doc.limits.max_tool_calls {
            set!("limits.max_tool_calls");
            snapshot.limits.max_tool_calls = Some(max);
        }
        for (name, server) in &doc.mcp_servers {
            set!(&format!("mcp_servers.{name}"));
            snapshot.mcp_servers.insert(name.clone(), server.clone());
        }
    }
    Ok(snapshot)
}

impl ArchiveSource {
    /// The reference the request pins the archive to.
    pub fn reference(&self) -> &ArchiveRef {
        match self {
            ArchiveSource::Http { reference, .. } | ArchiveSource::Embedded { reference, .. } => {
                reference
            }
        }
    }

    /// From the runtime's request type: `url` or `data`, not both.
    pub fn from_spec(
        spec: &roder_api::profile::ProfileArchiveSpec,
    ) -> Result<ArchiveSource, ProfileError> {
        let reference = ArchiveRef {
            id: spec.id.clone(),
            digest: spec.digest.clone(),
            size: spec.size,
        };
        match (&spec.url, &spec.data) {
            (Some(url), None) => Ok(ArchiveSource::Http {
                url: url.clone(),
                reference,
            }),
            (None, Some(data)) => Ok(ArchiveSource::Embedded {
                data: data.clone(),
                reference,
            }),
            _ => Err(ProfileError::Invalid(
                "a profile archive has either url or data (base64), not both or neither".into(),
            )),
        }
    }
}

#[async_trait::async_trait]
impl roder_api::profile::ProfileResolver for Resolver {
    async fn resolve(
        &self,
        request: &roder_api::profile::ProfileRequestSpec,
        workspace: Option<&str>,
    ) -> anyhow::Result<ProfileSnapshot> {
        let resolver = self.clone().with_workspace(workspace.map(PathBuf::from));
        let archive = request
            .archive
            .as_ref()
            .map(ArchiveSource::from_spec)
            .transpose()?;
        let request = ProfileRequest {
            selector: request.selector.clone(),
            archive,
        };
        Ok(Resolver::resolve(&resolver, &request).await?)
    }
}

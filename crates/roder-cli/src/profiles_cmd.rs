//! `roder profiles list|show|pack`, and resolving the profile a new thread
//! of `roder exec` runs as.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use base64::Engine;
use roder_api::profile::ProfileSnapshot;
use roder_profiles::{ArchiveRef, ArchiveSource, ProfileRequest, Resolver};

use crate::cli::{ProfileArgs, ProfilesCommand};
use crate::config::Settings;

/// The resolver for `settings`' home and `workspace`.
pub fn resolver(settings: &Settings, workspace: Option<&Path>) -> Resolver {
    Resolver::new(Some(settings.home.clone()))
        .with_workspace(workspace.map(Path::to_path_buf))
        .with_default_profile(settings.default_profile.clone())
}

/// What `args` ask for; `None` when neither the flags nor `default_profile`
/// ask for a profile (the thread then has none).
pub async fn request(
    settings: &Settings,
    args: &ProfileArgs,
) -> anyhow::Result<Option<ProfileRequest>> {
    let archive = match &args.archive {
        None => None,
        Some(location) => Some(archive_source(location, args).await?),
    };
    if args.selector.is_none() && archive.is_none() && settings.default_profile.is_none() {
        return Ok(None);
    }
    Ok(Some(ProfileRequest {
        selector: args.selector.clone().unwrap_or_default(),
        archive,
    }))
}

async fn archive_source(location: &str, args: &ProfileArgs) -> anyhow::Result<ArchiveSource> {
    let (Some(digest), Some(size)) = (&args.digest, args.size) else {
        anyhow::bail!("--profile-archive needs --profile-digest sha256:HEX and --profile-size N");
    };
    let reference = ArchiveRef {
        id: args.archive_id.clone().unwrap_or_default(),
        digest: digest.clone(),
        size,
    };
    if location.starts_with("http://") || location.starts_with("https://") {
        return Ok(ArchiveSource::Http {
            url: location.to_string(),
            reference,
        });
    }
    let bytes = tokio::fs::read(location)
        .await
        .map_err(|error| anyhow::anyhow!("profile archive {location}: {error}"))?;
    Ok(ArchiveSource::Embedded {
        data: base64::engine::general_purpose::STANDARD.encode(bytes),
        reference,
    })
}

/// Resolves the profile a new `roder exec` thread runs as.
pub async fn resolve_for_exec(
    settings: &Settings,
    args: &ProfileArgs,
    workspace: &Path,
) -> anyhow::Result<Option<ProfileSnapshot>> {
    let Some(request) = request(settings, args).await? else {
        return Ok(None);
    };
    let snapshot = resolver(settings, Some(workspace))
        .resolve(&request)
        .await?;
    Ok(Some(snapshot))
}

pub async fn run(settings: &Settings, command: ProfilesCommand) -> anyhow::Result<ExitCode> {
    match command {
        ProfilesCommand::List { workspace } => {
            let workspace = workspace_or_cwd(workspace)?;
            let resolver = resolver(settings, Some(&workspace));
            let listed = tokio::task::spawn_blocking(move || resolver.list()).await??;
            let mut out = String::new();
            for entry in listed {
                out.push_str(&format!("{}\t{}", entry.selector, entry.origin));
                if !entry.description.is_empty() {
                    out.push_str(&format!("\t{}", entry.description));
                }
                if let Some(by) = entry.shadowed_by {
                    out.push_str(&format!("\t(shadowed by {by})"));
                }
                out.push('\n');
            }
            crate::stdout::print(&out)?;
            Ok(ExitCode::SUCCESS)
        }
        ProfilesCommand::Show {
            name,
            mut profile,
            resolved,
            workspace,
        } => {
            if name.is_some() {
                profile.selector = name;
            }
            let workspace = workspace_or_cwd(workspace)?;
            let request = request(settings, &profile).await?.unwrap_or_default();
            let snapshot = resolver(settings, Some(&workspace))
                .resolve(&request)
                .await?;
            let text = if resolved {
                show_resolved(&snapshot)?
            } else {
                let mut own = snapshot.clone();
                own.origins.clear();
                let mut text = serde_json::to_string_pretty(&own)?;
                text.push('\n');
                text
            };
            crate::stdout::print(&text)?;
            Ok(ExitCode::SUCCESS)
        }
        ProfilesCommand::Pack { dir, out } => {
            let packed = tokio::task::spawn_blocking(move || roder_profiles::pack(&dir)).await?;
            let (reference, bytes) = packed?;
            let out = out.unwrap_or_else(|| PathBuf::from(format!("{}.tar", reference.id)));
            tokio::fs::write(&out, &bytes)
                .await
                .map_err(|error| anyhow::anyhow!("{}: {error}", out.display()))?;
            let mut text = serde_json::to_string(&reference)?;
            text.push('\n');
            text.push_str(&format!(
                "# roder exec --profile NAME --profile-archive {} --profile-digest {} --profile-size {}\n",
                out.display(),
                reference.digest,
                reference.size
            ));
            crate::stdout::print(&text)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn workspace_or_cwd(workspace: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match workspace {
        Some(workspace) => Ok(workspace),
        None => Ok(std::env::current_dir()?),
    }
}

/// Each field with the place it came from, `builtin:`, a path or an archive
/// member; fields no profile set are shown as defaults.
fn show_resolved(snapshot: &ProfileSnapshot) -> anyhow::Result<String> {
    let value = serde_json::to_value(snapshot)?;
    let mut out = format!(
        "# profile {} (selector {:?})\n",
        snapshot.canonical, snapshot.selector
    );
    let Some(fields) = value.as_object() else {
        return Ok(out);
    };
    for (field, value) in fields {
        if field == "origins" {
            continue;
        }
        let origin = snapshot
            .origins
            .iter()
            .filter(|(key, _)| *key == field || key.starts_with(&format!("{field}.")))
            .map(|(key, origin)| {
                if key == field {
                    origin.clone()
                } else {
                    format!("{key} from {origin}")
                }
            })
            .collect::<Vec<_>>();
        let origin = if origin.is_empty() {
            match field.as_str() {
                "selector" | "canonical" | "source" | "content_digest" | "name" | "overrides" => {
                    "resolution".to_string()
                }
                _ => "default".to_string(),
            }
        } else {
            origin.join("; ")
        };
        out.push_str(&format!("{field} = {value}  # from {origin}\n"));
    }
    Ok(out)
}

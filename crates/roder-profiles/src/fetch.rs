//! Fetching an archive over HTTP into the cache.
//!
//! `If-None-Match` is sent only when the cache holds the requested digest
//! and the URL's last fetch returned that digest with an ETag. A 304 uses
//! the cached copy (verified as `cache.rs` reads it). A 200 is read up to the
//! referenced size plus one byte; a length or digest that differs is an
//! error and nothing is cached. When the server cannot be reached (or
//! answers an error), a cached copy of the requested digest is used, since
//! the digest pins the content; without one the error says so.

use std::sync::Arc;

use futures::StreamExt;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_LENGTH, ETAG, IF_NONE_MATCH};

use crate::archive::{ArchiveRef, MAX_ARCHIVE_BYTES};
use crate::cache::{ArchiveCache, UrlRef};
use crate::error::ProfileError;

/// How a fetch ended, for callers that report it (tests, the bench).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchOutcome {
    /// 200: downloaded, verified, cached.
    Downloaded,
    /// 304: the cached copy is current.
    NotModified,
    /// The server failed; the cached copy of the digest was used.
    CachedAfterError,
}

/// Fetches (or revalidates) `reference` from `url`.
pub async fn fetch(
    client: &reqwest::Client,
    cache: &ArchiveCache,
    url: &str,
    reference: &ArchiveRef,
) -> Result<(Arc<[u8]>, FetchOutcome), ProfileError> {
    reference.hex()?;
    if reference.size > MAX_ARCHIVE_BYTES {
        return Err(ProfileError::Verification(format!(
            "profile archive {:?} is {} bytes, over the {MAX_ARCHIVE_BYTES}-byte limit",
            reference.id, reference.size
        )));
    }
    let (cached, url_ref) = {
        let cache = cache.clone();
        let (reference, url) = (reference.clone(), url.to_string());
        blocking(move || Ok((cache.get(&reference)?, cache.url_ref(&url)))).await?
    };
    let etag = match (&cached, url_ref) {
        (Some(_), Some(found)) if found.digest == reference.digest => found.etag,
        _ => None,
    };
    let mut request = client.get(url);
    if let Some(etag) = &etag {
        request = request.header(IF_NONE_MATCH, etag);
    }
    let shown = redacted(url);
    let failed = |why: String, cached: Option<Arc<[u8]>>| match cached {
        Some(bytes) => {
            tracing::warn!("{why}; using the cached copy of {}", reference.digest);
            Ok((bytes, FetchOutcome::CachedAfterError))
        }
        None => Err(ProfileError::Fetch(format!(
            "{why}, and the archive {} ({}) is not cached",
            reference.id, reference.digest
        ))),
    };
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => {
            return failed(
                format!(
                    "cannot fetch profile archive from {shown}: {}",
                    error.without_url()
                ),
                cached,
            );
        }
    };
    let status = response.status();
    if status == StatusCode::NOT_MODIFIED {
        return match cached {
            Some(bytes) if etag.is_some() => Ok((bytes, FetchOutcome::NotModified)),
            _ => Err(ProfileError::Fetch(format!(
                "{shown} answered 304 Not Modified to a request without a cached copy"
            ))),
        };
    }
    if !status.is_success() {
        return failed(
            format!("profile archive fetch from {shown} failed with HTTP {status}"),
            cached,
        );
    }
    let new_etag = response
        .headers()
        .get(ETAG)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    if let Some(length) = response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok())
        && length != reference.size
    {
        return Err(ProfileError::Verification(format!(
            "profile archive {:?} size mismatch: expected {} bytes, {shown} sends {length}",
            reference.id, reference.size
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(reference.size).unwrap_or(0));
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|error| {
            ProfileError::Fetch(format!(
                "reading profile archive from {shown}: {}",
                error.without_url()
            ))
        })?;
        if (bytes.len() + chunk.len()) as u64 > reference.size {
            return Err(ProfileError::Verification(format!(
                "profile archive {:?} size mismatch: expected {} bytes, {shown} sends more",
                reference.id, reference.size
            )));
        }
        bytes.extend_from_slice(&chunk);
    }
    reference.verify(&bytes)?;
    let cache = cache.clone();
    let entry = UrlRef {
        url: url.to_string(),
        etag: new_etag,
        digest: reference.digest.clone(),
    };
    let (reference, stored) = (reference.clone(), bytes);
    let bytes = blocking(move || {
        cache.insert(&reference, &stored)?;
        cache.set_url_ref(&entry)?;
        Ok(stored.into())
    })
    .await?;
    Ok((bytes, FetchOutcome::Downloaded))
}

/// A URL as it may be shown and stored: no credentials, no query.
pub fn redacted(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => "(an unparsable URL)".to_string(),
    }
}

pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ProfileError> + Send + 'static,
) -> Result<T, ProfileError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| ProfileError::Io(format!("profile worker thread: {error}")))?
}

//! Which thread store a runtime uses: the JSONL store under
//! `$RODER_HOME/threads` (the default), or a shared PostgreSQL database for
//! many replicas (`store = "postgres://..."` in `config.toml`, or
//! `roder app-server --store postgres://...`).

use std::sync::Arc;

use anyhow::bail;
use roder_api::thread::ThreadStoreFactory;
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use roder_ext_postgres_thread_store::store::redacted;
use roder_ext_postgres_thread_store::{PostgresThreadStore, PostgresThreadStoreFactory};

use crate::config::Settings;
use crate::config::file::StoreEntry;
use roder_ext_jsonl_thread_store::SyncMode;

/// A thread store, as configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StoreChoice {
    /// `$RODER_HOME/threads`.
    #[default]
    Jsonl,
    /// A PostgreSQL database (the URL may hold a password: never show it;
    /// `PGPASSWORD` works too).
    Postgres { url: String },
}

impl StoreChoice {
    /// `"jsonl"`, or a `postgres://` / `postgresql://` URL.
    pub fn parse(value: &str) -> anyhow::Result<Self> {
        let value = value.trim();
        if value == "jsonl" {
            return Ok(Self::Jsonl);
        }
        if value.starts_with("postgres://") || value.starts_with("postgresql://") {
            return Ok(Self::Postgres {
                url: value.to_string(),
            });
        }
        bail!(
            "unknown thread store {}: use \"jsonl\" or a postgres://user@host/db URL",
            shown(value)
        )
    }

    /// What `config show` and errors print: a URL's password is `***`.
    pub fn describe(&self) -> String {
        match self {
            Self::Jsonl => "jsonl".to_string(),
            Self::Postgres { url } => redacted(url),
        }
    }
}

impl StoreChoice {
    /// The store of the config file's `store` (a string or `[store] url`).
    pub fn from_entry(entry: Option<&StoreEntry>) -> anyhow::Result<Self> {
        match entry {
            None => Ok(Self::default()),
            Some(StoreEntry::Url(url)) => Self::parse(url),
            Some(StoreEntry::Table(table)) => match &table.url {
                Some(url) => Self::parse(url),
                None => Ok(Self::default()),
            },
        }
    }
}

/// `[store] sync`: the JSONL store's mode. Set with a Postgres store it is
/// an error (each Postgres append is a committed transaction already).
pub fn sync_from_entry(entry: Option<&StoreEntry>) -> anyhow::Result<SyncMode> {
    let Some(StoreEntry::Table(table)) = entry else {
        return Ok(SyncMode::default());
    };
    let Some(sync) = &table.sync else {
        return Ok(SyncMode::default());
    };
    if let StoreChoice::Postgres { url } = StoreChoice::from_entry(entry)? {
        bail!(
            "[store] sync = {sync:?} is not supported with the Postgres store ({}): each append there is a committed transaction; remove `sync`",
            redacted(&url)
        );
    }
    sync.parse::<SyncMode>()
        .map_err(|error| anyhow::anyhow!("[store] sync: {error}"))
}

/// The `store` line of `config show`: a string, or an inline table when
/// `sync` is not the default, so the output loads to the same settings.
pub fn show(store: &StoreChoice, sync: SyncMode) -> String {
    if sync == SyncMode::default() {
        format!("store = \"{}\"\n", store.describe())
    } else {
        format!(
            "store = {{ url = \"{}\", sync = \"{}\" }}\n",
            store.describe(),
            sync.as_str()
        )
    }
}

/// A value shown in an error: a URL-looking one is redacted.
fn shown(value: &str) -> String {
    if value.contains("://") {
        format!("{:?}", redacted(value))
    } else {
        format!("{value:?}")
    }
}

/// `settings` with `--store` applied over the config file's `store`.
pub fn with_flag(settings: &Settings, flag: Option<&str>) -> anyhow::Result<Settings> {
    let mut settings = settings.clone();
    if let Some(flag) = flag {
        settings.store = StoreChoice::parse(flag)?;
    }
    Ok(settings)
}

/// Connects and migrates now, so a server fails at start-up (not on its
/// first request) when its database is unreachable.
pub async fn prepare(settings: &Settings) -> anyhow::Result<()> {
    if let StoreChoice::Postgres { url } = &settings.store {
        PostgresThreadStore::connect(url).await?.close().await;
    }
    Ok(())
}

/// The factory `crate::wiring::runtime` registers.
pub fn factory(settings: &Settings) -> anyhow::Result<Arc<dyn ThreadStoreFactory>> {
    Ok(match &settings.store {
        StoreChoice::Jsonl => {
            let base_path = settings.threads_dir();
            roder_ext_jsonl_thread_store::sync::set_mode(&base_path, settings.store_sync);
            Arc::new(JsonlThreadStoreFactory { base_path })
        }
        StoreChoice::Postgres { url } => Arc::new(PostgresThreadStoreFactory::lazy(url)?),
    })
}

/// Where the app server follows threads other replicas write: the Postgres
/// store's LISTEN/NOTIFY follower (its own pool). None for JSONL: one
/// process per home, so the runtime's own bus has every event.
pub fn follow_source(
    settings: &Settings,
) -> anyhow::Result<Option<roder_app_server::SharedFollowSource>> {
    Ok(match &settings.store {
        StoreChoice::Jsonl => None,
        StoreChoice::Postgres { url } => Some(Arc::new(PostgresFollow(
            PostgresThreadStore::connect_lazy(url, Default::default())?,
        ))),
    })
}

/// The Postgres store as the app server's follow source.
struct PostgresFollow(PostgresThreadStore);

impl roder_app_server::ThreadFollowSource for PostgresFollow {
    fn follow(&self, thread_id: &str, after_seq: u64) -> roder_app_server::FollowStream {
        self.0.follow_stream(thread_id, after_seq)
    }

    fn follow_after_sent(
        &self,
        thread_id: &str,
        after_seq: u64,
        sent: roder_app_server::SentCursor,
    ) -> roder_app_server::FollowStream {
        self.0
            .follow_stream_after_sent(thread_id, after_seq, Some(sent))
    }
}

/// Commands that read the JSONL files directly refuse a Postgres store
/// instead of showing another store's threads.
pub fn require_jsonl(settings: &Settings, command: &str) -> anyhow::Result<()> {
    if let StoreChoice::Postgres { .. } = settings.store {
        bail!(
            "`{command}` with the Postgres thread store ({}) is not supported: it reads $RODER_HOME/threads only; use the app server's thread/list and thread/read",
            settings.store.describe()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::file::StoreTable;

    #[test]
    fn parses_jsonl_and_postgres_urls_and_names_the_rest() {
        assert_eq!(StoreChoice::parse("jsonl").unwrap(), StoreChoice::Jsonl);
        let choice = StoreChoice::parse("postgres://roder:pw@db:5432/roder").unwrap();
        assert_eq!(choice.describe(), "postgres://roder:***@db:5432/roder");
        StoreChoice::parse("postgresql://db/roder").unwrap();
        let error = StoreChoice::parse("mysql://root:pw@db/x")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("unknown thread store") && !error.contains("pw@"),
            "{error}"
        );
        let error = StoreChoice::parse("sqlite").unwrap_err().to_string();
        assert!(error.contains("\"sqlite\""), "{error}");
    }

    fn table(url: Option<&str>, sync: Option<&str>) -> StoreEntry {
        StoreEntry::Table(StoreTable {
            url: url.map(String::from),
            sync: sync.map(String::from),
        })
    }

    #[test]
    fn store_sync_parses_for_jsonl_and_is_refused_for_postgres() {
        for (name, mode) in [
            ("none", SyncMode::None),
            ("turn", SyncMode::Turn),
            ("always", SyncMode::Always),
        ] {
            let entry = table(None, Some(name));
            assert_eq!(sync_from_entry(Some(&entry)).unwrap(), mode);
            assert_eq!(
                StoreChoice::from_entry(Some(&entry)).unwrap(),
                StoreChoice::Jsonl
            );
            // What `config show` prints loads back to the same.
            let shown = show(&StoreChoice::Jsonl, mode);
            let file: crate::config::file::ConfigFile = toml::from_str(&shown).unwrap();
            assert_eq!(
                sync_from_entry(file.store.as_ref()).unwrap(),
                mode,
                "{shown}"
            );
        }
        assert_eq!(sync_from_entry(None).unwrap(), SyncMode::Turn);
        let error = sync_from_entry(Some(&table(None, Some("often"))))
            .unwrap_err()
            .to_string();
        assert!(error.contains("\"often\""), "{error}");
        let error = sync_from_entry(Some(&table(Some("postgres://u:pw@db/x"), Some("none"))))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("not supported") && !error.contains("pw@"),
            "{error}"
        );
    }
}

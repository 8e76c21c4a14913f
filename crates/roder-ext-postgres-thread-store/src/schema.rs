//! The schema, migrated on connect.
//!
//! Migrations are plain SQL files in `migrations/`, compiled in with
//! `include_str!` and applied in order inside one transaction that holds an
//! advisory lock, so replicas starting together migrate once and none sees
//! half a schema. Applied versions are recorded in
//! `roder_schema_migrations`; a database migrated by a newer roder (a
//! version this build does not know) is refused instead of used.

use anyhow::{Context, bail};
use sqlx::PgPool;

/// `(version, name, sql)`, in order. Append only: never edit an applied one.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "threads_metadata_events",
        include_str!("../migrations/0001_threads_metadata_events.sql"),
    ),
    (
        2,
        "append_function",
        include_str!("../migrations/0002_append_function.sql"),
    ),
];

/// Key of the advisory lock migrations hold (any constant; "roder" in ASCII).
const MIGRATION_LOCK: i64 = 0x0072_6f64_6572;

/// The newest schema version this build knows.
pub fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |(version, _, _)| *version)
}

/// Brings the database to [`latest_version`].
pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    let mut tx = pool
        .begin()
        .await
        .context("cannot begin the migration transaction")?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *tx)
        .await
        .context("cannot take the migration lock")?;
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS roder_schema_migrations (
            version    BIGINT PRIMARY KEY,
            name       TEXT NOT NULL,
            applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )",
    )
    .execute(&mut *tx)
    .await
    .context("cannot create roder_schema_migrations")?;
    let applied: i64 =
        sqlx::query_scalar("SELECT COALESCE(max(version), 0) FROM roder_schema_migrations")
            .fetch_one(&mut *tx)
            .await
            .context("cannot read the schema version")?;
    if applied > latest_version() {
        bail!(
            "the database's roder schema is at version {applied}, newer than this build knows ({}); run a newer roder against it",
            latest_version()
        );
    }
    for (version, name, sql) in MIGRATIONS
        .iter()
        .filter(|(version, _, _)| *version > applied)
    {
        sqlx::raw_sql(*sql)
            .execute(&mut *tx)
            .await
            .with_context(|| format!("migration {version} ({name}) failed"))?;
        sqlx::query("INSERT INTO roder_schema_migrations (version, name) VALUES ($1, $2)")
            .bind(version)
            .bind(name)
            .execute(&mut *tx)
            .await
            .with_context(|| format!("cannot record migration {version}"))?;
    }
    tx.commit().await.context("cannot commit the migrations")?;
    Ok(())
}

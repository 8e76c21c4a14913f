//! A throwaway PostgreSQL cluster for tests: `initdb` into a temporary
//! directory, one `postgres` on a free 127.0.0.1 port (and a socket in the
//! same directory), stopped and removed on drop.
//!
//! Postgres refuses to run as root; under root the cluster runs as the
//! `postgres` user that Debian's package creates (the directory is handed
//! to it). Binaries are looked for in `$RODER_PG_BIN`, then in
//! `/usr/lib/postgresql/<newest>/bin`. When none is installed,
//! [`TestCluster::start_or_skip`] skips the test, except under `CI=true`
//! where a missing Postgres is an error (a green CI must have run them).

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::fs::chown;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

use anyhow::{Context, bail};

/// How long `postgres` gets to say it accepts connections.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const READY_LINE: &str = "database system is ready to accept connections";
/// The superuser `initdb` creates (trust authentication, loopback only).
pub const USER: &str = "roder";

/// A running throwaway cluster.
pub struct TestCluster {
    dir: Option<tempfile::TempDir>,
    child: Option<Child>,
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
}

impl std::fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCluster")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

/// Where Postgres's binaries are, if anywhere.
pub fn find_bin() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("RODER_PG_BIN") {
        let dir = PathBuf::from(dir);
        return dir.join("postgres").is_file().then_some(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("postgres").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// Whether tests must not skip (`CI=true`).
fn required() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true" || value == "1")
}

/// `(uid, gid)` of the `postgres` user, from `/etc/passwd`.
fn postgres_user() -> anyhow::Result<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").context("cannot read /etc/passwd")?;
    for line in passwd.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        if let [name, _, uid, gid, ..] = fields.as_slice()
            && *name == "postgres"
        {
            return Ok((uid.parse()?, gid.parse()?));
        }
    }
    bail!(
        "running as root, and there is no `postgres` user to run a test cluster as (install Debian's postgresql package)"
    )
}

fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(listener.local_addr()?.port())
}

impl TestCluster {
    /// Starts a cluster, or `None` (with a note on stderr) when Postgres is
    /// not installed and `CI` is not `true`.
    pub async fn start_or_skip() -> anyhow::Result<Option<Self>> {
        if find_bin().is_none() {
            if required() {
                bail!(
                    "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres, no $RODER_PG_BIN) and CI=true: install Debian's postgresql package"
                );
            }
            eprintln!("skipping: PostgreSQL is not installed (apt-get install postgresql)");
            return Ok(None);
        }
        Self::start().await.map(Some)
    }

    /// Starts a cluster; fails when Postgres is not installed.
    pub async fn start() -> anyhow::Result<Self> {
        tokio::task::spawn_blocking(Self::start_blocking)
            .await
            .context("the cluster start-up task failed")?
    }

    fn start_blocking() -> anyhow::Result<Self> {
        let bin = find_bin().context("PostgreSQL is not installed")?;
        let dir = tempfile::Builder::new()
            .prefix("roder-pg-")
            .tempdir()
            .context("cannot create the cluster's directory")?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let as_postgres = (unsafe { libc::geteuid() } == 0)
            .then(postgres_user)
            .transpose()?;
        if let Some((uid, gid)) = as_postgres {
            chown(dir.path(), Some(uid), Some(gid))
                .context("cannot hand the cluster's directory to the postgres user")?;
        }
        let data = dir.path().join("data");
        let mut initdb = command(&bin.join("initdb"), as_postgres);
        initdb
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                USER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .stdin(Stdio::null());
        let output = initdb.output().context("cannot run initdb")?;
        if !output.status.success() {
            bail!(
                "initdb failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        // A port found free can be taken before postgres binds it: retry.
        let mut last_error = None;
        for _ in 0..5 {
            let port = free_port()?;
            match spawn_postgres(&bin, &data, dir.path(), port, as_postgres) {
                Ok((child, log)) => {
                    return Ok(Self {
                        dir: Some(dir),
                        child: Some(child),
                        port,
                        log,
                    });
                }
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("postgres did not start")))
    }

    /// The port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL of database `postgres` (which always exists).
    pub fn url(&self) -> String {
        self.database_url("postgres")
    }

    /// A URL of database `name` (see [`create_database`](Self::create_database)).
    pub fn database_url(&self, name: &str) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates database `name` and returns its URL.
    pub async fn create_database(&self, name: &str) -> anyhow::Result<String> {
        use sqlx::Connection;
        let mut connection = sqlx::PgConnection::connect(&self.url())
            .await
            .context("cannot connect to the test cluster")?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut connection)
            .await
            .with_context(|| format!("cannot create database {name}"))?;
        Ok(self.database_url(name))
    }

    /// The server's log so far, for failure messages.
    pub fn log(&self) -> String {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .join("\n")
    }

    /// Stops the server at once (`SIGQUIT`: immediate shutdown) and waits.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(pid) = i32::try_from(child.id()) {
                // SAFETY: signalling our own child, which we have not reaped.
                unsafe {
                    libc::kill(pid, libc::SIGQUIT);
                }
            }
            let _ = child.wait();
        }
    }

    /// Restarts the server on the same data and port, as an operator's
    /// restart does: a fast shutdown (`SIGINT`: every session is ended
    /// with `57P01`, a checkpoint is written) and a start, waiting for its
    /// ready line. `down_for` is how long it stays down in between.
    pub async fn restart(&mut self, down_for: Duration) -> anyhow::Result<()> {
        self.shut_down().await?;
        tokio::time::sleep(down_for).await;
        self.start_again().await
    }

    /// The first half of [`restart`](Self::restart): a fast shutdown
    /// (`SIGINT`), returning once the server has exited.
    pub async fn shut_down(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            if let Ok(pid) = i32::try_from(child.id()) {
                // SAFETY: signalling our own child, which we have not reaped.
                unsafe {
                    libc::kill(pid, libc::SIGINT);
                }
            }
            tokio::task::spawn_blocking(move || child.wait())
                .await
                .context("the cluster stop task failed")?
                .context("cannot wait for postgres to stop")?;
        }
        Ok(())
    }

    /// The second half of [`restart`](Self::restart): the server started
    /// again on the same data and port, once it is ready.
    pub async fn start_again(&mut self) -> anyhow::Result<()> {
        let dir = self
            .dir()
            .context("the cluster's directory is gone")?
            .to_path_buf();
        let port = self.port;
        let (child, log) = tokio::task::spawn_blocking(move || {
            let bin = find_bin().context("PostgreSQL is not installed")?;
            // SAFETY: geteuid has no preconditions and cannot fail.
            let as_postgres = (unsafe { libc::geteuid() } == 0)
                .then(postgres_user)
                .transpose()?;
            spawn_postgres(&bin, &dir.join("data"), &dir, port, as_postgres)
        })
        .await
        .context("the cluster start-up task failed")??;
        self.child = Some(child);
        self.log = log;
        Ok(())
    }

    /// The cluster's directory (data in `data/`).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_ref().map(tempfile::TempDir::path)
    }
}

/// Sleeps on the database's clock (`pg_sleep`) until `thread_id`'s writer
/// lease has expired there, so a takeover can follow; the caller's clock
/// plays no part.
pub async fn wait_for_lease_expiry(
    store: &crate::PostgresThreadStore,
    thread_id: &str,
) -> anyhow::Result<()> {
    sqlx::query(
        "SELECT pg_sleep(GREATEST(0, extract(epoch FROM lease_expires_at - clock_timestamp())) + 0.01)
         FROM roder_threads WHERE thread_id = $1",
    )
    .bind(thread_id)
    .execute(store.pool())
    .await
    .context("cannot wait on the database's clock")?;
    Ok(())
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

fn command(program: &Path, as_postgres: Option<(u32, u32)>) -> Command {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(program);
    command.env("LC_ALL", "C").env_remove("PGDATA");
    if let Some((uid, gid)) = as_postgres {
        command.uid(uid).gid(gid);
    }
    command
}

/// Starts `postgres` and waits for its ready line; the log is drained by a
/// thread into the returned buffer.
fn spawn_postgres(
    bin: &Path,
    data: &Path,
    socket_dir: &Path,
    port: u16,
    as_postgres: Option<(u32, u32)>,
) -> anyhow::Result<(Child, Arc<Mutex<Vec<String>>>)> {
    let mut postgres = command(&bin.join("postgres"), as_postgres);
    postgres
        .arg("-D")
        .arg(data)
        .arg("-k")
        .arg(socket_dir)
        .arg("-p")
        .arg(port.to_string())
        .args([
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
            "-c",
            "max_connections=200",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = postgres.spawn().context("cannot start postgres")?;
    let stderr = child.stderr.take().context("postgres has no stderr")?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let (ready_tx, ready_rx) = mpsc::channel();
    let lines = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains(READY_LINE) {
                let _ = ready_tx.send(true);
            }
            lines
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(line);
        }
        let _ = ready_tx.send(false);
    });
    match ready_rx.recv_timeout(READY_TIMEOUT) {
        Ok(true) => Ok((child, log)),
        outcome => {
            let _ = child.kill();
            let _ = child.wait();
            let log = log
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .join("\n");
            match outcome {
                Ok(_) => bail!("postgres exited before it was ready:\n{log}"),
                Err(_) => bail!("postgres was not ready within {READY_TIMEOUT:?}:\n{log}"),
            }
        }
    }
}

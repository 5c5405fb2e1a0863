//! Fresh databases for one test (a temporary SQLite file, a new PostgreSQL database on the test
//! cluster), ids, and the rule that turns a missing PostgreSQL into a loud failure or a
//! reported skip.

use std::path::PathBuf;
use std::sync::Arc;

use sealpost_protocol::ids::Id;
use sealpost_relay::store::{self, Inspect};

/// A fresh random id of the kind the caller names.
pub fn id<I: Id>() -> I {
    I::from_bytes(random_bytes())
}

fn random_bytes() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("random bytes");
    bytes
}

/// A temporary directory removed when dropped.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> Self {
        let path = std::env::temp_dir().join(format!("sealpost-test-{}", hex_id()));
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir(path)
    }
}

impl Default for TempDir {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A database for one test: its URL, and the folder that holds it (SQLite) so it lives as long.
#[derive(Debug)]
pub struct TestDb {
    pub url: String,
    /// The SQLite database's folder, removed on drop; `None` for PostgreSQL or a database
    /// this test does not own.
    pub dir: Option<TempDir>,
}

impl TestDb {
    /// A new, empty SQLite database in a folder of its own.
    pub fn sqlite() -> Self {
        let dir = TempDir::new();
        let url = format!("sqlite://{}/relay.db", dir.0.display());
        TestDb {
            url,
            dir: Some(dir),
        }
    }

    /// A new, empty database on the test cluster. Fails loudly when the cluster is not
    /// configured, unless `SEALPOST_SKIP_POSTGRES=1` (then reports the skip and returns `None`).
    pub async fn postgres() -> Option<Self> {
        let admin_url = postgres_admin_url()?;
        Some(Self::postgres_on(&admin_url, "relay_test").await)
    }

    /// A new, empty database named `<prefix>_<random hex>` on the server `admin_url` names
    /// (nobody drops it: the test cluster is thrown away whole).
    pub async fn postgres_on(admin_url: &str, prefix: &str) -> Self {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(admin_url)
            .await
            .expect("connect to the PostgreSQL server");
        assert!(
            prefix.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "a database name prefix of lowercase letters and underscores: {prefix}"
        );
        let name = format!("{prefix}_{}", hex_id());
        // Safe: the name is made of lowercase letters, hex digits and underscores.
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .expect("create test database");
        let base = admin_url
            .rsplit_once('/')
            .map(|(base, _)| base)
            .unwrap_or(admin_url);
        TestDb {
            url: format!("{base}/{name}"),
            dir: None,
        }
    }

    /// A database someone else made and removes (a benchmark's, another relay's).
    pub fn at(url: impl Into<String>) -> Self {
        TestDb {
            url: url.into(),
            dir: None,
        }
    }

    /// Opens the store, with its [`Inspect`] side for the tests that look at held bytes.
    pub async fn open(&self) -> Arc<dyn Inspect> {
        store::open_inspectable(&self.url)
            .await
            .expect("open store")
    }

    /// Every file SQLite keeps for the database (main file, WAL, shared memory); none for a
    /// database this test holds no folder for.
    pub fn files(&self) -> Vec<PathBuf> {
        let Some(dir) = &self.dir else {
            return Vec::new();
        };
        std::fs::read_dir(&dir.0)
            .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default()
    }
}

fn hex_id() -> String {
    random_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// The test cluster's URL. PostgreSQL tests are part of the suite: without a cluster they fail
/// with the command that provides one, unless the person opted out explicitly; a skipped test
/// says so (see [`report_skip`]) instead of passing silently.
pub fn postgres_admin_url() -> Option<String> {
    match std::env::var("SEALPOST_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("SEALPOST_SKIP_POSTGRES").as_deref() == Ok("1") => {
            report_skip("postgres");
            None
        }
        _ => panic!(
            "SEALPOST_TEST_POSTGRES_URL is not set. Run `cargo xtask test` (it starts a throwaway \
             PostgreSQL cluster), or set SEALPOST_SKIP_POSTGRES=1 to skip the PostgreSQL tests."
        ),
    }
}

/// Prints `SKIPPED: <what> <test>` straight to stderr (the test harness captures `eprintln!`,
/// not the stream itself) and appends the same line to the file `SEALPOST_SKIP_LOG` names, which
/// `cargo xtask test` counts.
pub fn report_skip(what: &str) {
    use std::io::Write as _;
    let thread = std::thread::current();
    let line = format!("SKIPPED: {what} {}\n", thread.name().unwrap_or("unnamed"));
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(path) = std::env::var_os("SEALPOST_SKIP_LOG") {
        // One write of one short line to a file opened for appending: lines from parallel
        // tests and processes do not interleave.
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .expect("open SEALPOST_SKIP_LOG");
        log.write_all(line.as_bytes())
            .expect("write SEALPOST_SKIP_LOG");
    }
}

//! A throwaway PostgreSQL cluster for tests and benchmarks: `initdb` into a fresh folder of
//! its own under the system's temporary directory, `pg_ctl start` on a free loopback port,
//! stopped and removed on drop.
//!
//! As root, initdb refuses to run, so the folder is handed to the `postgres` user and both
//! commands run through `runuser -u postgres --`. The folder is deliberately not under the
//! checkout: a clone may sit below a folder `postgres` cannot enter (`/root`, `mktemp -d`),
//! and initdb then fails with "Permission denied". Binaries come from `pg_config --bindir`.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context as _, Result, bail};

/// A running throwaway cluster.
#[derive(Debug)]
pub struct TestCluster {
    dir: PathBuf,
    bindir: PathBuf,
    port: u16,
    as_postgres_user: bool,
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// A new, empty folder for one cluster, reachable by every user (the system's temporary
/// directory is world-traversable; the folder itself is handed to `postgres` later).
fn cluster_dir(port: u16) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("sealpost-pg-{}-{port}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    Ok(dir.canonicalize()?)
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl TestCluster {
    /// Creates and starts a cluster. Fails, naming the missing piece, when PostgreSQL is not
    /// installed.
    pub fn start() -> Result<Self> {
        let output = Command::new("pg_config").arg("--bindir").output().context(
            "pg_config not found: install the PostgreSQL server (Debian: apt-get install postgresql)",
        )?;
        let bindir = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        if !bindir.join("initdb").exists() {
            bail!(
                "initdb not found in {}: install the PostgreSQL server (Debian: apt-get install postgresql)",
                bindir.display()
            );
        }
        let port = free_port()?;
        let dir = cluster_dir(port)?;
        let as_postgres_user = is_root();
        let cluster = TestCluster {
            dir,
            bindir,
            port,
            as_postgres_user,
        };
        if as_postgres_user {
            run(Command::new("chown")
                .args(["-R", "postgres"])
                .arg(&cluster.dir))?;
        }
        let data = cluster.dir.join("data");
        cluster.pg(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "--auth=trust".as_ref(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "--no-sync".as_ref(),
            ],
        )?;
        let options = format!(
            "-h 127.0.0.1 -p {port} -k {} -c max_connections=300",
            cluster.dir.display()
        );
        let log = cluster.dir.join("server.log");
        cluster.pg(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-o".as_ref(),
                options.as_ref(),
                "-l".as_ref(),
                log.as_os_str(),
                "-w".as_ref(),
                "start".as_ref(),
            ],
        )?;
        Ok(cluster)
    }

    /// URL of the cluster's `postgres` database (tests create their own databases in it).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The path of one of the installation's programs (`pgbench`, `psql`).
    pub fn tool(&self, name: &str) -> PathBuf {
        self.bindir.join(name)
    }

    /// Stops the cluster and removes its folder (dropping it does the same).
    pub fn stop(self) {
        drop(self);
    }

    fn pg(&self, tool: &str, args: &[&std::ffi::OsStr]) -> Result<()> {
        let binary = self.bindir.join(tool);
        let mut command = if self.as_postgres_user {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(binary);
            c
        } else {
            Command::new(binary)
        };
        command.args(args).current_dir(&self.dir);
        run(&mut command)
    }
}

fn run(command: &mut Command) -> Result<()> {
    let output = command
        .output()
        .with_context(|| format!("run {command:?}"))?;
    if !output.status.success() {
        bail!(
            "{command:?} failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = self.pg(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                "fast".as_ref(),
                "-w".as_ref(),
                "stop".as_ref(),
            ],
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `cargo xtask postgres`: starts a throwaway cluster, checks it answers a query, removes it.
pub fn check() -> Result<()> {
    let cluster = TestCluster::start()?;
    let answer = cluster.query("SELECT 40 + 2")?;
    if answer != "42" {
        bail!("the throwaway cluster answered {answer:?} to SELECT 40 + 2");
    }
    eprintln!(
        "a throwaway PostgreSQL cluster started in {}, answered and was removed",
        cluster.dir.display()
    );
    cluster.stop();
    Ok(())
}

impl TestCluster {
    fn query(&self, sql: &str) -> Result<String> {
        let output = Command::new(self.bindir.join("psql"))
            .args([self.url().as_str(), "-tAc", sql])
            .output()
            .context("run psql")?;
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn the_postgres_step_works_from_a_clone_under_a_closed_folder() {
        if crate::skips::skip_postgres() {
            return;
        }
        // A parent only its owner may enter, as /root is: `postgres` cannot reach the clone.
        let parent = std::env::temp_dir().join(format!("sealpost-closed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&parent);
        std::fs::create_dir_all(&parent).unwrap();
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o700)).unwrap();
        let clone = parent.join("sealpost");
        let root = crate::cmd::root();
        let status = Command::new("git")
            .args(["clone", "-q"])
            .arg(&root)
            .arg(&clone)
            .status()
            .unwrap();
        assert!(status.success(), "git clone failed");
        let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["run", "-q", "-p", "xtask", "--", "postgres"])
            .current_dir(&clone)
            .env("CARGO_TARGET_DIR", clone.join("target"))
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&parent);
        assert!(
            output.status.success(),
            "`cargo xtask postgres` from a clone under a 0700 folder failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    #[test]
    fn a_cluster_starts_answers_and_is_removed() {
        if crate::skips::skip_postgres() {
            return;
        }
        let cluster = TestCluster::start().expect("start cluster");
        let dir = cluster.dir.clone();
        assert_eq!(cluster.query("SELECT 40 + 2").unwrap(), "42");
        cluster.stop();
        assert!(!dir.exists());
    }
}

//! A throwaway PostgreSQL cluster for tests and benchmarks: `initdb` into a folder under
//! `target/`, `pg_ctl start` on a free loopback port, stopped and removed on drop.
//!
//! As root, initdb refuses to run, so the folder is handed to the `postgres` user and both
//! commands run through `runuser -u postgres --`. Binaries come from `pg_config --bindir`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
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
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
        let dir = root.join(format!("sealpost-pg-{port}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let dir = dir.canonicalize()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_starts_answers_and_is_removed() {
        let cluster = TestCluster::start().expect("start cluster");
        let dir = cluster.dir.clone();
        let psql = cluster.bindir.join("psql");
        let output = Command::new(psql)
            .args([cluster.url().as_str(), "-tAc", "SELECT 40 + 2"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "42");
        cluster.stop();
        assert!(!dir.exists());
    }
}

//! Running commands: one place that prints what runs, in which step, and fails loudly.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// The workspace root (xtask lives one level below it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask has a parent")
        .to_path_buf()
}

/// Runs `work` as a named step, printing its name and how long it took.
pub fn step<T>(name: &str, work: impl FnOnce() -> Result<T>) -> Result<T> {
    eprintln!("\n==> {name}");
    let started = Instant::now();
    let result = work().with_context(|| format!("step failed: {name}"));
    let outcome = if result.is_ok() { "ok" } else { "FAILED" };
    eprintln!(
        "<== {name}: {outcome} in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    result
}

/// A command builder that echoes the command line before running it.
pub struct Cmd(Command);

pub fn cmd(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Cmd {
    let mut command = Command::new(program);
    command.args(args).current_dir(root());
    Cmd(command)
}

pub fn cargo(args: &[&str]) -> Cmd {
    cmd(
        std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()),
        args,
    )
}

impl Cmd {
    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        self.0.env(key, value);
        self
    }

    pub fn env_remove(mut self, key: &str) -> Self {
        self.0.env_remove(key);
        self
    }

    pub fn arg_path(mut self, path: impl AsRef<Path>) -> Self {
        self.0.arg(path.as_ref());
        self
    }

    pub fn dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.0.current_dir(dir);
        self
    }

    pub fn run(mut self) -> Result<()> {
        eprintln!("$ {}", self.describe());
        let status = self
            .0
            .status()
            .with_context(|| format!("could not start {}", self.describe()))?;
        if !status.success() {
            bail!("{} exited with {status}", self.describe());
        }
        Ok(())
    }

    /// Runs quietly and returns stdout; fails with stderr on a non-zero exit.
    pub fn read(mut self) -> Result<String> {
        let output = self
            .0
            .output()
            .with_context(|| format!("could not start {}", self.describe()))?;
        if !output.status.success() {
            bail!(
                "{} failed: {}",
                self.describe(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8(output.stdout)?)
    }

    fn describe(&self) -> String {
        let args: Vec<_> = self
            .0
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        format!(
            "{} {}",
            self.0.get_program().to_string_lossy(),
            args.join(" ")
        )
    }
}

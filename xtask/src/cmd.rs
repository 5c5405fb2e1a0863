//! Running commands: one place that prints what runs, in which step, and fails loudly.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// How long one test suite may run before it is taken to hang: several times its usual
/// length on a cold build (the native suite, the longest, takes about five minutes), and short
/// enough that the whole test run still fails well inside CI's limit.
pub const SUITE_DEADLINE: Duration = Duration::from_secs(30 * 60);

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

    pub fn run(self) -> Result<()> {
        self.run_until(None)
    }

    /// Runs as [`Cmd::run`], but kills it and every process it started once `deadline` has
    /// passed: a test that hangs fails its step in bounded time instead of holding CI until
    /// CI's own limit, which reports nothing about which step hung.
    pub fn run_within(self, deadline: Duration) -> Result<()> {
        self.run_until(Some(deadline))
    }

    fn run_until(mut self, deadline: Option<Duration>) -> Result<()> {
        eprintln!("$ {}", self.describe());
        let mut child = self
            .0
            .spawn()
            .with_context(|| format!("could not start {}", self.describe()))?;
        let started = Instant::now();
        let status = loop {
            let Some(deadline) = deadline else {
                break child.wait()?;
            };
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if started.elapsed() > deadline {
                kill_tree(child.id());
                let _ = child.wait();
                bail!(
                    "{} did not finish within {} minutes and was killed, with every process \
                     it started. A Rust test that hangs names itself above (\"has been running \
                     for over 60 seconds\").",
                    self.describe(),
                    deadline.as_secs() / 60
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        };
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

/// Kills `root` and its descendants, children first found through `/proc` (Linux, where the
/// test suites run). Each is stopped before its children are listed, so none can start more.
fn kill_tree(root: u32) {
    let mut pending = vec![root];
    let mut found = Vec::new();
    while let Some(pid) = pending.pop() {
        let _ = Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status();
        pending.extend(children_of(pid));
        found.push(pid);
    }
    for pid in found {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

/// The processes whose parent is `pid`, from each `/proc/<pid>/stat` (its fourth field, after
/// the command name in parentheses, which may itself hold spaces and parentheses).
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    processes
        .filter_map(|entry| {
            let child: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
            let parent: u32 = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            (parent == pid).then_some(child)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `pid` still runs (a zombie, killed and not yet reaped, does not).
    fn runs(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            !stat
                .rsplit_once(')')
                .unwrap()
                .1
                .trim_start()
                .starts_with('Z')
        })
    }

    #[test]
    fn a_command_past_its_deadline_is_killed_with_what_it_started() {
        let folder = std::env::temp_dir().join(format!("xtask-deadline-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let pid_file = folder.join("grandchild");
        let script = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
        let error = cmd("sh", &["-c", &script])
            .run_within(Duration::from_secs(2))
            .unwrap_err();
        assert!(error.to_string().contains("did not finish"), "{error}");
        let grandchild: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let _ = std::fs::remove_dir_all(&folder);
        // The kill is sent before `run_within` returns; the kernel may take a moment.
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            !runs(grandchild)
        });
        assert!(gone, "the grandchild {grandchild} still runs");
    }

    #[test]
    fn a_command_within_its_deadline_reports_its_status() {
        cmd("true", &[])
            .run_within(Duration::from_secs(60))
            .unwrap();
        let error = cmd("false", &[])
            .run_within(Duration::from_secs(60))
            .unwrap_err();
        assert!(error.to_string().contains("exited with"), "{error}");
    }
}

//! Skipped tests are counted, not silent. A test that skips (today: a PostgreSQL test under
//! `SEALPOST_SKIP_POSTGRES=1`) prints `SKIPPED: <what> <test>` to stderr and appends the same
//! line to the file `SEALPOST_SKIP_LOG` names. `cargo xtask test` points that variable at a
//! fresh file, reads it after the native tests and fails when anything skipped that was not
//! asked to skip.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context as _, Result};

pub const LOG_VAR: &str = "SEALPOST_SKIP_LOG";
const PREFIX: &str = "SKIPPED: ";

/// Skipped tests by what they needed (`postgres` → test names), in a stable order.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Skips(pub BTreeMap<String, Vec<String>>);

impl Skips {
    /// Reads every `SKIPPED: <what> <test>` line; other lines are ignored, so the parser also
    /// works on a test run's whole output.
    pub fn parse(text: &str) -> Self {
        let mut skips = Skips::default();
        for line in text.lines() {
            let Some(rest) = line.trim_end().strip_prefix(PREFIX) else {
                continue;
            };
            let (what, test) = rest.split_once(' ').unwrap_or((rest, "unnamed"));
            if what.is_empty() {
                continue;
            }
            skips
                .0
                .entry(what.to_owned())
                .or_default()
                .push(test.trim().to_owned());
        }
        for tests in skips.0.values_mut() {
            tests.sort();
        }
        skips
    }

    /// Reads the log; a missing file means nothing skipped.
    pub fn read(path: &Path) -> Result<Self> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Self::parse(&text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    pub fn total(&self) -> usize {
        self.0.values().map(Vec::len).sum()
    }

    #[cfg(test)]
    pub fn count(&self, what: &str) -> usize {
        self.0.get(what).map_or(0, Vec::len)
    }

    /// What skipped other than `allowed`.
    pub fn other_than(&self, allowed: &[&str]) -> Skips {
        Skips(
            self.0
                .iter()
                .filter(|(what, _)| !allowed.contains(&what.as_str()))
                .map(|(what, tests)| (what.clone(), tests.clone()))
                .collect(),
        )
    }

    /// One line per kind: `postgres: 3 tests skipped (a, b, c)`.
    pub fn summary(&self) -> String {
        self.0
            .iter()
            .map(|(what, tests)| {
                format!(
                    "{what}: {} tests skipped ({})",
                    tests.len(),
                    tests.join(", ")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The line a skipped test writes.
#[cfg(test)]
fn line(what: &str, test: &str) -> String {
    format!("{PREFIX}{what} {test}\n")
}

/// For xtask's own tests: the same report the workspace's tests give.
#[cfg(test)]
pub fn report(what: &str) {
    use std::io::Write as _;
    let thread = std::thread::current();
    let line = line(what, thread.name().unwrap_or("unnamed"));
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(path) = std::env::var_os(LOG_VAR) {
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .expect("open the skip log");
        log.write_all(line.as_bytes()).expect("write the skip log");
    }
}

/// For xtask's own PostgreSQL tests: whether to skip (and report it).
#[cfg(test)]
pub fn skip_postgres() -> bool {
    let skip = std::env::var("SEALPOST_SKIP_POSTGRES").as_deref() == Ok("1");
    if skip {
        report("postgres");
    }
    skip
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_lines_are_counted_by_kind_among_other_output() {
        let output = "\
running 3 tests
SKIPPED: postgres contract::postgres::check_claims
test contract::postgres::check_claims ... ok
SKIPPED: postgres session_end::a_claim_on_postgres
SKIPPED: chromium web::spec
  SKIPPED: postgres indented lines are not reports
SKIPPED:
test result: ok. 3 passed; 0 failed
";
        let skips = Skips::parse(output);
        assert_eq!(skips.total(), 3);
        assert_eq!(skips.count("postgres"), 2);
        assert_eq!(skips.count("chromium"), 1);
        assert_eq!(skips.count("sqlite"), 0);
        assert_eq!(
            skips.0["postgres"],
            [
                "contract::postgres::check_claims",
                "session_end::a_claim_on_postgres"
            ]
        );
        assert_eq!(skips.other_than(&["postgres"]).total(), 1);
        assert_eq!(skips.other_than(&["postgres", "chromium"]).total(), 0);
        assert_eq!(
            skips.summary(),
            "chromium: 1 tests skipped (web::spec)\npostgres: 2 tests skipped \
             (contract::postgres::check_claims, session_end::a_claim_on_postgres)"
        );
    }

    #[test]
    fn no_log_means_nothing_skipped_and_a_report_is_read_back() {
        let dir = std::env::temp_dir().join(format!("sealpost-skips-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("skipped.log");
        assert_eq!(Skips::read(&path).unwrap(), Skips::default());
        // The line a test writes is the line the parser reads.
        std::fs::write(&path, line("postgres", "it::a_test").repeat(2)).unwrap();
        let skips = Skips::read(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(skips.count("postgres"), 2);
        assert_eq!(skips.total(), 2);
    }
}

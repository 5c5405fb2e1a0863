//! `cargo xtask mutants [seal|relay|all]`: mutation testing with cargo-mutants, bounded to the
//! code where a surviving mutant means a missing test on a security property: `crates/seal`
//! (the whole crate), and the relay's authentication and call-state transitions. Not part of
//! `cargo xtask test`: it builds and tests once per mutant (docs/TESTING.md has the last run).
//!
//! cargo-mutants works on a copy of the tree (never `--in-place`), with its own target folder
//! inside the copy; results go to `target/mutants/<part>/mutants.out/`.

use anyhow::{Result, bail};

use crate::cmd::{cmd, root};
use crate::tools;

/// One bounded run: a package, the files to mutate, and what must not be mutated.
struct Part {
    name: &'static str,
    package: &'static str,
    files: &'static [&'static str],
    /// Functions not mutated (cargo-mutants `--exclude-re`), with why in the comment.
    exclude: &'static [&'static str],
}

const PARTS: [Part; 2] = [
    Part {
        name: "seal",
        package: "sealpost-seal",
        files: &["crates/seal/src/**/*.rs"],
        exclude: &[],
    },
    Part {
        name: "relay",
        package: "sealpost-relay",
        // Who may act (tokens, owner sessions) and the call state machine on SQLite (post,
        // claim, reply, cancel, expiry sweep, and the writer's grouped statements);
        // PostgreSQL's copy is covered by the same contract suite.
        files: &[
            "crates/relay/src/http/auth/**/*.rs",
            "crates/relay/src/store/sqlite/calls.rs",
            "crates/relay/src/store/sqlite/batch.rs",
        ],
        // `Debug` output is not a property anyone relies on.
        exclude: &["impl .*Debug"],
    },
];

pub fn run(which: &str) -> Result<()> {
    let parts: Vec<&Part> = match which {
        "all" => PARTS.iter().collect(),
        name => match PARTS.iter().find(|p| p.name == name) {
            Some(part) => vec![part],
            None => bail!("usage: cargo xtask mutants [seal|relay|all]"),
        },
    };
    let cargo_mutants = tools::ensure_cargo_mutants()?;
    let mut failed = Vec::new();
    for part in parts {
        let output = root().join("target").join("mutants").join(part.name);
        std::fs::create_dir_all(&output)?;
        let mut args = vec!["mutants", "--package", part.package, "--no-shuffle"];
        for file in part.files {
            args.extend(["--file", file]);
        }
        for exclude in part.exclude {
            args.extend(["--exclude-re", exclude]);
        }
        args.push("--output");
        // cargo-mutants exits non-zero when a mutant survives or times out; the other parts
        // still run, and the whole command fails at the end.
        let result = crate::cmd::step(&format!("mutants: {}", part.name), || {
            cmd(&cargo_mutants, &args)
                .arg_path(&output)
                // The PostgreSQL copies of the relay's tests would need a cluster; the SQLite
                // ones exercise the same transitions. Skips are reported, as everywhere.
                .env("SEALPOST_SKIP_POSTGRES", "1")
                .run()
        });
        let outcomes = output.join("mutants.out").join("outcomes.json");
        match summary(&outcomes) {
            Ok(line) => eprintln!("{}: {line} ({})", part.name, outcomes.display()),
            Err(error) => eprintln!("{}: no summary: {error:#}", part.name),
        }
        if result.is_err() {
            failed.push(part.name);
        }
    }
    if !failed.is_empty() {
        bail!("mutants survived or timed out in: {}", failed.join(", "));
    }
    Ok(())
}

/// `caught 40, missed 2, unviable 5, timeout 0 of 47` from cargo-mutants' `outcomes.json`.
fn summary(outcomes: &std::path::Path) -> Result<String> {
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(outcomes)?)?;
    let count = |key: &str| json[key].as_u64().unwrap_or(0);
    Ok(format!(
        "caught {}, missed {}, unviable {}, timeout {} of {}",
        count("caught"),
        count("missed"),
        count("unviable"),
        count("timeout"),
        count("total_mutants")
    ))
}

#[cfg(test)]
mod tests {
    use super::PARTS;
    use crate::cmd::root;

    /// A file that moved would leave cargo-mutants with nothing to mutate, and the run would
    /// report a clean table over no code.
    #[test]
    fn every_file_a_part_names_exists() {
        for part in &PARTS {
            for pattern in part.files {
                let path = pattern.trim_end_matches("/**/*.rs");
                assert!(
                    root().join(path).exists(),
                    "{}: {pattern} names nothing",
                    part.name
                );
            }
        }
    }
}

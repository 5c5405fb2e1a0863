//! PostgreSQL's own speed on the benchmark's cluster, in the same run: `pgbench -N` (the
//! simple-update script: per transaction one update, one select, one insert, one commit) at
//! scale 10, from one client and from 16. The relay's PostgreSQL figures are judged against
//! these: a call needs three durable commits (post, claim, reply), so the database allows
//! about tps ÷ 3 calls/s, and one call at a time about 3 × the one-client latency.

use std::path::Path;
use std::process::Command;

/// What `pgbench -N` measured.
#[derive(Debug, Clone, Copy)]
pub struct Pgbench {
    /// Transactions per second from one client, and the mean latency of one.
    pub tps_1: f64,
    pub latency_1_ms: f64,
    /// Transactions per second from 16 clients.
    pub tps_16: f64,
}

impl Pgbench {
    /// Mean of two measurements (taken before and after the relay's, on a noisy machine).
    pub fn mean(a: Pgbench, b: Pgbench) -> Pgbench {
        Pgbench {
            tps_1: (a.tps_1 + b.tps_1) / 2.0,
            latency_1_ms: (a.latency_1_ms + b.latency_1_ms) / 2.0,
            tps_16: (a.tps_16 + b.tps_16) / 2.0,
        }
    }

    /// Calls per second the database's commits allow: three per call.
    pub fn calls_per_second(&self) -> f64 {
        self.tps_16 / 3.0
    }

    /// One call at a time: three commits from one client.
    pub fn call_latency_ms(&self) -> f64 {
        3.0 * self.latency_1_ms
    }

    pub fn line(&self) -> String {
        format!(
            "pgbench -N (scale 10): 1 client {:.0} tps ({:.2} ms each), 16 clients {:.0} tps",
            self.tps_1, self.latency_1_ms, self.tps_16
        )
    }
}

/// Fills the database `url` names with pgbench's tables (scale 10).
pub fn initialise(pgbench: &Path, url: &str) {
    let output = Command::new(pgbench)
        .args(["-i", "-q", "-s", "10", url])
        .output()
        .expect("run pgbench -i");
    assert!(
        output.status.success(),
        "pgbench -i failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs `pgbench -N` for `seconds` from 1 client and from 16.
pub fn measure(pgbench: &Path, url: &str, seconds: u64) -> Pgbench {
    let (tps_1, latency_1_ms) = run(pgbench, url, 1, seconds);
    let (tps_16, _) = run(pgbench, url, 16, seconds);
    Pgbench {
        tps_1,
        latency_1_ms,
        tps_16,
    }
}

/// `(tps, mean latency in ms)` of one `pgbench -N` run.
fn run(pgbench: &Path, url: &str, clients: u32, seconds: u64) -> (f64, f64) {
    let output = Command::new(pgbench)
        .args(["-N", "-n", "-j", if clients > 1 { "2" } else { "1" }])
        .arg(format!("-c{clients}"))
        .arg(format!("-T{seconds}"))
        .arg(url)
        .output()
        .expect("run pgbench");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "pgbench failed: {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let figure = |prefix: &str| -> f64 {
        text.lines()
            .find_map(|line| line.trim().strip_prefix(prefix))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|number| number.parse().ok())
            .unwrap_or_else(|| panic!("no `{prefix}` in pgbench's output:\n{text}"))
    };
    (figure("tps = "), figure("latency average = "))
}

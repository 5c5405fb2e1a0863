//! The real `sealpost-relay` binary set up for the test provider through its environment, as
//! an operator's container is: what its variables mean and what its first start prints.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use sealpost_testkit::{Relay, TEST_KEY, TempDir, TestDb};

use super::{CLIENT_ID, CLIENT_SECRET, TestProvider, file_with, free_addr};

/// A hang guard for the start, not a speed measurement.
const STARTED_WITHIN: Duration = Duration::from_secs(60);

/// A relay process, killed when dropped, with a client for it and what it printed before it
/// said where it listens.
pub struct RelayProcess {
    child: Child,
    pub relay: Relay,
    pub printed: Vec<String>,
    _dir: TempDir,
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the binary on `db` at a fresh loopback address, with the provider's issuer, client
/// id and secret file in `SEALPOST_OIDC_*` and `env` besides. The provider must have the
/// address's callback registered: see [`provider_for_process`].
pub fn spawn_relay(
    provider: &TestProvider,
    addr: std::net::SocketAddr,
    db: TestDb,
    env: &[(&str, &str)],
) -> RelayProcess {
    let dir = TempDir::new();
    let key_file = dir.0.join("signing.key");
    std::fs::write(&key_file, TEST_KEY).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sealpost-relay"))
        .args(["serve", "--metrics-listen", "off"])
        .env("SEALPOST_LISTEN", addr.to_string())
        .env("SEALPOST_PUBLIC_URL", format!("http://{addr}"))
        .env("SEALPOST_DATABASE_URL", &db.url)
        .env("SEALPOST_SIGNING_KEY_FILE", &key_file)
        .env("SEALPOST_OIDC_ISSUER", &provider.issuer)
        .env("SEALPOST_OIDC_CLIENT_ID", CLIENT_ID)
        .env("SEALPOST_OIDC_CLIENT_SECRET_FILE", file_with(CLIENT_SECRET))
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sealpost-relay");
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (lines, read) = mpsc::channel();
    // Read on: the relay never blocks on a full stdout.
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let mut printed = Vec::new();
    let base = loop {
        let line = read
            .recv_timeout(STARTED_WITHIN)
            .unwrap_or_else(|_| panic!("the relay did not start; it printed {printed:?}"));
        if let Some(base) = line.strip_prefix("sealpost-relay listening on ") {
            break base.to_owned();
        }
        printed.push(line);
    };
    RelayProcess {
        child,
        relay: Relay::connect(base, None, Some(db)),
        printed,
        _dir: dir,
    }
}

/// A provider with a fresh address's callback registered, and that address.
pub fn provider_for_process() -> (TestProvider, std::net::SocketAddr) {
    let addr = free_addr();
    let provider = TestProvider::start(&[format!("http://{addr}/auth/oidc/callback")]);
    (provider, addr)
}

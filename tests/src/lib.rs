//! The cross-process tests' and the load benchmark's side of the test kit: a relay tuned for
//! load with an owner signed in, and pairings as the web app makes them (a pairing secret, its
//! pair_id, an MCP token, the code the plugin is given). Pairing secrets need `sealpost-seal`,
//! which `sealpost-testkit` must not depend on (the relay's own tests use the kit).

pub mod channel;
pub mod tab;

use std::ops::Deref;

use anyhow::Result;
use sealpost_protocol::api::{CreateMcpTokenRequest, CreateMcpTokenResponse};
use sealpost_protocol::ids::{PairId, TokenId};
use sealpost_relay::config::Limits;
use sealpost_seal::PairingSecret;
use sealpost_testkit::{Client, Relay, TestDb, id};

/// A relay on loopback and an owner signed in to it. Everything else a test asks of the relay
/// goes through the kit's [`Relay`] (its `Deref` target).
#[derive(Debug)]
pub struct LiveRelay {
    pub relay: Relay,
    /// The signed-in owner: the tab's end of a session.
    pub owner: Client,
}

impl Deref for LiveRelay {
    type Target = Relay;

    fn deref(&self) -> &Relay {
        &self.relay
    }
}

/// One pairing: the secret both ends share, its routing handle, and the plugin's MCP token.
#[derive(Debug)]
pub struct Pairing {
    pub secret: PairingSecret,
    pub pair_id: PairId,
    pub mcp_token: String,
    /// The MCP token's id, for revoking it.
    pub token_id: TokenId,
}

impl Pairing {
    /// The pairing code the web app would show for this pairing on the relay at `base`.
    pub fn code(&self, base: &str) -> String {
        let secret = PairingSecret::from_bytes(*self.secret.expose());
        let origin = sealpost_seal::RelayOrigin::parse(base).expect("a loopback relay");
        sealpost_seal::PairingCode::new(origin, self.mcp_token.clone(), secret)
            .expect("a loopback relay and a fresh token make a valid code")
            .encode()
            .to_string()
    }
}

impl LiveRelay {
    /// Starts a relay on `db` (limits tuned for load: no rate limit, no cap on bytes held,
    /// many sessions) and signs an owner in through `/v1/auth/signin`.
    pub async fn start(db: TestDb) -> Self {
        Self::start_with(db, |_| {}).await
    }

    /// As [`LiveRelay::start`], with `limits` changed by `tune` after the load-test defaults.
    pub async fn start_with(db: TestDb, tune: impl FnOnce(&mut Limits)) -> Self {
        let relay = Relay::start(db, |config| {
            config.limits.max_bytes_held_per_owner = 0;
            config.limits.max_live_sessions_per_owner = 1_000;
            tune(&mut config.limits);
        })
        .await;
        let (_, token) = relay.owner(&format!("e2e-{}", id::<TokenId>())).await;
        let owner = relay.client_as(token);
        Self { relay, owner }
    }

    /// A client for a server at `base` that only answers like a relay (the benchmark's echo).
    pub fn echo(base: String) -> Self {
        let relay = Relay::connect(base, None, None);
        let owner = relay.client_as("");
        Self { relay, owner }
    }

    /// The plugin's end of `pairing`: a client acting with its MCP token.
    pub fn plugin(&self, pairing: &Pairing) -> Client {
        self.relay.client_as(pairing.mcp_token.clone())
    }

    /// A new pairing, as the web app makes one: a fresh secret and an MCP token for its pair_id.
    pub async fn pair(&self) -> Result<Pairing> {
        let secret = PairingSecret::generate(&mut rand::rng());
        let pair_id = secret.pair_id();
        let request = CreateMcpTokenRequest {
            label: "e2e".into(),
            pair_id,
            ttl_s: None,
        };
        let token: CreateMcpTokenResponse = self.owner.post("/v1/mcp-tokens", &request).await?;
        Ok(Pairing {
            secret,
            pair_id,
            mcp_token: token.token,
            token_id: token.id,
        })
    }

    /// Stops the relay and starts it again on the same address and database, as after an
    /// outage; the owner's token stays valid.
    pub async fn restart(self) -> Self {
        Self {
            relay: self.relay.restart().await,
            owner: self.owner,
        }
    }

    /// Stops the relay: long-polls end, in-flight requests finish. Its database, to be read
    /// after.
    pub async fn stop(self) -> Option<TestDb> {
        self.relay.stop().await
    }
}

//! Team sign-in through the team's identity provider (OpenID Connect): the authorization code
//! flow with PKCE, `state` and `nonce`, the ID token's checks, who may sign in, and (with
//! `--oidc-recheck-hours`) re-confirming each person at the provider. docs/SIGNIN.md explains
//! the flow and its decisions; `http::oidc` serves its two pages.

mod args;
mod at_rest;
mod http;
mod provider;
mod recheck;
mod refusal;
mod tokens;
mod verify;

use std::time::Duration;

pub use args::{ClientSecret, OidcArgs, OidcConfig, RequiredClaim};
pub use at_rest::AtRest;
pub use provider::{Authorization, CALLBACK_PATH, Provider, Refresh, Refreshed, Renewal, SignedIn};
pub use recheck::{recheck_loop, renew_due};
pub use refusal::Refusal;
pub use verify::{CLOCK_SKEW, VerifiedClaims, admit, id_token_at, identity_tag, name_hint};

/// Where an app sends the browser to start a team sign-in.
pub const START_PATH: &str = "/auth/oidc/start";
/// How long a flow may take from its start to its callback.
pub const FLOW_TTL: Duration = Duration::from_secs(10 * 60);
/// How long the code a callback hands an app works (the app uses it at once).
pub const HANDOFF_CODE_TTL_S: u64 = 120;

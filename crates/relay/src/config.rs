//! The relay's configuration and every limit it enforces. Each limit is written once, here: its
//! name, its default and its doc comment make the `serve` flag (`--NAME`), its variable
//! (`SEALPOST_NAME`, derived in `cli.rs`), its `--help` text and the table in docs/RELAY.md
//! (checked by a test in `cli.rs`).

use std::net::SocketAddr;
use std::path::PathBuf;

use sealpost_protocol::limits;
use sealpost_time::UnixMillis;

use crate::origins::AppOrigin;

/// Everything `serve` needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address the API listens on (port 0 picks a free one).
    pub listen: SocketAddr,
    /// `sqlite://PATH` or `postgres://…`: the scheme chooses the backend.
    pub database_url: String,
    /// Folder of the web app served at `/` (none: a short notice).
    pub web_dir: Option<PathBuf>,
    /// Origin used in sign-in links, e.g. `https://relay.example.com`.
    pub public_url: String,
    /// Take the client address from the last `Forwarded` / `X-Forwarded-For` entry (only behind
    /// a proxy that sets it); otherwise those headers are ignored.
    pub trust_proxy: bool,
    /// Serve `/metrics` on this address of its own (meant for loopback or a private network).
    pub metrics_listen: Option<SocketAddr>,
    /// When `metrics_listen` is only the default and that address is taken, go on without it
    /// (a warning) instead of failing to start.
    pub metrics_listen_optional: bool,
    /// Serve `/metrics` on the main address too, to requests bearing this token.
    pub metrics_token: Option<String>,
    /// Token signing key (≥ 32 bytes). None: generated once and stored in the database.
    pub signing_key: Option<Vec<u8>>,
    /// Origins whose pages may use the API from a browser (CORS). Empty: no CORS headers and
    /// no `Origin` checked; otherwise a request from any other origin but the relay's own is
    /// refused with 403 `origin_not_allowed` (`origins`, `http::cors`).
    pub app_origins: Vec<AppOrigin>,
    /// Team sign-in through an OpenID provider; `None`: sign-in links only.
    pub oidc: Option<crate::oidc::OidcConfig>,
    /// Every limit the relay enforces.
    pub limits: Limits,
}

/// Every size, count, time and rate limit of the relay.
#[derive(Debug, Clone, PartialEq, clap::Args)]
#[command(next_help_heading = "Limits")]
pub struct Limits {
    /// Largest decoded call envelope, in bytes (shared with the plugin); above it, 413
    /// `envelope_too_large`.
    #[arg(long, default_value_t = limits::MAX_CALL_ENVELOPE_BYTES)]
    pub max_call_envelope_bytes: usize,
    /// Largest decoded reply envelope, in bytes (shared with the browser); above it, 413
    /// `reply_too_large`.
    #[arg(long, default_value_t = limits::MAX_REPLY_ENVELOPE_BYTES)]
    pub max_reply_envelope_bytes: usize,
    /// Largest decoded session hello, in bytes; above it, 413 `hello_too_large`.
    #[arg(long, default_value_t = limits::MAX_HELLO_BYTES)]
    pub max_hello_bytes: usize,
    /// Largest body of a request that carries no envelope (sign-in, tokens, cancel), in bytes;
    /// above it, 413 `body_too_large`.
    #[arg(long, default_value_t = 16 * 1024)]
    pub max_small_body_bytes: usize,
    /// A request body must arrive within this many milliseconds; after it, 408 `body_timeout`.
    #[arg(long, default_value_t = 30_000)]
    pub body_read_timeout_ms: u64,
    /// Longest long-poll (`wait_ms`) for claims and reads, in milliseconds; a longer one is
    /// refused with 400 `wait_too_long`. At least the default: the plugin and the browser ask
    /// for up to it.
    #[arg(long, default_value_t = limits::MAX_WAIT_MS)]
    pub max_wait_ms: u64,
    /// Most calls one claim returns; a claim asking for more (its `max`) is refused with 400
    /// `claim_batch_out_of_range`. At least the default: the browser asks for up to it.
    #[arg(long, default_value_t = limits::MAX_CLAIM_BATCH as u32)]
    pub max_claim_batch: u32,
    /// Lease a claim grants, in milliseconds (never past the call's expiry); a reply after it
    /// gets 410 `lease_expired`. At least the default: a tab's tool may run for 25 s.
    #[arg(long, default_value_t = limits::DEFAULT_LEASE_MS)]
    pub lease_ms: u64,
    /// Highest call `ttl_s`, in seconds; above it, 400 `ttl_out_of_range`.
    #[arg(long, default_value_t = 600)]
    pub max_call_ttl_s: u64,
    /// Highest session `ttl_s`, in seconds; above it, 400 `ttl_out_of_range`.
    #[arg(long, default_value_t = 24 * 3600)]
    pub max_session_ttl_s: u64,
    /// Lifetime of an MCP token whose request names no `ttl_s`, in seconds.
    #[arg(long, default_value_t = 90 * 24 * 3600)]
    pub default_mcp_token_ttl_s: u64,
    /// Highest MCP token `ttl_s`, in seconds; above it, 400 `ttl_out_of_range`.
    #[arg(long, default_value_t = 365 * 24 * 3600)]
    pub max_mcp_token_ttl_s: u64,
    /// An owner sign-in lapses this many seconds after its last renewal (each `GET /v1/me`
    /// renews it), and then answers 401 `unauthorized`…
    #[arg(long, default_value_t = 7 * 24 * 3600)]
    pub owner_token_ttl_s: u64,
    /// …and never later than this many seconds after the sign-in itself, however often it is
    /// used (a sign-in made from a link another sign-in minted: after that one's sign-in).
    #[arg(long, default_value_t = 30 * 24 * 3600)]
    pub owner_token_lifetime_s: u64,
    /// A sign-in code works once within this many seconds; later, 401 `invalid_signin_code`.
    #[arg(long, default_value_t = 15 * 60)]
    pub signin_code_ttl_s: u64,
    /// Longest MCP token label, in bytes; above it, 400 `bad_request`.
    #[arg(long, default_value_t = 100)]
    pub max_label_bytes: usize,
    /// Pending calls one session may hold; past it, a post gets 429 `too_many_pending_calls`.
    #[arg(long, default_value_t = 1_000, alias = "max-pending-calls")]
    pub max_pending_calls_per_session: u32,
    /// Live sessions one owner may hold (one per pairing), a host app at most half (host apps
    /// together three quarters); past it, 429 `too_many_sessions`.
    #[arg(long, default_value_t = 20, alias = "max-live-sessions")]
    pub max_live_sessions_per_owner: u32,
    /// Sustained requests per second per token (0 = unlimited), per replica; past it and the
    /// burst, 429 `rate_limited` with `Retry-After`, never to the first reply, cancel or read
    /// of admitted work.
    #[arg(long, default_value_t = 50, alias = "rate-per-token")]
    pub rate_per_token_per_s: u32,
    /// Burst of requests a token may send above the sustained rate.
    #[arg(long, default_value_t = 200, alias = "rate-burst")]
    pub rate_burst_per_token: u32,
    /// Sustained requests per second of all of one owner's tokens together (0 = unlimited),
    /// per replica: minting more tokens buys no more rate. Past it and the burst, 429
    /// `owner_rate_limited` with `Retry-After`, never to the first reply, cancel or read of
    /// admitted work.
    #[arg(long, default_value_t = 100, alias = "rate-per-owner")]
    pub rate_per_owner_per_s: u32,
    /// Burst of requests an owner's tokens may send together above that rate.
    #[arg(long, default_value_t = 400)]
    pub rate_burst_per_owner: u32,
    /// Bytes one owner's calls and replies may hold at once (0 = no quota), per replica; past
    /// it, 429 `bytes_quota_exceeded` with `Retry-After` the sweep interval.
    #[arg(long, default_value_t = 256 * 1024 * 1024, alias = "max-bytes-per-owner")]
    pub max_bytes_held_per_owner: u64,
    /// Live (unrevoked, unexpired) MCP tokens one owner may hold, a host app at most half
    /// (host apps together three quarters); past it, 429 `too_many_tokens` with
    /// `Retry-After: 60`.
    #[arg(long, default_value_t = 100, alias = "max-mcp-tokens")]
    pub max_live_mcp_tokens_per_owner: u32,
    /// Unused, unexpired sign-in links one owner may hold, a host app at most half (host apps
    /// together three quarters), made through the API (the CLI's `owner link` is not
    /// counted); past it, 429 `too_many_signin_links` with `Retry-After: 60`.
    #[arg(long, default_value_t = 10, alias = "max-signin-links")]
    pub max_live_signin_codes_per_owner: u32,
    /// Sign-in attempts per minute per client address (0 = unlimited), per replica; past it
    /// and the burst, 429 `rate_limited` with `Retry-After`. Counted apart for `POST
    /// /v1/auth/signin`, team sign-in's starts and its callbacks (each its own bucket).
    #[arg(long, default_value_t = 10, alias = "signin-rate-per-address")]
    pub signin_rate_per_address_per_min: u32,
    /// Burst of sign-in attempts an address may make above that rate.
    #[arg(long, default_value_t = 20)]
    pub signin_burst_per_address: u32,
    /// How often the sweeper runs, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    pub sweep_interval_ms: u64,
    /// How long finished rows (already without bytes) stay before deletion, in milliseconds.
    #[arg(long, default_value_t = 10 * 60_000)]
    pub sweep_grace_ms: u64,
    /// Long-polls re-check the store at least this often, in milliseconds (a missed
    /// cross-replica wake-up costs at most this much).
    #[arg(long, default_value_t = 5_000)]
    pub fallback_poll_ms: u64,
    /// A connection must send a request's headers within this many milliseconds of opening or
    /// of its previous response (so this is also the keep-alive idle timeout), or it is closed.
    #[arg(long, default_value_t = 10_000)]
    pub header_read_timeout_ms: u64,
    /// A write to a client that makes no progress for this many milliseconds drops the
    /// connection.
    #[arg(long, default_value_t = 30_000)]
    pub write_timeout_ms: u64,
    /// Connections open at once (at least 1: the relay refuses to start with 0). At it, the
    /// connection idle longest is closed to make room; only when every connection has a request
    /// in flight does a new one get 503 `too_many_connections` with `Retry-After: 1`, and close.
    #[arg(long, default_value_t = 1_024)]
    pub max_connections: u32,
    /// Connections open at once from one peer address (0 = no cap; off with `--trust-proxy`,
    /// where every peer is the proxy); past it, 503 `too_many_connections` and close.
    #[arg(long, default_value_t = 256)]
    pub max_connections_per_address: u32,
    /// Responses one connection may carry; the last says `Connection: close`.
    #[arg(long, default_value_t = 10_000)]
    pub max_requests_per_connection: u32,
    /// On shutdown (SIGTERM, SIGINT), in-flight requests get this many milliseconds before their
    /// connections are dropped and the relay exits 0.
    #[arg(long, default_value_t = 10_000)]
    pub shutdown_deadline_ms: u64,
    /// A request body (declared, or chunked) or a reply above this many bytes is "large".
    #[arg(long, default_value_t = 64 * 1024)]
    pub large_body_bytes: usize,
    /// Large request bodies read at once, over all tokens; past it, 503 `busy` with
    /// `Retry-After: 1`, before the body is read.
    #[arg(long, default_value_t = 32)]
    pub max_large_bodies_in_flight: u32,
    /// Large request bodies one owner's tokens may have read at once (0 = no cap), so one
    /// account cannot take every place among `max_large_bodies_in_flight`; past it, 429
    /// `too_many_large_bodies` with `Retry-After: 1` and `Connection: close`, before the body
    /// is read.
    #[arg(long, default_value_t = 8)]
    pub max_large_bodies_per_owner: u32,
    /// Large replies one token may be sent at once; past it, 503 `busy` with `Retry-After: 1`.
    #[arg(long, default_value_t = 4)]
    pub max_large_replies_per_token: u32,
    /// Claims, reads and session watches waiting (a `wait_ms` above 0, over HTTP or a channel)
    /// with one token at once (0 = no cap); past it, 429 `too_many_long_polls` with
    /// `Retry-After: 1` and `Connection: close`, at once (a watch is answered at once instead).
    #[arg(long, default_value_t = 32)]
    pub max_long_polls_per_token: u32,
    /// Claims and reads waiting with all of one owner's tokens together (0 = no cap), so one
    /// account cannot hold every connection the relay allows; past it, as for one token.
    #[arg(long, default_value_t = 128)]
    pub max_long_polls_per_owner: u32,
    /// Session channels (WebSockets) one owner may hold open, per replica; past it, 429
    /// `too_many_channels` with `Retry-After: 60`, and the tab uses HTTP. 0: the relay offers
    /// no channel (404 `not_found`), and tabs use HTTP alone.
    #[arg(long, default_value_t = 8)]
    pub max_channels_per_owner: u32,
    /// Calls one replica remembers as admitted work (claimed and leased, or answered and not
    /// yet read), whose first reply, cancel or read a rate does not refuse (`admitted`); past
    /// it, nothing new is remembered, and those requests are refused by a rate as any other.
    /// 0: none is remembered.
    #[arg(long, default_value_t = 100_000)]
    pub max_admitted_calls: usize,
}

impl Default for Limits {
    /// The defaults written on the fields: the values `serve` starts with when no flag or
    /// variable names a limit (the environment is not read here).
    fn default() -> Self {
        use clap::{Args as _, FromArgMatches as _};
        let command = Self::augment_args(clap::Command::new("limits").no_binary_name(true));
        let matches = command
            .try_get_matches_from(std::iter::empty::<&str>())
            .expect("every limit has a default");
        Self::from_arg_matches(&matches).expect("the defaults are valid values")
    }
}

impl Limits {
    /// Refuses limits that would refuse what the plugin and the browser are built to ask for
    /// (the claims' wait and batch, the time a tab has to answer); `serve` checks the command
    /// line's. These may be raised, not lowered below the protocol's
    /// (`sealpost_protocol::limits`). Tests lower them through `Config` to run fast. (A
    /// connection cap of 0 is refused by `app::start`, for every caller.)
    pub fn check(&self) -> Result<(), String> {
        let floors = [
            (
                "max-wait-ms",
                self.max_wait_ms,
                limits::MAX_WAIT_MS,
                "the plugin and the browser wait up to that long",
            ),
            (
                "max-claim-batch",
                u64::from(self.max_claim_batch),
                limits::MAX_CLAIM_BATCH as u64,
                "the browser claims up to that many calls at once",
            ),
            (
                "lease-ms",
                self.lease_ms,
                limits::DEFAULT_LEASE_MS,
                "a tab's tool may run for 25 s",
            ),
        ];
        for (flag, value, floor, why) in floors {
            if value < floor {
                return Err(format!(
                    "--{flag} {value} is below {floor}, the least the relay serves with: {why} \
                     (raise it, or leave it out)"
                ));
            }
        }
        Ok(())
    }

    /// The latest an owner token signed in at `signed_in_at` may ever lapse: its absolute
    /// lifetime from the sign-in, or `inherited` when that is sooner (a sign-in made from a
    /// link another sign-in minted keeps that one's end, so chained links never extend it).
    pub fn owner_token_deadline(
        &self,
        signed_in_at: UnixMillis,
        inherited: Option<UnixMillis>,
    ) -> UnixMillis {
        let absolute =
            signed_in_at.saturating_add_ms(self.owner_token_lifetime_s.saturating_mul(1000));
        inherited.map_or(absolute, |inherited| inherited.min(absolute))
    }

    /// When an owner token used at `now` lapses: the sliding window from now, cut at its
    /// `deadline` ([`Limits::owner_token_deadline`]).
    pub fn owner_token_expiry(&self, deadline: UnixMillis, now: UnixMillis) -> UnixMillis {
        let sliding = now.saturating_add_ms(self.owner_token_ttl_s.saturating_mul(1000));
        sliding.min(deadline)
    }

    /// Largest JSON body that can carry an envelope of `decoded` bytes: base64 grows 4/3, plus
    /// room for the other fields. Bodies above this are refused before they are read.
    pub fn body_cap_for(&self, decoded: usize) -> usize {
        decoded.div_ceil(3) * 4 + 1024
    }
}

impl Config {
    /// A configuration with defaults for everything but the database.
    pub fn new(database_url: impl Into<String>) -> Self {
        let listen: SocketAddr = "127.0.0.1:8080".parse().expect("static address");
        Self {
            listen,
            database_url: database_url.into(),
            web_dir: None,
            public_url: format!("http://{listen}"),
            trust_proxy: false,
            metrics_listen: None,
            metrics_listen_optional: false,
            metrics_token: None,
            signing_key: None,
            app_origins: Vec::new(),
            oidc: None,
            limits: Limits::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_the_clients_rely_on_may_be_raised_not_lowered() {
        assert_eq!(Limits::default().check(), Ok(()));
        let raised = Limits {
            max_wait_ms: 60_000,
            max_claim_batch: 100,
            lease_ms: 60_000,
            ..Limits::default()
        };
        assert_eq!(raised.check(), Ok(()));
        let lowerings: [fn(&mut Limits); 3] = [
            |l| l.max_wait_ms = 20_000,
            |l| l.max_claim_batch = 10,
            |l| l.lease_ms = 0,
        ];
        for lower in lowerings {
            let mut lowered = Limits::default();
            lower(&mut lowered);
            assert!(lowered.check().is_err(), "{lowered:?}");
        }
    }
}
